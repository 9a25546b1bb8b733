//! Build a cargo workspace of guest crates for `wasm32-wasip2` from a build script.
//!
//! Shared by `runtime/toolcell/build.rs` (the built-in tools) and `tests/build.rs` (the test guests) with
//! `#[path]`. Each `cdylib` member becomes one component; the caller embeds them.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target every guest is built for.
pub const GUEST_TARGET: &str = "wasm32-wasip2";

/// One built guest: its library name (`echo`) and the component's path.
pub struct Guest {
    pub name: String,
    pub path: PathBuf,
}

/// Build every `cdylib` member of the workspace at `workspace` in release mode, and return the
/// components, sorted by name. Stops the build with a one-line fix if the target is missing.
pub fn build_workspace(workspace: &Path) -> Vec<Guest> {
    ensure_target();
    println!("cargo:rerun-if-changed={}", workspace.display());
    let target_dir = guest_target_dir();
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    // Run from the workspace, so its own `.cargo/config.toml` applies.
    command
        .current_dir(workspace)
        .arg("build")
        .arg("--release")
        .arg("--workspace")
        .arg("--target")
        .arg(GUEST_TARGET)
        .arg("--manifest-path")
        .arg(workspace.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target_dir);
    // The outer build's settings (its target, flags, profile, jobserver, clippy wrapper) are
    // not the guests' settings.
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let keep =
            key == "CARGO_HOME" || key.starts_with("CARGO_NET") || key.starts_with("CARGO_HTTP");
        if (key.starts_with("CARGO_") && !keep)
            || matches!(
                key,
                "RUSTFLAGS" | "RUSTC_WORKSPACE_WRAPPER" | "RUSTC_WRAPPER" | "MAKEFLAGS"
            )
        {
            command.env_remove(key);
        }
    }
    let output = command
        .output()
        .unwrap_or_else(|error| fail(&format!("cannot run cargo: {error}")));
    if !output.status.success() {
        fail(&format!(
            "building the guests in {} failed:\n{}",
            workspace.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let release = target_dir.join(GUEST_TARGET).join("release");
    let mut guests: Vec<Guest> = cdylib_members(workspace)
        .into_iter()
        .map(|name| {
            let path = release.join(format!("{name}.wasm"));
            if !path.is_file() {
                fail(&format!(
                    "the guest {name} built, but {} is missing",
                    path.display()
                ));
            }
            Guest { name, path }
        })
        .collect();
    guests.sort_by(|a, b| a.name.cmp(&b.name));
    guests
}

/// Copy each guest into `OUT_DIR` and return the paths there (so `include_bytes!` does not
/// depend on the guest target directory).
pub fn copy_to_out_dir(guests: &[Guest]) -> Vec<(String, PathBuf)> {
    let out_dir =
        PathBuf::from(env::var_os("OUT_DIR").unwrap_or_else(|| fail("OUT_DIR is not set")));
    guests
        .iter()
        .map(|guest| {
            let to = out_dir.join(format!("{}.wasm", guest.name));
            std::fs::copy(&guest.path, &to).unwrap_or_else(|error| {
                fail(&format!("copying {}: {error}", guest.path.display()))
            });
            (guest.name.clone(), to)
        })
        .collect()
}

/// The library names of the workspace's `cdylib` members: each member directory whose
/// manifest says `crate-type = ["cdylib"]`, named by its `[package] name` with `-` as `_`.
fn cdylib_members(workspace: &Path) -> Vec<String> {
    let entries = std::fs::read_dir(workspace)
        .unwrap_or_else(|error| fail(&format!("reading {}: {error}", workspace.display())));
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let Ok(manifest) = std::fs::read_to_string(entry.path().join("Cargo.toml")) else {
            continue;
        };
        if !manifest.contains("\"cdylib\"") {
            continue;
        }
        let name = manifest
            .lines()
            .find_map(|line| line.trim().strip_prefix("name = \"")?.strip_suffix('"'))
            .unwrap_or_else(|| fail(&format!("{}: no package name", entry.path().display())));
        names.push(name.replace('-', "_"));
    }
    names
}

/// `<target>/guests`: beside the host's build, outside any guest workspace.
fn guest_target_dir() -> PathBuf {
    if let Some(dir) = env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir).join("guests");
    }
    // OUT_DIR is <target>/<profile>/build/<crate>-<hash>/out.
    let out_dir =
        PathBuf::from(env::var_os("OUT_DIR").unwrap_or_else(|| fail("OUT_DIR is not set")));
    out_dir
        .ancestors()
        .nth(4)
        .map(|target| target.join("guests"))
        .unwrap_or_else(|| fail(&format!("unexpected OUT_DIR {}", out_dir.display())))
}

/// Make sure the standard library for the guest target is installed: install it with rustup
/// if rustup is there, otherwise stop with the command that fixes it.
fn ensure_target() {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let installed = || {
        Command::new(&rustc)
            .args(["--print", "target-libdir", "--target", GUEST_TARGET])
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
            .is_some_and(|libdir| libdir.is_dir())
    };
    if installed() {
        return;
    }
    let added = Command::new("rustup")
        .args(["target", "add", GUEST_TARGET])
        .status()
        .is_ok_and(|status| status.success());
    if !added || !installed() {
        fail(&format!(
            "the {GUEST_TARGET} target is missing; fix it with: rustup target add {GUEST_TARGET}"
        ));
    }
}

fn fail(message: &str) -> ! {
    eprintln!("error: {message}");
    std::process::exit(1)
}
