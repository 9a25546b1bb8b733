//! The host's own Rust tools go through the same pipeline as wasm ones: their arguments are
//! checked, their capabilities decided by the gate, their deadline and stop enforced, their
//! panics caught, their text capped, and they are served over MCP.

use crate::support::exclusive;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use toolcell::ToolPort as _;
use toolcell::{
    Call, CallContext, CallOptions, CapabilityKind, DenyReason, FailureKind, FnTool, Policy,
    ResourceRef, Runtime, StopToken, ToolError, ToolInfo, ToolResponse,
};

/// How late past its deadline a native call may answer (the promise tested here).
const DEADLINE_SLACK: Duration = Duration::from_millis(25);

/// How long after a stop a native call may answer.
const STOP_SLACK: Duration = Duration::from_millis(10);

/// The policy of the native test tools: `native_read` reads the workspace; `native_write`
/// is granted nothing.
const POLICY: &str = r#"
[tools.native_read]
filesystem.read = { access = "allow", roots = ["."] }

[tools.read_file]
filesystem.read = { access = "allow", roots = ["."] }
"#;

/// A workspace holding `a.txt` ("inside"), and beside it a directory with a secret that a
/// link inside the workspace (`out`) leads to.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temp dir");
    let ws = temp.path().join("ws");
    std::fs::create_dir_all(ws.join("sub")).expect("mkdir");
    std::fs::create_dir_all(temp.path().join("outside")).expect("mkdir");
    std::fs::write(ws.join("a.txt"), "inside").expect("write");
    std::fs::write(ws.join("sub/b.txt"), "below").expect("write");
    std::fs::write(temp.path().join("outside/secret.txt"), "secret").expect("write");
    std::os::unix::fs::symlink("../outside", ws.join("out")).expect("symlink");
    (temp, ws)
}

fn path_schema() -> Value {
    json!({
        "type": "object",
        "properties": { "path": { "type": "string" } },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// The native test tools, each counting the times its code ran in `runs`.
struct Natives {
    runs: Arc<AtomicUsize>,
}

impl Natives {
    fn new() -> Natives {
        Natives {
            runs: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }

    /// `native_read`: reads the file its `path` names, through the handle it was granted.
    fn read(&self) -> impl toolcell::NativeTool {
        let runs = Arc::clone(&self.runs);
        FnTool::new(
            ToolInfo::new(
                "native_read",
                "Reads a file through its grant.",
                path_schema(),
            )
            .read_only(true)
            .capability(
                CapabilityKind::FilesystemRead,
                ResourceRef::Argument("/path".to_owned()),
            ),
            move |arguments, context| {
                runs.fetch_add(1, Ordering::SeqCst);
                async move {
                    let path = arguments["path"].as_str().unwrap_or_default();
                    let granted = context
                        .granted(path)
                        .ok_or_else(|| ToolError::Denied(format!("no grant holds {path}")))?;
                    granted
                        .dir
                        .read_to_string(granted.path)
                        .map_err(|error| ToolError::NotFound(format!("{path}: {error}")))
                }
            },
        )
    }

    /// `native_write`: declares a write it is never granted.
    fn write(&self) -> impl toolcell::NativeTool {
        let runs = Arc::clone(&self.runs);
        FnTool::new(
            ToolInfo::new("native_write", "Would write a file.", path_schema()).capability(
                CapabilityKind::FilesystemWrite,
                ResourceRef::Argument("/path".to_owned()),
            ),
            move |_, _| {
                runs.fetch_add(1, Ordering::SeqCst);
                async { Ok("wrote".to_owned()) }
            },
        )
    }
}

/// `builder` with `sleepy` (sleeps ten seconds), `panicky` (panics), `huge` (returns a
/// megabyte) and `ok` (answers ok).
fn with_misbehaving(builder: toolcell::RuntimeBuilder) -> toolcell::RuntimeBuilder {
    let object = || json!({ "type": "object" });
    builder
        .native(FnTool::new(
            ToolInfo::new("sleepy", "Sleeps for ten seconds.", object()),
            |_, _| async {
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok("woke".to_owned())
            },
        ))
        .native(FnTool::new(
            ToolInfo::new("panicky", "Panics.", object()),
            |_, _| async {
                if std::hint::black_box(true) {
                    panic!("native tool bug");
                }
                Ok(String::new())
            },
        ))
        .native(FnTool::new(
            ToolInfo::new("huge", "Returns a megabyte.", object()),
            |_, _| async { Ok("x".repeat(1 << 20)) },
        ))
        .native(FnTool::new(
            ToolInfo::new("ok", "Answers ok.", object()),
            |_, _| async { Ok("ok".to_owned()) },
        ))
}

fn runtime(ws: &Path, natives: &Natives) -> Runtime {
    let builder = crate::support::builder()
        .policy(Policy::from_toml(POLICY).expect("policy"))
        .workspace(ws)
        .native(natives.read())
        .native(natives.write());
    let runtime = with_misbehaving(builder).build().expect("runtime");
    assert_eq!(runtime.load_errors(), &[], "every native tool registers");
    runtime
}

fn call(runtime: &Runtime, tool: &str, arguments: Value) -> ToolResponse {
    runtime.call(&toolcell::ToolRequest::new(
        "t",
        tool,
        arguments.to_string(),
    ))
}

#[test]
fn a_native_tool_is_validated_and_gated_before_its_code_runs() {
    let (_temp, ws) = workspace();
    let natives = Natives::new();
    let runtime = runtime(&ws, &natives);

    // Arguments that break the schema: refused, and the tool's code never ran.
    for bad in [
        json!({ "path": 5 }),
        json!({}),
        json!({ "path": "a.txt", "x": 1 }),
    ] {
        let response = call(&runtime, "native_read", bad.clone());
        assert!(
            matches!(
                response,
                ToolResponse::Failed {
                    kind: FailureKind::InvalidInput,
                    ..
                }
            ),
            "{bad}: {response:?}"
        );
    }
    assert_eq!(natives.runs(), 0, "invalid arguments never reach the tool");

    // A capability the policy does not grant: denied before it runs.
    let response = call(&runtime, "native_write", json!({ "path": "new.txt" }));
    match response {
        ToolResponse::Denied {
            reason: DenyReason::Capability {
                capability, why, ..
            },
        } => {
            assert_eq!(capability, "filesystem.write");
            assert!(
                why.contains("grants native_write no filesystem.write"),
                "{why}"
            );
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    assert!(!ws.join("new.txt").exists());
    assert_eq!(natives.runs(), 0, "a denied call never reaches the tool");

    // Escapes are refused for it exactly as for the wasm read_file, with the same reason.
    for escape in [
        "../outside/secret.txt",
        "out/secret.txt",
        "/etc/passwd",
        "sub/../../outside/secret.txt",
    ] {
        let native = call(&runtime, "native_read", json!({ "path": escape }));
        let wasm = call(&runtime, "read_file", json!({ "path": escape }));
        assert!(
            matches!(
                native,
                ToolResponse::Denied {
                    reason: DenyReason::Capability { .. }
                }
            ),
            "{escape}: {native:?}"
        );
        assert_eq!(native, wasm, "{escape}: the same refusal as a wasm tool's");
    }
    assert_eq!(natives.runs(), 0, "no escape reached the tool");

    // Granted: it reads through the handle it was given, at the canonical path the gate checked.
    assert_eq!(
        call(&runtime, "native_read", json!({ "path": "a.txt" })),
        ToolResponse::text("inside")
    );
    assert_eq!(
        call(&runtime, "native_read", json!({ "path": "./sub/./b.txt" })),
        ToolResponse::text("below")
    );
    assert_eq!(natives.runs(), 2);
}

#[test]
fn a_native_tool_is_found_and_called_through_the_loop_s_own_tools() {
    let (_temp, ws) = workspace();
    let natives = Natives::new();
    let runtime = runtime(&ws, &natives);
    let found = call(
        &runtime,
        "find_tool",
        json!({ "query": "through its grant" }),
    );
    assert!(
        matches!(&found, ToolResponse::Result { text, .. } if text.contains("\"native_read\"")),
        "{found:?}"
    );
    let report = runtime.run_blocking(
        &Call::new(
            "c-1",
            "call_tool",
            json!({ "name": "native_read", "arguments": { "path": "a.txt" } }).to_string(),
        )
        .in_context(runtime.default_context().clone()),
    );
    assert_eq!(report.response, ToolResponse::text("inside"));
    assert_eq!(report.call_id, "c-1");
    assert_eq!(report.tool, "native_read", "the tool that ran");
    assert_eq!(report.via.as_deref(), Some("call_tool"));
    assert_eq!(report.gate, toolcell::report::GateDecision::Allow);
    assert_eq!(report.granted.len(), 1);
    assert_eq!(report.granted[0].resource, "a.txt");
}

#[test]
fn a_native_tool_is_held_to_its_deadline_and_its_stop_and_a_panic_is_a_failure() {
    let _guard = exclusive();
    let (_temp, ws) = workspace();
    let natives = Natives::new();
    let runtime = runtime(&ws, &natives);

    let deadline = Duration::from_millis(100);
    let options = CallOptions {
        timeout: Some(deadline),
        ..CallOptions::default()
    };
    let started = Instant::now();
    let response = runtime.call_with(&toolcell::ToolRequest::new("t", "sleepy", "{}"), &options);
    let took = started.elapsed();
    assert_eq!(response, ToolResponse::TimedOut { limit_ms: 100 });
    println!("sleepy: a {deadline:?} deadline answered after {took:?}");
    assert!(
        took >= deadline && took <= deadline + DEADLINE_SLACK,
        "timed out after {took:?}"
    );

    let stop = StopToken::new();
    let options = CallOptions {
        stop: Some(stop.clone()),
        ..CallOptions::default()
    };
    let (response, stopped_at, returned_at) = std::thread::scope(|scope| {
        let stopper = scope.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            let at = Instant::now();
            stop.stop();
            at
        });
        let response =
            runtime.call_with(&toolcell::ToolRequest::new("t", "sleepy", "{}"), &options);
        (response, stopper.join().expect("stopper"), Instant::now())
    });
    assert_eq!(response, ToolResponse::Cancelled);
    let lag = returned_at.saturating_duration_since(stopped_at);
    println!("sleepy: answered {lag:?} after the stop");
    assert!(lag <= STOP_SLACK, "answered {lag:?} after the stop");

    match call(&runtime, "panicky", json!({})) {
        ToolResponse::Failed {
            kind: FailureKind::Trap,
            message,
        } => assert!(message.contains("native tool bug"), "{message}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(call(&runtime, "ok", json!({})), ToolResponse::text("ok"));
    assert_eq!(
        call(&runtime, "native_read", json!({ "path": "a.txt" })),
        ToolResponse::text("inside"),
        "the host keeps serving after a panic"
    );
}

#[test]
fn a_native_tool_s_huge_result_is_capped_like_a_wasm_tool_s() {
    let (_temp, ws) = workspace();
    let natives = Natives::new();
    let runtime = runtime(&ws, &natives).with_cap(1000);
    match call(&runtime, "huge", json!({})) {
        ToolResponse::Result {
            text, truncated, ..
        } => {
            assert!(truncated);
            assert_eq!(text.len(), 1000, "the cap is a hard bound, marker included");
            assert!(text.ends_with(toolcell::registry::TRUNCATION_MARKER));
        }
        other => panic!("expected a capped result, got {other:?}"),
    }
}

#[test]
fn a_native_tool_s_paths_start_from_the_call_s_working_directory() {
    let (_temp, ws) = workspace();
    let natives = Natives::new();
    let runtime = runtime(&ws, &natives);
    let context = runtime
        .context("agent", &ws)
        .expect("context")
        .with_cwd("sub")
        .expect("cwd");
    let read = |context: &CallContext, path: &str| {
        runtime
            .run_blocking(
                &Call::new("t", "native_read", json!({ "path": path }).to_string())
                    .in_context(context.clone()),
            )
            .response
    };
    assert_eq!(read(&context, "b.txt"), ToolResponse::text("below"));
    assert!(
        read(&context, "../a.txt").is_error(),
        "`..` is refused from a cwd too"
    );
    assert!(
        runtime
            .context("agent", &ws)
            .expect("context")
            .with_cwd("out")
            .is_err(),
        "a working directory behind a link out of the workspace is refused"
    );
}

/// Two agents of one runtime in one workspace, one under a policy of its own: the gate, the
/// pins and the result class are decided by the policy of each call's context, for native and
/// wasm tools alike.
#[test]
fn each_context_s_calls_are_decided_by_its_own_policy() {
    let (_temp, ws) = workspace();
    let natives = Natives::new();
    let runtime = runtime(&ws, &natives);
    let own = Policy::from_toml(&format!(
        "[tools.native_read]\nclass = \"confidential\"\n\
         filesystem.read = {{ access = \"allow\", roots = [\"sub\"] }}\n\
         [tools.read_file]\nsha256 = \"{}\"\n",
        "f".repeat(64)
    ))
    .expect("policy");
    runtime.check_policy(&own).expect("usable");
    let server_s = runtime.context("agent-a", &ws).expect("context");
    let its_own = runtime
        .context("agent-b", &ws)
        .expect("context")
        .with_policy(Arc::new(own));
    let run = |context: &CallContext, tool: &str, path: &str| {
        runtime
            .run_blocking(
                &Call::new("t", tool, json!({ "path": path }).to_string())
                    .in_context(context.clone()),
            )
            .response
    };
    // The runtime's policy: the whole workspace, public results.
    assert!(matches!(
        run(&server_s, "native_read", "a.txt"),
        ToolResponse::Result { ref text, class: toolcell::Class::Public, .. } if text == "inside"
    ));
    // Its own: only below sub/, and what it reads is confidential.
    assert!(matches!(
        run(&its_own, "native_read", "a.txt"),
        ToolResponse::Denied {
            reason: DenyReason::Capability { .. }
        }
    ));
    assert!(matches!(
        run(&its_own, "native_read", "sub/b.txt"),
        ToolResponse::Result { ref text, class: toolcell::Class::Confidential, .. }
            if text == "below"
    ));
    // Its pin on the read_file component refuses it for this context alone.
    assert!(!run(&server_s, "read_file", "a.txt").is_error());
    match run(&its_own, "read_file", "a.txt") {
        ToolResponse::Denied {
            reason: DenyReason::Capability {
                capability, why, ..
            },
        } => assert!(
            capability == "run" && why.contains("pins it to ffff"),
            "{why}"
        ),
        other => panic!("expected the pin to refuse it, got {other:?}"),
    }
    // A policy that needs fuel this runtime does not meter is refused before any call.
    let fuel =
        Policy::from_toml("[tools.native_read]\nlimits = { fuel = 1000 }\n").expect("policy");
    assert!(runtime.check_policy(&fuel).is_err());
}

/// A served runtime lists a native tool and calls it, over an in-memory MCP connection.
#[test]
fn serve_lists_and_calls_a_native_tool() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
    let (_temp, ws) = workspace();
    let natives = Natives::new();
    let policy = format!("{POLICY}\n[tools.ok]\ncore = true\n");
    let runtime = crate::support::builder()
        .policy(Policy::from_toml(&policy).expect("policy"))
        .workspace(&ws)
        .native(natives.read())
        .native(FnTool::new(
            ToolInfo::new("ok", "Answers ok.", json!({ "type": "object" })),
            |_, _| async { Ok("ok".to_owned()) },
        ))
        .build()
        .expect("runtime");
    let executor = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    let runtime = Arc::new(runtime);
    let served = Arc::clone(&runtime);
    executor.block_on(async move {
        let (client, server) = tokio::io::duplex(1 << 16);
        let (server_read, server_write) = tokio::io::split(server);
        let server = tokio::spawn(toolcell_mcp::serve_on(served, server_read, server_write));
        let (client_read, mut client_write) = tokio::io::split(client);
        let mut lines = BufReader::new(client_read).lines();
        let mut exchange = async |message: Value, id: Option<i64>| -> Option<Value> {
            client_write
                .write_all(format!("{message}\n").as_bytes())
                .await
                .expect("send");
            let id = id?;
            loop {
                let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                    .await
                    .expect("an answer in time")
                    .expect("read")
                    .expect("a line");
                let value: Value = serde_json::from_str(&line).expect("JSON");
                if value["id"] == json!(id) {
                    return Some(value);
                }
            }
        };
        exchange(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": { "name": "test", "version": "0" } } }),
            Some(1),
        )
        .await;
        exchange(
            json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
            None,
        )
        .await;
        let listed = exchange(
            json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
            Some(2),
        )
        .await
        .expect("list");
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|tool| tool["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["ok", "find_tool", "call_tool"],
            "core native tool listed"
        );
        let called = exchange(
            json!({ "jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": { "name": "ok", "arguments": {} } }),
            Some(3),
        )
        .await
        .expect("call");
        assert_eq!(called["result"]["content"][0]["text"], "ok");
        assert_eq!(called["result"]["isError"], false);
        let indirect = exchange(
            json!({ "jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": { "name": "call_tool", "arguments": {
                        "name": "native_read", "arguments": { "path": "a.txt" } } } }),
            Some(4),
        )
        .await
        .expect("call");
        assert_eq!(indirect["result"]["content"][0]["text"], "inside");
        // Closing the client's end (both halves) is the end of the server's input.
        drop((client_write, lines));
        tokio::time::timeout(Duration::from_secs(20), server)
            .await
            .expect("the server ends when its input closes")
            .expect("join")
            .expect("served");
    });
    assert_eq!(natives.runs(), 1);
    // The runtime owns a tokio runtime, which must be dropped outside async code.
    drop(executor);
    drop(runtime);
}

/// Every text a model reads is capped, marker included, in every outcome: a result, a tool's
/// failure, a tool's refusal, and a denial that quotes a resource the arguments named.
#[test]
fn every_text_a_model_reads_is_capped_in_every_outcome() {
    let (_temp, ws) = workspace();
    let natives = Natives::new();
    let big = || "y".repeat(5 << 20);
    let object = || json!({ "type": "object" });
    let cap = 100;
    let runtime = crate::support::builder()
        .policy(Policy::from_toml(POLICY).expect("policy"))
        .workspace(&ws)
        .native(natives.read())
        .native(FnTool::new(
            ToolInfo::new("fails_big", "Fails at length.", object()),
            move |_, _| async move { Err(ToolError::Failed(big())) },
        ))
        .native(FnTool::new(
            ToolInfo::new("refuses_big", "Refuses at length.", object()),
            move |_, _| async move { Err(ToolError::Denied(big())) },
        ))
        .native(FnTool::new(
            ToolInfo::new("returns_big", "Answers at length.", object()),
            move |_, _| async move { Ok(big()) },
        ))
        .build()
        .expect("runtime")
        .with_cap(cap);
    let escaping = format!("../{}", "z".repeat(500_000));
    for (tool, arguments) in [
        ("fails_big", json!({})),
        ("refuses_big", json!({})),
        ("returns_big", json!({})),
        ("native_read", json!({ "path": escaping })),
        ("native_read", json!({ "path": 7 })),
    ] {
        let response = call(&runtime, tool, arguments);
        let shown = runtime.model_text(&response);
        assert!(shown.len() <= cap, "{tool}: {} bytes shown", shown.len());
        let longest_field = serde_json::to_value(&response)
            .expect("json")
            .as_object()
            .into_iter()
            .flat_map(|object| object.values())
            .flat_map(|value| match value {
                Value::Object(reason) => reason.values().cloned().collect(),
                other => vec![other.clone()],
            })
            .filter_map(|value| value.as_str().map(str::len))
            .max()
            .unwrap_or(0);
        assert!(
            longest_field <= cap,
            "{tool}: a field of {longest_field} bytes"
        );
    }
}

/// The audit keeps each call's shape, never its content (file bodies, edit text, request
/// bodies, header values, URL userinfo and query), names the tool that ran, and says what the
/// gate itself decided: a tool that ran and refused was allowed by the gate.
#[test]
fn the_audit_keeps_resources_and_a_digest_never_content_and_the_gate_s_own_decision() {
    let (temp, ws) = workspace();
    let audit_path = temp.path().join("audit.jsonl");
    let policy = format!(
        "{}{}",
        toolcell::policy::DEFAULT_POLICY,
        "\n[tools.refuses]\n"
    );
    let runtime = crate::support::builder()
        .policy(Policy::from_toml(&policy).expect("policy"))
        .workspace(&ws)
        .native(FnTool::new(
            ToolInfo::new("refuses", "Refuses.", json!({ "type": "object" })),
            |_, _| async { Err(ToolError::Denied("not today".to_owned())) },
        ))
        .build()
        .expect("runtime")
        .with_audit(toolcell::audit::Audit::open(&audit_path).expect("audit"));
    let calls = [
        (
            "write_file",
            json!({ "path": "new.txt", "content": "SECRET-BODY" }),
        ),
        (
            "edit_file",
            json!({ "path": "a.txt", "old": "SECRET-OLD", "new": "SECRET-NEW" }),
        ),
        (
            "http_fetch",
            json!({
                "url": "https://user:SECRET-PW@example.invalid/x?q=SECRET-QUERY#SECRET-FRAGMENT",
                "headers": { "Cookie": "SECRET-COOKIE", "Authorization": "SECRET-AUTH" },
                "body": "SECRET-REQUEST"
            }),
        ),
        ("call_tool", json!({ "name": "refuses", "arguments": {} })),
    ];
    for (tool, arguments) in &calls {
        assert!(call(&runtime, tool, arguments.clone()).is_error(), "{tool}");
    }
    let text = std::fs::read_to_string(&audit_path).expect("audit");
    assert!(
        !text.contains("SECRET"),
        "content reached the audit:\n{text}"
    );
    let records: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect();
    assert_eq!(records.len(), calls.len());
    assert_eq!(
        records[0]["resources"]["/path"], "new.txt",
        "resources are kept"
    );
    let arguments = calls[0].1.to_string();
    assert_eq!(
        records[0]["arguments"],
        json!({
            "sha256": toolcell::audit::ArgumentDigest::of(&arguments).sha256,
            "bytes": arguments.len()
        }),
        "the rest is a digest of the canonical arguments"
    );
    assert_eq!(records[0]["gate"], "deny");
    assert_eq!(
        records[2]["resources"]["/url"]["url"], "https://example.invalid/x",
        "a URL without its userinfo, query and fragment"
    );
    toolcell::audit::verify(std::slice::from_ref(&audit_path), &Default::default())
        .expect("the audit chain verifies");
    let refusal = &records[3];
    assert_eq!(
        (
            &refusal["tool"],
            &refusal["via"],
            &refusal["gate"],
            &refusal["outcome"]
        ),
        (
            &json!("refuses"),
            &json!("call_tool"),
            &json!("allow"),
            &json!("denied")
        ),
        "{refusal}"
    );
}
