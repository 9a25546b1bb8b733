//! `toolcell describe FILE`: what a component says about itself, checked as a load checks it.

use crate::exit;
use std::path::Path;
use std::process::ExitCode;
use toolcell::Runtime;

pub(crate) fn run(file: &Path, no_cache: bool) -> ExitCode {
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("toolcell: reading {}: {error}", file.display());
            return ExitCode::from(exit::USAGE);
        }
    };
    let mut builder = Runtime::builder()
        .builtin_tools(false)
        .component(file.display().to_string(), bytes);
    if no_cache {
        builder = builder.cache_dir(None);
    }
    let built = builder.build();
    let runtime = match built {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolcell: {error:#}");
            return ExitCode::from(exit::FAILED);
        }
    };
    if let Some(error) = runtime.load_errors().first() {
        eprintln!("toolcell: refused {error}");
        return ExitCode::from(exit::FAILED);
    }
    let Some(info) = runtime
        .registry()
        .entries()
        .first()
        .and_then(|entry| runtime.info(&entry.schema.name))
    else {
        eprintln!("toolcell: {} holds no tool", file.display());
        return ExitCode::from(exit::FAILED);
    };
    match serde_json::to_string_pretty(&info) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("toolcell: {error}");
            ExitCode::from(exit::FAILED)
        }
    }
}
