//! The audit record: one JSON line per call, appended to a file the user names.
//!
//! A line holds when the call ended, its id (the runtime's, unique, and the caller's), the tool that ran (and `call_tool` when it came
//! through it), the agent and the workspace, the arguments' shape (never their content: see
//! [`argument_shape`]), the gate's decision and its grants, the outcome, how long it took, and
//! how much it returned. Each line is written with one `write` on a file opened for appending, so readers
//! never see half a line; if the disk fills mid-line, the file is cut back to its last whole
//! line and the failure is returned, never ignored. The file is created readable by its owner
//! only.

use crate::call::proto::ToolResponse;
use crate::call::report::CallReport;
use crate::call::report::{GateDecision, Granted};
use serde::Serialize;
use serde_json::Value;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

/// What replaces a secret-looking value.
pub const REDACTED: &str = "[redacted]";

/// Object keys whose values are never written: any key that contains one of these, ignoring
/// case (so `api_key`, `X-Auth-Token`, `Password` are all redacted).
pub const SECRET_KEY_MARKERS: &[&str] = &["password", "secret", "token", "key", "authorization"];

/// An append-only audit file.
#[derive(Debug)]
pub struct Audit {
    file: Mutex<File>,
}

/// One audit line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// When the call ended, RFC 3339 in UTC.
    pub time: String,
    /// The runtime's own id for the call (see [`next_record_id`]): unique, whatever the
    /// callers chose for theirs.
    pub id: String,
    /// The caller's id for the call (two clients may both say `1`).
    pub call_id: String,
    /// The tool that ran (`echo` for `call_tool` calling `echo`); for a call the loop answered
    /// itself, the name as called (`find_tool`).
    pub tool: String,
    /// The loop's tool the call came through (`call_tool`), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The agent that made the call.
    pub agent: String,
    /// The workspace the call worked in; left out when it had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The arguments' shape, never their content (see [`argument_shape`]): the arguments of
    /// the tool that ran (for `call_tool`, the inner arguments).
    pub arguments: Value,
    /// The gate's own decision: `allow` (the call ran with the grants below), `deny` (it was
    /// refused and nothing ran) or `not_reached` (the loop answered it, or its arguments were
    /// refused first). A tool that ran and then refused is `allow` with outcome `denied`.
    pub gate: GateDecision,
    /// The capabilities the gate granted the call and who granted each (the policy, a saved
    /// rule, a person); left out when there were none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub granted: Vec<Granted>,
    /// The response's outcome: `result`, `failed`, `denied`, `timed_out` or `cancelled`.
    pub outcome: &'static str,
    /// For a failure, its kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// How long the call took, in microseconds.
    pub duration_us: u64,
    /// How many bytes of text the response carried.
    pub bytes: usize,
    /// Whether the result was cut to the cap.
    pub truncated: bool,
}

impl Audit {
    /// Open `path` for appending, creating it (mode 0600) if it does not exist. The file must
    /// be a regular file reached without a symlink at its last step: a link planted where the
    /// audit goes (perhaps by a tool that could write there) is refused, never followed, and a
    /// FIFO or a device is refused without waiting on it.
    pub fn open(path: &Path) -> std::io::Result<Audit> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let not_regular = || std::io::Error::other("it is not a regular file");
        if let Ok(meta) = std::fs::symlink_metadata(path)
            && !meta.is_file()
            && !meta.is_symlink()
        {
            return Err(not_regular());
        }
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags(flags.bits() as i32)
            .open(path)
            .map_err(|error| {
                if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                    std::io::Error::other("it is a symlink; the audit file is never followed")
                } else {
                    error
                }
            })?;
        if !file.metadata()?.is_file() {
            return Err(not_regular());
        }
        Ok(Audit {
            file: Mutex::new(file),
        })
    }

    /// Append one record as one line. On failure nothing partial is left behind (as far as
    /// the file system allows) and the error is returned.
    pub fn record(&self, record: &AuditRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let before = file.metadata().map(|meta| meta.len()).ok();
        let written = file.write_all(&line).and_then(|()| file.flush());
        if written.is_err()
            && let Some(before) = before
            && file.metadata().is_ok_and(|meta| meta.is_file())
        {
            // A short write (a full disk) would leave half a line: cut it off.
            let _ = file.set_len(before);
        }
        written
    }
}

impl AuditRecord {
    /// The record of one call, from the arguments of the tool that ran, the JSON pointers of
    /// the arguments that name its resources (`/path`, `/url`: kept, URLs without their
    /// userinfo and query), what came of the call (its report, which names the call, the tool,
    /// the agent and the workspace), and how long it took.
    pub fn of(
        arguments: &str,
        resources: &[&str],
        report: &CallReport,
        took: Duration,
    ) -> AuditRecord {
        let response = &report.response;
        let (outcome, failure, bytes, truncated) = match response {
            ToolResponse::Result {
                text, truncated, ..
            } => ("result", None, text.len(), *truncated),
            ToolResponse::Failed { kind, message } => (
                "failed",
                serde_json::to_value(kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned)),
                message.len(),
                false,
            ),
            ToolResponse::Denied { .. } => ("denied", None, 0, false),
            ToolResponse::TimedOut { .. } => ("timed_out", None, 0, false),
            ToolResponse::Cancelled => ("cancelled", None, 0, false),
        };
        AuditRecord {
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            id: next_record_id(),
            call_id: report.call_id.clone(),
            tool: report.tool.clone(),
            via: report.via.clone(),
            agent: report.agent.clone(),
            workspace: report
                .workspace
                .as_ref()
                .map(|path| path.display().to_string()),
            arguments: argument_shape(arguments, resources),
            gate: report.gate,
            granted: report.granted.clone(),
            outcome,
            failure,
            duration_us: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            bytes,
            truncated,
        }
    }
}

/// A fresh id for an audit record: this process's random prefix (8 bytes, hex, drawn once)
/// and a counter, as `PREFIX-N`. Ids never repeat within a process, and two processes (two
/// replicas, or one restarted) share a prefix with odds of one in 2^64. If the system has no
/// randomness to give, the prefix is made of the process id and the start time instead.
pub fn next_record_id() -> String {
    static PREFIX: OnceLock<String> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| match crate::digest::random::<8>() {
        Ok(bytes) => crate::digest::hex(&bytes),
        Err(_) => {
            let started = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|since| since.as_nanos())
                .unwrap_or_default();
            format!("{:x}{started:x}", std::process::id())
        }
    });
    format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

/// What the audit keeps of a call's arguments: their shape, never their content.
///
/// - a value under a key that looks like it names a secret (see [`SECRET_KEY_MARKERS`]) is
///   [`REDACTED`], at any depth;
/// - a string at one of `resources` (the JSON pointers of the arguments that name a resource:
///   a path, a URL) is kept, since it is what the gate decided on; a URL loses its userinfo,
///   query and fragment, which become their length and sha256 beside it;
/// - every other string (file contents, edit text, request bodies, header values, queries)
///   becomes `{"bytes": N, "sha256": "…"}`;
/// - numbers, booleans and null are kept; objects and arrays keep their keys and order;
/// - arguments that are not JSON become `{"not_json_bytes": N}`.
pub fn argument_shape(arguments: &str, resources: &[&str]) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(mut value) => {
            shape(&mut value, "", resources);
            value
        }
        Err(_) => serde_json::json!({ "not_json_bytes": arguments.len() }),
    }
}

fn shape(value: &mut Value, pointer: &str, resources: &[&str]) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if names_a_secret(key) {
                    *value = Value::String(REDACTED.to_owned());
                } else {
                    let escaped = key.replace('~', "~0").replace('/', "~1");
                    shape(value, &format!("{pointer}/{escaped}"), resources);
                }
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                shape(item, &format!("{pointer}/{index}"), resources);
            }
        }
        Value::String(text) => {
            *value = if resources.contains(&pointer) {
                resource_shape(text)
            } else {
                digest_of(text)
            };
        }
        _ => {}
    }
}

/// A resource as the audit keeps it: a path whole; a URL without its userinfo, query and
/// fragment, which become their digests.
fn resource_shape(text: &str) -> Value {
    let Some((scheme, rest)) = text.split_once("://") else {
        return Value::String(text.to_owned());
    };
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (rest, None),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (before_fragment, None),
    };
    let (authority, path) = match before_query.find('/') {
        Some(at) => before_query.split_at(at),
        None => (before_query, ""),
    };
    let (userinfo, host) = match authority.rsplit_once('@') {
        Some((userinfo, host)) => (Some(userinfo), host),
        None => (None, authority),
    };
    if userinfo.is_none() && query.is_none() && fragment.is_none() {
        return Value::String(text.to_owned());
    }
    let mut kept = serde_json::Map::new();
    kept.insert(
        "url".to_owned(),
        Value::String(format!("{scheme}://{host}{path}")),
    );
    for (part, value) in [
        ("userinfo", userinfo),
        ("query", query),
        ("fragment", fragment),
    ] {
        if let Some(value) = value {
            kept.insert(part.to_owned(), digest_of(value));
        }
    }
    Value::Object(kept)
}

/// A text as its length and sha256: enough to tell whether two calls carried the same
/// content, and nothing of what it said.
fn digest_of(text: &str) -> Value {
    serde_json::json!({ "bytes": text.len(), "sha256": crate::digest::sha256_hex(text.as_bytes()) })
}

/// True when an object key looks like it names a secret (see [`SECRET_KEY_MARKERS`]).
fn names_a_secret(key: &str) -> bool {
    let key = key.to_lowercase();
    SECRET_KEY_MARKERS.iter().any(|marker| key.contains(marker))
}

/// Replace, at any depth, the value of every key that looks like it names a secret.
pub fn redact(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                if names_a_secret(key) {
                    *value = Value::String(REDACTED.to_owned());
                } else {
                    redact(value);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_redacted_at_any_depth_and_nothing_else_is() {
        let mut value = json!({
            "path": "README.md",
            "Password": "hunter2",
            "headers": { "Authorization": "Bearer abc", "Accept": "text/plain" },
            "list": [{ "api_key": "k1" }, { "name": "ok" }],
            "nested": { "deeper": { "X-Auth-Token": "t", "client_secret": { "a": 1 } } }
        });
        redact(&mut value);
        assert_eq!(
            value,
            json!({
                "path": "README.md",
                "Password": REDACTED,
                "headers": { "Authorization": REDACTED, "Accept": "text/plain" },
                "list": [{ "api_key": REDACTED }, { "name": "ok" }],
                "nested": { "deeper": { "X-Auth-Token": REDACTED, "client_secret": REDACTED } }
            })
        );
    }

    #[test]
    fn arguments_that_are_not_json_are_not_written() {
        assert_eq!(
            argument_shape("token=hunter2", &[]),
            json!({ "not_json_bytes": 13 })
        );
    }

    #[test]
    fn the_audit_keeps_shape_and_resources_never_content() {
        let digest = |text: &str| json!({ "bytes": text.len(), "sha256": crate::digest::sha256_hex(text.as_bytes()) });
        let shaped = argument_shape(
            &json!({
                "path": "notes/today.md",
                "content": "the diary",
                "old": "a", "new": "b",
                "count": 3, "flag": true, "none": null,
                "headers": { "Cookie": "id=1", "Accept": "text/plain", "X-Api-Key": "k" },
                "list": ["x", 1],
                "url": "https://user:pw@example.org:8443/a/b?q=secret#frag"
            })
            .to_string(),
            &["/path", "/url"],
        );
        assert_eq!(
            shaped,
            json!({
                "path": "notes/today.md",
                "content": digest("the diary"),
                "old": digest("a"), "new": digest("b"),
                "count": 3, "flag": true, "none": null,
                "headers": { "Cookie": digest("id=1"), "Accept": digest("text/plain"), "X-Api-Key": REDACTED },
                "list": [digest("x"), 1],
                "url": {
                    "url": "https://example.org:8443/a/b",
                    "userinfo": digest("user:pw"),
                    "query": digest("q=secret"),
                    "fragment": digest("frag")
                }
            })
        );
        let text = shaped.to_string();
        for secret in ["the diary", "id=1", "secret", "pw", "frag\"", "text/plain"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert_eq!(
            argument_shape(r#"{"url":"http://example.org/x"}"#, &["/url"]),
            json!({ "url": "http://example.org/x" }),
            "a plain URL is kept whole"
        );
    }

    #[test]
    fn a_record_says_what_became_of_the_call() {
        let mut report = CallReport {
            call_id: "7".to_owned(),
            tool: "echo".to_owned(),
            via: Some("call_tool".to_owned()),
            agent: "agent-a".to_owned(),
            workspace: Some("/srv/a".into()),
            gate: GateDecision::Allow,
            ..CallReport::host_answer(ToolResponse::failed(crate::FailureKind::Trap, "boom"))
        };
        let took = Duration::from_micros(1234);
        let record = AuditRecord::of(r#"{"text":"x","token":"t"}"#, &[], &report, took);
        assert_eq!(record.outcome, "failed");
        assert_eq!(record.failure.as_deref(), Some("trap"));
        assert_eq!(record.duration_us, 1234);
        assert_eq!(
            record.arguments,
            json!({ "text": { "bytes": 1, "sha256": crate::digest::sha256_hex(b"x") }, "token": REDACTED })
        );
        let line = serde_json::to_value(&record).expect("json");
        for (field, value) in [
            ("call_id", json!("7")),
            ("tool", json!("echo")),
            ("via", json!("call_tool")),
            ("agent", json!("agent-a")),
            ("workspace", json!("/srv/a")),
            ("gate", json!("allow")),
        ] {
            assert_eq!(line[field], value, "{field}");
        }
        assert!(
            line.get("granted").is_none(),
            "nothing granted, nothing said"
        );

        report.granted.push(Granted {
            capability: "filesystem.write".to_owned(),
            resource: "notes/today.md".to_owned(),
            by: crate::call::report::GrantedBy::PersonOnce,
        });
        report.tool = "write_file".to_owned();
        let record = AuditRecord::of("{}", &[], &report, took);
        assert_eq!(
            serde_json::to_value(&record).expect("json")["granted"],
            json!([{
                "capability": "filesystem.write",
                "resource": "notes/today.md",
                "by": "person_once"
            }])
        );
    }
}
