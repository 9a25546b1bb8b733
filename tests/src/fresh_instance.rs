//! Every call gets a fresh instance: nothing one call leaves behind is seen by the next.

use crate::support::{call, result_text};
use std::thread;

/// The `counter` guest counts calls in a global. Had any instance been reused, some call would
/// see 2 or more.
#[test]
pub(crate) fn counter() {
    for _ in 0..20 {
        assert_eq!(result_text(call("counter", "{}")), "1");
    }
    let answers: Vec<String> = thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    (0..10)
                        .map(|_| result_text(call("counter", "{}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().expect("thread"))
            .collect()
    });
    assert_eq!(answers.len(), 40);
    assert!(answers.iter().all(|answer| answer == "1"), "{answers:?}");
}

/// A fresh runtime with the `hostile` guest alone in a pool of one slot keeping
/// `keep_resident` bytes, as a function from an attack's name to the call's text.
fn one_slot_hostile(keep_resident: usize) -> impl Fn(&str) -> String {
    use toolcell::{CallOptions, ToolPort as _, ToolRequest};
    let port = crate::support::builder()
        .builtin_tools(false)
        .component("test:hostile", crate::guests::HOSTILE)
        .pool_slots(1)
        .keep_resident_bytes(keep_resident)
        .build()
        .expect("port");
    move |what: &str| {
        let request = ToolRequest::new("t", "hostile", format!(r#"{{"do":"{what}"}}"#));
        result_text(port.call_with(&request, &CallOptions::default()))
    }
}

/// Nothing a call writes to linear memory survives into the next call that gets the same
/// slot: not in the part a slot keeps resident (reset), not beyond it (given back and faulted
/// in fresh), and not when a slot keeps more. One slot, so the second call surely reuses it.
#[test]
fn linear_memory_carries_nothing_from_one_call_to_the_next() {
    for keep_resident in [toolcell::limits::KEEP_RESIDENT_BYTES, 64 << 20] {
        let attack = one_slot_hostile(keep_resident);
        // The control: within one instance the scan finds every planted word.
        let words = ((64 << 10) + (16 << 20)) / 8;
        let found: usize = attack("plant_and_scan").parse().expect("a count");
        assert!(
            found >= words,
            "the scan found {found} of {words} planted words"
        );
        for round in 0..3 {
            assert_eq!(attack("plant"), "planted");
            assert_eq!(
                attack("scan"),
                "0",
                "markers left over (round {round}, {keep_resident} bytes kept resident)"
            );
        }
    }
}

/// The same through 2,048 separate dirty runs, each one page: more than the reset's scan
/// takes in one pass (32), and, with 2 MiB kept, more pages than it may keep. Each slot is
/// fresh: pages an earlier call wrote stay written after their reset, and would make the
/// markers one run again.
#[test]
fn memory_written_in_thousands_of_runs_carries_nothing_to_the_next_call() {
    for keep_resident in [toolcell::limits::KEEP_RESIDENT_BYTES, 64 << 20] {
        let attack = one_slot_hostile(keep_resident);
        assert_eq!(attack("plant_scattered"), "2048");
        assert_eq!(
            attack("scan"),
            "0",
            "scattered markers left over ({keep_resident} bytes kept resident)"
        );
    }
}

/// What a call wrote stays its own even when the kernel swaps it out before the call ends. The
/// call plants 16 MiB of markers and runs on; the test has the server's memory swapped out
/// under it (`MADV_PAGEOUT`, as memory pressure would) until at least those 16 MiB are; the
/// deadline stops the call; the next call in the same slot reads all of its memory. wasmtime
/// 48.0.8's reset skipped pages that were not present: built with it, the next call started
/// on the previous one's allocator state and trapped on an address past its memory
/// (vendor/wasmtime/TOOLCELL-PATCH.md). Needs swap: turned on for the test where it is off.
#[test]
fn a_call_swapped_out_leaves_nothing_to_the_next() {
    use serde_json::json;
    let _swap = crate::system::swap_on();
    let tools = crate::support::tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let policy = tempfile::NamedTempFile::new().expect("policy file");
    // Long enough to page the server out on a loaded machine; the test waits for it once.
    std::fs::write(
        policy.path(),
        "[tools.hostile]\nlimits = { timeout_ms = 8000 }\n",
    )
    .expect("write the policy");
    let mut server = crate::mcp::Server::start(&[
        "--no-builtin",
        "--tools",
        tools.path().to_str().expect("path"),
        "--policy",
        policy.path().to_str().expect("path"),
    ]);
    // What the server has to swap out before the call: the planted 16 MiB come on top.
    let before = crate::system::page_out(server.pid());
    server.call(1, "hostile", json!({ "do": "plant_and_spin" }));
    let planted = 16 << 20;
    let mut swapped = 0;
    for _ in 0..PAGE_OUT_TRIES {
        swapped = crate::system::page_out(server.pid());
        if swapped >= before + planted {
            break;
        }
    }
    assert!(
        swapped >= before + planted,
        "the server's memory was not swapped out: {swapped} bytes, {before} before the call"
    );
    let stopped = server.response(1);
    assert_eq!(
        stopped["result"]["isError"], true,
        "the deadline stops the call: {stopped}"
    );
    server.call(2, "hostile", json!({ "do": "scan" }));
    let scanned = server.response(2);
    assert_eq!(
        scanned["result"]["content"][0]["text"], "0",
        "the next call did not start fresh after a swapped-out call: {scanned}"
    );
}

/// How many times the test pages the server out while its call runs: each pass swaps out what
/// the call has written by then, and the plant takes milliseconds.
const PAGE_OUT_TRIES: usize = 200;

/// Sixteen threads at once over four slots, and two tools: each thread has `hostile` plant
/// markers (in one run, or scattered over thousands), then scans for them through `counter`
/// (another tool, another component) and through `hostile` again, and counts. Every slot
/// serves many calls of both tools; no scan finds a marker and no count is past one.
#[test]
fn nothing_of_one_call_reaches_the_next_under_sixteen_concurrent_calls() {
    use toolcell::{ToolPort as _, ToolRequest};
    let port = crate::support::builder()
        .builtin_tools(false)
        .component("test:hostile", crate::guests::HOSTILE)
        .component("test:counter", crate::guests::COUNTER)
        .pool_slots(4)
        .build()
        .expect("port");
    let call = |tool: &str, arguments: &str| {
        result_text(port.call(&ToolRequest::new("t", tool, arguments)))
    };
    // The control: the other tool's scan finds the marker in its own memory's reach only when
    // the marker is there: a hostile call's own plant-and-scan finds it.
    assert_ne!(call("hostile", r#"{"do":"plant_and_scan"}"#), "0");
    let found: Vec<String> = thread::scope(|scope| {
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let call = &call;
                scope.spawn(move || {
                    let mut seen = Vec::new();
                    for round in 0..3 {
                        let plant = if round == 1 {
                            r#"{"do":"plant_scattered"}"#
                        } else {
                            r#"{"do":"plant"}"#
                        };
                        call("hostile", plant);
                        seen.push(call("counter", r#"{"scan":true}"#));
                        seen.push(call("hostile", r#"{"do":"scan"}"#));
                        seen.push(call("counter", "{}"));
                    }
                    seen
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("a thread"))
            .collect()
    });
    assert_eq!(found.len(), 16 * 3 * 3);
    for (at, answer) in found.iter().enumerate() {
        let expected = if at % 3 == 2 { "1" } else { "0" };
        assert_eq!(answer, expected, "answer {at}: {found:?}");
    }
}

/// A runtime of `slots` instance slots whose policy grants `envy` the variable PATH and the
/// built-in `clock` the real clock, with `snoop` (granted nothing) and `hostile` beside them.
fn granting_env_and_clock(slots: u32) -> toolcell::Runtime {
    let policy = toolcell::Policy::from_toml(
        "[tools.envy]\nenv = { access = \"allow\", vars = [\"PATH\"] }\n\
         [tools.clock]\nclock = { access = \"allow\" }\n",
    )
    .expect("policy parses");
    crate::support::builder()
        .policy(policy)
        .component("test:envy", crate::guests::ENVY)
        .component("test:snoop", crate::guests::SNOOP)
        .component("test:hostile", crate::guests::HOSTILE)
        .pool_slots(slots)
        .build()
        .expect("port")
}

/// A call's WASI context is built from that call's grants alone: at once when it has a
/// directory to preopen, otherwise from what the call was granted the first time its guest
/// reaches WASI (`wasm/sandbox.rs`). In one slot, so every call reuses the last one's: calls
/// granted an environment variable, the real clock, and a flood of stdout alternate with a
/// call granted nothing, and the one granted nothing sees no variable, the fixed clock and
/// empty captures each time, while each granted call still gets exactly its grant.
#[test]
fn a_wasi_context_built_late_holds_only_its_own_call_s_grants() {
    use toolcell::{CallOptions, ToolPort as _, ToolRequest};
    let path = std::env::var("PATH").expect("PATH is set for the tests");
    let port = granting_env_and_clock(1);
    let call = |tool: &str, arguments: &str| {
        port.call_with_report(
            &ToolRequest::new("t", tool, arguments),
            &CallOptions::default(),
        )
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let port_number = listener.local_addr().expect("address").port();
    for round in 0..3 {
        let granted = match round {
            0 => call("envy", r#"{"name":"PATH"}"#),
            1 => call("clock", "{}"),
            _ => call("hostile", r#"{"do":"flood"}"#),
        };
        let text = result_text(granted.response.clone());
        match round {
            0 => assert_eq!(text, format!("PATH={path}"), "envy got its grant"),
            1 => {
                // The real clock: within a minute of the host's (the fixed one is 1970).
                let read = humantime::parse_rfc3339(&text).expect("RFC 3339");
                let apart = std::time::SystemTime::now()
                    .duration_since(read)
                    .unwrap_or_else(|ahead| ahead.duration());
                assert!(apart.as_secs() < 60, "the clock tool read {text}");
            }
            _ => assert!(
                granted.stdout.truncated && granted.stdout.text.len() > 1024,
                "the flood was captured"
            ),
        }
        let after = call("snoop", &format!(r#"{{"port":{port_number}}}"#));
        assert!(after.stdout.text.is_empty() && !after.stdout.truncated);
        assert!(after.stderr.text.is_empty() && !after.stderr.truncated);
        let report: serde_json::Value =
            serde_json::from_str(&result_text(after.response)).expect("the report is JSON");
        assert_eq!(
            report["env"],
            serde_json::json!([]),
            "round {round}: {report}"
        );
        assert_eq!(report["wall_clock_secs"], 0, "round {round}: {report}");
        assert_eq!(report["wasi_wall_clock_secs"], 0, "round {round}: {report}");
        assert_eq!(report["preopens"], 0, "round {round}: {report}");
    }
}

/// The same, as an outsider would try it: eight threads over four slots, each call granted the
/// variable, granted the real clock or granted nothing, all at once, so contexts are built late
/// while other calls' are being built. No call granted nothing ever sees the variable or the
/// real clock, and every granted call sees its grant.
#[test]
fn late_wasi_contexts_built_at_once_by_many_calls_keep_their_own_grants() {
    use toolcell::ToolPort as _;
    let path = std::env::var("PATH").expect("PATH is set for the tests");
    let port = granting_env_and_clock(4);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
    let snoop = format!(
        r#"{{"port":{}}}"#,
        listener.local_addr().expect("address").port()
    );
    let call = |tool: &str, arguments: &str| {
        result_text(port.call(&toolcell::ToolRequest::new("t", tool, arguments)))
    };
    let answers: Vec<(usize, String)> = thread::scope(|scope| {
        let threads: Vec<_> = (0..8)
            .map(|thread| {
                let (call, snoop) = (&call, &snoop);
                scope.spawn(move || {
                    (0..24)
                        .map(|n| {
                            let kind = (thread + n) % 3;
                            let text = match kind {
                                0 => call("envy", r#"{"name":"PATH"}"#),
                                1 => call("clock", "{}"),
                                _ => call("snoop", snoop),
                            };
                            (kind, text)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("a thread"))
            .collect()
    });
    assert_eq!(answers.len(), 8 * 24);
    for (kind, text) in answers {
        match kind {
            0 => assert_eq!(text, format!("PATH={path}")),
            1 => assert!(!text.starts_with("1970"), "the clock tool read {text}"),
            _ => {
                let report: serde_json::Value =
                    serde_json::from_str(&text).expect("the report is JSON");
                assert_eq!(report["env"], serde_json::json!([]), "{report}");
                assert_eq!(report["wall_clock_secs"], 0, "{report}");
                assert_eq!(report["wasi_wall_clock_secs"], 0, "{report}");
            }
        }
    }
}
