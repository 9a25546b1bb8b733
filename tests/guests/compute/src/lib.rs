//! Compute-heavy work for the benchmark: generate a corpus and grep it, in wasm.

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

struct Compute;

#[derive(Deserialize)]
struct Args {
    seed: u64,
    bytes: usize,
    needle: String,
    /// `"generate"` to only generate the corpus (and return its length), for a breakdown;
    /// `"all"` (the default) for the whole job.
    #[serde(default)]
    phase: Option<String>,
}

impl Tool for Compute {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::info(
            "compute",
            "Generates a text of the given size and counts the lines that contain a needle.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "seed": { "type": "integer" },
                    "bytes": { "type": "integer" },
                    "needle": { "type": "string" },
                    "phase": { "enum": ["all", "generate"] }
                },
                "required": ["seed", "bytes", "needle"]
            }),
        )
    }

    fn call(args: Args) -> Result<String, ToolError> {
        if args.phase.as_deref() == Some("generate") {
            return Ok(grep_kernel::corpus(args.seed, args.bytes).len().to_string());
        }
        Ok(grep_kernel::run(args.seed, args.bytes, &args.needle).to_string())
    }
}

toolcell_guest::export_tool!(Compute);
