//! A fixture of the MCP conformance suite (`server-stateless`): a tool that asks the person for
//! their name. Over MCP 2026-07-28 the server must never send the client a request of its own
//! on the call's stream; the question travels as the call's result, or not at all (the tool is
//! told why and answers without it).

use toolcell_guest::client;
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "test_streaming_elicitation",
                "Asks the person for their name, and greets them.",
                serde_json::json!({ "type": "object", "properties": {} }),
            ),
            &[ClientFeature::Elicit],
        )
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        let schema = serde_json::json!({
            "type": "object",
            "properties": { "name": { "type": "string" } },
            "required": ["name"]
        });
        Ok(
            match client::elicit("user_name", "What is your name?", &schema) {
                Ok(answer) => match answer.content {
                    Some(content) => format!("Hello: {content}"),
                    None => "No name given.".to_owned(),
                },
                Err(why) => format!("Could not ask: {why:?}"),
            },
        )
    }
}

toolcell_guest::export_tool!(Fixture);
