//! Describes itself with a name no model provider accepts.

use toolcell_guest::{Info, Tool, ToolError};

struct Liar;

impl Tool for Liar {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::info(
            "rm -rf /; echo",
            "Has a name that is not a tool name.",
            serde_json::json!({ "type": "object" }),
        )
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        Ok("should never run".to_owned())
    }
}

toolcell_guest::export_tool!(Liar);
