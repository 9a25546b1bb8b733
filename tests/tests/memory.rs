//! A memory bomb's memory goes back to the system when its call ends: measured in a process of
//! its own (this test binary holds only this test), so no other test's allocations move the
//! needle, with a baseline taken before any bomb, and a control that shows the measurement
//! does see a slot that keeps its memory.

use std::time::Duration;
use toolcell::{CallOptions, FailureKind, Runtime, ToolPort, ToolRequest, ToolResponse};

/// The bomb's limit: what each bomb makes resident before it is refused more.
const BOMB_BYTES: usize = 32 << 20;

/// This process's resident memory, in bytes.
fn resident_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: usize = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// A runtime with the hostile guest, keeping `keep` bytes resident per slot, and the tests'
/// compile cache.
fn runtime(keep: usize) -> Runtime {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-cache");
    Runtime::builder()
        .cache_dir(Some(base.join("entries")))
        .cache_key_file(Some(base.join("cache.key")))
        .keep_resident_bytes(keep)
        .component("test:hostile", toolcell_tests::guests::HOSTILE)
        .build()
        .expect("the runtime builds")
}

/// How much resident memory three bombs leave behind, on a runtime keeping `keep` bytes per
/// slot: measured from a baseline after benign calls (which fill the pool, the caches and the
/// allocator) and before any bomb.
fn left_behind_by_bombs(keep: usize) -> usize {
    let runtime = runtime(keep);
    let attack = |what: &str, options: &CallOptions| {
        runtime.call_with(
            &ToolRequest::new("t", "hostile", format!(r#"{{"do":"{what}"}}"#)),
            options,
        )
    };
    let echo = ToolRequest::new("t", "echo", r#"{"text":"x"}"#);
    for _ in 0..100 {
        assert_eq!(runtime.call(&echo), ToolResponse::text("x"));
        // The hostile guest instantiated without a bomb: an attack it does not know.
        assert!(attack("nothing-at-all", &CallOptions::default()).is_error());
    }
    let before = resident_bytes();
    let bomb = CallOptions {
        memory_bytes: Some(BOMB_BYTES),
        timeout: Some(Duration::from_secs(20)),
        ..CallOptions::default()
    };
    for _ in 0..3 {
        match attack("alloc", &bomb) {
            ToolResponse::Failed {
                kind: FailureKind::OutOfMemory,
                ..
            } => {}
            other => panic!("expected out of memory, got {other:?}"),
        }
    }
    let after = resident_bytes();
    println!(
        "keeping {} KiB per slot: {} KiB resident before the bombs, {} KiB after",
        keep >> 10,
        before >> 10,
        after >> 10
    );
    assert_eq!(runtime.call(&echo), ToolResponse::text("x"));
    after.saturating_sub(before)
}

#[test]
fn a_memory_bomb_gives_its_memory_back() {
    // The control: a slot allowed to keep 64 MiB keeps the bomb's pages, and the measurement
    // sees them. Without this, a check that could not see a slot's memory would pass.
    let kept = left_behind_by_bombs(64 << 20);
    assert!(
        kept >= BOMB_BYTES / 2,
        "the control kept only {} KiB: the measurement cannot see a slot's memory",
        kept >> 10
    );
    // The default: what a bomb touched beyond the 2 MiB kept per slot goes back.
    let left = left_behind_by_bombs(toolcell::limits::KEEP_RESIDENT_BYTES);
    assert!(
        left < 3 * toolcell::limits::KEEP_RESIDENT_BYTES + (2 << 20),
        "three bombs left {} KiB resident",
        left >> 10
    );
}
