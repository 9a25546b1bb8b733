//! Counts its calls in a global. In a fresh instance per call, every call returns 1.
//!
//! With `scan`, it counts instead the words of its whole linear memory (grown by 16 MiB) that
//! hold the `hostile` guest's marker: another tool's call left them, if any is found, in the
//! slot this call was given.

use serde::Deserialize;
use std::sync::atomic::{AtomicU32, Ordering};
use toolcell_guest::{Info, Tool, ToolError};

static CALLS: AtomicU32 = AtomicU32::new(0);

struct Counter;

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    scan: bool,
}

/// The `hostile` guest's marker (its `MARKER`).
const HOSTILE_MARKER: u64 = 0x5245_5349_4455_4521;

/// How far memory is grown before it is read: as far as `hostile` plants.
const GROW_BYTES: usize = 16 << 20;

/// How many words of this instance's whole linear memory hold [`HOSTILE_MARKER`].
fn scan() -> usize {
    use core::arch::wasm32::{memory_grow, memory_size};
    const PAGE: usize = 64 << 10;
    if memory_grow(0, GROW_BYTES / PAGE) == usize::MAX {
        return usize::MAX;
    }
    let end = memory_size(0) * PAGE;
    (8..end)
        .step_by(8)
        .filter(|&address| {
            // SAFETY: `address` is aligned and below the memory's size; volatile, so the read
            // is made whatever the compiler believes about the memory behind it.
            unsafe { (address as *const u64).read_volatile() == HOSTILE_MARKER }
        })
        .count()
}

impl Tool for Counter {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::info(
            "counter",
            "Returns how many calls this instance has served.",
            serde_json::json!({
                "type": "object",
                "properties": { "scan": { "type": "boolean" } }
            }),
        )
    }

    fn call(args: Args) -> Result<String, ToolError> {
        if args.scan {
            return Ok(scan().to_string());
        }
        Ok((CALLS.fetch_add(1, Ordering::SeqCst) + 1).to_string())
    }
}

toolcell_guest::export_tool!(Counter);
