//! A hostile tool that does its worst on request: `{"do": "<attack>"}`. Each attack is one way
//! an untrusted tool could try to take the host down with it.

use serde::Deserialize;
use std::io::Write as _;
use toolcell_guest::{Info, Tool, ToolError};

struct Hostile;

#[derive(Deserialize)]
struct Args {
    #[serde(rename = "do")]
    attack: String,
}

/// What the flood writes, over and over; the tests look for it where it must not be.
const FLOOD_LINE: &[u8] = b"HOSTILE-FLOOD-HOSTILE-FLOOD-HOSTILE-FLOOD-HOSTILE-FLOOD-HOSTILE!\n";

/// What `plant` leaves in memory and `scan` looks for. A number, so that it lives in the code
/// (an `i64.const`), never in linear memory, until `plant` writes it there.
const MARKER: u64 = 0x5245_5349_4455_4521;

/// How much memory `plant` fills with the marker, and `scan` grows before it looks: far past
/// what a slot keeps resident by default, so both the reset and the decommit are tried.
const PLANT_BYTES: usize = 16 << 20;

impl Tool for Hostile {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::info(
            "hostile",
            "Attacks its host: spin, sleep, alloc, recurse, deep_frames, panic, flood, huge, \
             plant, plant_scattered, scan, plant_and_scan, plant_and_spin.",
            serde_json::json!({
                "type": "object",
                "properties": { "do": { "type": "string" } },
                "required": ["do"]
            }),
        )
    }

    fn call(args: Args) -> Result<String, ToolError> {
        match args.attack.as_str() {
            // Run wasm forever: only an epoch interruption stops it.
            "spin" => {
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            // Wait forever inside a host call (poll on a monotonic deadline an hour away),
            // where epochs do not reach.
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(3600));
                Ok("woke".to_owned())
            }
            // Allocate, and touch, memory until the host refuses more.
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![0xA5; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            // Recurse with small frames until wasm's own call stack runs out.
            "recurse" => Ok(recurse(0).to_string()),
            // Recurse with large frames until Rust's stack in linear memory runs off its end.
            "deep_frames" => Ok(deep_frames(0).to_string()),
            "panic" => panic!("the hostile tool panicked on purpose"),
            // Write 1 GiB to stdout and 1 GiB to stderr, then answer.
            "flood" => {
                let block = FLOOD_LINE.repeat(1024);
                let rounds = (1usize << 30) / block.len();
                for _ in 0..rounds {
                    std::io::stdout().write_all(&block).map_err(failed)?;
                    std::io::stderr().write_all(&block).map_err(failed)?;
                }
                Ok("flooded".to_owned())
            }
            // Return a result as large as memory allows.
            "huge" => {
                let mut size = 1usize << 30;
                let mut text = String::new();
                while text.try_reserve_exact(size).is_err() {
                    size /= 2;
                }
                text.extend(std::iter::repeat_n('x', size));
                Ok(text)
            }
            // Fill memory, small and large allocations, with the marker, for `scan` to find.
            "plant" => {
                std::hint::black_box(plant());
                Ok("planted".to_owned())
            }
            // Both in one instance: the control that shows `scan` finds what is there.
            "plant_and_scan" => {
                let planted = plant();
                let found = scan();
                std::hint::black_box(planted);
                Ok(found.to_string())
            }
            // The marker in every other 4 KiB page of memory grown by `PLANT_BYTES`: 2,048
            // dirty runs of one page each, where `plant` makes one run (the host's reset finds
            // dirty pages as runs, and must find every one).
            "plant_scattered" => Ok(plant_scattered().to_string()),
            // Plant, then run wasm until the deadline stops the call, never touching what was
            // planted again: time for the host's memory to be swapped out under it.
            "plant_and_spin" => {
                let planted = plant();
                let mut n = 0u64;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                    std::hint::black_box(&planted);
                }
            }
            // Grow memory as `plant` did, then read every word of it, allocated or not, and
            // count the markers: any is what an earlier call left behind.
            "scan" => Ok(scan().to_string()),
            other => Err(ToolError::InvalidInput(format!(
                "no attack named {other:?}"
            ))),
        }
    }
}

/// Two allocations, small and large, filled with [`MARKER`].
fn plant() -> (Vec<u64>, Vec<u64>) {
    (vec![MARKER; (64 << 10) / 8], vec![MARKER; PLANT_BYTES / 8])
}

/// Grow memory by [`PLANT_BYTES`] and write [`MARKER`] at the start of every other 4 KiB page
/// of what was grown; how many were written.
fn plant_scattered() -> usize {
    use core::arch::wasm32::memory_grow;
    const PAGE: usize = 64 << 10;
    let Some(start) = memory_grow(0, PLANT_BYTES / PAGE).checked_mul(PAGE) else {
        return 0;
    };
    (start..start + PLANT_BYTES)
        .step_by(8 << 10)
        .map(|address| {
            // SAFETY: the address is aligned and inside the memory just grown, which no Rust
            // allocation owns; volatile, so the write is made.
            unsafe { (address as *mut u64).write_volatile(MARKER) };
        })
        .count()
}

/// How many words of this instance's whole linear memory hold [`MARKER`], after growing it by
/// [`PLANT_BYTES`] (pages no allocation has touched yet).
fn scan() -> usize {
    use core::arch::wasm32::{memory_grow, memory_size};
    const PAGE: usize = 64 << 10;
    if memory_grow(0, PLANT_BYTES / PAGE) == usize::MAX {
        return usize::MAX;
    }
    let end = memory_size(0) * PAGE;
    // Reading memory no Rust allocation owns is what a hostile tool would do; in wasm every
    // address below `end` is readable. Address 0 is skipped (a null pointer).
    (8..end)
        .step_by(8)
        .filter(|&address| {
            // SAFETY: `address` is aligned and below the memory's size; volatile, so the read
            // is made whatever the compiler believes about the memory behind it.
            unsafe { (address as *const u64).read_volatile() == MARKER }
        })
        .count()
}

// Recursing without end is the point: the host must turn each overflow into a trap. The
// `black_box`es keep the optimiser from turning the recursion into a loop.
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    std::hint::black_box(recurse(std::hint::black_box(depth + 1))).wrapping_add(depth)
}

#[allow(unconditional_recursion)]
fn deep_frames(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 64]);
    deep_frames(depth + 1) + frame[depth as usize % 64]
}

fn failed(error: std::io::Error) -> ToolError {
    ToolError::Failed(error.to_string())
}

toolcell_guest::export_tool!(Hostile);
