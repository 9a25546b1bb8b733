//! The tools that ship, through the real wasm port.

use crate::support::{call, port, result_text};
use std::time::SystemTime;
use toolcell::registry::Registry;
use toolcell::{Class, FailureKind, ToolPort, ToolRequest, ToolResponse};

#[test]
fn echo_returns_its_text_unchanged() {
    for text in ["héllo", "", "line one\nline two", "😀 \u{0} \"quoted\""] {
        let arguments = serde_json::json!({ "text": text }).to_string();
        assert_eq!(
            call("echo", &arguments),
            ToolResponse::Result {
                text: text.to_owned(),
                class: Class::Public,
                untrusted: false,
                truncated: false,
            }
        );
    }
}

#[test]
fn echo_without_text_is_invalid_input_with_the_reason() {
    for arguments in [r#"{}"#, r#"{"text":7}"#, "not json", "[]"] {
        match call("echo", arguments) {
            ToolResponse::Failed {
                kind: FailureKind::InvalidInput,
                message,
            } => assert!(message.contains("arguments"), "{arguments}: {message}"),
            other => panic!("{arguments}: expected invalid input, got {other:?}"),
        }
    }
}

#[test]
fn clock_granted_the_clock_reads_the_real_time() {
    let text = result_text(call("clock", "{}"));
    let then = humantime::parse_rfc3339(&text).expect("RFC 3339");
    assert!(text.ends_with('Z'), "UTC: {text}");
    let skew = SystemTime::now()
        .duration_since(then)
        .unwrap_or_else(|e| e.duration());
    assert!(skew.as_secs() <= 5, "{text} is {skew:?} from now");
}

#[test]
fn clock_without_the_grant_reads_the_fixed_time() {
    let port = crate::support::builder()
        .policy(toolcell::Policy::empty())
        .build()
        .expect("port");
    let response = port.call(&ToolRequest::new("1", "clock", "{}"));
    assert_eq!(result_text(response), "1970-01-01T00:00:00Z");
}

#[test]
fn an_unknown_tool_is_its_own_failure_naming_the_nearest_tools() {
    assert_eq!(
        call("no_such_tool", "{}"),
        ToolResponse::failed(FailureKind::UnknownTool, r#"no tool named "no_such_tool""#)
    );
    assert_eq!(
        call("reed_file", r#"{"path":"x"}"#),
        ToolResponse::failed(
            FailureKind::UnknownTool,
            r#"no tool named "reed_file"; did you mean read_file?"#
        )
    );
}

#[test]
fn oversized_arguments_are_refused_before_instantiation() {
    let text = "x".repeat(toolcell::limits::MAX_ARGUMENT_BYTES);
    let arguments = serde_json::json!({ "text": text }).to_string();
    match call("echo", &arguments) {
        ToolResponse::Failed {
            kind: FailureKind::InvalidInput,
            message,
        } => assert!(message.contains("at most"), "{message}"),
        other => panic!("expected invalid input, got {other:?}"),
    }
}

#[test]
fn the_registry_from_describe_is_the_seeds_registry() {
    let port = crate::support::builder().build().expect("port");
    // The seed's two tools, exactly as the seed's registry has them (more tools ship too).
    let seed: Vec<_> = port
        .registry()
        .entries()
        .iter()
        .filter(|entry| ["clock", "echo"].contains(&entry.schema.name.as_str()))
        .cloned()
        .collect();
    assert_eq!(seed, Registry::m2b().entries());
    let echo = port.info("echo").expect("echo");
    assert!(echo.read_only && echo.concurrency_safe);
    let clock = port.info("clock").expect("clock");
    assert_eq!(clock.capabilities.len(), 1);
}

#[test]
fn the_pipeline_runs_find_tool_and_call_tool_like_a_loop() {
    let port = crate::support::builder().build().expect("port");
    let runtime = port;
    let found = result_text(runtime.call(&toolcell::ToolRequest::new(
        "1",
        "find_tool",
        r#"{"query":"ECHO"}"#,
    )));
    assert!(
        found.starts_with("1 tool(s) match:\n{\"name\":\"echo\""),
        "{found}"
    );
    assert_eq!(
        result_text(runtime.call(&toolcell::ToolRequest::new(
            "2",
            "echo",
            r#"{"text":"direct"}"#
        ))),
        "direct"
    );

    // The cap counts the marker: a cap leaving 4 bytes before the marker
    // cuts after "hé" and before the second "é" (the cut may not split it).
    let runtime = runtime.with_cap(4 + toolcell::registry::TRUNCATION_MARKER.len());
    let response = runtime.call(&toolcell::ToolRequest::new(
        "3",
        "call_tool",
        r#"{"name":"echo","arguments":{"text":"hééxxxxxxxxxxxxxxxxxxxx"}}"#,
    ));
    assert_eq!(
        response,
        ToolResponse::Result {
            text: "hé\n[truncated]".to_owned(),
            class: Class::Public,
            untrusted: false,
            truncated: true,
        }
    );
}

#[test]
fn the_shared_port_loaded_every_guest() {
    let registry = port().registry();
    let names: Vec<&str> = registry
        .entries()
        .iter()
        .map(|entry| entry.schema.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "clock",
            "echo",
            "edit_file",
            "glob",
            "grep",
            "http_fetch",
            "list_dir",
            "read_file",
            "write_file",
            "counter",
            "snoop",
            "hostile"
        ]
    );
}

/// The benchmark's compute guest gets the same answer as the same Rust run natively.
#[test]
pub(crate) fn compute() {
    let port = crate::support::builder()
        .builtin_tools(false)
        .component("test:compute", crate::guests::COMPUTE)
        .build()
        .expect("port");
    let response = port.call(&ToolRequest::new(
        "t",
        "compute",
        r#"{"seed":3,"bytes":200000,"needle":"fresh sandbox"}"#,
    ));
    let native = grep_kernel::run(3, 200_000, "fresh sandbox");
    assert!(native > 0, "the needle occurs");
    assert_eq!(result_text(response), native.to_string());
}
