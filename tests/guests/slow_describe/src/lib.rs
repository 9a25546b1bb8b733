//! Never finishes describing itself.

use toolcell_guest::{Info, Tool, ToolError};

struct Slow;

impl Tool for Slow {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut n = 0u64;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        Ok("should never run".to_owned())
    }
}

toolcell_guest::export_tool!(Slow);
