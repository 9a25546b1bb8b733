//! `edit_file`: replace one exact, unique piece of a file's text, optionally only if the file
//! is still what the caller last read.
//!
//! The new text is written to a temporary file beside the old one and renamed over it, so no
//! reader ever sees half an edit. The host runs calls of this tool (it is not
//! concurrency-safe) on the same file one at a time, so the check of `expected_sha256` and
//! the write that follows it are one step for every other toolcell call.

mod logic;

use logic::replace_once;
use serde::Deserialize;
use sha2::Digest as _;
use toolcell_guest::{Info, Tool, ToolError};

struct EditFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    old: String,
    new: String,
    expected_sha256: Option<String>,
}

impl Tool for EditFile {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let info = toolcell_guest::info(
            "edit_file",
            "Edit a text file in the workspace: replace the one place where `old` occurs with \
             `new`. `old` must occur exactly once. With `expected_sha256`, the edit is refused if \
             the file changed since it was read.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "The file, relative to the workspace." },
                    "old": { "type": "string", "minLength": 1, "description": "The exact text to replace; it must occur once." },
                    "new": { "type": "string", "description": "The text to put in its place." },
                    "expected_sha256": { "type": "string", "description": "The sha256 (hex) of the file as last read." }
                },
                "required": ["path", "old", "new"],
                "additionalProperties": false
            }),
        );
        toolcell_guest::writes_path(info, "/path")
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let bytes =
            std::fs::read(&args.path).map_err(|e| toolcell_guest::io_error(&args.path, e))?;
        if let Some(expected) = &args.expected_sha256 {
            let actual = hex(&sha2::Sha256::digest(&bytes));
            if !actual.eq_ignore_ascii_case(expected) {
                return Err(ToolError::Failed(format!(
                    "{} changed since it was read (its sha256 is now {actual}); read it again",
                    args.path
                )));
            }
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::InvalidInput(format!("{} is not UTF-8 text", args.path)))?;
        let edited = replace_once(&text, &args.old, &args.new).map_err(|count| match count {
            0 => ToolError::NotFound(format!("`old` does not occur in {}", args.path)),
            n => ToolError::InvalidInput(format!(
                "`old` occurs {n} times in {}; include more context so it occurs once",
                args.path
            )),
        })?;
        replace_atomically(&args.path, edited.as_bytes())
            .map_err(|e| toolcell_guest::io_error(&args.path, e))?;
        Ok(format!(
            "edited {}; its sha256 is now {}",
            args.path,
            hex(&sha2::Sha256::digest(edited.as_bytes()))
        ))
    }
}

/// Write `bytes` to a temporary file beside `path`, then rename it over `path`.
fn replace_atomically(path: &str, bytes: &[u8]) -> std::io::Result<()> {
    let path = std::path::Path::new(path);
    let name = path
        .file_name()
        .and_then(|name| name.to_str())
        .ok_or_else(|| std::io::Error::other("not a file name"))?;
    let temp = path.with_file_name(format!(".{name}.edit.tmp"));
    let written = std::fs::write(&temp, bytes).and_then(|()| std::fs::rename(&temp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

toolcell_guest::export_tool!(EditFile);
