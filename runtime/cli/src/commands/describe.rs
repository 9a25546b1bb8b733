//! `toolcell describe FILE`: what a component says about itself, checked as a load checks it.
//!
//! A component of toolcell's contract prints its one tool's description. A component of plain
//! typed exports prints every function served as a tool (`tools`, each with the function it
//! calls), the functions left out and why (`left_out`), and what the `policy.yaml` beside it
//! (`STEM.policy.yaml`, or `policy.yaml` alone with it) became (`policy_yaml`: its rules, and
//! what it names that grants nothing here).

use crate::exit;
use std::path::Path;
use std::process::ExitCode;
use toolcell::Runtime;
use toolcell::policy::yaml::PolicyYaml;

pub(crate) fn run(file: &Path, no_cache: bool) -> ExitCode {
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("toolcell: reading {}: {error}", file.display());
            return ExitCode::from(exit::USAGE);
        }
    };
    let source = file.display().to_string();
    let yaml = PolicyYaml::beside(file);
    let mut builder = Runtime::builder()
        .builtin_tools(false)
        .component(source.clone(), bytes);
    if let Some(yaml) = &yaml {
        builder = builder.policy_yaml(source.clone(), yaml);
    }
    if no_cache {
        builder = builder.cache_dir(None);
    }
    let runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolcell: {error:#}");
            return ExitCode::from(exit::FAILED);
        }
    };
    let (left_out, refused): (Vec<_>, Vec<_>) = runtime
        .load_errors()
        .iter()
        .partition(|error| error.message.starts_with(LEFT_OUT));
    if let Some(error) = refused.first() {
        eprintln!("toolcell: refused {error}");
        return ExitCode::from(exit::FAILED);
    }
    let registry = runtime.registry();
    let entries = registry.entries();
    let typed = entries
        .iter()
        .any(|entry| runtime.exported_function(&entry.schema.name).is_some());
    let shown = if typed {
        let tools: Vec<serde_json::Value> = entries
            .iter()
            .filter_map(|entry| {
                let name = &entry.schema.name;
                let mut info = serde_json::to_value(runtime.info(name)?).ok()?;
                info["function"] = serde_json::json!(runtime.exported_function(name));
                Some(info)
            })
            .collect();
        let left_out: Vec<serde_json::Value> = left_out
            .iter()
            .map(|error| {
                serde_json::json!({
                    "function": error.source.rsplit_once('#').map_or("", |(_, f)| f),
                    "why": error.message.trim_start_matches(LEFT_OUT),
                })
            })
            .collect();
        let policy_yaml = yaml.as_ref().and_then(|path| {
            // Read again to show it: the load read it already, and refused the component if it
            // could not be read.
            let read = PolicyYaml::read(path, &toolcell::hostfs::OwnFiles::new()).ok()?;
            let mut shown = read.shown();
            shown["path"] = serde_json::json!(path.display().to_string());
            Some(shown)
        });
        serde_json::json!({
            "component": source,
            "tools": tools,
            "left_out": left_out,
            "policy_yaml": policy_yaml,
        })
    } else {
        let Some(info) = entries
            .first()
            .and_then(|entry| runtime.info(&entry.schema.name))
        else {
            eprintln!("toolcell: {} holds no tool", file.display());
            return ExitCode::from(exit::FAILED);
        };
        match serde_json::to_value(&info) {
            Ok(info) => info,
            Err(error) => {
                eprintln!("toolcell: {error}");
                return ExitCode::from(exit::FAILED);
            }
        }
    };
    match serde_json::to_string_pretty(&shown) {
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

/// How a function left out of a typed component's tools is said among the load's errors.
const LEFT_OUT: &str = "left out: ";
