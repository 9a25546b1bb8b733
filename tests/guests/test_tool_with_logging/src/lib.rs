//! A fixture of the MCP conformance suite: the scenario `tools-call-with-logging` calls it and
//! expects log messages while it runs. It logs that it started, works, and finished (at
//! `info`), through the contract's `client` interface, which the host gates like any
//! capability.

use toolcell_guest::client::{self, Level};
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "test_tool_with_logging",
                "Logs that it starts, works and finishes, and returns.",
                serde_json::json!({ "type": "object", "properties": {} }),
            ),
            &[ClientFeature::Log],
        )
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        for message in [
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ] {
            client::log(Level::Info, None, message);
        }
        Ok("Logging completed.".to_owned())
    }
}

toolcell_guest::export_tool!(Fixture);
