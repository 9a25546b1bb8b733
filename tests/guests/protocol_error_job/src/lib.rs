//! A fixture of the MCP conformance suite's tasks extension (`tasks-*`, SEP-2663): a job that
//! works for a second and then crashes (a panic, which traps its instance). Nothing the tool
//! said is a result, so its task ends `failed` with the host's error. See
//! `tests/src/conformance.rs`.

use toolcell_guest::{Info, Tool, ToolError};

struct ProtocolErrorJob;

impl Tool for ProtocolErrorJob {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "protocol_error_job",
            "Works for a second, then crashes.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(1));
        panic!("the job crashed after a second")
    }
}

toolcell_guest::export_tool!(ProtocolErrorJob);
