//! A fixture of the MCP conformance suite's tasks extension (`tasks-*`, SEP-2663): a job that
//! works for a second and then reports a failure of its own (a result with `isError`, so its
//! task ends `completed`, not `failed`). The operator's policy says it must run as a task
//! (`task = "required"`). See `tests/src/conformance.rs`.

use toolcell_guest::{Info, Tool, ToolError};

struct FailingJob;

impl Tool for FailingJob {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "failing_job",
            "Works for a second, then fails.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        std::thread::sleep(std::time::Duration::from_secs(1));
        Err(ToolError::Failed(
            "the job failed after a second".to_owned(),
        ))
    }
}

toolcell_guest::export_tool!(FailingJob);
