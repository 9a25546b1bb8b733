//! Every input the fuzz targets were seeded with (`fuzz/seeds/<target>/`) and every reproducer
//! of a crash they found (`fuzz/regressions/<target>/`), replayed through the very check the
//! target runs (`toolcell::fuzzing::check_<target>`, `toolcell_mcp::fuzzing::check_mcp`), without the fuzzer's instrumented build.
//!
//! Needs the `fuzzing` feature (the checks reach crate-internal code):
//!
//! ```sh
//! cargo test --release -p toolcell-mcp --features fuzzing --test fuzz_regressions
//! ```
#![cfg(feature = "fuzzing")]

use std::path::{Path, PathBuf};
use toolcell::fuzzing;
use toolcell_mcp::fuzzing as mcp_fuzzing;

type Check = fn(&[u8]) -> Result<(), String>;

/// Every target and its check, as `fuzz/fuzz_targets/<target>.rs` calls it.
const TARGETS: &[(&str, Check)] = &[
    ("policy", fuzzing::check_policy),
    ("dispatch", fuzzing::check_dispatch),
    ("cap", fuzzing::check_cap),
    ("gate_paths", fuzzing::check_gate_paths),
    ("schema", fuzzing::check_schema),
    ("mcp", mcp_fuzzing::check_mcp),
    ("component", fuzzing::check_component),
];

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

/// Each target has its check here and a seed directory.
#[test]
fn every_target_is_replayed() {
    for entry in std::fs::read_dir(fuzz_dir().join("fuzz_targets")).expect("fuzz_targets") {
        let path = entry.expect("an entry").path();
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        assert!(
            TARGETS.iter().any(|(target, _)| *target == name),
            "{name} is not replayed"
        );
        assert!(!inputs("seeds", name).is_empty(), "{name} has no seeds");
    }
}

/// The checks are not vacuous: the MCP seed session is answered, request by request.
#[test]
fn the_mcp_seed_session_is_answered() {
    let data = std::fs::read(fuzz_dir().join("seeds/mcp/session")).expect("the seed");
    let messages = mcp_fuzzing::mcp_session(&data).expect("the session checks");
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

/// The checks are not vacuous: the echo seed loads and answers, the other seeds are refused.
#[test]
fn the_component_seeds_load_or_are_refused() {
    let seeds = fuzz_dir().join("seeds/component");
    let echo = std::fs::read(seeds.join("echo.wasm")).expect("the seed");
    assert_eq!(
        fuzzing::load_component(&echo).expect("checks"),
        fuzzing::ComponentOutcome::Answered("echo".to_owned(), toolcell::ToolResponse::text("hi"))
    );
    for refused in [
        "empty_component.wasm",
        "empty_module.wasm",
        "wrong_world.wasm",
    ] {
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
