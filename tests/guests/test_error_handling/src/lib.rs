//! A fixture of the MCP conformance suite (`@modelcontextprotocol/conformance`): the scenario
//! `tools-call-error` calls it for a result that is an error (`isError`), its first block text.
//! Its name and behaviour are the suite's (`tests/conformance/`); see `tests/src/conformance.rs`.

use toolcell_guest::{Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "test_error_handling",
            "Always fails, to show how a tool reports an error.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        Err(ToolError::Failed(
            "This tool intentionally returns an error for testing".to_owned(),
        ))
    }
}

toolcell_guest::export_tool!(Fixture);
