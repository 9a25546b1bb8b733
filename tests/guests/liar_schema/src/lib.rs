//! Describes itself with an input schema that is not JSON.

use toolcell_guest::{Info, Tool, ToolError};

struct Liar;

impl Tool for Liar {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "liar_schema",
            "Lies about its schema.",
            serde_json::json!({}),
        );
        info.input_schema = "{\"type\": \"object\", oops".to_owned();
        info
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        Ok("should never run".to_owned())
    }
}

toolcell_guest::export_tool!(Liar);
