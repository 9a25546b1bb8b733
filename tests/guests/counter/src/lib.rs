//! Counts its calls in a global. In a fresh instance per call, every call returns 1.

use serde::Deserialize;
use std::sync::atomic::{AtomicU32, Ordering};
use toolcell_guest::{Info, Tool, ToolError};

static CALLS: AtomicU32 = AtomicU32::new(0);

struct Counter;

#[derive(Deserialize)]
struct Args {}

impl Tool for Counter {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::info(
            "counter",
            "Returns how many calls this instance has served.",
            serde_json::json!({ "type": "object" }),
        )
    }

    fn call(_: Args) -> Result<String, ToolError> {
        Ok((CALLS.fetch_add(1, Ordering::SeqCst) + 1).to_string())
    }
}

toolcell_guest::export_tool!(Counter);
