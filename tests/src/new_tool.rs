//! `toolcell new`: for each language, the project it writes builds with the line it prints
//! (the book's, docs/writing-tools.md), and the component answers through the `toolcell` binary; the project's own
//! `make test` passes too.
//!
//! The toolchains are the tests' own (`toolchains.rs`); a Rust project builds offline, with the
//! guest workspace's lock file copied in, into a target directory the runs share.

use crate::support::{test_cache, toolcell_binary, toolcell_command};
use crate::toolchains::{componentize_py, js_tooling, root};
use std::path::Path;
use std::process::{Command, Output};
use toolcell_cli::scaffold::Language;

fn run(command: &mut Command) -> Output {
    let output = command.output().expect("the command runs");
    assert!(
        output.status.success(),
        "{command:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A command run in `project`, with toolcell and the language's toolchain on `PATH`, and the
/// tests' compile cache.
fn in_project(project: &Path, program: &str) -> Command {
    let toolchains = [
        toolcell_binary()
            .parent()
            .expect("the binary's directory")
            .to_path_buf(),
        componentize_py()
            .parent()
            .expect("the venv's bin")
            .to_path_buf(),
    ];
    let path = std::env::join_paths(toolchains.into_iter().chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    let (cache, key) = test_cache();
    let mut command = Command::new(program);
    command
        .current_dir(project)
        .env("PATH", path)
        .env("CARGO_TARGET_DIR", root().join("target/new-tool-rust"))
        .env(toolcell::cache::CACHE_DIR_ENV, cache)
        .env(toolcell::cache::CACHE_KEY_ENV, key);
    command
}

#[test]
fn a_new_project_in_each_language_builds_and_answers() {
    for language in [Language::Rust, Language::Python, Language::Js] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let project = dir.path().join("demo");
        let written = run(toolcell_command()
            .args(["new", "demo", "--lang"])
            .arg(format!("{language:?}").to_lowercase())
            .arg("--dir")
            .arg(&project));
        let printed = String::from_utf8_lossy(&written.stdout).into_owned();
        let build = language.build_command("demo");
        assert!(printed.contains(&build), "{language:?}: {printed}");
        match language {
            // Offline, and the same versions as the built-in tools.
            Language::Rust => {
                std::fs::copy(
                    root().join("guest-tools/Cargo.lock"),
                    project.join("Cargo.lock"),
                )
                .expect("the lock file");
            }
            Language::Python => {}
            // `npm install`, as the project's README says, but from the tests' installed copy.
            Language::Js => {
                std::os::unix::fs::symlink(js_tooling(), project.join("node_modules"))
                    .expect("node_modules");
            }
        }
        {
            // Toolchains are CPU-heavy: not while a timing test measures.
            let _guard = crate::support::exclusive();
            run(in_project(&project, "sh").args(["-c", &build]));
        }

        let tools = match language {
            // Where CARGO_TARGET_DIR (set by `in_project`) puts it.
            Language::Rust => root().join("target/new-tool-rust/wasm32-wasip2/release"),
            _ => project.join(language.output_dir()),
        };
        let answer = run(toolcell_command().arg("--tools").arg(&tools).args([
            "call",
            "demo",
            r#"{"name":"world"}"#,
        ]));
        assert_eq!(
            String::from_utf8_lossy(&answer.stdout),
            "Hello, world!\n",
            "{language:?}"
        );
        for (arguments, why) in [
            (r#"{"name":"  "}"#, "the name is blank"),
            (r#"{"nam":"world"}"#, "schema"),
        ] {
            let refused = toolcell_command()
                .arg("--tools")
                .arg(&tools)
                .args(["call", "demo", arguments])
                .output()
                .expect("toolcell runs");
            let stderr = String::from_utf8_lossy(&refused.stderr);
            assert_eq!(
                refused.status.code(),
                Some(1),
                "{language:?} {arguments}: {stderr}"
            );
            assert!(stderr.contains(why), "{language:?} {arguments}: {stderr}");
        }
        // The project's own check.
        run(in_project(&project, "make").arg("test"));
    }
}
