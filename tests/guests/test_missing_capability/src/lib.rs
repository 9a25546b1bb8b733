//! A fixture of the MCP conformance suite (`server-stateless`): a tool that cannot work without
//! asking the client's model, and says so (`client-needs`: `sample`, required). A request whose
//! client does not offer sampling is refused before it runs (MCP 2026-07-28: error -32021,
//! naming `sampling`); one that does gets the model's answer back.

use toolcell_guest::client::{self, AskError};
use toolcell_guest::{ClientFeature, ClientNeed, Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "test_missing_capability",
            "Asks the client's model a question, which it cannot do without.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.client_needs = vec![ClientNeed {
            feature: ClientFeature::Sample,
            required: true,
        }];
        info
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        match client::sample("answer", "Say something.", 50) {
            Ok(sampled) => Ok(format!("the model ({}) answered", sampled.model)),
            Err(AskError::Unsupported(why) | AskError::Denied(why)) => Err(ToolError::Denied(why)),
            Err(error) => Err(ToolError::Failed(format!("{error:?}"))),
        }
    }
}

toolcell_guest::export_tool!(Fixture);
