//! The soak: one process, one `Runtime`, a million mixed calls (benign, hostile, timed out,
//! cancelled), with resident memory and open descriptors sampled at intervals.
//!
//! Run it with `just soak` (`cargo bench -p toolcell-tests --bench soak`); `-- --calls N`,
//! `--threads T`, `--interval N` and `--warmup N` change the defaults (1,000,000 calls, 2
//! threads, a sample every 50,000 calls, a warm-up of 5 % of the calls but at least 10,000).
//! See RELIABILITY.md for a run and what it shows.
//!
//! Calls follow a fixed, shuffled schedule of 1000 kinds, repeated (and a flood every 10,000
//! calls): call `i` is of the kind at `i % 1000`, whichever thread makes it, so two runs make
//! the same calls. Every response is checked against what its kind must produce (outcome, and
//! for results the text); a response that differs is a mismatch, printed, and fails the run.
//! The workers pause at the end of each interval, so each sample is taken with no call in
//! flight; the first sample after the warm-up (every kind run at least ten times, so the
//! instance pool's slots, the runtime's caches and the allocator's arenas have filled) is the
//! baseline. At the end the run fails (exit status 1) if resident memory is not within 10 %
//! of the baseline, if more descriptors are open than at the baseline, or if any answer was
//! wrong.

use serde_json::json;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use toolcell::ToolPort as _;
use toolcell::{
    Call, CallOptions, CallReport, CapabilityKind, FailureKind, FnTool, Policy, ResourceRef,
    Runtime, StopToken, ToolError, ToolInfo, ToolResponse,
};

/// How long a call that must time out is given, and the outcome it must end with.
const SHORT_TIMEOUT: Duration = Duration::from_millis(20);
const TIMED_OUT: &str = "timed_out:20";
/// How long after its start a call that must be cancelled is stopped.
const STOP_AFTER: Duration = Duration::from_millis(5);
/// The memory limit of the memory bombs.
const BOMB_MEMORY: usize = 32 << 20;
/// The memory limit of the `huge` calls: the result they return is about half of it, far
/// past the cap, and costs less to build than one at the default 64 MiB (about 190 ms).
const HUGE_MEMORY: usize = 16 << 20;
/// How far the final resident memory may be from the baseline.
const RSS_TOLERANCE: f64 = 0.10;
/// How many mismatches are printed in full (all are counted).
const MISMATCHES_SHOWN: u64 = 20;

/// The kinds of call, each with what it must produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Kind {
    // Benign: each must answer with a result, and the right text.
    Echo,
    CallToolEcho,
    NativeSum,
    NativeRead,
    ReadFile,
    ReadFileInCwd,
    ListDir,
    FindTool,
    Counter,
    Clock,
    // Refused or failed by the host before anything runs.
    SchemaViolation,
    MalformedJson,
    OversizedArguments,
    UnknownTool,
    CallToolUnknown,
    PathEscape,
    WriteNeedsApproval,
    // The hostile guest's attacks, and native tools that misbehave: each ends typed.
    UnknownAttack,
    Panic,
    Recurse,
    DeepFrames,
    MemoryBomb,
    Huge,
    Flood,
    NativePanic,
    // Timed out.
    SpinTimeout,
    SleepTimeout,
    NativeWaitTimeout,
    // Cancelled while running, by a stop from another thread.
    SpinCancelled,
    SleepCancelled,
    NativeWaitCancelled,
    // Given a token already stopped.
    PreStoppedEcho,
    PreStoppedSpin,
    PreStoppedNative,
}

/// How many calls of each kind one cycle of [`CYCLE`] calls makes (floods apart: see
/// [`FLOOD_EVERY`]). Timed-out and cancelled calls cost their deadline or their stop delay
/// each, so they are few: together with the memory bombs and the floods they set most of the
/// run's length.
const MIX: &[(Kind, usize)] = &[
    (Kind::Echo, 196),
    (Kind::CallToolEcho, 90),
    (Kind::NativeSum, 150),
    (Kind::NativeRead, 60),
    (Kind::ReadFile, 80),
    (Kind::ReadFileInCwd, 30),
    (Kind::ListDir, 50),
    (Kind::FindTool, 50),
    (Kind::Counter, 50),
    (Kind::Clock, 20),
    (Kind::SchemaViolation, 30),
    (Kind::MalformedJson, 30),
    (Kind::OversizedArguments, 2),
    (Kind::UnknownTool, 20),
    (Kind::CallToolUnknown, 20),
    (Kind::PathEscape, 20),
    (Kind::WriteNeedsApproval, 20),
    (Kind::UnknownAttack, 10),
    (Kind::Panic, 10),
    (Kind::Recurse, 4),
    (Kind::DeepFrames, 4),
    (Kind::MemoryBomb, 2),
    (Kind::Huge, 1),
    (Kind::NativePanic, 10),
    (Kind::SpinTimeout, 2),
    (Kind::SleepTimeout, 2),
    (Kind::NativeWaitTimeout, 1),
    (Kind::SpinCancelled, 2),
    (Kind::SleepCancelled, 2),
    (Kind::NativeWaitCancelled, 1),
    (Kind::PreStoppedEcho, 10),
    (Kind::PreStoppedSpin, 10),
    (Kind::PreStoppedNative, 10),
];

/// The fewest calls the warm-up makes by default: ten cycles of the schedule, a flood among
/// them.
const MIN_WARMUP: u64 = 10 * CYCLE as u64;

/// The length of the schedule.
const CYCLE: usize = 1000;

/// The floods: one call in this many (they write 1 GiB each to stdout and stderr).
const FLOOD_EVERY: u64 = 10_000;

/// The schedule: [`MIX`] shuffled by a fixed seed, then padded with echoes to [`CYCLE`].
fn schedule() -> Vec<Kind> {
    let mut kinds: Vec<Kind> = MIX
        .iter()
        .flat_map(|&(kind, count)| std::iter::repeat_n(kind, count))
        .collect();
    assert!(kinds.len() <= CYCLE, "the mix has {} calls", kinds.len());
    kinds.resize(CYCLE, Kind::Echo);
    // Fisher-Yates with xorshift64: the same order on every run.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..kinds.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = usize::try_from(state % (i as u64 + 1)).unwrap_or(0);
        kinds.swap(i, j);
    }
    kinds
}

/// The kind of call `i`.
fn kind_of(schedule: &[Kind], i: u64) -> Kind {
    // A flood replaces the call scheduled at one fixed place in every FLOOD_EVERY calls.
    if i % FLOOD_EVERY == FLOOD_EVERY / 2 {
        return Kind::Flood;
    }
    schedule[usize::try_from(i % CYCLE as u64).unwrap_or(0)]
}

/// The command line: `--calls N --threads T --interval N --warmup N`. cargo adds `--bench`.
struct Args {
    calls: u64,
    threads: usize,
    interval: u64,
    warmup: u64,
}

fn args() -> Args {
    let mut args = Args {
        calls: 1_000_000,
        threads: 2,
        interval: 0,
        warmup: 0,
    };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let mut value = |name: &str| -> u64 {
            given
                .next()
                .and_then(|v| v.replace('_', "").parse().ok())
                .unwrap_or_else(|| {
                    eprintln!("soak: {name} needs a number");
                    std::process::exit(2)
                })
        };
        match flag.as_str() {
            "--calls" => args.calls = value("--calls").max(1),
            "--threads" => args.threads = usize::try_from(value("--threads")).unwrap_or(1).max(1),
            "--interval" => args.interval = value("--interval").max(1),
            "--warmup" => args.warmup = value("--warmup").max(1),
            "--bench" => {}
            other => {
                eprintln!(
                    "soak: unknown argument {other:?} (use --calls N, --threads T, --interval N, --warmup N)"
                );
                std::process::exit(2)
            }
        }
    }
    if args.interval == 0 {
        args.interval = (args.calls / 20).clamp(1, 50_000);
    }
    if args.warmup == 0 {
        // 5 % of the calls, and at least ten of every kind's cycles (and a flood).
        args.warmup = (args.calls / 20).max(MIN_WARMUP).min(args.calls);
    }
    args
}

/// The workspace the calls read: `notes.txt`, `sub/b.txt`, and beside it a secret that
/// `PathEscape` tries to reach.
struct Workspace {
    _temp: tempfile::TempDir,
    root: PathBuf,
}

const NOTES: &str = "soak notes\nsecond line\n";
const BELOW: &str = "below\n";

fn workspace() -> Workspace {
    let temp = tempfile::tempdir().expect("temp dir");
    let root = temp.path().join("ws");
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::create_dir_all(temp.path().join("outside")).expect("mkdir");
    std::fs::write(root.join("notes.txt"), NOTES).expect("write");
    std::fs::write(root.join("sub/b.txt"), BELOW).expect("write");
    std::fs::write(temp.path().join("outside/secret.txt"), "secret").expect("write");
    Workspace { _temp: temp, root }
}

/// The entries of `dir` as `list_dir` lists them: sorted, one a line, directories ending in
/// '/' (the runtime adds `.toolcell/` when it opens a workspace).
fn listing(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read the workspace")
        .map(|entry| {
            let entry = entry.expect("entry");
            let mut name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                name.push('/');
            }
            name
        })
        .collect();
    names.sort();
    names.join("\n")
}

/// The default policy, with a read grant for the native reader.
fn policy() -> Policy {
    let text = format!(
        "{}\n[tools.native_read]\nfilesystem.read = {{ access = \"allow\", roots = [\".\"] }}\n",
        toolcell::policy::DEFAULT_POLICY
    );
    Policy::from_toml(&text).expect("policy")
}

/// The tests' compile cache (as `tests/src/support.rs` uses), never the user's own.
fn builder() -> toolcell::RuntimeBuilder {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-cache");
    Runtime::builder()
        .cache_dir(Some(base.join("entries")))
        .cache_key_file(Some(base.join("cache.key")))
}

fn runtime(workspace: &Path) -> Runtime {
    let object = || json!({ "type": "object" });
    let native_sum = FnTool::new(
        ToolInfo::new(
            "native_sum",
            "Adds two integers.",
            json!({
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": false
            }),
        )
        .read_only(true),
        |arguments, _| async move {
            let a = arguments["a"].as_i64().unwrap_or_default();
            let b = arguments["b"].as_i64().unwrap_or_default();
            Ok(a.saturating_add(b).to_string())
        },
    );
    let native_read = FnTool::new(
        ToolInfo::new(
            "native_read",
            "Reads a file through its grant.",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": false
            }),
        )
        .read_only(true)
        .capability(
            CapabilityKind::FilesystemRead,
            ResourceRef::Argument("/path".to_owned()),
        ),
        |arguments, context| async move {
            let path = arguments["path"].as_str().unwrap_or_default();
            let granted = context
                .granted(path)
                .ok_or_else(|| ToolError::Denied(format!("no grant holds {path}")))?;
            granted
                .dir
                .read_to_string(granted.path)
                .map_err(|error| ToolError::NotFound(format!("{path}: {error}")))
        },
    );
    // Waits for ever: only its deadline or its stop ends it.
    let native_wait = FnTool::new(
        ToolInfo::new("native_wait", "Never answers.", object()).read_only(true),
        |_, _| async move {
            std::future::pending::<()>().await;
            Ok(String::new())
        },
    );
    let native_panic = FnTool::new(
        ToolInfo::new("native_panic", "Panics.", object()).read_only(true),
        |_, _| async move {
            if std::hint::black_box(true) {
                panic!("native_panic panicked on purpose");
            }
            Ok(String::new())
        },
    );
    let runtime = builder()
        .policy(policy())
        .workspace(workspace)
        .component("test:hostile", toolcell_tests::guests::HOSTILE)
        .component("test:counter", toolcell_tests::guests::COUNTER)
        .native(native_sum)
        .native(native_read)
        .native(native_wait)
        .native(native_panic)
        .build()
        .expect("the soak's runtime builds");
    assert_eq!(runtime.load_errors(), &[], "every tool loads");
    runtime
}

/// Stops tokens at their time, for the calls that must be cancelled while they run.
struct Stopper {
    send: Mutex<Option<mpsc::Sender<(Instant, StopToken)>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Stopper {
    fn start() -> Stopper {
        let (send, receive) = mpsc::channel::<(Instant, StopToken)>();
        let thread = std::thread::Builder::new()
            .name("soak-stopper".to_owned())
            .spawn(move || {
                let mut pending: Vec<(Instant, StopToken)> = Vec::new();
                loop {
                    let now = Instant::now();
                    pending.retain(|(at, token)| {
                        let due = *at <= now;
                        if due {
                            token.stop();
                        }
                        !due
                    });
                    let next = pending.iter().map(|(at, _)| *at).min();
                    let received = match next {
                        Some(at) => receive.recv_timeout(at.saturating_duration_since(now)),
                        None => receive
                            .recv()
                            .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
                    };
                    match received {
                        Ok(entry) => pending.push(entry),
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        Err(mpsc::RecvTimeoutError::Disconnected) if pending.is_empty() => {
                            return;
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                }
            })
            .expect("stopper thread");
        Stopper {
            send: Mutex::new(Some(send)),
            thread: Mutex::new(Some(thread)),
        }
    }

    /// A token this thread stops `after` from now.
    fn token_stopped_after(&self, after: Duration) -> StopToken {
        let token = StopToken::new();
        let send = self
            .send
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .expect("the stopper is running");
        send.send((Instant::now() + after, token.clone()))
            .expect("the stopper is running");
        token
    }

    fn finish(&self) {
        drop(self.send.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(thread) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            thread.join().expect("stopper");
        }
    }
}

fn options(timeout: Option<Duration>, stop: Option<StopToken>) -> CallOptions {
    CallOptions {
        timeout,
        stop,
        ..CallOptions::default()
    }
}

fn stopped() -> StopToken {
    let token = StopToken::new();
    token.stop();
    token
}

/// One response, as `--json` names its outcome (and a failure's kind, a denial's reason).
fn outcome(response: &ToolResponse) -> String {
    match response {
        ToolResponse::Result { .. } => "result".to_owned(),
        ToolResponse::Failed { kind, .. } => {
            format!("failed:{}", json!(kind).as_str().unwrap_or("?"))
        }
        ToolResponse::Denied { reason } => {
            let json = json!(reason);
            format!("denied:{}", json["kind"].as_str().unwrap_or("?"))
        }
        ToolResponse::TimedOut { limit_ms } => format!("timed_out:{limit_ms}"),
        ToolResponse::Cancelled => "cancelled".to_owned(),
        other => other.outcome().to_owned(),
    }
}

/// What a response must be: an outcome, and for a result a check of its text.
enum Expect {
    /// A result whose text is exactly this.
    Text(String),
    /// A result whose text passes this check (named for the message).
    TextWhere(&'static str, fn(&str, bool) -> bool),
    /// This outcome, as [`outcome`] spells it.
    Outcome(&'static str),
    /// A failure of this kind whose message contains this.
    FailedWith(FailureKind, &'static str),
}

impl Expect {
    /// Why `response` is not what was expected, if it is not.
    fn mismatch(&self, response: &ToolResponse) -> Option<String> {
        let got = outcome(response);
        let wrong = |wanted: &str| Some(format!("expected {wanted}, got {response:?}"));
        match (self, response) {
            (
                Expect::Text(text),
                ToolResponse::Result {
                    text: got,
                    truncated: false,
                    ..
                },
            ) if got == text => None,
            (Expect::Text(text), _) => wrong(&format!("result {text:?}")),
            (
                Expect::TextWhere(_, check),
                ToolResponse::Result {
                    text, truncated, ..
                },
            ) if check(text, *truncated) => None,
            (Expect::TextWhere(what, _), _) => wrong(&format!("a result {what}")),
            (Expect::Outcome(wanted), _) if got == *wanted => None,
            (Expect::Outcome(wanted), _) => wrong(wanted),
            (Expect::FailedWith(kind, part), ToolResponse::Failed { kind: got, message })
                if got == kind && message.contains(part) =>
            {
                None
            }
            (Expect::FailedWith(kind, part), _) => {
                wrong(&format!("failed:{kind:?} containing {part:?}"))
            }
        }
    }
}

/// What each worker shares.
struct Soak {
    runtime: Runtime,
    schedule: Vec<Kind>,
    stopper: Stopper,
    /// The index of the next call.
    next: AtomicU64,
    /// The first index past the current interval.
    end: AtomicU64,
    finished: AtomicBool,
    /// The context of `ReadFileInCwd`: another agent, in `sub`.
    in_sub: toolcell::CallContext,
    mismatches: AtomicU64,
    /// Per kind: calls, total time, longest.
    stats: Mutex<HashMap<Kind, KindStats>>,
    oversized: String,
    /// The workspace's root as `list_dir` must list it, read by the host.
    listing: String,
}

#[derive(Default, Clone, Copy)]
struct KindStats {
    calls: u64,
    total: Duration,
    max: Duration,
}

impl Soak {
    /// Make call `i` and check its answer.
    fn call(&self, i: u64, kind: Kind) -> Option<String> {
        let id = i.to_string();
        let handle = |name: &str, arguments: &str, options: &CallOptions| -> CallReport {
            self.runtime
                .call_with_report(&toolcell::ToolRequest::new(&id, name, arguments), options)
        };
        let plain = CallOptions::default();
        let attack = |which: &str, options: &CallOptions| {
            handle("hostile", &format!(r#"{{"do":"{which}"}}"#), options)
        };
        let short = options(Some(SHORT_TIMEOUT), None);
        let stop_soon = || options(None, Some(self.stopper.token_stopped_after(STOP_AFTER)));
        let already = options(None, Some(stopped()));
        let (report, expect) = match kind {
            Kind::Echo => {
                let text = format!("soak-{i}");
                (
                    handle("echo", &json!({ "text": text }).to_string(), &plain),
                    Expect::Text(text),
                )
            }
            Kind::CallToolEcho => {
                let text = format!("via-{i}");
                let arguments = json!({"name": "echo", "arguments": {"text": text}});
                (
                    handle("call_tool", &arguments.to_string(), &plain),
                    Expect::Text(text),
                )
            }
            Kind::NativeSum => {
                let a = i64::try_from(i).unwrap_or(0);
                (
                    handle("native_sum", &json!({"a": a, "b": 7}).to_string(), &plain),
                    Expect::Text((a + 7).to_string()),
                )
            }
            Kind::NativeRead => (
                handle("native_read", r#"{"path":"notes.txt"}"#, &plain),
                Expect::Text(NOTES.to_owned()),
            ),
            Kind::ReadFile => (
                handle("read_file", r#"{"path":"notes.txt"}"#, &plain),
                Expect::TextWhere("with the notes and their digest", |text, cut| {
                    !cut && text.starts_with(NOTES) && text.contains("[sha256: ")
                }),
            ),
            Kind::ReadFileInCwd => (
                self.runtime.run_blocking(
                    &Call::new(id.clone(), "read_file", r#"{"path":"b.txt"}"#)
                        .in_context(self.in_sub.clone()),
                ),
                Expect::TextWhere("with sub/b.txt", |text, cut| {
                    !cut && text.starts_with(BELOW) && text.contains("[sha256: ")
                }),
            ),
            Kind::ListDir => (
                handle("list_dir", r#"{"path":"."}"#, &plain),
                Expect::Text(self.listing.clone()),
            ),
            Kind::FindTool => (
                handle("find_tool", r#"{"query":"adds two"}"#, &plain),
                Expect::TextWhere("naming native_sum only", |text, _| {
                    text.starts_with("1 tool(s) match:\n") && text.contains(r#""native_sum""#)
                }),
            ),
            Kind::Counter => (
                handle("counter", "{}", &plain),
                Expect::Text("1".to_owned()),
            ),
            Kind::Clock => (
                handle("clock", "{}", &plain),
                Expect::TextWhere("that is a date", |text, _| {
                    text.len() == 20 && text.ends_with('Z')
                }),
            ),
            Kind::SchemaViolation => (
                handle("echo", r#"{"text":5}"#, &plain),
                Expect::Outcome("failed:invalid_input"),
            ),
            Kind::MalformedJson => (
                handle("echo", r#"{"text":"unterminated"#, &plain),
                Expect::Outcome("failed:invalid_input"),
            ),
            Kind::OversizedArguments => (
                handle("echo", &self.oversized, &plain),
                Expect::FailedWith(FailureKind::InvalidInput, "at most"),
            ),
            Kind::UnknownTool => (
                handle("no_such_tool", "{}", &plain),
                Expect::Outcome("denied:no_grant"),
            ),
            Kind::CallToolUnknown => (
                handle("call_tool", r#"{"name":"nope","arguments":{}}"#, &plain),
                Expect::TextWhere("saying there is no such tool", |text, _| {
                    text.starts_with(r#"No tool named "nope""#)
                }),
            ),
            Kind::PathEscape => (
                handle("read_file", r#"{"path":"../outside/secret.txt"}"#, &plain),
                Expect::Outcome("denied:capability"),
            ),
            Kind::WriteNeedsApproval => (
                handle("write_file", r#"{"path":"new.txt","content":"x"}"#, &plain),
                Expect::Outcome("denied:approval_required"),
            ),
            Kind::UnknownAttack => (
                attack("nothing", &plain),
                Expect::FailedWith(FailureKind::InvalidInput, "no attack named"),
            ),
            Kind::Panic => (
                attack("panic", &plain),
                Expect::FailedWith(FailureKind::Trap, "the hostile tool panicked on purpose"),
            ),
            Kind::Recurse => (
                attack("recurse", &plain),
                Expect::FailedWith(FailureKind::Trap, "call stack exhausted"),
            ),
            Kind::DeepFrames => (
                attack("deep_frames", &plain),
                Expect::FailedWith(FailureKind::Trap, "out of bounds memory access"),
            ),
            Kind::MemoryBomb => (
                attack(
                    "alloc",
                    &CallOptions {
                        memory_bytes: Some(BOMB_MEMORY),
                        ..CallOptions::default()
                    },
                ),
                Expect::FailedWith(FailureKind::OutOfMemory, "memory"),
            ),
            Kind::Huge => (
                attack(
                    "huge",
                    &CallOptions {
                        memory_bytes: Some(HUGE_MEMORY),
                        ..CallOptions::default()
                    },
                ),
                Expect::TextWhere("capped and flagged", |text, cut| {
                    cut && text.len() == toolcell::limits::DEFAULT_RESULT_CAP
                }),
            ),
            Kind::Flood => (
                attack("flood", &options(Some(Duration::from_secs(60)), None)),
                Expect::Text("flooded".to_owned()),
            ),
            Kind::NativePanic => (
                handle("native_panic", "{}", &plain),
                Expect::FailedWith(FailureKind::Trap, "native_panic panicked on purpose"),
            ),
            Kind::SpinTimeout => (attack("spin", &short), Expect::Outcome(TIMED_OUT)),
            Kind::SleepTimeout => (attack("sleep", &short), Expect::Outcome(TIMED_OUT)),
            Kind::NativeWaitTimeout => (
                handle("native_wait", "{}", &short),
                Expect::Outcome(TIMED_OUT),
            ),
            Kind::SpinCancelled => (attack("spin", &stop_soon()), Expect::Outcome("cancelled")),
            Kind::SleepCancelled => (attack("sleep", &stop_soon()), Expect::Outcome("cancelled")),
            Kind::NativeWaitCancelled => (
                handle("native_wait", "{}", &stop_soon()),
                Expect::Outcome("cancelled"),
            ),
            Kind::PreStoppedEcho => (
                handle("echo", r#"{"text":"never"}"#, &already),
                Expect::Outcome("cancelled"),
            ),
            Kind::PreStoppedSpin => (attack("spin", &already), Expect::Outcome("cancelled")),
            Kind::PreStoppedNative => (
                handle("native_wait", "{}", &already),
                Expect::Outcome("cancelled"),
            ),
        };
        expect
            .mismatch(&report.response)
            .map(|why| format!("call {i} ({kind:?}): {why}"))
    }

    /// Make calls until the interval ends.
    fn work(&self) {
        let mut stats: HashMap<Kind, KindStats> = HashMap::new();
        while let Ok(i) = self
            .next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |i| {
                (i < self.end.load(Ordering::SeqCst)).then_some(i + 1)
            })
        {
            let kind = kind_of(&self.schedule, i);
            let started = Instant::now();
            let mismatch = self.call(i, kind);
            let took = started.elapsed();
            let entry = stats.entry(kind).or_default();
            entry.calls += 1;
            entry.total += took;
            entry.max = entry.max.max(took);
            if let Some(why) = mismatch {
                let seen = self.mismatches.fetch_add(1, Ordering::SeqCst);
                if seen < MISMATCHES_SHOWN {
                    eprintln!("MISMATCH {why:.600}");
                }
            }
        }
        let mut all = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        for (kind, mine) in stats {
            let entry = all.entry(kind).or_default();
            entry.calls += mine.calls;
            entry.total += mine.total;
            entry.max = entry.max.max(mine.max);
        }
    }
}

/// Resident memory of this process, in KiB, from `/proc/self/status` (`field` is `VmRSS` or
/// `VmHWM`).
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("the field in /proc/self/status")
}

/// Open descriptors of this process (the one reading the directory included, every time).
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

struct Sample {
    calls: u64,
    elapsed: Duration,
    rate: f64,
    rss_kib: u64,
    fds: usize,
    in_flight: usize,
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// The panics the soak provokes on purpose (in `native_panic`, caught by the runtime) are
/// not printed; any other panic is, as usual.
fn quiet_deliberate_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or_default();
        if !message.contains("panicked on purpose") {
            default(info);
        }
    }));
}

fn main() {
    let args = args();
    quiet_deliberate_panics();
    let warmup = args.warmup.div_ceil(args.interval) * args.interval;
    let ws = workspace();
    let built = Instant::now();
    let runtime = runtime(&ws.root);
    println!(
        "runtime built in {:.1?} ({:?}); rss {:.1} MiB, {} descriptors open",
        built.elapsed(),
        runtime.cache_stats(),
        mib(status_kib("VmRSS")),
        open_descriptors()
    );
    // One read first, uncounted: the workspace makes its `.toolcell/` on the first file grant,
    // and `list_dir` must list what is there from then on.
    let primed = runtime.call(&toolcell::ToolRequest::new(
        "prime",
        "read_file",
        r#"{"path":"notes.txt"}"#,
    ));
    assert!(
        matches!(primed, ToolResponse::Result { .. }),
        "the first read answers: {primed:?}"
    );
    let in_sub = runtime
        .context("soak-sub", &ws.root)
        .expect("context")
        .with_cwd("sub")
        .expect("cwd");
    let soak = Arc::new(Soak {
        runtime,
        schedule: schedule(),
        stopper: Stopper::start(),
        next: AtomicU64::new(0),
        end: AtomicU64::new(0),
        finished: AtomicBool::new(false),
        in_sub,
        mismatches: AtomicU64::new(0),
        stats: Mutex::new(HashMap::new()),
        oversized: json!({ "text": "o".repeat(toolcell::limits::MAX_ARGUMENT_BYTES) }).to_string(),
        listing: listing(&ws.root),
    });

    // Workers persist for the whole run; two barriers bracket each interval, so samples are
    // taken with every worker idle and no call in flight.
    let barrier = Arc::new(Barrier::new(args.threads + 1));
    let workers: Vec<_> = (0..args.threads)
        .map(|n| {
            let soak = Arc::clone(&soak);
            let barrier = Arc::clone(&barrier);
            std::thread::Builder::new()
                .name(format!("soak-{n}"))
                .spawn(move || {
                    loop {
                        barrier.wait();
                        if soak.finished.load(Ordering::SeqCst) {
                            return;
                        }
                        soak.work();
                        barrier.wait();
                    }
                })
                .expect("worker thread")
        })
        .collect();

    println!(
        "soak: {} calls on {} threads, a sample every {} calls, warm-up {} calls",
        args.calls, args.threads, args.interval, warmup
    );
    let started = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let mut last = (0u64, Duration::ZERO);
    let mut done = 0u64;
    while done < args.calls {
        done = (done + args.interval).min(args.calls);
        soak.end.store(done, Ordering::SeqCst);
        barrier.wait();
        barrier.wait();
        let elapsed = started.elapsed();
        let rate = (done - last.0) as f64 / (elapsed - last.1).as_secs_f64();
        last = (done, elapsed);
        let sample = Sample {
            calls: done,
            elapsed,
            rate,
            rss_kib: status_kib("VmRSS"),
            fds: open_descriptors(),
            in_flight: soak.runtime.calls_in_flight(),
        };
        println!(
            "  {:>9} calls  {:>7.1} s  {:>7.0} calls/s  rss {:>7.1} MiB  fds {:>3}  in flight {}{}",
            sample.calls,
            sample.elapsed.as_secs_f64(),
            sample.rate,
            mib(sample.rss_kib),
            sample.fds,
            sample.in_flight,
            if done == warmup {
                "  (end of warm-up: the baseline)"
            } else {
                ""
            }
        );
        samples.push(sample);
    }
    soak.finished.store(true, Ordering::SeqCst);
    barrier.wait();
    for worker in workers {
        worker.join().expect("worker");
    }
    soak.stopper.finish();
    let wall = started.elapsed();

    // The table.
    let mut table = String::new();
    let _ = writeln!(
        table,
        "| calls | elapsed (s) | calls/s (interval) | RSS (MiB) | open fds | in flight |"
    );
    let _ = writeln!(table, "|---:|---:|---:|---:|---:|---:|");
    for sample in &samples {
        let mark = if sample.calls == warmup {
            " (baseline)"
        } else {
            ""
        };
        let _ = writeln!(
            table,
            "| {}{mark} | {:.1} | {:.0} | {:.1} | {} | {} |",
            sample.calls,
            sample.elapsed.as_secs_f64(),
            sample.rate,
            mib(sample.rss_kib),
            sample.fds,
            sample.in_flight
        );
    }
    println!("\n{table}");

    // What each kind cost.
    let stats = soak.stats.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut kinds: Vec<_> = stats.into_iter().collect();
    kinds.sort_by_key(|(kind, _)| *kind);
    println!("| kind | calls | mean | max | share of call time |");
    println!("|---|---:|---:|---:|---:|");
    let total: Duration = kinds.iter().map(|(_, s)| s.total).sum();
    for (kind, s) in &kinds {
        println!(
            "| {kind:?} | {} | {:.1?} | {:.1?} | {:.1} % |",
            s.calls,
            s.total / u32::try_from(s.calls.max(1)).unwrap_or(u32::MAX),
            s.max,
            100.0 * s.total.as_secs_f64() / total.as_secs_f64().max(1e-9)
        );
    }

    // The verdict.
    let mismatches = soak.mismatches.load(Ordering::SeqCst);
    let baseline = samples.iter().find(|s| s.calls == warmup);
    let last = samples.last().expect("a sample");
    let peak_kib = status_kib("VmHWM");
    println!(
        "\n{} calls in {:.1} s ({:.0} calls/s overall), {} threads; peak RSS (VmHWM) {:.1} MiB",
        args.calls,
        wall.as_secs_f64(),
        args.calls as f64 / wall.as_secs_f64(),
        args.threads,
        mib(peak_kib)
    );
    // Each file grant is staged in a directory of its own under `.toolcell/grants`, removed
    // when the call ends: none may be left behind.
    let staged = std::fs::read_dir(ws.root.join(".toolcell/grants"))
        .map(Iterator::count)
        .unwrap_or(0);
    println!("staging directories left in the workspace: {staged}");
    let mut failed = false;
    match baseline {
        Some(base) if base.calls < last.calls => {
            let change = last.rss_kib as f64 / base.rss_kib as f64 - 1.0;
            let rss_ok = change.abs() <= RSS_TOLERANCE;
            println!(
                "RSS: {:.1} MiB after warm-up ({} calls), {:.1} MiB at the end: {:+.1} % \
                 (allowed ±{:.0} %): {}",
                mib(base.rss_kib),
                base.calls,
                mib(last.rss_kib),
                change * 100.0,
                RSS_TOLERANCE * 100.0,
                if rss_ok { "PASS" } else { "FAIL" }
            );
            let fds_ok = last.fds <= base.fds;
            println!(
                "descriptors: {} after warm-up, {} at the end (most seen {}): {}",
                base.fds,
                last.fds,
                samples.iter().map(|s| s.fds).max().unwrap_or(0),
                if fds_ok { "PASS" } else { "FAIL" }
            );
            failed |= !rss_ok || !fds_ok;
        }
        _ => {
            println!("no sample after the warm-up: run more calls than one interval past it");
            failed = true;
        }
    }
    println!(
        "mismatches: {mismatches} of {} calls: {}",
        args.calls,
        if mismatches == 0 { "PASS" } else { "FAIL" }
    );
    failed |= mismatches > 0;
    println!("verdict: {}", if failed { "FAIL" } else { "PASS" });
    if failed {
        std::process::exit(1);
    }
}
