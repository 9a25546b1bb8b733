//! A tool's questions over MCP 2026-07-28 (`input_required` rounds), against `serve --http`
//! with raw JSON-RPC: the call ends with the questions under the tool's keys and a sealed
//! `requestState`; the retry with the answers runs it again, from the start, and it completes
//! (or asks its next round); an altered state is refused with an error; a state counts once;
//! a client that offers only sampling is asked no form. (A tool that asks something else under
//! an answered key is told `mismatch`: `rounds.rs`'s unit tests.) One test per fixture, named after it (`tests/guests/test_input_required_result_*`).

use super::{Server, request};
use crate::support::tools_dir;
use serde_json::{Value, json};

/// `serve --http` with the `input_required` fixtures, allowed to ask (as the conformance
/// server is), and the files it lives on.
struct Rig {
    server: Server,
    _tools: tempfile::TempDir,
}

/// The fixtures, as the conformance suite names them (its server serves them too).
pub(crate) const FIXTURES: [(&str, &[u8]); 8] = {
    use crate::guests::*;
    [
        (
            "test_input_required_result_elicitation",
            TEST_INPUT_REQUIRED_RESULT_ELICITATION,
        ),
        (
            "test_input_required_result_sampling",
            TEST_INPUT_REQUIRED_RESULT_SAMPLING,
        ),
        (
            "test_input_required_result_list_roots",
            TEST_INPUT_REQUIRED_RESULT_LIST_ROOTS,
        ),
        (
            "test_input_required_result_request_state",
            TEST_INPUT_REQUIRED_RESULT_REQUEST_STATE,
        ),
        (
            "test_input_required_result_tampered_state",
            TEST_INPUT_REQUIRED_RESULT_TAMPERED_STATE,
        ),
        (
            "test_input_required_result_multiple_inputs",
            TEST_INPUT_REQUIRED_RESULT_MULTIPLE_INPUTS,
        ),
        (
            "test_input_required_result_multi_round",
            TEST_INPUT_REQUIRED_RESULT_MULTI_ROUND,
        ),
        (
            "test_input_required_result_capabilities",
            TEST_INPUT_REQUIRED_RESULT_CAPABILITIES,
        ),
    ]
};

impl Rig {
    fn new() -> Rig {
        let tools = tools_dir(&FIXTURES);
        let mut policy = String::new();
        for (name, _) in FIXTURES {
            policy.push_str(&format!(
                "[tools.{name}]\nclient.elicit = {{ access = \"allow\" }}\n\
                 client.sample = {{ access = \"allow\" }}\n\
                 client.list_roots = {{ access = \"allow\" }}\n"
            ));
        }
        let file = tools.path().join("policy.toml");
        std::fs::write(&file, policy).expect("policy");
        let server = Server::start(&[
            "--tools",
            &tools.path().to_string_lossy(),
            "--policy",
            &file.to_string_lossy(),
        ]);
        Rig {
            server,
            _tools: tools,
        }
    }

    /// A stateless `tools/call` of `tool` with `extra` params (`inputResponses`,
    /// `requestState`), from a client that declares `capabilities`: the JSON-RPC answer.
    fn call(&self, id: u64, tool: &str, extra: Value, capabilities: Value) -> Value {
        let mut params = json!({
            "name": tool,
            "arguments": {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": capabilities,
            },
        });
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
        let answer = request(
            self.server.addr,
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "tools/call"),
                ("Mcp-Name", tool),
            ],
            &body.to_string(),
        );
        answer.json()
    }
}

/// What a client that answers everything declares.
fn everything() -> Value {
    json!({ "elicitation": { "form": {} }, "sampling": {}, "roots": {} })
}

fn accept(content: Value) -> Value {
    json!({ "action": "accept", "content": content })
}

fn sampled() -> Value {
    json!({ "role": "assistant", "content": { "type": "text", "text": "Paris." }, "model": "m" })
}

fn roots() -> Value {
    json!({ "roots": [{ "uri": "file:///test/root", "name": "Test Root" }] })
}

/// The first round's `input_required` answer: its questions by key (key, method), and its state.
fn asked(answer: &Value) -> (Vec<(String, String)>, String) {
    let result = &answer["result"];
    assert_eq!(result["resultType"], "input_required", "{answer}");
    let questions = result["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("no inputRequests: {answer}"))
        .iter()
        .map(|(key, request)| {
            (
                key.clone(),
                request["method"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let state = result["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no state: {answer}"));
    (questions, state.to_owned())
}

/// The text of a complete answer.
fn done(answer: &Value) -> String {
    let result = &answer["result"];
    assert_ne!(result["resultType"], "input_required", "{answer}");
    assert_eq!(result["isError"], false, "{answer}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// One question answered: `tool` asks `key` by `method`, and given `answer` completes with
/// text containing `expected`.
fn one_round(tool: &str, key: &str, method: &str, answer: Value, expected: &str) {
    let rig = Rig::new();
    let first = rig.call(1, tool, json!({}), everything());
    let (questions, state) = asked(&first);
    assert_eq!(questions, [(key.to_owned(), method.to_owned())], "{first}");
    let second = rig.call(
        2,
        tool,
        json!({ "inputResponses": { key: answer }, "requestState": state }),
        everything(),
    );
    let text = done(&second);
    assert!(text.contains(expected), "{text}");
}

#[test]
pub(crate) fn test_input_required_result_elicitation() {
    one_round(
        "test_input_required_result_elicitation",
        "user_name",
        "elicitation/create",
        accept(json!({ "name": "Alice" })),
        "Alice",
    );
}

#[test]
pub(crate) fn test_input_required_result_sampling() {
    one_round(
        "test_input_required_result_sampling",
        "capital",
        "sampling/createMessage",
        sampled(),
        "Paris.",
    );
}

#[test]
pub(crate) fn test_input_required_result_list_roots() {
    one_round(
        "test_input_required_result_list_roots",
        "roots",
        "roots/list",
        roots(),
        "file:///test/root",
    );
}

/// The answer comes back with the state it was asked under, and completes the call.
#[test]
pub(crate) fn test_input_required_result_request_state() {
    let rig = Rig::new();
    let tool = "test_input_required_result_request_state";
    let (questions, state) = asked(&rig.call(1, tool, json!({}), everything()));
    assert_eq!(questions[0].0, "confirm");
    let answered = json!({
        "inputResponses": { "confirm": accept(json!({ "ok": "yes" })) },
        "requestState": state,
    });
    assert!(done(&rig.call(2, tool, answered, everything())).contains("state-ok"));
}

/// A state changed on the way is refused with an error, never taken nor asked afresh.
#[test]
pub(crate) fn test_input_required_result_tampered_state() {
    let rig = Rig::new();
    let tool = "test_input_required_result_tampered_state";
    let (_, state) = asked(&rig.call(1, tool, json!({}), everything()));
    let answer = rig.call(
        2,
        tool,
        json!({ "inputResponses": { "confirm": accept(json!({ "ok": "yes" })) },
                "requestState": format!("{state}-TAMPERED") }),
        everything(),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
}

#[test]
pub(crate) fn test_input_required_result_multiple_inputs() {
    let rig = Rig::new();
    let tool = "test_input_required_result_multiple_inputs";
    let (questions, state) = asked(&rig.call(1, tool, json!({}), everything()));
    let methods: Vec<&str> = questions
        .iter()
        .map(|(_, method)| method.as_str())
        .collect();
    assert_eq!(methods.len(), 3);
    for method in ["elicitation/create", "sampling/createMessage", "roots/list"] {
        assert!(methods.contains(&method), "{methods:?}");
    }
    let answers = json!({
        "user_name": accept(json!({ "name": "Alice" })),
        "summary": sampled(),
        "roots": roots(),
    });
    let text = done(&rig.call(
        2,
        tool,
        json!({ "inputResponses": answers, "requestState": state }),
        everything(),
    ));
    assert_eq!(text, "Answered: elicited, sampled, roots");
}

/// Two rounds: the second state carries the first answer, and the last retry brings only
/// the second's; the tool, run again from the start, gets both.
#[test]
pub(crate) fn test_input_required_result_multi_round() {
    let rig = Rig::new();
    let tool = "test_input_required_result_multi_round";
    let (first, state) = asked(&rig.call(1, tool, json!({}), everything()));
    assert_eq!(first[0].0, "step1");
    let second = rig.call(
        2,
        tool,
        json!({ "inputResponses": { "step1": accept(json!({ "name": "Alice" })) }, "requestState": state }),
        everything(),
    );
    let (next, later) = asked(&second);
    assert_eq!(next[0].0, "step2");
    assert_ne!(later, state);
    let third = rig.call(
        3,
        tool,
        json!({ "inputResponses": { "step2": accept(json!({ "color": "blue" })) }, "requestState": later }),
        everything(),
    );
    let text = done(&third);
    assert!(text.contains("Alice") && text.contains("blue"), "{text}");
    // A state counts once: sent again, it carries no earlier answer, and the first question
    // is asked afresh.
    let replayed = rig.call(
        4,
        tool,
        json!({ "inputResponses": { "step2": accept(json!({ "color": "red" })) }, "requestState": later }),
        everything(),
    );
    let (asked_again, _) = asked(&replayed);
    assert_eq!(asked_again[0].0, "step1", "{replayed}");
}

/// A client that offers sampling alone is asked no form; one that offers nothing is asked
/// nothing, and the tool says so.
#[test]
pub(crate) fn test_input_required_result_capabilities() {
    let rig = Rig::new();
    let tool = "test_input_required_result_capabilities";
    let (questions, _) = asked(&rig.call(1, tool, json!({}), json!({ "sampling": {} })));
    assert_eq!(
        questions,
        [("capital".to_owned(), "sampling/createMessage".to_owned())]
    );
    let nothing = done(&rig.call(2, tool, json!({}), json!({})));
    assert_eq!(nothing, "This client can be asked nothing.");
}
