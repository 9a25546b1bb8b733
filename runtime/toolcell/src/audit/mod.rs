//! The audit record: one JSON line per call, appended to a file the user names, each line
//! chained to the one before by its hash so that no one can quietly rewrite the record.
//!
//! A line holds its place in the chain (`seq`, and `prev`: the sha256 of the line before), when
//! the call ended, its id (the runtime's, unique, and the caller's), the tool that ran (and
//! `call_tool` when it came through it) and which artifact it was (its component's sha256, and
//! for a pulled tool the artifact's digest and the signers verified at load), the agent and the
//! workspace, a hash of the canonical arguments (never their content: see
//! [`ArgumentDigest`]) and the resources the gate decided on, the gate's decision and who
//! granted what, the outcome, how long it took, what it cost, and how much it returned.
//!
//! How the chain is kept and rotated is in `chain.rs` ([`Audit`]), how it is checked in
//! `verify.rs` ([`verify`]); `toolcell audit verify` checks a file and names the first line
//! that breaks. A stage of the core of its own: it reads what a call reported (`call`, `tool`)
//! and nothing of the pipeline that writes it.

mod chain;
mod files;
mod verify;

use crate::call::proto::ToolResponse;
use crate::call::report::CallReport;
use crate::call::report::{Cost, GateDecision, Granted};
use crate::tool::info::CapabilityKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

pub use chain::Audit;
pub use files::{GENESIS, HEAD_SUFFIX, Head, MAX_DIRECTORY_ENTRIES, MAX_LINE_BYTES, head_path};
pub use verify::{Broken, Verified, VerifyOptions, verify};

/// What replaces a secret-looking value.
pub const REDACTED: &str = "[redacted]";

/// Object keys whose values are never written: any key that contains one of these, ignoring
/// case (so `api_key`, `X-Auth-Token`, `Password` are all redacted).
pub const SECRET_KEY_MARKERS: &[&str] = &["password", "secret", "token", "key", "authorization"];

/// One audit line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRecord {
    /// The line's place in its chain: 0 for the first line ever written to the file (or to
    /// the first of a rotated series), then one more per line, across rotations.
    pub seq: u64,
    /// The sha256 (hex) of the line before, as written (without its newline); for the first
    /// line, [`GENESIS`].
    pub prev: String,
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
    /// Which artifact ran; left out for a native tool and for a call no tool answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact: Option<Artifact>,
    /// The agent that made the call.
    pub agent: String,
    /// The workspace the call worked in; left out when it had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// A digest of the arguments of the tool that ran (for `call_tool`, the inner arguments),
    /// never their content.
    pub arguments: ArgumentDigest,
    /// The arguments that name the tool's resources (a path, a URL), by JSON pointer, as the
    /// gate decided on them: a path whole, a URL without its userinfo, query and fragment
    /// (which become their length and sha256). Left out when there are none.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub resources: serde_json::Map<String, Value>,
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
    /// What the guest used (fuel when metered, its largest memory); left out when nothing was
    /// measured.
    #[serde(skip_serializing_if = "is_unmeasured")]
    pub cost: Cost,
    /// How many bytes of text the response carried.
    pub bytes: usize,
    /// Whether the result was cut to the cap.
    pub truncated: bool,
    /// What the call sent its client and asked it, by shape (counts and bytes, never what
    /// was said); left out when it did neither.
    #[serde(skip_serializing_if = "crate::call::client::ClientUse::is_empty")]
    pub client: crate::call::client::ClientUse,
}

fn is_unmeasured(cost: &Cost) -> bool {
    *cost == Cost::default()
}

/// Which artifact a call ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifact {
    /// The component's sha256 (hex): what a policy's `sha256` pin names.
    pub sha256: String,
    /// For a tool pulled from a registry, the artifact's digest (`sha256:…`): what its
    /// signatures sign.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// Who signed it, as verified when it loaded (a key's `sha256:` id, a keyless signer's
    /// identity); left out when the policy required no signature.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub signers: Vec<String>,
}

/// What the audit keeps of a call's arguments: their size and the sha256 of their canonical
/// form, so two records can be shown to carry the same arguments and neither says what they
/// were.
///
/// The canonical form is the JSON with every object's keys sorted (by their UTF-8 bytes), no
/// whitespace, and strings and numbers as serde_json writes them; arguments that are not JSON
/// are hashed as they came (`json: false`). A hash of arguments a reader could guess (a
/// boolean, a short enum) can be confirmed by hashing the guess: the digest hides content, not
/// the answer to "was it exactly this?".
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgumentDigest {
    /// The sha256 (hex) of the canonical form.
    pub sha256: String,
    /// How many bytes the arguments were, as they came.
    pub bytes: usize,
    /// False when the arguments were not JSON (the digest is then of their bytes).
    #[serde(skip_serializing_if = "is_true", default = "yes")]
    pub json: bool,
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

impl ArgumentDigest {
    /// The digest of `arguments`.
    pub fn of(arguments: &str) -> ArgumentDigest {
        ArgumentDigest::parsed(arguments, serde_json::from_str(arguments).ok().as_ref())
    }

    /// The digest of `arguments`, which parse as `parsed` (`None`: they are not JSON).
    fn parsed(arguments: &str, parsed: Option<&Value>) -> ArgumentDigest {
        match parsed {
            Some(value) => {
                let mut text = String::with_capacity(arguments.len());
                canonical(value, &mut text);
                ArgumentDigest {
                    sha256: crate::digest::sha256_hex(text.as_bytes()),
                    bytes: arguments.len(),
                    json: true,
                }
            }
            None => ArgumentDigest {
                sha256: crate::digest::sha256_hex(arguments.as_bytes()),
                bytes: arguments.len(),
                json: false,
            },
        }
    }
}

/// `value` in canonical form (see [`ArgumentDigest`]), appended to `out`.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

impl AuditRecord {
    /// The record of one call, from the arguments of the tool that ran, the JSON pointers of
    /// the arguments that name its resources (`/path`, `/url`) with the kind of each
    /// capability, the artifact that ran, what
    /// came of the call (its report, which names the call, the tool, the agent and the
    /// workspace), and how long it took. Its place in the chain (`seq`, `prev`) is set when it
    /// is written ([`Audit::record`]).
    pub fn of(
        arguments: &str,
        resources: &[(&str, CapabilityKind)],
        artifact: Option<Artifact>,
        report: &CallReport,
        took: Duration,
    ) -> AuditRecord {
        let parsed = serde_json::from_str::<Value>(arguments).ok();
        let response = &report.response;
        let (failure, bytes, truncated) = match response {
            ToolResponse::Result {
                text, truncated, ..
            } => (None, text.len(), *truncated),
            ToolResponse::Failed { kind, message } => (
                serde_json::to_value(kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned)),
                message.len(),
                false,
            ),
            ToolResponse::Denied { .. }
            | ToolResponse::TimedOut { .. }
            | ToolResponse::Cancelled => (None, 0, false),
        };
        let outcome = response.outcome();
        AuditRecord {
            seq: 0,
            prev: String::new(),
            time: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            id: next_record_id(),
            call_id: report.call_id.clone(),
            tool: report.tool.clone(),
            via: report.via.clone(),
            artifact,
            agent: report.agent.clone(),
            workspace: report
                .workspace
                .as_ref()
                .map(|path| path.display().to_string()),
            arguments: ArgumentDigest::parsed(arguments, parsed.as_ref()),
            resources: resources_of(parsed.as_ref(), resources),
            gate: report.gate,
            granted: report.granted.clone(),
            outcome,
            failure,
            duration_us: u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
            cost: report.cost,
            bytes,
            truncated,
            client: report.client,
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

/// The arguments (`None`: they are not JSON) at `resources` (JSON pointers, with the kind of
/// capability each names) that are strings, as the audit keeps them (see
/// [`AuditRecord::resources`]).
fn resources_of(
    arguments: Option<&Value>,
    resources: &[(&str, CapabilityKind)],
) -> serde_json::Map<String, Value> {
    let mut kept = serde_json::Map::new();
    let Some(value) = arguments else {
        return kept;
    };
    for (pointer, kind) in resources {
        if let Some(Value::String(text)) = value.pointer(pointer) {
            let shape = match kind {
                CapabilityKind::Network => url_shape(text),
                _ => Value::String(text.clone()),
            };
            kept.insert((*pointer).to_owned(), shape);
        }
    }
    kept
}

/// A network resource as the audit keeps it: a URL (as `http::Uri` reads it, with a scheme
/// and a host) without its userinfo, query and fragment; anything else, which could be read as
/// a URL some other way (`http:user:pw@host`), only as its length and sha256.
fn url_shape(text: &str) -> Value {
    let before_fragment = text.split_once('#').map_or(text, |(before, _)| before);
    match before_fragment.parse::<http::Uri>() {
        Ok(uri) if uri.scheme().is_some() && uri.authority().is_some() && text.contains("://") => {
            resource_shape(text)
        }
        _ => digest_of(text),
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
    fn arguments_that_are_not_json_are_hashed_as_they_came() {
        let digest = ArgumentDigest::of("token=hunter2");
        assert_eq!(digest.sha256, crate::digest::sha256_hex(b"token=hunter2"));
        assert_eq!((digest.bytes, digest.json), (13, false));
        assert_eq!(
            serde_json::to_value(&digest).expect("json")["json"],
            json!(false)
        );
    }

    #[test]
    fn the_argument_digest_is_of_the_canonical_form() {
        let a = ArgumentDigest::of(r#"{"b": [1, {"y": 2, "x": "é"}], "a": true}"#);
        let b = ArgumentDigest::of(r#"{"a":true,"b":[1,{"x":"é","y":2}]}"#);
        assert_eq!(a.sha256, b.sha256, "key order and whitespace do not count");
        assert_eq!(
            a.sha256,
            crate::digest::sha256_hex(r#"{"a":true,"b":[1,{"x":"é","y":2}]}"#.as_bytes())
        );
        assert_ne!(
            a.bytes, b.bytes,
            "the size is of the arguments as they came"
        );
        assert_ne!(
            ArgumentDigest::of(r#"{"a":false}"#).sha256,
            ArgumentDigest::of(r#"{"a":true}"#).sha256
        );
        assert!(
            serde_json::to_value(&a)
                .expect("json")
                .get("json")
                .is_none(),
            "json: true goes without saying"
        );
    }

    #[test]
    fn the_audit_keeps_resources_and_a_digest_never_content() {
        let digest = |text: &str| json!({ "bytes": text.len(), "sha256": crate::digest::sha256_hex(text.as_bytes()) });
        let arguments = json!({
            "path": "notes/today.md",
            "content": "the diary",
            "count": 3,
            "headers": { "Cookie": "id=1", "X-Api-Key": "k" },
            "url": "https://user:pw@example.org:8443/a/b?q=secret#frag"
        })
        .to_string();
        let report = CallReport {
            tool: "write_file".to_owned(),
            ..CallReport::host_answer(ToolResponse::text("ok"))
        };
        let record = AuditRecord::of(
            &arguments,
            &[
                ("/path", CapabilityKind::FilesystemWrite),
                ("/url", CapabilityKind::Network),
                ("/missing", CapabilityKind::FilesystemRead),
                ("/count", CapabilityKind::FilesystemRead),
            ],
            None,
            &report,
            Duration::ZERO,
        );
        assert_eq!(
            Value::Object(record.resources.clone()),
            json!({
                "/path": "notes/today.md",
                "/url": {
                    "url": "https://example.org:8443/a/b",
                    "userinfo": digest("user:pw"),
                    "query": digest("q=secret"),
                    "fragment": digest("frag")
                }
            }),
            "strings at the resource pointers only"
        );
        assert_eq!(record.arguments, ArgumentDigest::of(&arguments));
        let text = serde_json::to_string(&record).expect("json");
        for secret in [
            "the diary",
            "id=1",
            "secret",
            "pw",
            "frag\"",
            "\"k\"",
            "count",
        ] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        let url = |text: &str| {
            resources_of(
                Some(&json!({ "url": text })),
                &[("/url", CapabilityKind::Network)],
            )
            .remove("/url")
            .unwrap_or_default()
        };
        assert_eq!(
            url("http://example.org/x"),
            json!("http://example.org/x"),
            "a plain URL is kept whole"
        );
        for not_a_uri in [
            "http:SECRET@127.0.0.1:1/",
            "notaurl SECRET",
            "http:\\\\u:SECRET@h/",
        ] {
            assert_eq!(url(not_a_uri), digest(not_a_uri), "{not_a_uri}");
        }
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
        report.cost.fuel = Some(42);
        let artifact = Artifact {
            sha256: "ab".repeat(32),
            manifest: Some(format!("sha256:{}", "cd".repeat(32))),
            signers: vec!["sha256:key".to_owned()],
        };
        let record = AuditRecord::of(
            r#"{"text":"x","token":"t"}"#,
            &[],
            Some(artifact.clone()),
            &report,
            took,
        );
        assert_eq!(record.outcome, "failed");
        assert_eq!(record.failure.as_deref(), Some("trap"));
        assert_eq!(record.duration_us, 1234);
        assert_eq!(
            record.arguments,
            ArgumentDigest::of(r#"{"token":"t","text":"x"}"#)
        );
        let line = serde_json::to_value(&record).expect("json");
        for (field, value) in [
            ("call_id", json!("7")),
            ("tool", json!("echo")),
            ("via", json!("call_tool")),
            ("agent", json!("agent-a")),
            ("workspace", json!("/srv/a")),
            ("gate", json!("allow")),
            ("cost", json!({ "fuel": 42 })),
            ("artifact", serde_json::to_value(&artifact).expect("json")),
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
        let record = AuditRecord::of("{}", &[], None, &report, took);
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
