//! A fixture of the MCP conformance suite (`elicitation-sep1330-enums`, 2025-11-25): a tool
//! that asks the person to choose, in each of the five ways a form may offer a choice (one of
//! plain values, one of titled values, one of values with the older `enumNames`, several of
//! plain values, several of titled values), and returns what the person did.

use toolcell_guest::client::{self, Action, AskError};
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "test_elicitation_sep1330_enums",
                "Asks the person to choose, in each of the ways a form offers choices.",
                serde_json::json!({ "type": "object", "properties": {} }),
            ),
            &[ClientFeature::Elicit],
        )
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        let titled = |values: [(&str, &str); 3]| {
            values
                .iter()
                .map(|(value, title)| serde_json::json!({ "const": value, "title": title }))
                .collect::<Vec<_>>()
        };
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "untitledSingle": {
                    "type": "string",
                    "enum": ["option1", "option2", "option3"]
                },
                "titledSingle": {
                    "type": "string",
                    "oneOf": titled([
                        ("value1", "First Option"),
                        ("value2", "Second Option"),
                        ("value3", "Third Option"),
                    ])
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]
                },
                "untitledMulti": {
                    "type": "array",
                    "items": { "type": "string", "enum": ["option1", "option2", "option3"] }
                },
                "titledMulti": {
                    "type": "array",
                    "items": {
                        "anyOf": titled([
                            ("value1", "First Choice"),
                            ("value2", "Second Choice"),
                            ("value3", "Third Choice"),
                        ])
                    }
                }
            }
        });
        match client::elicit("choices", "Choose, please.", &schema) {
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
