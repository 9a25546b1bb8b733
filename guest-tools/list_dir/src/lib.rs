//! `list_dir`: the entries of a directory in the workspace, one a line, directories marked.

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

struct ListDir;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    #[serde(default = "toolcell_guest::workspace_path")]
    path: String,
}

impl Tool for ListDir {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let info = toolcell_guest::info(
            "list_dir",
            "List a directory in the workspace: one entry a line, sorted, directories ending \
             in '/'.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string", "description": "The directory, relative to the workspace (default: the workspace)." }
                },
                "additionalProperties": false
            }),
        );
        toolcell_guest::reads_path(info, "/path")
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let entries =
            std::fs::read_dir(&args.path).map_err(|e| toolcell_guest::io_error(&args.path, e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| toolcell_guest::io_error(&args.path, e))?;
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                name.push('/');
            }
            names.push(name);
        }
        names.sort();
        Ok(names.join("\n"))
    }
}

toolcell_guest::export_tool!(ListDir);
