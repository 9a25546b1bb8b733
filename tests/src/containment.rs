//! A hostile guest does its worst; the host answers with a typed response, on time, and keeps
//! serving. Each attack is asserted on its own, and each is followed by a good call.

use crate::support::{assert_echo_still_works, attack, exclusive, port, result_text};
use std::time::{Duration, Instant};
use toolcell::{CallOptions, FailureKind, StopToken, ToolPort, ToolRequest, ToolResponse};

const DEADLINE: Duration = Duration::from_millis(100);
/// How late past its deadline a call may end here: a margin sized for a loaded 2-core machine
/// (the suite runs its tests in parallel, beside other builds). The attacks run for an hour or
/// forever, so a deadline that did not stop them would still fail by far. How late a call
/// really ends is printed (`-- --nocapture`); idle it is a few ms (25 ms was the bound asked).
const DEADLINE_SLACK: Duration = Duration::from_secs(1);
/// How long after a stop a call may end here, for the same reason (10 ms was the bound asked).
const STOP_SLACK: Duration = Duration::from_secs(1);

fn with_timeout(timeout: Duration) -> CallOptions {
    CallOptions {
        timeout: Some(timeout),
        ..CallOptions::default()
    }
}

fn assert_times_out_on_time(which: &str) {
    let _guard = exclusive();
    let started = Instant::now();
    let report = attack(which, &with_timeout(DEADLINE));
    let took = started.elapsed();
    assert_eq!(report.response, ToolResponse::TimedOut { limit_ms: 100 });
    println!("{which}: a {DEADLINE:?} deadline ended the call after {took:?}");
    assert!(
        took >= DEADLINE && took <= DEADLINE + DEADLINE_SLACK,
        "{which}: timed out after {took:?}"
    );
    assert_echo_still_works();
}

#[test]
fn an_endless_loop_in_wasm_times_out_on_time() {
    assert_times_out_on_time("spin");
}

#[test]
fn a_wait_inside_a_host_call_times_out_on_time() {
    assert_times_out_on_time("sleep");
}

fn assert_stops_promptly(which: &str) {
    let _guard = exclusive();
    // The shared port and the hostile tool's code are loaded before the stopper's clock
    // starts: loading them takes longer than its 50 ms when this test is the first to call.
    let warm = attack("scan", &CallOptions::default());
    assert!(!warm.response.is_error(), "{warm:?}");
    let stop = StopToken::new();
    let options = CallOptions {
        stop: Some(stop.clone()),
        ..CallOptions::default()
    };
    let (report, stopped_at, returned_at) = std::thread::scope(|scope| {
        let stopper = scope.spawn(|| {
            // Let the call get well into its attack before stopping it.
            std::thread::sleep(Duration::from_millis(50));
            let at = Instant::now();
            stop.stop();
            at
        });
        let report = attack(which, &options);
        let returned_at = Instant::now();
        (report, stopper.join().expect("stopper"), returned_at)
    });
    assert_eq!(report.response, ToolResponse::Cancelled, "{which}");
    assert!(
        report.elapsed >= Duration::from_millis(50),
        "{which}: stopped mid-call"
    );
    let lag = returned_at.saturating_duration_since(stopped_at);
    println!("{which}: the call returned {lag:?} after the stop");
    assert!(
        lag <= STOP_SLACK,
        "{which}: returned {lag:?} after the stop"
    );
    assert_echo_still_works();
}

#[test]
fn a_stop_ends_an_endless_loop_promptly() {
    assert_stops_promptly("spin");
}

#[test]
fn a_stop_ends_a_wait_in_a_host_call_promptly() {
    assert_stops_promptly("sleep");
}

#[test]
fn a_call_with_a_stopped_token_never_starts() {
    let stop = StopToken::new();
    stop.stop();
    let options = CallOptions {
        stop: Some(stop),
        ..CallOptions::default()
    };
    let report = attack("spin", &options);
    assert_eq!(report.response, ToolResponse::Cancelled);
    // Stopped before validation, the first stage: never gated, never instantiated (no guest
    // memory was measured, which every instance has).
    assert_eq!(report.gate, toolcell::report::GateDecision::NotReached);
    assert_eq!(report.cost.memory_bytes, None, "{report:?}");
}

/// A bomb ends `out_of_memory`, and the host answers the next call. (That its memory goes
/// back is measured in a process of its own: `tests/tests/memory.rs`.)
#[test]
fn a_memory_bomb_ends_out_of_memory() {
    let options = CallOptions {
        memory_bytes: Some(32 << 20),
        ..CallOptions::default()
    };
    let report = attack("alloc", &options);
    match &report.response {
        ToolResponse::Failed {
            kind: FailureKind::OutOfMemory,
            message,
        } => assert!(message.contains("memory"), "{message}"),
        other => panic!("expected out of memory, got {other:?}"),
    }
    assert_echo_still_works();
}

#[test]
fn a_stack_overflow_is_a_trap() {
    // Wasm's own call stack, then Rust's stack in linear memory running off its end.
    for (which, trap) in [
        ("recurse", "call stack exhausted"),
        ("deep_frames", "out of bounds memory access"),
    ] {
        let report = attack(which, &CallOptions::default());
        match &report.response {
            ToolResponse::Failed {
                kind: FailureKind::Trap,
                message,
            } => assert!(message.contains(trap), "{which}: {message}"),
            other => panic!("{which}: expected a trap, got {other:?}"),
        }
        assert_echo_still_works();
    }
}

#[test]
fn a_panic_is_a_trap_that_quotes_the_panic() {
    let report = attack("panic", &CallOptions::default());
    match &report.response {
        ToolResponse::Failed {
            kind: FailureKind::Trap,
            message,
        } => assert!(
            message.contains("the hostile tool panicked on purpose"),
            "{message}"
        ),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(report.stderr.text.contains("panicked"));
    assert_echo_still_works();
}

#[test]
fn output_floods_are_captured_capped_and_flagged() {
    let _guard = exclusive();
    let report = attack("flood", &with_timeout(Duration::from_secs(60)));
    assert_eq!(result_text(report.response), "flooded");
    for captured in [&report.stdout, &report.stderr] {
        assert!(captured.truncated);
        assert_eq!(captured.text.len(), toolcell::limits::STDIO_CAPTURE_BYTES);
        assert!(captured.text.starts_with("HOSTILE-FLOOD"));
    }
    assert_echo_still_works();
}

/// The flood, run in a child process: nothing the guest writes reaches the host's stdout.
#[test]
fn guest_output_never_reaches_the_host_stdout() {
    const CHILD: &str = "TOOLCELL_TEST_FLOOD_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let report = attack("flood", &with_timeout(Duration::from_secs(60)));
        println!("child result: {}", report.response.model_text());
        return;
    }
    let _guard = exclusive();
    let output = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "containment::guest_output_never_reaches_the_host_stdout",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "child failed: {stdout}\n{stderr}");
    assert!(stdout.contains("child result: flooded"), "{stdout}");
    assert!(
        !stdout.contains("HOSTILE-FLOOD"),
        "guest output on the host's stdout"
    );
    assert!(
        !stderr.contains("HOSTILE-FLOOD"),
        "guest output on the host's stderr"
    );
}

#[test]
fn a_result_as_large_as_memory_allows_is_capped_and_flagged() {
    let _guard = exclusive();
    let runtime = port();
    let response = runtime.call(&toolcell::ToolRequest::new(
        "t",
        "hostile",
        r#"{"do":"huge"}"#,
    ));
    match response {
        ToolResponse::Result {
            text, truncated, ..
        } => {
            assert!(truncated);
            assert_eq!(text.len(), toolcell::limits::DEFAULT_RESULT_CAP);
        }
        other => panic!("expected a capped result, got {other:?}"),
    }
    assert_echo_still_works();
}

/// The command line shows a tool's failure within the cap too, marker included, as text and
/// as JSON: `--cap` is a hard bound on what the model reads, whatever the outcome.
#[test]
fn the_command_line_caps_a_failure_s_text() {
    let tools = crate::support::tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let long = "q".repeat(100_000);
    let arguments = format!(r#"{{"do":"{long}"}}"#);
    for (cap, json) in [("100", false), ("100", true), ("0", false)] {
        let mut command = crate::support::toolcell_command();
        command.arg("--tools").arg(tools.path());
        command.args(["call", "hostile", &arguments, "--cap", cap]);
        if json {
            command.arg("--json");
        }
        let output = command.output().expect("run toolcell");
        assert_eq!(output.status.code(), Some(1), "a failure");
        let cap: usize = cap.parse().expect("cap");
        if json {
            let response: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
            let message = response["message"].as_str().expect("message");
            assert!(message.len() <= cap, "{} bytes", message.len());
            assert!(message.ends_with(toolcell::registry::TRUNCATION_MARKER));
        } else {
            let shown = String::from_utf8_lossy(&output.stderr);
            let shown = shown
                .strip_prefix("toolcell: ")
                .and_then(|line| line.strip_suffix('\n'))
                .expect("one line");
            assert!(shown.len() <= cap, "{} bytes: {shown:.40}", shown.len());
        }
    }
}

#[test]
fn fuel_bounds_a_call_deterministically() {
    // Fuel in the policy turns metering on: the spin's own limit comes from there.
    let policy = toolcell::Policy::from_toml("[tools.hostile]\nlimits = { fuel = 1000000 }\n")
        .expect("policy");
    let port = crate::support::builder()
        .policy(policy)
        .component("test:hostile", crate::guests::HOSTILE)
        .build()
        .expect("port");
    let report = port.call_with_report(
        &ToolRequest::new("t", "hostile", r#"{"do":"spin"}"#),
        &CallOptions::default(),
    );
    assert!(
        matches!(
            report.response,
            ToolResponse::Failed {
                kind: FailureKind::OutOfFuel,
                ..
            }
        ),
        "{:?}",
        report.response
    );
    // Enough fuel for a small call: echo answers within it.
    let echo = port.call_with(
        &ToolRequest::new("t", "echo", r#"{"text":"fueled"}"#),
        &CallOptions {
            fuel: Some(10_000_000),
            ..CallOptions::default()
        },
    );
    assert_eq!(result_text(echo), "fueled");
    assert_echo_still_works();
}

#[test]
fn a_fuel_limit_on_a_port_that_does_not_meter_fuel_is_refused_not_ignored() {
    // The shared port's policy sets no fuel, so it was built without metering. A spin that
    // asks for fuel must not run unbounded by it until its deadline: it does not run at all.
    let report = attack(
        "spin",
        &CallOptions {
            fuel: Some(1_000),
            timeout: Some(Duration::from_secs(5)),
            ..CallOptions::default()
        },
    );
    match &report.response {
        ToolResponse::Failed {
            kind: FailureKind::Internal,
            message,
        } => assert!(message.contains("fuel_metering"), "{message}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // Refused before anything ran: no instance was made.
    assert_eq!(report.cost.memory_bytes, None, "{report:?}");
    assert_echo_still_works();
}

#[test]
fn an_unknown_attack_is_the_tools_own_invalid_input() {
    let report = attack("nothing", &CallOptions::default());
    assert!(matches!(
        report.response,
        ToolResponse::Failed {
            kind: FailureKind::InvalidInput,
            ..
        }
    ));
}

/// Every attack, one after another on one port, each with its typed answer, and a good call
/// after each.
#[test]
pub(crate) fn hostile() {
    let _guard = exclusive();
    let short = with_timeout(Duration::from_millis(50));
    let small = CallOptions {
        memory_bytes: Some(16 << 20),
        ..CallOptions::default()
    };
    let plain = CallOptions::default();
    let rows: &[(&str, &CallOptions, &str)] = &[
        ("spin", &short, "timed_out"),
        ("sleep", &short, "timed_out"),
        ("alloc", &small, "out_of_memory"),
        ("recurse", &plain, "trap"),
        ("deep_frames", &plain, "trap"),
        ("panic", &plain, "trap"),
    ];
    for (which, options, expected) in rows {
        let report = attack(which, options);
        assert_eq!(
            outcome(&report.response),
            *expected,
            "{which}: {:?}",
            report.response
        );
        assert_echo_still_works();
    }
}

/// A response's outcome, and for a failure its kind, as `--json` spells them.
fn outcome(response: &ToolResponse) -> String {
    let json = serde_json::to_value(response).unwrap_or_default();
    match response {
        ToolResponse::Failed { .. } => json["kind"].as_str().unwrap_or_default().to_owned(),
        _ => json["outcome"].as_str().unwrap_or_default().to_owned(),
    }
}

/// With every instance slot taken, a call waits for one instead of failing.
#[test]
fn a_full_pool_makes_calls_wait_not_fail() {
    let port = crate::support::builder()
        .pool_slots(2)
        .component("test:hostile", crate::guests::HOSTILE)
        .build()
        .expect("port");
    let sleep = CallOptions {
        timeout: Some(Duration::from_millis(300)),
        ..CallOptions::default()
    };
    let responses: Vec<ToolResponse> = std::thread::scope(|scope| {
        let sleepers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    port.call_with(
                        &ToolRequest::new("s", "hostile", r#"{"do":"sleep"}"#),
                        &sleep,
                    )
                })
            })
            .collect();
        // Once the sleepers hold both slots, echo calls must queue for one.
        let started = Instant::now();
        while port.calls_in_flight() < 2 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the sleepers never started"
            );
            std::thread::yield_now();
        }
        let echoes: Vec<_> = (0..3)
            .map(|i| {
                let port = &port;
                scope.spawn(move || {
                    let text = format!("queued {i}");
                    let arguments = serde_json::json!({ "text": text }).to_string();
                    (text, port.call(&ToolRequest::new("e", "echo", &arguments)))
                })
            })
            .collect();
        for echo in echoes {
            let (text, response) = echo.join().expect("echo thread");
            assert_eq!(response, ToolResponse::text(text));
        }
        // They could only have run once a sleeper gave its slot back.
        assert!(started.elapsed() >= Duration::from_millis(250));
        sleepers
            .into_iter()
            .map(|s| s.join().expect("sleeper"))
            .collect()
    });
    for response in responses {
        assert_eq!(response, ToolResponse::TimedOut { limit_ms: 300 });
    }
}

/// A call stopped while it waits for an instance slot never starts its guest, even when the
/// slot comes free at the same moment as the stop (the wait looks at the slot before the
/// stop). One slot, held by a call asleep in a host call; a second call waits for it; the
/// second is stopped, then the first, whose slot passes to the second as the first ends: the
/// second answers `cancelled`, and its guest never ran. Both are polled by hand on one thread,
/// so the order is the same every run.
#[test]
fn a_call_stopped_while_it_waits_for_a_slot_never_starts() {
    use std::future::Future as _;
    use std::task::Poll;
    let runtime = crate::support::builder()
        .pool_slots(1)
        .component("test:hostile", crate::guests::HOSTILE)
        .build()
        .expect("the runtime builds");
    // Each tool's code is loaded on its first call: both are loaded before the order matters.
    let warm = |tool: &str, arguments: &str| {
        let answer = runtime.call(&ToolRequest::new("warm", tool, arguments));
        assert!(!answer.is_error(), "{tool}: {answer:?}");
    };
    warm("hostile", r#"{"do":"scan"}"#);
    warm("echo", r#"{"text":"warm"}"#);
    let with = |stop: &StopToken| CallOptions {
        stop: Some(stop.clone()),
        ..CallOptions::default()
    };
    let (holder_stop, waiter_stop) = (StopToken::new(), StopToken::new());
    let holder =
        toolcell::Call::new("1", "hostile", r#"{"do":"sleep"}"#).with_options(with(&holder_stop));
    let waiter =
        toolcell::Call::new("2", "echo", r#"{"text":"ran"}"#).with_options(with(&waiter_stop));
    let executor = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("an executor");
    let (held, waited) = executor.block_on(async {
        let holding = runtime.run(&holder);
        let waiting = runtime.run(&waiter);
        tokio::pin!(holding, waiting);
        // One poll each: the first takes the only slot and its guest sleeps in a host call;
        // the second finds no slot free and waits.
        std::future::poll_fn(|cx| {
            assert!(
                holding.as_mut().poll(cx).is_pending(),
                "the sleeper answered"
            );
            assert!(
                waiting.as_mut().poll(cx).is_pending(),
                "the waiter did not wait"
            );
            Poll::Ready(())
        })
        .await;
        waiter_stop.stop();
        holder_stop.stop();
        // The sleeper ends (cancelled) and lets its slot go, to the waiter.
        let held = holding.await;
        (held, waiting.await)
    });
    assert_eq!(held.response, ToolResponse::Cancelled, "{held:?}");
    assert_eq!(waited.response, ToolResponse::Cancelled, "{waited:?}");
}
