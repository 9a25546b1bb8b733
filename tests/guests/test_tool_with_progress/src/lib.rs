//! A fixture of the MCP conformance suite: the scenario `tools-call-with-progress` calls it
//! with a progress token and expects rising progress while it runs. It reports its three
//! steps out of 100, through the contract's `client` interface.

use toolcell_guest::client;
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "test_tool_with_progress",
                "Reports its progress in three steps, and returns.",
                serde_json::json!({ "type": "object", "properties": {} }),
            ),
            &[ClientFeature::Progress],
        )
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        for (step, message) in [(0.0, "starting"), (50.0, "half way"), (100.0, "done")] {
            client::progress(step, Some(100.0), Some(message));
        }
        Ok("Progress completed.".to_owned())
    }
}

toolcell_guest::export_tool!(Fixture);
