//! The front's one reading of a request body: what every check decides on, and what runs.
//!
//! A request's body is parsed here once, as a `serde_json::Value`, and nothing reads the bytes
//! again. The scope check, quota admission, the fair share and cancellation all read this
//! value; the fast path builds its call from it ([`Reading::fast_call`]); and rmcp is
//! handed this value written out again ([`Reading::to_bytes`]), never the bytes the client
//! sent. So no check and the call it guards can read two different requests out of one body:
//! not through a JSON array that a serde-derived struct would read in field order, a duplicate
//! key that one parser keeps first and another last, an escape, or text one parser accepts
//! and another refuses (a lone surrogate, a number beyond `f64`).
//!
//! What is read is held to the shape MCP gives a message: one JSON object (JSON-RPC batches
//! were removed from MCP in 2025-06-18, and rmcp refuses them), whose `params`, when present,
//! is an object too. Anything else is refused before anything runs ([`Unreadable`]): `400`,
//! with the JSON-RPC error a client expects (`-32700` for a body that is not JSON, `-32600`
//! for JSON that is not such a message).

use crate::RawArguments;
use crate::transport::parse::FastCallParts;
use rmcp::model::{JsonObject, RequestId};
use serde::Deserialize as _;
use serde_json::{Map, Value};
use std::sync::Arc;

/// JSON-RPC's code for a body that is not JSON.
pub const PARSE_ERROR: i64 = -32700;

/// JSON-RPC's code for JSON that is not a request object.
pub const INVALID_REQUEST: i64 = -32600;

/// Why a body was refused before anything ran.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Unreadable {
    /// Not JSON (or JSON that `serde_json` cannot hold: a lone surrogate, a number beyond
    /// `f64`, nesting past its recursion limit).
    NotJson(String),
    /// JSON, but not one MCP message: a batch, a scalar, `params` that is not an object.
    NotAMessage {
        why: &'static str,
        /// The message's id, when it has one a refusal can echo.
        id: Option<Value>,
    },
}

impl Unreadable {
    /// The JSON-RPC error body the refusal carries: its code, a message a person (or a model)
    /// can read, and the request's id where one was read.
    pub(crate) fn body(&self) -> String {
        let (code, message, id) = match self {
            Unreadable::NotJson(why) => (
                PARSE_ERROR,
                format!("Parse error: the body is not JSON this server reads ({why})"),
                Value::Null,
            ),
            Unreadable::NotAMessage { why, id } => (
                INVALID_REQUEST,
                format!("Invalid Request: {why}"),
                id.clone().filter(echoable).unwrap_or(Value::Null),
            ),
        };
        serde_json::json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": { "code": code, "message": message },
        })
        .to_string()
    }
}

/// The longest string id a refusal echoes (a longer one is answered with `null`): a caller
/// cannot make a refusal large.
pub const MAX_ECHOED_ID_CHARS: usize = crate::http::quota::MAX_ECHOED_ID_CHARS;

fn echoable(id: &Value) -> bool {
    match id {
        Value::Number(_) => true,
        Value::String(text) => text.chars().count() <= MAX_ECHOED_ID_CHARS,
        _ => false,
    }
}

/// The longest `_meta` a message may carry, written out: what MCP puts there (the protocol
/// version, the client's capabilities, a progress token, trace context) takes a few hundred
/// bytes, and a call keeps its `_meta` while it runs, so a larger one is refused rather than
/// held.
pub const MAX_META_BYTES: usize = 64 * 1024;

/// The longest name a message may give the thing it acts on (`params.name` of a call or a
/// prompt, `params.uri` of a resource, `params.taskId`): far above any real one (a tool's
/// name is at most 64 characters, a URI a few hundred), and low enough that no answer echoing
/// it (an unknown tool, a header that does not match it) is large.
pub const MAX_NAME_BYTES: usize = 4096;

/// The longest `serde_json` error quoted in a refusal (its message names a line and column;
/// nothing of the body).
const MAX_PARSE_ERROR_CHARS: usize = 200;

/// One request body, read once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reading {
    message: Map<String, Value>,
}

impl Reading {
    /// Read `body` as one MCP message, or say why it is not one.
    pub(crate) fn parse(body: &[u8]) -> Result<Reading, Unreadable> {
        let value: Value = serde_json::from_slice(body).map_err(|error| {
            Unreadable::NotJson(
                error
                    .to_string()
                    .chars()
                    .take(MAX_PARSE_ERROR_CHARS)
                    .collect(),
            )
        })?;
        let Value::Object(message) = value else {
            return Err(Unreadable::NotAMessage {
                why: match value {
                    Value::Array(_) => {
                        "a message is one JSON object; batches (arrays) are not part of MCP"
                    }
                    _ => "a message is one JSON object",
                },
                id: None,
            });
        };
        match message.get("params") {
            None => {}
            Some(Value::Object(params)) => {
                if ["name", "uri", "taskId", "method"].iter().any(|field| {
                    params
                        .get(*field)
                        .and_then(Value::as_str)
                        .is_some_and(|name| name.len() > MAX_NAME_BYTES)
                }) {
                    return Err(Unreadable::NotAMessage {
                        why: "a name, URI or task id may be at most 4 KiB",
                        id: message.get("id").cloned(),
                    });
                }
                if let Some(meta) = params.get("_meta")
                    && serde_json::to_string(meta).map_or(true, |meta| meta.len() > MAX_META_BYTES)
                {
                    return Err(Unreadable::NotAMessage {
                        why: "a message's _meta may be at most 64 KiB",
                        id: message.get("id").cloned(),
                    });
                }
            }
            Some(_) => {
                return Err(Unreadable::NotAMessage {
                    why: "a message's params, when given, are a JSON object",
                    id: message.get("id").cloned(),
                });
            }
        }
        Ok(Reading { message })
    }

    /// The message's `id`, if it has one.
    pub(crate) fn id(&self) -> Option<&Value> {
        self.message.get("id")
    }

    fn method(&self) -> Option<&str> {
        self.message.get("method").and_then(Value::as_str)
    }

    fn params(&self) -> Option<&Map<String, Value>> {
        self.message.get("params").and_then(Value::as_object)
    }

    /// Whether it is a `tools/call`: what quotas count and the fair share of calls holds.
    /// (Without an id too: whatever becomes of such a message, it is counted as a call.)
    pub(crate) fn is_call(&self) -> bool {
        self.method() == Some("tools/call")
    }

    /// Whether it runs a guest: a `tools/call`, or a request of what components offer beside
    /// tools (`prompts/get`, `resources/read`, `completion/complete`), each of which runs a
    /// fresh instance. What quotas count and the fair share of calls holds.
    pub(crate) fn runs_guest(&self) -> bool {
        self.is_call()
            || matches!(
                self.method(),
                Some("prompts/get" | "resources/read" | "completion/complete")
            )
    }

    /// Whether what it runs may ask its client during the run: a tool's call, or a prompt's
    /// `get`.
    pub(crate) fn may_ask(&self) -> bool {
        self.is_call() || self.method() == Some("prompts/get")
    }

    /// The name a request of a component's offers is known by to the scope check and the
    /// quota's reservation: `prompt:NAME` for `prompts/get` and the completion of a prompt's
    /// argument, `resource:URI` for `resources/read` and the completion of a template's
    /// variable (its URI template). `None` for any other request, or one that names nothing.
    pub(crate) fn offer_called(&self) -> Option<String> {
        let params = self.params()?;
        match self.method()? {
            "prompts/get" => Some(format!("prompt:{}", params.get("name")?.as_str()?)),
            "resources/read" => Some(format!("resource:{}", params.get("uri")?.as_str()?)),
            "completion/complete" => {
                let reference = params.get("ref")?;
                match reference.get("type")?.as_str()? {
                    "ref/prompt" => Some(format!("prompt:{}", reference.get("name")?.as_str()?)),
                    "ref/resource" => Some(format!("resource:{}", reference.get("uri")?.as_str()?)),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The tools a `tools/call` runs, for the scope check: the tool it names, and for
    /// `call_tool`, the tool that one calls (its arguments' `name`), read from the same value
    /// the pipeline will be handed.
    pub(crate) fn tools_called(&self) -> Vec<&str> {
        let mut called = Vec::new();
        if !self.is_call() {
            return called;
        }
        let Some(params) = self.params() else {
            return called;
        };
        if let Some(name) = params.get("name").and_then(Value::as_str) {
            called.push(name);
            if name == toolcell::registry::CALL_TOOL
                && let Some(inner) = params
                    .get("arguments")
                    .and_then(|arguments| arguments.get("name"))
                    .and_then(Value::as_str)
            {
                called.push(inner);
            }
        }
        called
    }

    /// The capabilities an `initialize` request declares (what its session id will carry), if
    /// it is one.
    pub(crate) fn initialize(&self) -> Option<Value> {
        if self.method() != Some("initialize") || !self.message.contains_key("id") {
            return None;
        }
        Some(
            self.params()
                .and_then(|params| params.get("capabilities"))
                .cloned()
                .unwrap_or_else(|| Value::Object(Map::new())),
        )
    }

    /// A client's answer to a question this server asked on a stream: a response (no
    /// `method`) whose id is a question's name, with its `result` or its `error`.
    pub(crate) fn answer(&self) -> Option<(&str, crate::asking::Posted)> {
        if self.message.contains_key("method") {
            return None;
        }
        let id = self.id()?.as_str()?;
        if !id.starts_with(crate::http::questions::QUESTION_PREFIX) {
            return None;
        }
        match (self.message.get("result"), self.message.get("error")) {
            (Some(result), None) => Some((id, Ok(result.clone()))),
            (None, Some(error)) => Some((id, Err(error.clone()))),
            _ => None,
        }
    }

    /// The request a `notifications/cancelled` names, as the MCP handler writes request ids.
    pub(crate) fn cancelled(&self) -> Option<String> {
        if self.method() != Some("notifications/cancelled") {
            return None;
        }
        match self.params()?.get("requestId")? {
            Value::Number(number) => Some(number.to_string()),
            Value::String(text) => Some(text.clone()),
            _ => None,
        }
    }

    /// The message written out again: the body rmcp is handed, so that it reads exactly what
    /// the checks read.
    pub(crate) fn to_bytes(&self) -> bytes::Bytes {
        // Writing a `Value` out cannot fail (its keys are strings).
        bytes::Bytes::from(serde_json::to_vec(&self.message).unwrap_or_default())
    }

    /// The call, if the message is a `tools/call` of the usual shape (the fields `jsonrpc`
    /// `"2.0"`, `id`, `method`, and `name`, `arguments` (an object, or absent or `null`),
    /// `_meta` (an object) and, for a retry that carries a person's answer, `requestState` (a
    /// string) and `inputResponses` (an object) in `params`, and nothing else): what the fast
    /// path runs. The
    /// arguments are this value's, written out once for the pipeline's parse, exactly as the
    /// handler writes the map rmcp's parse makes of [`Reading::to_bytes`].
    pub(crate) fn fast_call(&self) -> Option<FastCallParts> {
        const MESSAGE: [&str; 4] = ["jsonrpc", "id", "method", "params"];
        const PARAMS: [&str; 5] = [
            "name",
            "arguments",
            "_meta",
            "requestState",
            "inputResponses",
        ];
        if !self
            .message
            .keys()
            .all(|key| MESSAGE.contains(&key.as_str()))
            || self.message.get("jsonrpc")?.as_str()? != "2.0"
            || !self.is_call()
        {
            return None;
        }
        let id = RequestId::deserialize(self.message.get("id")?).ok()?;
        let params = self.params()?;
        if !params.keys().all(|key| PARAMS.contains(&key.as_str())) {
            return None;
        }
        let name = params.get("name")?.as_str()?.to_owned();
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => None,
            Some(arguments @ Value::Object(_)) => {
                Some(RawArguments(Arc::from(arguments.to_string())))
            }
            Some(_) => return None,
        };
        let meta: Option<JsonObject> = match params.get("_meta") {
            None => None,
            Some(Value::Object(meta)) => Some(meta.clone()),
            Some(_) => return None,
        };
        let request_state = match params.get("requestState") {
            None => None,
            Some(Value::String(state)) => Some(state.clone()),
            Some(_) => return None,
        };
        let input_responses = match params.get("inputResponses") {
            None => None,
            Some(responses @ Value::Object(_)) => {
                Some(serde_json::from_value(responses.clone()).ok()?)
            }
            Some(_) => return None,
        };
        Some(FastCallParts {
            id,
            name,
            arguments,
            meta,
            request_state,
            input_responses,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(body: &str) -> Unreadable {
        Reading::parse(body.as_bytes()).expect_err(body)
    }

    #[test]
    fn only_one_object_with_object_params_is_a_message() {
        for body in [
            r#"["2.0",7,"tools/call",{"name":"read_file","arguments":{"path":"x"}}]"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}]"#,
            r#"[]"#,
            r#"[[{"jsonrpc":"2.0"}]]"#,
            r#""tools/call""#,
            "7",
            "null",
        ] {
            assert!(
                matches!(refused(body), Unreadable::NotAMessage { .. }),
                "{body}"
            );
        }
        let params = refused(
            r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":["read_file",{"path":"x"}]}"#,
        );
        assert_eq!(
            params,
            Unreadable::NotAMessage {
                why: "a message's params, when given, are a JSON object",
                id: Some(json!(9)),
            }
        );
        let answer: Value = serde_json::from_str(&params.body()).expect("JSON");
        assert_eq!(answer["error"]["code"], INVALID_REQUEST);
        assert_eq!(answer["id"], 9);
        let big_meta = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","_meta":{{"junk":"{}"}}}}}}"#,
            "x".repeat(MAX_META_BYTES)
        );
        assert!(matches!(refused(&big_meta), Unreadable::NotAMessage { .. }));
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\ud800"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":1e400}}}"#,
            r#"{"jsonrpc":"2.0","id":1"#,
            "",
        ] {
            let refusal = refused(body);
            assert!(matches!(refusal, Unreadable::NotJson(_)), "{body}");
            let answer: Value = serde_json::from_str(&refusal.body()).expect("JSON");
            assert_eq!(answer["error"]["code"], PARSE_ERROR, "{body}");
            assert_eq!(answer["id"], Value::Null, "{body}");
        }
    }

    #[test]
    fn the_checks_read_what_runs() {
        // Duplicate keys: the last is kept, by the checks and in what runs alike; escapes are
        // read as what they spell.
        let body = r#"{"jsonrpc":"2.0","id":3,"method":"tools\/call","params":{"name":"echo","name":"read_file","arguments":{"path":"a","path":"x.txt"}}}"#;
        let reading = Reading::parse(body.as_bytes()).expect("a message");
        assert!(reading.is_call());
        assert_eq!(reading.tools_called(), ["read_file"]);
        let rewritten: Value = serde_json::from_slice(&reading.to_bytes()).expect("JSON");
        assert_eq!(rewritten["params"]["name"], "read_file");
        assert_eq!(rewritten["method"], "tools/call");
        let call = reading.fast_call().expect("the usual shape");
        assert_eq!(call.name, "read_file");
        assert_eq!(
            call.arguments.as_ref().map(|raw| raw.0.as_ref()),
            Some(r#"{"path":"x.txt"}"#)
        );
        // call_tool names the tool it calls, from the arguments that will be run.
        let body = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"call_tool","arguments":{"name":"echo","name":"write_file","arguments":{}}}}"#;
        let reading = Reading::parse(body.as_bytes()).expect("a message");
        assert_eq!(reading.tools_called(), ["call_tool", "write_file"]);
    }

    #[test]
    fn only_the_usual_shape_is_a_fast_call() {
        let fast = |body: &str| {
            Reading::parse(body.as_bytes())
                .expect("a message")
                .fast_call()
        };
        assert!(fast(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":null,"_meta":{}}}"#).is_some_and(|call| call.arguments.is_none() && call.meta.is_some()));
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":[1],"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","task":{}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requestState":7}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","inputResponses":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
        ] {
            assert!(fast(body).is_none(), "took the fast path: {body}");
        }
    }

    #[test]
    fn a_cancellation_names_its_request() {
        for (body, named) in [
            (
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
                Some("7"),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"x"}}"#,
                Some("x"),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[7]}}"#,
                None,
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo"}}"#,
                None,
            ),
        ] {
            let reading = Reading::parse(body.as_bytes()).expect("a message");
            assert_eq!(reading.cancelled().as_deref(), named, "{body}");
        }
    }
}
