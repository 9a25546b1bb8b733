//! Structured results: a tool declares its result's schema (`info.output-schema`, since
//! `toolcell:tool@0.2.0`), the host checks every result against it, and MCP serves it as
//! `structuredContent`. Components built against 0.1.0 keep loading.

use crate::mcp::Server;
use crate::support::{result_text, tools_dir};
use serde_json::json;
use toolcell::{
    CallOptions, CallReport, FailureKind, Runtime, ToolPort as _, ToolRequest, ToolResponse,
};

fn runtime() -> Runtime {
    crate::support::builder()
        .builtin_tools(false)
        .component("structured.wasm", crate::guests::STRUCTURED)
        .component("old_contract.wasm", crate::guests::OLD_CONTRACT)
        .build()
        .expect("runtime")
}

fn call(runtime: &Runtime, tool: &str, arguments: serde_json::Value) -> CallReport {
    runtime.call_with_report(
        &ToolRequest::new("t", tool, arguments.to_string()),
        &CallOptions::default(),
    )
}

/// The failure's message, if the response is an InvalidOutput failure.
fn invalid_output(response: &ToolResponse) -> Option<&str> {
    match response {
        ToolResponse::Failed {
            kind: FailureKind::InvalidOutput,
            message,
        } => Some(message),
        _ => None,
    }
}

/// A result that fits its schema is passed on with its parsed value; one of the wrong type,
/// one that is not JSON and one over the result cap are each a typed failure, and none of them
/// reaches the caller.
#[test]
pub(crate) fn structured() {
    let runtime = runtime();
    assert!(
        runtime.load_errors().is_empty(),
        "{:?}",
        runtime.load_errors()
    );
    let info = runtime.info("structured").expect("loaded");
    assert_eq!(
        info.output_schema.as_ref().map(|s| &s["required"]),
        Some(&json!(["sum"]))
    );

    let honest = call(&runtime, "structured", json!({ "a": 2, "b": 3 }));
    assert_eq!(result_text(honest.response.clone()), r#"{"sum":5}"#);
    assert_eq!(honest.structured, Some(json!({ "sum": 5 })));

    let wrong_type = call(
        &runtime,
        "structured",
        json!({ "a": 2, "b": 3, "lie": "type" }),
    );
    let why = invalid_output(&wrong_type.response).expect("a typed failure");
    assert!(
        why.contains("does not fit its output schema") && why.contains("/sum"),
        "{why}"
    );
    assert_eq!(wrong_type.structured, None);

    let not_json = call(
        &runtime,
        "structured",
        json!({ "a": 2, "b": 3, "lie": "text" }),
    );
    let why = invalid_output(&not_json.response).expect("a typed failure");
    assert!(why.contains("is not JSON"), "{why}");

    let huge = call(
        &runtime,
        "structured",
        json!({ "a": 2, "b": 3, "lie": "huge" }),
    );
    let why = invalid_output(&huge.response).expect("a typed failure");
    assert!(why.contains("more than the result cap"), "{why}");
    assert!(
        runtime.model_text(&huge.response).len() <= toolcell::limits::DEFAULT_RESULT_CAP,
        "the cap bounds what the model reads"
    );
}

/// A component built against `toolcell:tool@0.1.0` loads, describes itself without an output
/// schema, answers, and reports its own errors.
#[test]
pub(crate) fn old_contract() {
    let runtime = runtime();
    let info = runtime
        .info("old_contract")
        .expect("a 0.1.0 component loads");
    assert_eq!(info.output_schema, None);
    let report = call(&runtime, "old_contract", json!({ "text": "abc" }));
    assert_eq!(result_text(report.response), "cba");
    let failed = call(&runtime, "old_contract", json!({ "text": "fail" }));
    assert!(
        matches!(&failed.response, ToolResponse::Failed { kind: FailureKind::NotFound, message } if message == "asked to fail"),
        "{:?}",
        failed.response
    );
}

/// Over MCP: `tools/list` carries the output schema, a result that fits comes with
/// `structuredContent`, and a lying one is `isError` without it.
#[test]
fn mcp_serves_structured_content_and_refuses_a_lying_result() {
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let policy = tools.path().join("policy.toml");
    std::fs::write(&policy, "[tools.structured]\ncore = true\n").expect("policy");
    let mut server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &policy.to_string_lossy(),
    ]);
    server.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
    let list = server.response(1);
    let listed = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|tool| tool["name"] == "structured")
        .expect("a core tool is listed");
    assert_eq!(
        listed["outputSchema"]["required"],
        json!(["sum"]),
        "{listed}"
    );
    server.call(2, "structured", json!({ "a": 1, "b": 1 }));
    let answer = server.response(2);
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({ "sum": 2 }),
        "{answer}"
    );
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    assert_eq!(crate::mcp::text(&answer), r#"{"sum":2}"#);

    server.call(3, "structured", json!({ "a": 1, "b": 1, "lie": "type" }));
    let lying = server.response(3);
    assert_eq!(lying["result"]["isError"], json!(true), "{lying}");
    assert!(
        lying["result"].get("structuredContent").is_none(),
        "{lying}"
    );
    assert!(
        crate::mcp::text(&lying).contains("output schema"),
        "{lying}"
    );
    server.close();
}
