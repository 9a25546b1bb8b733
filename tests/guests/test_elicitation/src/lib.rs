//! A fixture of the MCP conformance suite (`tools-call-elicitation`, 2025-11-25): a tool that
//! shows the person the message it is given, asks for a user name and an email address, and
//! returns what the person did. A client that cannot be asked gets the tool's error saying so.

use serde::Deserialize;
use toolcell_guest::client::{self, Action, AskError};
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Fixture;

#[derive(Deserialize)]
struct Args {
    message: String,
}

impl Tool for Fixture {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "test_elicitation",
                "Asks the person for a user name and an email address, showing them a message.",
                serde_json::json!({
                    "type": "object",
                    "properties": {
                        "message": { "type": "string", "description": "What to show the person." }
                    },
                    "required": ["message"]
                }),
            ),
            &[ClientFeature::Elicit],
        )
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "username": { "type": "string", "description": "User's response" },
                "email": { "type": "string", "description": "User's email address" }
            },
            "required": ["username", "email"]
        });
        match client::elicit("user_info", &args.message, &schema) {
            Ok(elicited) => Ok(format!(
                "User response: action={}, content={}",
                action_name(elicited.action),
                elicited.content.as_deref().unwrap_or("{}")
            )),
            Err(AskError::Unsupported(why) | AskError::Denied(why)) => Err(ToolError::Denied(
                format!("the person cannot be asked: {why}"),
            )),
            Err(error) => Err(ToolError::Failed(format!("{error:?}"))),
        }
    }
}

fn action_name(action: Action) -> &'static str {
    match action {
        Action::Accept => "accept",
        Action::Decline => "decline",
        Action::Cancel => "cancel",
    }
}

toolcell_guest::export_tool!(Fixture);
