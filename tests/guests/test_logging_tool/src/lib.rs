//! A fixture of the MCP conformance suite (`server-stateless`): a tool that logs. Over MCP
//! 2026-07-28 a request that names no `logLevel` must get no log messages, whatever the tool
//! sends; one that names a level gets those at or above it.

use toolcell_guest::client::{self, Level};
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "test_logging_tool",
                "Logs a line at each level from debug to error, and returns.",
                serde_json::json!({ "type": "object", "properties": {} }),
            ),
            &[ClientFeature::Log],
        )
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        for (level, name) in [
            (Level::Debug, "debug"),
            (Level::Info, "info"),
            (Level::Warning, "warning"),
            (Level::Error, "error"),
        ] {
            client::log(level, Some("fixture"), &format!("a line at {name}"));
        }
        Ok("Logged four lines.".to_owned())
    }
}

toolcell_guest::export_tool!(Fixture);
