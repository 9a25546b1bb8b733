//! `glob`: the files under a directory whose paths match a pattern.

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

/// `*` and `?` stay within one path component; only `**` crosses directories.
const SEPARATOR_AWARE: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// The most paths one call returns; a model needs a narrower pattern past this.
const MAX_RESULTS: usize = 1000;

struct Glob;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    #[serde(default = "toolcell_guest::workspace_path")]
    path: String,
}

impl Tool for Glob {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let info = toolcell_guest::info(
            "glob",
            "Find files in the workspace whose paths match a glob pattern (`*`, `?`, `**`, \
             `[abc]`), searching below `path`. One path a line, sorted.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "The pattern, matched against paths relative to `path`, such as `**/*.rs`." },
                    "path": { "type": "string", "description": "The directory to search (default: the workspace)." }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        );
        toolcell_guest::reads_path(info, "/path")
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let pattern = glob::Pattern::new(&args.pattern)
            .map_err(|e| ToolError::InvalidInput(format!("pattern: {e}")))?;
        let mut found = toolcell_guest::files_below(std::path::Path::new(&args.path))
            .map_err(|e| toolcell_guest::io_error(&args.path, e))?;
        found.retain(|relative| pattern.matches_with(relative, SEPARATOR_AWARE));
        found.sort();
        let total = found.len();
        found.truncate(MAX_RESULTS);
        let mut out = found.join("\n");
        if total > MAX_RESULTS {
            out.push_str(&format!(
                "\n[truncated: {MAX_RESULTS} of {total} paths shown]"
            ));
        }
        Ok(out)
    }
}

toolcell_guest::export_tool!(Glob);
