//! `echo`: returns its text argument unchanged. The smallest useful tool, and the one the
//! benchmarks and tests lean on.

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

struct Echo;

/// The arguments: one required string.
#[derive(Deserialize)]
struct Args {
    text: String,
}

impl Tool for Echo {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "echo",
            "Returns its text argument unchanged.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "text": { "type": "string", "description": "The text to return." }
                },
                "required": ["text"]
            }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(args: Args) -> Result<String, ToolError> {
        Ok(args.text)
    }
}

toolcell_guest::export_tool!(Echo);
