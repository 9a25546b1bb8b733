//! Every input the fuzz targets were seeded with (`fuzz/seeds/<target>/`) and every reproducer
//! of a crash they found (`fuzz/regressions/<target>/`), replayed through the very check the
//! target runs (`toolcell_fuzz_checks::TARGETS`), without the fuzzer's instrumented build. Part
//! of the workspace's test command (`cargo test --release --workspace`); alone:
//!
//! ```sh
//! cargo test --release --workspace --test regressions
//! ```

use std::path::{Path, PathBuf};
use toolcell_fuzz_checks::{self as fuzzing, TARGETS};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files under `fuzz/<kind>/<target>/`, sorted; none if the directory is missing.
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind).join(target)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Replay every file under `fuzz/<kind>/` through its target's check; returns how many ran.
fn replay(kind: &str) -> usize {
    let mut failures = Vec::new();
    let mut ran = 0;
    for (target, check) in TARGETS {
        for path in inputs(kind, target) {
            let data = std::fs::read(&path).expect("a readable input");
            ran += 1;
            if let Err(finding) = check(&data) {
                failures.push(format!("{}: {finding}", path.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    ran
}

#[test]
fn every_reproducer_passes_its_check() {
    replay("regressions");
}

#[test]
fn every_seed_passes_its_check() {
    let ran = replay("seeds");
    assert!(ran >= 2 * TARGETS.len(), "only {ran} seeds found");
}

/// Each target has its check here and a seed directory, and the fuzz crate (its own workspace,
/// built only by cargo-fuzz) stays in step with this one: every target file calls its check
/// here by name, and is a `[[bin]]` of `fuzz/Cargo.toml`, which depends on this crate.
#[test]
fn every_target_is_replayed() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    assert!(
        manifest.contains("toolcell-fuzz-checks = { path = \"../tests/fuzz-checks\""),
        "fuzz/Cargo.toml does not depend on this crate"
    );
    let mut found = Vec::new();
    for entry in std::fs::read_dir(fuzz_dir().join("fuzz_targets")).expect("fuzz_targets") {
        let path = entry.expect("an entry").path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        assert!(
            TARGETS.iter().any(|(target, _)| *target == name),
            "{name} is not replayed"
        );
        assert!(!inputs("seeds", &name).is_empty(), "{name} has no seeds");
        let source = std::fs::read_to_string(&path).expect("a target's source");
        assert!(
            source.contains(&format!("toolcell_fuzz_checks::check_{name}(data)")),
            "{} does not call toolcell_fuzz_checks::check_{name}",
            path.display()
        );
        assert!(
            manifest.contains(&format!(
                "name = \"{name}\"\npath = \"fuzz_targets/{name}.rs\""
            )),
            "{name} is not a [[bin]] of fuzz/Cargo.toml"
        );
        found.push(name);
    }
    assert_eq!(found.len(), TARGETS.len(), "targets {found:?}");
}

/// The checks are not vacuous: the MCP seed session is answered, request by request.
#[test]
fn the_mcp_seed_session_is_answered() {
    let data = std::fs::read(fuzz_dir().join("seeds/mcp/session")).expect("the seed");
    let messages = fuzzing::mcp_session(&data).expect("the session checks");
    let answered: Vec<&serde_json::Value> = messages.iter().filter_map(|m| m.get("id")).collect();
    for id in [
        serde_json::json!(1),
        serde_json::json!(2),
        serde_json::json!(3),
        serde_json::json!(4),
        serde_json::json!(5),
        serde_json::json!("six"),
        serde_json::json!(7),
    ] {
        assert!(answered.contains(&&id), "{id} unanswered: {messages:?}");
    }
    let echo = messages
        .iter()
        .find(|m| m.get("id") == Some(&serde_json::json!(3)))
        .expect("id 3");
    assert_eq!(echo["result"]["content"][0]["text"], "hi", "{echo:?}");
}

/// The checks are not vacuous: the echo seed loads and answers, a component of another world is
/// served by its types, the empty seeds are refused.
#[test]
fn the_component_seeds_load_or_are_refused() {
    let seeds = fuzz_dir().join("seeds/component");
    let echo = std::fs::read(seeds.join("echo.wasm")).expect("the seed");
    assert_eq!(
        fuzzing::load_component(&echo).expect("checks"),
        fuzzing::ComponentOutcome::Answered("echo".to_owned(), toolcell::ToolResponse::text("hi"))
    );
    // A component of another world is served by its types now: its `run` is a tool, which
    // takes no arguments, so the check's `{"text":"hi"}` is refused before it runs.
    let other = std::fs::read(seeds.join("wrong_world.wasm")).expect("the seed");
    let outcome = fuzzing::load_component(&other).expect("checks");
    assert!(
        matches!(
            &outcome,
            fuzzing::ComponentOutcome::Answered(name, toolcell::ToolResponse::Failed { kind, .. })
                if name == "run" && *kind == toolcell::FailureKind::InvalidInput
        ),
        "{outcome:?}"
    );
    for refused in ["empty_component.wasm", "empty_module.wasm"] {
        let data = std::fs::read(seeds.join(refused)).expect("the seed");
        assert!(
            matches!(
                fuzzing::load_component(&data),
                Ok(fuzzing::ComponentOutcome::Refused(_))
            ),
            "{refused}"
        );
    }
}
