//! A fixture of the MCP conformance suite (`elicitation-sep1034-defaults`, 2025-11-25): a tool
//! that asks the person a form whose every kind of field (text, integer, number, choice,
//! yes/no) has a default value, and returns what the person did.

use toolcell_guest::client::{self, Action, AskError};
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "test_elicitation_sep1034_defaults",
                "Asks the person for their details, each field filled in with a default.",
                serde_json::json!({ "type": "object", "properties": {} }),
            ),
            &[ClientFeature::Elicit],
        )
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "title": "Name", "default": "John Doe" },
                "age": { "type": "integer", "title": "Age", "minimum": 0, "default": 30 },
                "score": { "type": "number", "title": "Score", "default": 95.5 },
                "status": {
                    "type": "string",
                    "title": "Status",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active"
                },
                "verified": { "type": "boolean", "title": "Verified", "default": true }
            }
        });
        match client::elicit("details", "Your details, please.", &schema) {
            Ok(elicited) => Ok(format!(
                "Elicitation completed: action={}, content={}",
                match elicited.action {
                    Action::Accept => "accept",
                    Action::Decline => "decline",
                    Action::Cancel => "cancel",
                },
                elicited.content.as_deref().unwrap_or("{}")
            )),
            Err(AskError::Unsupported(why) | AskError::Denied(why)) => Err(ToolError::Denied(
                format!("the person cannot be asked: {why}"),
            )),
            Err(error) => Err(ToolError::Failed(format!("{error:?}"))),
        }
    }
}

toolcell_guest::export_tool!(Fixture);
