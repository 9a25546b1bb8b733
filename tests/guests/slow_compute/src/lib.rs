//! A fixture of the MCP conformance suite's tasks extension (`tasks-*`, SEP-2663): works for
//! `seconds` (sleeping), then says what it computed. A call of it becomes a task for a client
//! that declared the extension; `seconds: 0` answers at once. Cancelled, its instance is
//! stopped mid-sleep. See `tests/src/conformance.rs`.

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

struct SlowCompute;

#[derive(Deserialize)]
struct Args {
    /// How long the work takes.
    seconds: u64,
    /// A name for this piece of work, said back in the result.
    #[serde(default)]
    label: String,
}

impl Tool for SlowCompute {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "slow_compute",
            "Works for `seconds`, then says what it computed.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "seconds": { "type": "integer", "minimum": 0, "maximum": 3600 },
                    "label": { "type": "string" }
                },
                "required": ["seconds"]
            }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(args: Args) -> Result<String, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(args.seconds));
        Ok(format!(
            "Computed {} in {} s.",
            if args.label.is_empty() {
                "it"
            } else {
                &args.label
            },
            args.seconds
        ))
    }
}

toolcell_guest::export_tool!(SlowCompute);
