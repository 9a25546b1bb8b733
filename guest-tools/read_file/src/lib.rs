//! `read_file`: a text file's lines, from an offset, up to a limit and a byte budget, saying
//! when it cut, and the whole file's sha256 (which `edit_file` takes as `expected_sha256`).

mod logic;

use logic::select;
use serde::Deserialize;
use sha2::Digest as _;
use toolcell_guest::{Info, Tool, ToolError};

/// How many lines a call returns when it does not say.
const DEFAULT_LIMIT: usize = 2000;
/// How many bytes a call returns when it does not say.
const DEFAULT_MAX_BYTES: usize = 256 * 1024;

struct ReadFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    #[serde(default)]
    offset: usize,
    limit: Option<usize>,
    max_bytes: Option<usize>,
}

impl Tool for ReadFile {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let info = toolcell_guest::info(
            "read_file",
            "Read a text file in the workspace. Returns its lines from `offset` (0-based), at \
             most `limit` lines and `max_bytes` bytes, says when it cut, and ends with a line \
             `[sha256: ...]`: the whole file's digest, to pass to edit_file as \
             `expected_sha256`.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "The file, relative to the workspace." },
                    "offset": { "type": "integer", "minimum": 0, "description": "The first line to return, 0-based." },
                    "limit": { "type": "integer", "minimum": 1, "description": "The most lines to return (default 2000)." },
                    "max_bytes": { "type": "integer", "minimum": 1, "description": "The most bytes to return (default 262144)." }
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        );
        toolcell_guest::reads_path(info, "/path")
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let bytes =
            std::fs::read(&args.path).map_err(|e| toolcell_guest::io_error(&args.path, e))?;
        let digest: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::InvalidInput(format!("{} is not UTF-8 text", args.path)))?;
        let mut selected = select(
            &text,
            args.offset,
            args.limit.unwrap_or(DEFAULT_LIMIT),
            args.max_bytes.unwrap_or(DEFAULT_MAX_BYTES),
        );
        if !selected.is_empty() && !selected.ends_with('\n') {
            selected.push('\n');
        }
        selected.push_str(&format!("[sha256: {digest}]"));
        Ok(selected)
    }
}

toolcell_guest::export_tool!(ReadFile);
