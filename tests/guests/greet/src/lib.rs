//! A fixture of the MCP conformance suite's tasks extension (`tasks-*`, SEP-2663): a quick
//! tool that greets whom it is told to. It is never a task: it answers long before a call
//! could become one. See `tests/src/conformance.rs`.

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

struct Greet;

#[derive(Deserialize)]
struct Args {
    /// Whom to greet.
    name: String,
}

impl Tool for Greet {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "greet",
            "Greets whom it is told to.",
            serde_json::json!({
                "type": "object",
                "properties": { "name": { "type": "string" } },
                "required": ["name"]
            }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(args: Args) -> Result<String, ToolError> {
        Ok(format!("Hello, {}!", args.name))
    }
}

toolcell_guest::export_tool!(Greet);
