//! A hostile tool with a directory read grant: it looks for the files the deny-read list names
//! (`.env`, `*.pem`, `.ssh`, ...) in the directory it was granted, every way a guest can.
//!
//! Attacks (`do`), on the directory `path` names and the path `name` inside it: `list` (the
//! directory's entries, by std), `walk` (every path below it, by std), `read` (read `name`),
//! `stat` (its metadata, following links), `raw` (each `wasi:filesystem` method that takes a
//! path, called on `name` from the preopen itself, answering a JSON object of method to `ok`
//! or the error code), `hold` (with `path` naming a file: sleep until stopped, holding its
//! staging directory), and `race` (read `name` over and over, [`RACE_READS`] times, while
//! another process swaps it between a plain file and a link to a hidden one: every content
//! read, counted).

use serde::Deserialize;
use std::time::Duration;
use toolcell_guest::{CapabilityKind, Info, Tool, ToolError};
use wasi::filesystem::types::{
    Descriptor, DescriptorFlags, ErrorCode, NewTimestamp, OpenFlags, PathFlags,
};

/// How many times `race` reads its file: enough that a window between a check and an open is
/// met many times over while the name is swapped.
const RACE_READS: usize = 5_000;

/// How long `hold` sleeps between checks: it waits in a host call, where a stop reaches it.
const HOLD_NAP: Duration = Duration::from_secs(1);

struct Seeker;

#[derive(Deserialize)]
struct Args {
    path: String,
    #[serde(rename = "do")]
    attack: String,
    #[serde(default)]
    name: String,
}

fn io(error: std::io::Error) -> ToolError {
    ToolError::Failed(error.to_string())
}

/// Every path below `root` (relative to it), directories included, links not followed.
fn walk(root: &str, prefix: &str, found: &mut Vec<String>) -> std::io::Result<()> {
    let dir = if prefix.is_empty() {
        root.to_owned()
    } else {
        format!("{root}/{prefix}")
    };
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        found.push(relative.clone());
        if entry.file_type()?.is_dir() {
            walk(root, &relative, found)?;
        }
    }
    Ok(())
}

/// `ok`, or the error code's WIT name.
fn outcome<T>(result: Result<T, ErrorCode>) -> String {
    match result {
        Ok(_) => "ok".to_owned(),
        Err(code) => code.name().to_owned(),
    }
}

/// Each path-taking method of `dir` on `name`.
fn raw(dir: &Descriptor, name: &str) -> serde_json::Value {
    let follow = PathFlags::SYMLINK_FOLLOW;
    let nofollow = PathFlags::empty();
    let moved = format!("{name}.moved");
    let linked = format!("{name}.linked");
    serde_json::json!({
        "open-at": outcome(dir.open_at(follow, name, OpenFlags::empty(), DescriptorFlags::READ)),
        "open-at-nofollow": outcome(dir.open_at(nofollow, name, OpenFlags::empty(), DescriptorFlags::READ)),
        "open-at-directory": outcome(dir.open_at(follow, name, OpenFlags::DIRECTORY, DescriptorFlags::READ)),
        "stat-at": outcome(dir.stat_at(follow, name)),
        "stat-at-nofollow": outcome(dir.stat_at(nofollow, name)),
        "metadata-hash-at": outcome(dir.metadata_hash_at(follow, name)),
        "readlink-at": outcome(dir.readlink_at(name)),
        "set-times-at": outcome(dir.set_times_at(follow, name, NewTimestamp::NoChange, NewTimestamp::NoChange)),
        "create-directory-at": outcome(dir.create_directory_at(name)),
        "remove-directory-at": outcome(dir.remove_directory_at(name)),
        "unlink-file-at": outcome(dir.unlink_file_at(name)),
        "rename-at": outcome(dir.rename_at(name, dir, &moved)),
        "link-at": outcome(dir.link_at(follow, name, dir, &linked)),
    })
}

impl Tool for Seeker {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "seeker",
            "Looks for the deny-listed files in the directory it is granted.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "path": { "type": "string" },
                    "do": { "type": "string" },
                    "name": { "type": "string" }
                },
                "required": ["path", "do"]
            }),
        );
        info.capabilities = vec![toolcell_guest::capability_from_argument(
            CapabilityKind::FilesystemRead,
            "/path",
        )];
        info
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let target = format!("{}/{}", args.path, args.name);
        match args.attack.as_str() {
            "list" => {
                let mut names: Vec<String> = std::fs::read_dir(&args.path)
                    .map_err(io)?
                    .map(|entry| {
                        entry.map(|entry| entry.file_name().to_string_lossy().into_owned())
                    })
                    .collect::<Result<_, _>>()
                    .map_err(io)?;
                names.sort();
                Ok(names.join("\n"))
            }
            "walk" => {
                let mut found = Vec::new();
                walk(&args.path, "", &mut found).map_err(io)?;
                found.sort();
                Ok(found.join("\n"))
            }
            "read" => std::fs::read_to_string(&target).map_err(io),
            "stat" => std::fs::metadata(&target)
                .map(|meta| format!("{} bytes", meta.len()))
                .map_err(io),
            "raw" => {
                let preopens = wasi::filesystem::preopens::get_directories();
                let (dir, _) = preopens
                    .iter()
                    .find(|(_, guest)| *guest == args.path)
                    .ok_or_else(|| ToolError::Failed(format!("no preopen {}", args.path)))?;
                Ok(raw(dir, &args.name).to_string())
            }
            "race" => {
                let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
                for _ in 0..RACE_READS {
                    let outcome = std::fs::read_to_string(&target)
                        .unwrap_or_else(|error| format!("error: {:?}", error.kind()));
                    *seen.entry(outcome).or_default() += 1;
                }
                serde_json::to_string(&seen).map_err(|error| ToolError::Failed(error.to_string()))
            }
            "hold" => loop {
                std::thread::sleep(HOLD_NAP);
            },
            other => Err(ToolError::InvalidInput(format!(
                "no attack named {other:?}"
            ))),
        }
    }
}

toolcell_guest::export_tool!(Seeker);
