//! A fixture of the MCP conformance suite (`@modelcontextprotocol/conformance`): the scenario
//! `tools-call-simple-text` calls it, without arguments, for one text block.
//! Its name and behaviour are the suite's (`tests/conformance/`); see `tests/src/conformance.rs`.

use toolcell_guest::{Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "test_simple_text",
            "Returns a simple text response.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        Ok("This is a simple text response for testing.".to_owned())
    }
}

toolcell_guest::export_tool!(Fixture);
