//! A fixture of the MCP conformance suite (`tools-call-sampling`, 2025-11-25): a tool that asks
//! the client's model the prompt it is given (at most 100 tokens) and returns what the model
//! said. A client that cannot be asked gets the tool's error saying so.

use serde::Deserialize;
use toolcell_guest::client::{self, AskError, Content};
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Fixture;

#[derive(Deserialize)]
struct Args {
    prompt: String,
}

impl Tool for Fixture {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "test_sampling",
                "Asks the client's model to answer a prompt, and returns its answer.",
                serde_json::json!({
                    "type": "object",
                    "properties": {
                        "prompt": { "type": "string", "description": "What to ask the model." }
                    },
                    "required": ["prompt"]
                }),
            ),
            &[ClientFeature::Sample],
        )
    }

    fn call(args: Args) -> Result<String, ToolError> {
        match client::sample("answer", &args.prompt, 100) {
            Ok(sampled) => Ok(match sampled.content {
                Content::Text(text) => format!("LLM response: {text}"),
                _ => format!("LLM response: (not text, from {})", sampled.model),
            }),
            Err(AskError::Unsupported(why) | AskError::Denied(why)) => Err(ToolError::Denied(
                format!("the client's model cannot be asked: {why}"),
            )),
            Err(error) => Err(ToolError::Failed(format!("{error:?}"))),
        }
    }
}

toolcell_guest::export_tool!(Fixture);
