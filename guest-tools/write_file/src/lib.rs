//! `write_file`: create a file in the workspace, or replace its contents.

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

struct WriteFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    content: String,
}

impl Tool for WriteFile {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let info = toolcell_guest::info(
            "write_file",
            "Write a text file in the workspace: create it, or replace what it holds. Its \
             directory must exist.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "The file, relative to the workspace." },
                    "content": { "type": "string", "description": "The whole new content." }
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        );
        toolcell_guest::writes_path(info, "/path")
    }

    fn call(args: Args) -> Result<String, ToolError> {
        std::fs::write(&args.path, args.content.as_bytes())
            .map_err(|e| toolcell_guest::io_error(&args.path, e))?;
        Ok(format!(
            "wrote {} bytes to {}",
            args.content.len(),
            args.path
        ))
    }
}

toolcell_guest::export_tool!(WriteFile);
