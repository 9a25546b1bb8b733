//! `grep`: the lines of files under a directory that match a regular expression, with context.

mod logic;

use serde::Deserialize;
use std::fmt::Write as _;
use toolcell_guest::{Info, Tool, ToolError};

/// `*` and `?` stay within one path component; only `**` crosses directories.
const SEPARATOR_AWARE: glob::MatchOptions = glob::MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

/// How many matching lines a call returns when it does not say.
const DEFAULT_MAX_MATCHES: usize = 100;
/// The most context lines a call may ask for on each side of a match.
const MAX_CONTEXT: usize = 10;

struct Grep;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    pattern: String,
    #[serde(default = "toolcell_guest::workspace_path")]
    path: String,
    glob: Option<String>,
    #[serde(default)]
    context: usize,
    max_matches: Option<usize>,
}

impl Tool for Grep {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let info = toolcell_guest::info(
            "grep",
            "Search the text files below `path` for lines matching a regular expression. Prints \
             `file:line:text` for matches and `file-line-text` for context lines.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "pattern": { "type": "string", "description": "A regular expression (Rust regex syntax)." },
                    "path": { "type": "string", "description": "A file or directory to search (default: the workspace)." },
                    "glob": { "type": "string", "description": "Only search files whose paths match this glob, such as `**/*.rs`." },
                    "context": { "type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": "Lines of context before and after each match." },
                    "max_matches": { "type": "integer", "minimum": 1, "description": "The most matching lines to return (default 100)." }
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        );
        toolcell_guest::reads_path(info, "/path")
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let regex = regex::Regex::new(&args.pattern)
            .map_err(|e| ToolError::InvalidInput(format!("pattern: {e}")))?;
        let filter = match &args.glob {
            Some(glob) => Some(
                glob::Pattern::new(glob)
                    .map_err(|e| ToolError::InvalidInput(format!("glob: {e}")))?,
            ),
            None => None,
        };
        let max = args.max_matches.unwrap_or(DEFAULT_MAX_MATCHES);
        let context = args.context.min(MAX_CONTEXT);
        let root = std::path::Path::new(&args.path);
        let mut files = Vec::new();
        if root.is_file() {
            files.push(args.path.clone());
        } else {
            files = toolcell_guest::files_below(root)
                .map_err(|e| toolcell_guest::io_error(&args.path, e))?;
            files.sort();
            files.retain(|file| {
                filter
                    .as_ref()
                    .is_none_or(|glob| glob.matches_with(file, SEPARATOR_AWARE))
            });
        }
        let mut out = String::new();
        let mut matches = 0;
        for file in &files {
            let full = if root.is_file() {
                root.to_path_buf()
            } else {
                root.join(file)
            };
            // Files that are not UTF-8 text are skipped, as grep skips binary files.
            let Ok(text) = std::fs::read_to_string(&full) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().collect();
            let (shown, found, stopped) =
                logic::mark_lines(&lines, |line| regex.is_match(line), context, max - matches);
            matches += found;
            out.push_str(&logic::render(file, &lines, &shown));
            if stopped {
                let _ = write!(out, "[truncated: stopped at {max} matches]");
                return Ok(out);
            }
        }
        if matches == 0 {
            return Ok("No matches.".to_owned());
        }
        Ok(out)
    }
}

toolcell_guest::export_tool!(Grep);
