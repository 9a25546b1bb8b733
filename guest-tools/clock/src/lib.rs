//! `clock`: the current date and time, as RFC 3339 in UTC.
//!
//! It declares the `clock` capability; without that grant the host gives it a fixed wall clock,
//! so what it returns is only as true as its grant.

use serde::Deserialize;
use std::time::SystemTime;
use toolcell_guest::{CapabilityKind, Info, Tool, ToolError};

struct Clock;

/// No arguments: an empty object (other keys are ignored).
#[derive(Deserialize)]
struct Args {}

impl Tool for Clock {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "clock",
            "The current date and time, as RFC 3339 in UTC.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info.capabilities = vec![toolcell_guest::capability_whole(CapabilityKind::Clock)];
        info
    }

    fn call(_: Args) -> Result<String, ToolError> {
        Ok(humantime::format_rfc3339_seconds(SystemTime::now()).to_string())
    }
}

toolcell_guest::export_tool!(Clock);
