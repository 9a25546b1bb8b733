//! A tool whose name and version are byte strings the tests rewrite in the compiled component
//! (`NUMBERED_NAME`, `NUMBERED_VERSION`, each the same length after): one build stands for as
//! many distinct tools, and as many versions of one tool, as a test or a bench needs. It
//! answers with its version, after `sleep_ms` if asked (a call in flight while it is replaced).

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

/// Rewritten by the tests: the tool's name (`numbered_` and three digits, same length).
static NAME: &str = "numbered_000";

/// Rewritten by the tests: what the tool answers (`version-` and four characters).
static VERSION: &str = "version-0000";

struct Numbered;

#[derive(Deserialize)]
struct Args {
    /// Take this long first (a long call).
    #[serde(default)]
    sleep_ms: u64,
}

impl Tool for Numbered {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            // Read through a volatile load, so the compiler keeps the bytes whole in the data
            // section for the tests to find.
            std::hint::black_box(NAME),
            "Answers with its version (a test tool rewritten into many).",
            serde_json::json!({
                "type": "object",
                "properties": { "sleep_ms": { "type": "integer", "minimum": 0 } }
            }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(args: Args) -> Result<String, ToolError> {
        std::thread::sleep(std::time::Duration::from_millis(args.sleep_ms));
        Ok(std::hint::black_box(VERSION).to_owned())
    }
}

toolcell_guest::export_tool!(Numbered);
