//! `toolcell list` and `toolcell find`: what tools there are, as a person or the model sees
//! them.

use crate::args::Cli;
use crate::exit;
use crate::runtime::with_runtime;
use std::io::Write as _;
use std::process::ExitCode;
use toolcell::registry::FIND_TOOL;
use toolcell::{Runtime, ToolPort as _};

pub(crate) fn list(cli: &Cli, json: bool) -> ExitCode {
    with_runtime(cli, |runtime| print(runtime, json))
}

/// Search the tools, as the model's `find_tool` does.
pub(crate) fn find(cli: &Cli, query: &str) -> ExitCode {
    with_runtime(cli, |runtime| {
        let arguments = serde_json::json!({ "query": query }).to_string();
        crate::commands::call::respond(
            &runtime,
            &runtime.call(&toolcell::ToolRequest::new("cli", FIND_TOOL, &arguments)),
            false,
            false,
        )
    })
}

/// Print the tools, a line each (`--json`: a JSON object each). None loaded is not an empty
/// success: it is said on stderr, and the exit status is [`exit::NOT_FOUND`], so a script that
/// lists before it calls learns that nothing was loaded (the reasons, if a tool was refused,
/// are on stderr above it).
fn print(runtime: Runtime, json: bool) -> ExitCode {
    let registry = runtime.registry();
    let entries = registry.entries();
    if entries.is_empty() {
        eprintln!(
            "toolcell: no tools are loaded (the built-in tools are off with --no-builtin; \
             --tools names the directories tools load from)"
        );
        return ExitCode::from(exit::NOT_FOUND);
    }
    let mut out = std::io::stdout().lock();
    for entry in entries {
        let name = &entry.schema.name;
        let line = if json {
            serde_json::json!({
                "name": name,
                "description": entry.schema.description,
                "parameters": entry.schema.parameters,
                "core": entry.core,
                "source": runtime.source(name),
                "info": runtime.info(name),
            })
            .to_string()
        } else {
            let core = if entry.core { "core" } else { "    " };
            // A tool's name and description are its author's: escaped on a terminal.
            let shown = crate::commands::call::Shown::for_stdout(false);
            format!(
                "{:<16} {core}  {}",
                shown.text(name),
                shown.text(&entry.schema.description)
            )
        };
        if writeln!(out, "{line}").is_err() {
            return ExitCode::from(exit::FAILED);
        }
    }
    ExitCode::SUCCESS
}
