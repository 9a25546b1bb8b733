//! A fixture of the MCP conformance suite (`@modelcontextprotocol/conformance`): the scenario
//! `tools-call-embedded-resource` calls it for a resource block.
//! Its name and behaviour are the suite's (`tests/conformance/`); see `tests/src/conformance.rs`.

use toolcell_guest::{Info, Part, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = Vec<Part>;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "test_embedded_resource",
            "Returns a text resource, embedded whole.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(_: serde_json::Value) -> Result<Vec<Part>, ToolError> {
        Ok(vec![toolcell_guest::embedded_text(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        )])
    }
}

toolcell_guest::export_tool!(Fixture);
