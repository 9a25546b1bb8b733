//! What a call costs, side by side, in one run on one machine: the native floor, toolcell's
//! fresh instance per call, the whole pipeline, a process per call, cold starts, throughput,
//! and compute-heavy work in wasm against the same Rust compiled natively.
//!
//! Run it with `just bench` (it needs the release `toolcell` binary for the cold starts). It
//! prints a Markdown table: p50 and p99 per case, and each case's ratio to the floor and to the
//! process model. A hand-written harness: the table needs percentiles and cross-case ratios
//! from the same run, which divan and criterion do not report; the in-process cases also run
//! under divan, in `micro.rs`, which `just bench` runs first.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};
use toolcell::{FakeTools, Runtime, ToolPort, ToolRequest};

/// Calls per in-process case: enough for a stable p99 in a few seconds.
const CALLS: usize = 20_000;
/// Warm-up calls before each in-process case.
const WARMUP: usize = 2_000;
/// Runs of each process-spawning case.
const SPAWNS: usize = 200;
/// Runs of each cold-start case.
const STARTS: usize = 20;
/// Calls per thread in the throughput cases.
const THROUGHPUT_CALLS: usize = 100_000;
/// The compute case: 20 MB of generated text, grepped; runs of each side.
const CORPUS_BYTES: usize = 20_000_000;
const COMPUTE_RUNS: usize = 10;
/// The Python and JavaScript tools: compiles of each (about 10 s apiece), starts from the
/// compile cache, and calls (a Python call takes about a millisecond).
const OTHER_COMPILES: usize = 3;
const OTHER_STARTS: usize = 10;
const OTHER_CALLS: usize = 5_000;

struct Case {
    name: String,
    p50: Duration,
    p99: Duration,
}

/// The cases measured in this run: all of them, or (given an argument, as in
/// `cargo bench --bench calls -- compute`) those whose name contains it, which is how one case
/// is run alone under a profiler.
struct Bench {
    filter: Option<String>,
    cases: Vec<Case>,
}

impl Bench {
    fn from_args() -> Self {
        // cargo passes `--bench` to a harness-less bench; anything else is the filter.
        let filter = std::env::args().skip(1).find(|arg| !arg.starts_with("--"));
        Bench {
            filter,
            cases: Vec::new(),
        }
    }

    fn selects(&self, name: &str) -> bool {
        self.filter
            .as_deref()
            .is_none_or(|filter| name.contains(filter))
    }

    fn run(&mut self, name: &str, runs: usize, warmup: usize, once: impl FnMut()) {
        if self.selects(name) {
            self.cases.push(measure(name, runs, warmup, once));
        }
    }
}

fn measure(name: &str, runs: usize, warmup: usize, mut once: impl FnMut()) -> Case {
    for _ in 0..warmup {
        once();
    }
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            once();
            started.elapsed()
        })
        .collect();
    times.sort();
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    Case {
        name: name.to_owned(),
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn toolcell_binary() -> PathBuf {
    // Another build to compare with (`TOOLCELL_BENCH_BINARY=/tmp/old/toolcell just bench`).
    if let Some(binary) = std::env::var_os("TOOLCELL_BENCH_BINARY") {
        return PathBuf::from(binary);
    }
    // This bench runs from target/release/deps; the binary is in target/release.
    let exe = std::env::current_exe().expect("bench path");
    let binary = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|release| release.join("toolcell"))
        .expect("target dir");
    assert!(
        binary.is_file(),
        "{} is missing: run `cargo build --release` first (just bench does)",
        binary.display()
    );
    binary
}

fn main() {
    let echo = ToolRequest::new("bench", "echo", r#"{"text":"hello"}"#);
    let mut bench = Bench::from_args();

    // Each case checks its answer once before it is timed: a failing echo would otherwise read
    // as a speed-up.
    let hello = toolcell::ToolResponse::text("hello");
    let fake = FakeTools::new();
    assert_eq!(fake.call(&echo), hello);
    bench.run(
        "native in-process call (FakeTools echo): the floor",
        CALLS,
        WARMUP,
        || {
            black_box(fake.call(&echo));
        },
    );
    drop(fake);

    let port = Runtime::builder()
        .component("bench:compute", toolcell_tests::guests::COMPUTE)
        .build()
        .expect("port");
    assert_eq!(port.call(&echo), hello);
    bench.run(
        "echo through the runtime as a ToolPort (validation, gate, fresh instance, cap)",
        CALLS,
        WARMUP,
        || {
            black_box(port.call(&echo));
        },
    );
    let audit_dir = tempfile::tempdir().expect("temp dir");
    let audit =
        toolcell::audit::Audit::open(&audit_dir.path().join("audit.jsonl")).expect("audit file");
    let runtime = port.with_audit(audit);
    assert_eq!(
        runtime.call(&toolcell::ToolRequest::new(
            "bench",
            "call_tool",
            r#"{"name":"echo","arguments":{"text":"hello"}}"#
        )),
        hello
    );
    bench.run(
        "echo through the pipeline (call_tool dispatch, validation, gate, port, cap, audit)",
        CALLS,
        WARMUP,
        || {
            black_box(runtime.call(&toolcell::ToolRequest::new(
                "bench",
                "call_tool",
                r#"{"name":"echo","arguments":{"text":"hello"}}"#,
            )));
        },
    );
    // The pipeline's own share: the same call, answered by a native tool instead of a fresh
    // instance.
    let native_echo = toolcell::FnTool::new(
        toolcell::ToolInfo::new(
            "echo",
            "Returns its text argument unchanged.",
            serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}},
                               "required": ["text"]}),
        )
        .read_only(true),
        |arguments, _| async move { Ok(arguments["text"].as_str().unwrap_or_default().to_owned()) },
    );
    let native_runtime = Runtime::builder()
        .builtin_tools(false)
        .native(native_echo)
        .build()
        .expect("runtime");
    let native_request = ToolRequest::new("bench", "echo", r#"{"text":"hello"}"#);
    assert_eq!(
        native_runtime.call(&native_request),
        toolcell::ToolResponse::text("hello")
    );
    bench.run(
        "echo as a native tool through the runtime as a ToolPort (validation, gate, cap)",
        CALLS,
        WARMUP,
        || {
            black_box(native_runtime.call(&native_request));
        },
    );
    drop(native_runtime);

    bench.run(
        "a process per call (spawn /bin/echo, wait)",
        SPAWNS,
        10,
        || {
            let output = Command::new("/bin/echo")
                .arg("hello")
                .output()
                .expect("spawn");
            black_box(output);
        },
    );

    let binary = toolcell_binary();
    let cache = tempfile::tempdir().expect("temp dir");
    let start = |cache_dir: &std::path::Path| {
        let output = Command::new(&binary)
            .args(["call", "echo", r#"{"text":"hello"}"#])
            .env(toolcell::cache::CACHE_DIR_ENV, cache_dir)
            .env(
                toolcell::cache::CACHE_KEY_ENV,
                cache.path().join("cache.key"),
            )
            .output()
            .expect("run toolcell");
        assert_eq!(output.stdout, b"hello\n");
    };
    bench.run("cold start to first result, empty cache", STARTS, 0, || {
        let empty = cache.path().join(format!("empty-{}", fastrand_suffix()));
        start(&empty);
    });
    let warm = cache.path().join("warm");
    if bench.selects("cold start to first result, warm cache") {
        start(&warm);
    }
    bench.run("cold start to first result, warm cache", STARTS, 2, || {
        start(&warm)
    });

    // The compute job, whole and (for the breakdown) its first half alone: generating the
    // corpus. Both sides must agree on the answers, or the comparison means nothing.
    let wasm_port = &runtime;
    let compute = |phase: &str| {
        let arguments = format!(
            r#"{{"seed":7,"bytes":{CORPUS_BYTES},"needle":"needle haystack","phase":"{phase}"}}"#
        );
        ToolRequest::new("bench", "compute", arguments)
    };
    let native = |phase: &str| match phase {
        "generate" => grep_kernel::corpus(7, black_box(CORPUS_BYTES)).len(),
        _ => grep_kernel::run(7, black_box(CORPUS_BYTES), black_box("needle haystack")),
    };
    for (phase, what) in [
        ("all", "grep a generated 20 MB corpus"),
        ("generate", "generate the 20 MB corpus only"),
    ] {
        let in_wasm = format!("{what}, in wasm");
        if bench.selects(&in_wasm) {
            let request = compute(phase);
            let expected = toolcell::ToolResponse::text(native(phase).to_string());
            bench.run(&in_wasm, COMPUTE_RUNS, 1, || {
                assert_eq!(wasm_port.call(&request), expected);
            });
        }
        bench.run(&format!("{what}, native"), COMPUTE_RUNS, 1, || {
            black_box(native(phase));
        });
    }
    // What fuel metering costs, which is why a port meters fuel only when asked to; and what
    // faulting fresh memory in costs, which more memory kept resident per slot saves.
    let variants = [
        (
            "grep a generated 20 MB corpus, in wasm with fuel metering",
            Runtime::builder().fuel_metering(true),
        ),
        (
            "grep a generated 20 MB corpus, in wasm with 64 MiB kept resident per slot",
            Runtime::builder().keep_resident_bytes(64 << 20),
        ),
    ];
    for (name, builder) in variants {
        if !bench.selects(name) {
            continue;
        }
        let variant_port = builder
            .builtin_tools(false)
            .component("bench:compute", toolcell_tests::guests::COMPUTE)
            .build()
            .expect("port");
        let request = compute("all");
        let expected = toolcell::ToolResponse::text(native("all").to_string());
        bench.run(name, COMPUTE_RUNS, 1, || {
            assert_eq!(variant_port.call(&request), expected);
        });
    }

    // The example tools in Python and JavaScript (built on first use with their pinned
    // toolchains, `toolcell_tests::toolchains`): compiling each from scratch, starting from the
    // compile cache, and one call in a fresh instance, through the same ToolPort as echo.
    use toolcell_tests::toolchains::{Js, js_tool, python_tool};
    let table = "name,lang\\nwasmtime,rust\\ncpython,c\\nrmcp,rust\\n";
    // (the case's label, the tool, how to build it, its arguments, its answer)
    type Other = (
        &'static str,
        &'static str,
        fn() -> Vec<u8>,
        String,
        &'static str,
    );
    let others: [Other; 3] = [
        (
            "Python csv_query (componentize-py)",
            "csv_query",
            || python_tool("csv_query"),
            format!(r#"{{"csv":"{table}","where":{{"lang":"rust"}},"columns":["name"]}}"#),
            r#"[{"name": "wasmtime"}, {"name": "rmcp"}]"#,
        ),
        (
            "JS json_pick (componentize-js, StarlingMonkey)",
            "json_pick",
            || js_tool("json_pick", Js::StarlingMonkey),
            r#"{"json":"{\"a\":[1,{\"b\":2}]}","pointers":["/a/1/b"]}"#.to_owned(),
            r#"{"/a/1/b":2}"#,
        ),
        (
            "JS json_pick (componentize-qjs --sync, QuickJS)",
            "json_pick",
            || js_tool("json_pick", Js::QuickJs),
            r#"{"json":"{\"a\":[1,{\"b\":2}]}","pointers":["/a/1/b"]}"#.to_owned(),
            r#"{"/a/1/b":2}"#,
        ),
    ];
    for (label, tool, build, arguments, expected) in others {
        let names = [
            format!("{label}: compile, no cache"),
            format!("{label}: start from the compile cache"),
            format!("{label}: call in a fresh instance"),
        ];
        if !names.iter().any(|name| bench.selects(name)) {
            continue;
        }
        let bytes = build();
        let cache_dir = tempfile::tempdir().expect("temp dir");
        let load = |cached: bool| {
            let runtime = Runtime::builder()
                .builtin_tools(false)
                .cache_dir(cached.then(|| cache_dir.path().join("entries")))
                .cache_key_file(Some(cache_dir.path().join("cache.key")))
                .component(format!("bench:{tool}"), bytes.clone())
                .build()
                .expect("runtime");
            assert_eq!(runtime.load_errors(), &[], "{label}");
            runtime
        };
        bench.run(&names[0], OTHER_COMPILES, 0, || {
            black_box(load(false));
        });
        bench.run(&names[1], OTHER_STARTS, 1, || {
            black_box(load(true));
        });
        let other = load(true);
        let request = ToolRequest::new("bench", tool, arguments.as_str());
        assert_eq!(
            other.call(&request),
            toolcell::ToolResponse::text(expected),
            "{label}"
        );
        bench.run(&names[2], OTHER_CALLS, OTHER_CALLS / 10, || {
            black_box(other.call(&request));
        });
    }

    // The same echo served over MCP on stdio, by the release binary: one request at a time
    // (the round trip alone), then pipelined (what a busy client gets), with the server's own
    // CPU per call. Given another build to compare with (`TOOLCELL_BENCH_BASELINE`), the two
    // serve in turn, `SERVED_ROUNDS` times each, so both see the same machine.
    let baseline = std::env::var_os("TOOLCELL_BENCH_BASELINE").map(PathBuf::from);
    let mut served = Vec::new();
    let mut compared = Vec::new();
    // The pipe's floor beside one call at a time: `cat` (no runtime, no parse, no call) driven
    // by the same client one line at a time, once before each round of the served stdio case.
    let mut floors = Vec::new();
    for window in [1, SERVED_WINDOW] {
        let name = format!("echo served over MCP stdio, {window} in flight: round trip");
        if !bench.selects(&name) {
            continue;
        }
        if window == 1 {
            floors.push(pipe_floor(served_calls()));
        }
        let serve = |binary: &std::path::Path| {
            serve_echo(
                binary,
                &warm,
                &cache.path().join("cache.key"),
                served_calls(),
                window,
            )
        };
        let Some(baseline) = &baseline else {
            let run = serve(&binary);
            bench.cases.push(Case {
                name,
                p50: run.p50,
                p99: run.p99,
            });
            served.push((format!("stdio, {window} in flight"), run));
            continue;
        };
        let mut rounds = Vec::new();
        for round in 0..SERVED_ROUNDS {
            if window == 1 && round > 0 {
                floors.push(pipe_floor(served_calls()));
            }
            rounds.push((serve(baseline), serve(&binary)));
        }
        compared.push((format!("stdio, {window} in flight"), rounds));
    }
    // The typed echo (`echo: func(text: string) -> string`, the `typed_echo` test guest): the
    // component as other runtimes serve it, from a tools directory, beside the built-in echo of
    // toolcell's own contract.
    let typed = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        typed.path().join("echo.wasm"),
        toolcell_tests::guests::TYPED_ECHO,
    )
    .expect("typed echo");
    for window in [1, SERVED_WINDOW] {
        let name = format!("typed echo served over MCP stdio, {window} in flight: round trip");
        if !bench.selects(&name) {
            continue;
        }
        let key = cache.path().join("cache.key");
        let run = serve_typed_echo(&binary, &warm, &key, typed.path(), served_calls(), window);
        bench.cases.push(Case {
            name,
            p50: run.p50,
            p99: run.p99,
        });
        served.push((format!("stdio, typed echo, {window} in flight"), run));
    }
    // The same echo served by Wassette ([`Wassette::from_env`]) and by this build in turn,
    // `SERVED_ROUNDS` times each, by the same client: Wassette and toolcell serve the very same
    // file (the typed echo), and toolcell its built-in echo too.
    let mut versus = Vec::new();
    if let Some(wassette) = Wassette::from_env() {
        for window in [1, SERVED_WINDOW] {
            let name = format!("echo served over MCP stdio, {window} in flight: against Wassette");
            if !bench.selects(&name) {
                continue;
            }
            let key = cache.path().join("cache.key");
            let mut same_file = Vec::new();
            let mut builtin = Vec::new();
            for _ in 0..SERVED_ROUNDS {
                let theirs = wassette.serve_echo(typed.path(), served_calls(), window);
                let ours =
                    serve_typed_echo(&binary, &warm, &key, typed.path(), served_calls(), window);
                same_file.push((theirs, ours));
                let theirs = wassette.serve_echo(typed.path(), served_calls(), window);
                let ours = serve_echo(&binary, &warm, &key, served_calls(), window);
                builtin.push((theirs, ours));
            }
            versus.push((
                format!("stdio, {window} in flight, the same file"),
                same_file,
            ));
            versus.push((
                format!("stdio, {window} in flight, toolcell's built-in echo"),
                builtin,
            ));
        }
    }
    // A gated write asked of the client (it answers at once), against the same write allowed
    // by the policy, in each era: what asking a person costs the server, beyond the person.
    for stateless in [false, true] {
        for asked in [false, true] {
            let era = if stateless {
                "stateless requests"
            } else {
                "a session"
            };
            let how = match (asked, stateless) {
                (false, _) => "allowed by the policy",
                (true, false) => "gated, approved by elicitation/create",
                (true, true) => "gated, approved by input_required and a retry",
            };
            let name = format!("write_file served over MCP stdio ({era}), {how}: round trip");
            if !bench.selects(&name) {
                continue;
            }
            let run = serve_write(
                &binary,
                &warm,
                &cache.path().join("cache.key"),
                asked,
                stateless,
            );
            bench.cases.push(Case {
                name,
                p50: run.p50,
                p99: run.p99,
            });
            let label = format!(
                "write, {}, {}",
                if stateless { "stateless" } else { "session" },
                if asked { "asked" } else { "allowed" }
            );
            served.push((label, run));
        }
    }
    // The same echo over Streamable HTTP (stateless 2026-07-28 requests), driven by wrk:
    // answered by the front's fast path, then by rmcp (the fast path switched off).
    for fast_path in [true, false] {
        let path = if fast_path { "fast path" } else { "rmcp" };
        let name = format!(
            "echo served over MCP HTTP, {path} (wrk, {HTTP_CONNECTIONS} connections): round trip"
        );
        if !bench.selects(&name) {
            continue;
        }
        let key = cache.path().join("cache.key");
        if let Some(baseline) = &baseline {
            let mut rounds = Vec::new();
            for _ in 0..SERVED_ROUNDS {
                let before = serve_echo_http(baseline, &warm, &key, fast_path);
                let after = serve_echo_http(&binary, &warm, &key, fast_path);
                match (before, after) {
                    (Some(before), Some(after)) => rounds.push((before, after)),
                    _ => break,
                }
            }
            compared.push((
                format!("HTTP, {path}, {HTTP_CONNECTIONS} connections"),
                rounds,
            ));
            continue;
        }
        match serve_echo_http(&binary, &warm, &key, fast_path) {
            Some(run) => {
                bench.cases.push(Case {
                    name,
                    p50: run.p50,
                    p99: run.p99,
                });
                served.push((
                    format!("HTTP, {path}, {HTTP_CONNECTIONS} connections (wrk)"),
                    run,
                ));
            }
            None => {
                println!("(wrk is not installed: the HTTP case is skipped; apt-get install wrk)");
                break;
            }
        }
    }
    // As a person's agent and an operator meet it (tokens, quotas and the audit on): one call
    // at a time on a kept-alive connection, then 64 clients at once with the server on one
    // core (wrk on the other) and on both.
    let operator_cases = [
        (
            "one at a time (token, quota, audit)",
            HttpCase {
                fast_path: true,
                connections: 1,
                tenants: 1,
                cpus: None,
            },
        ),
        (
            "64 clients, server on 1 core (token, quota, audit)",
            HttpCase {
                fast_path: true,
                connections: 64,
                tenants: 64,
                cpus: Some(("0", "1")),
            },
        ),
        (
            "64 clients, server on 2 cores (token, quota, audit)",
            HttpCase {
                fast_path: true,
                connections: 64,
                tenants: 64,
                cpus: Some(("0,1", "0,1")),
            },
        ),
    ];
    for (label, case) in &operator_cases {
        let name = format!("echo served over MCP HTTP, {label}: round trip");
        if !bench.selects(&name) {
            continue;
        }
        let key = cache.path().join("cache.key");
        if let Some(baseline) = &baseline {
            let mut rounds = Vec::new();
            for _ in 0..SERVED_ROUNDS {
                let before = serve_echo_http_as(baseline, &warm, &key, case);
                let after = serve_echo_http_as(&binary, &warm, &key, case);
                match (before, after) {
                    (Some(before), Some(after)) => rounds.push((before, after)),
                    _ => break,
                }
            }
            compared.push((format!("HTTP, {label}"), rounds));
            continue;
        }
        if let Some(run) = serve_echo_http_as(&binary, &warm, &key, case) {
            bench.cases.push(Case {
                name,
                p50: run.p50,
                p99: run.p99,
            });
            served.push((format!("HTTP, {label} (wrk)"), run));
        }
    }
    let throughput = |threads: usize| -> f64 {
        let started = Instant::now();
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| {
                    for _ in 0..THROUGHPUT_CALLS {
                        black_box(wasm_port.call(&echo));
                    }
                });
            }
        });
        (threads * THROUGHPUT_CALLS) as f64 / started.elapsed().as_secs_f64()
    };
    let throughputs: Vec<(usize, f64)> = if bench.selects("throughput") {
        vec![(1, throughput(1)), (2, throughput(2))]
    } else {
        Vec::new()
    };

    print_table(&bench.cases, &throughputs);
    print_served(&bench.cases, &served);
    print_floors(&bench.cases, &floors);
    if let Some(baseline) = &baseline {
        print_compared(&bench.cases, baseline, &binary, &compared);
    }
    print_versus(&versus);
}

/// Wassette, served beside toolcell: `TOOLCELL_BENCH_WASSETTE` names its binary (built from
/// its repository, e.g. the v0.2.0 tag: `cargo build --release --bin wassette`; not part of
/// this repository, and without it the case is skipped). It serves the typed echo test guest
/// (`echo: func(text: string) -> string`) as the tool `echo`.
struct Wassette {
    binary: PathBuf,
}

/// What Wassette answers an echo of "hello" with (the function's string result, as text).
const WASSETTE_ECHO_ANSWER: &str = "hello";

impl Wassette {
    fn from_env() -> Option<Wassette> {
        Some(Wassette {
            binary: std::env::var_os("TOOLCELL_BENCH_WASSETTE")?.into(),
        })
    }

    /// `wassette serve --stdio`, its log at `warn` (its default, `info`, writes lines per
    /// call to stderr, which toolcell does not: left on, the comparison would favour
    /// toolcell), then the same calls and checks as toolcell's served echo.
    fn serve_echo(&self, components: &std::path::Path, calls: usize, window: usize) -> Served {
        let mut command = Command::new(&self.binary);
        command
            .args(["serve", "--stdio", "--plugin-dir"])
            .arg(components)
            .env("RUST_LOG", "warn");
        let served = ServedChild {
            ends_at_eof: false,
            ..ServedChild::spawn(command, "{}")
        };
        echo_served(served, calls, window, WASSETTE_ECHO_ANSWER)
    }
}

/// Wassette's served echo beside toolcell's, round by round: the server's CPU per call and
/// how many times toolcell's that is.
fn print_versus(versus: &[(String, Vec<(Served, Served)>)]) {
    if versus.is_empty() {
        return;
    }
    println!();
    println!(
        "| served echo | round | Wassette calls/s | toolcell calls/s | Wassette CPU per call | toolcell CPU per call | toolcell cheaper by |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for (served, rounds) in versus {
        for (round, (theirs, ours)) in rounds.iter().enumerate() {
            println!(
                "| {served} | {} | {:.0} | {:.0} | {:.1} µs | {:.1} µs | {:.1}x |",
                round + 1,
                theirs.calls_per_second,
                ours.calls_per_second,
                theirs.cpu_per_call.as_secs_f64() * 1e6,
                ours.cpu_per_call.as_secs_f64() * 1e6,
                theirs.cpu_per_call.as_secs_f64() / ours.cpu_per_call.as_secs_f64(),
            );
        }
    }
}

/// Rounds of each build in a comparison with a baseline.
const SERVED_ROUNDS: usize = 3;

/// The served cases of a baseline and this build, round by round, and their ratios.
fn print_compared(
    cases: &[Case],
    baseline: &std::path::Path,
    binary: &std::path::Path,
    compared: &[(String, Vec<(Served, Served)>)],
) {
    println!();
    println!("baseline: {}", baseline.display());
    println!("this build: {}", binary.display());
    println!();
    println!(
        "| served | round | baseline calls/s | this build calls/s | ratio | baseline CPU per call | this build CPU per call | / in-process p50 | this build p50 | p99 |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let in_process = in_process_p50(cases);
    for (served, rounds) in compared {
        for (round, (before, after)) in rounds.iter().enumerate() {
            println!(
                "| {served} | {} | {:.0} | {:.0} | {:.1}x | {:.1} µs | {:.1} µs | {} | {:.0} µs | {:.0} µs |",
                round + 1,
                before.calls_per_second,
                after.calls_per_second,
                after.calls_per_second / before.calls_per_second,
                before.cpu_per_call.as_secs_f64() * 1e6,
                after.cpu_per_call.as_secs_f64() * 1e6,
                ratio(after.cpu_per_call.as_secs_f64() / in_process),
                after.p50.as_secs_f64() * 1e6,
                after.p99.as_secs_f64() * 1e6,
            );
        }
    }
}

/// Calls per served case, after as many again to warm up.
const SERVED_CALLS: usize = 20_000;

/// [`SERVED_CALLS`], or more for a profiler to see (`TOOLCELL_BENCH_SERVED_CALLS=200000`).
fn served_calls() -> usize {
    std::env::var("TOOLCELL_BENCH_SERVED_CALLS")
        .ok()
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(SERVED_CALLS)
}
/// Requests in flight in the pipelined served case.
const SERVED_WINDOW: usize = 32;

/// One served run: round trips, calls per second, and the server's CPU per call.
struct Served {
    p50: Duration,
    p99: Duration,
    calls_per_second: f64,
    cpu_per_call: Duration,
}

/// Connections wrk keeps open against the HTTP server: as many requests as one client may
/// have in flight (more are answered 429).
const HTTP_CONNECTIONS: usize =
    toolcell_mcp::http::share::calls_per_client(toolcell::limits::POOL_SLOTS as usize);
/// How long wrk warms the HTTP server up, then measures it.
const HTTP_WARMUP: &str = "2s";
const HTTP_RUN: &str = "5s";

/// Serve echo over HTTP from `binary` and load it with wrk (one thread, [`HTTP_CONNECTIONS`]
/// connections, each answer's status checked, one answer's body checked first); the server's
/// CPU is measured over the measured run. Without `fast_path`, the server's fast path is
/// switched off and rmcp answers every request. `None` without wrk.
fn serve_echo_http(
    binary: &std::path::Path,
    cache: &std::path::Path,
    key: &std::path::Path,
    fast_path: bool,
) -> Option<Served> {
    serve_echo_http_as(binary, cache, key, &HttpCase::load(fast_path))
}

/// How an HTTP case is served and loaded.
struct HttpCase {
    fast_path: bool,
    /// wrk's connections (each one request at a time, kept alive).
    connections: usize,
    /// As an operator runs it: tokens of this many tenants (each request takes the next, so
    /// that many clients share the server), each tenant's quota (room for every call), and
    /// the audit. 0: no tokens.
    tenants: usize,
    /// The CPUs the server may run on (`taskset -c`), and wrk's.
    cpus: Option<(&'static str, &'static str)>,
}

impl HttpCase {
    /// The load case: [`HTTP_CONNECTIONS`] connections, no token.
    fn load(fast_path: bool) -> HttpCase {
        HttpCase {
            fast_path,
            connections: HTTP_CONNECTIONS,
            tenants: 0,
            cpus: None,
        }
    }
}

/// Serve echo over HTTP as `case` says, and load it with wrk: round trips, calls per second
/// and the server's CPU per call. `None` when wrk is missing.
fn serve_echo_http_as(
    binary: &std::path::Path,
    cache: &std::path::Path,
    key: &std::path::Path,
    case: &HttpCase,
) -> Option<Served> {
    use std::io::{BufRead as _, Read as _, Write as _};
    Command::new("wrk").arg("--version").output().ok()?;
    let ticks_per_second = ticks_per_second();
    let fast_path = case.fast_path;
    let operator = tempfile::tempdir().expect("temp dir");
    let mut tokens = Vec::new();
    let mut command = match case.cpus {
        Some((server, _)) => {
            let mut command = Command::new("taskset");
            command.args(["-c", server]).arg(binary);
            command
        }
        None => Command::new(binary),
    };
    if case.tenants > 0 {
        let mut file = String::new();
        for n in 0..case.tenants {
            let made = Command::new(binary)
                .args(["token", &format!("bench{n}")])
                .output()
                .expect("toolcell token");
            let printed = String::from_utf8(made.stdout).expect("UTF-8");
            let (secret, table) = printed.split_once('\n').expect("a token, then its table");
            tokens.push(secret.to_owned());
            // Room for every call the run makes: the quota is charged, never in the way.
            file.push_str(&format!(
                "{table}\n[quota.bench{n}]\nrate = 10000\nburst = 10000\nin_flight = 16\n"
            ));
        }
        let path = operator.path().join("tokens.toml");
        std::fs::write(&path, file).expect("tokens file");
        command
            .arg("--audit")
            .arg(operator.path().join("audit.jsonl"))
            .args(["serve", "--http", "127.0.0.1:0", "--tokens"])
            .arg(&path);
    } else {
        command.args(["serve", "--http", "127.0.0.1:0"]);
    }
    let mut child = command
        .env(toolcell::cache::CACHE_DIR_ENV, cache)
        .env(toolcell::cache::CACHE_KEY_ENV, key)
        .env(
            toolcell_mcp::http::FAST_PATH_ENV,
            if fast_path { "1" } else { "0" },
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start toolcell serve --http");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).expect("stderr") > 0,
            "the server ended"
        );
        if let Some(url) = line.trim_end().strip_prefix("toolcell: serving MCP at ") {
            break url.to_owned();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let bearer = tokens.first().map(|token| format!("Bearer {token}"));
    let mut headers = vec![
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    if let Some(bearer) = &bearer {
        headers.push(("Authorization", bearer.as_str()));
    }
    // One request by hand: the answer must be echo's, not an error wrk would count as a 200.
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(authority).expect("connect");
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in &headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    stream
        .write_all(format!("{head}\r\n{body}").as_bytes())
        .expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer");
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.contains(r#""text":"hello""#),
        "echo over HTTP answered: {answer}"
    );
    let script = tempfile::NamedTempFile::new().expect("a script file");
    let mut lua = format!("wrk.method = \"POST\"\nwrk.body = [[{body}]]\n");
    for (name, value) in &headers {
        lua.push_str(&format!("wrk.headers[\"{name}\"] = \"{value}\"\n"));
    }
    // Each request the next tenant's token, so that many clients share the server.
    if tokens.len() > 1 {
        let quoted: Vec<String> = tokens.iter().map(|token| format!("\"{token}\"")).collect();
        lua.push_str(&format!(
            "tokens = {{{}}}\nturn = 0\nrequest = function()\n  turn = turn + 1\n  \
             wrk.headers[\"Authorization\"] = \"Bearer \" .. tokens[turn % #tokens + 1]\n  \
             return wrk.format()\nend\n",
            quoted.join(",")
        ));
    }
    lua.push_str(
        "done = function(summary, latency, requests)\n\
         io.write(string.format(\"toolcell-bench %d %d %d %d %d\\n\", summary.requests, \
         summary.duration, summary.errors.status + summary.errors.connect + summary.errors.read \
         + summary.errors.write + summary.errors.timeout, latency:percentile(50), latency:percentile(99)))\n\
         end\n",
    );
    std::fs::write(script.path(), lua).expect("the script");
    let wrk = |duration: &str| -> (u64, u64, u64, u64, u64) {
        let mut wrk = match case.cpus {
            Some((_, client)) => {
                let mut command = Command::new("taskset");
                command.args(["-c", client, "wrk"]);
                command
            }
            None => Command::new("wrk"),
        };
        let threads = if case.connections > 1 { 2 } else { 1 };
        let out = wrk
            .args([
                &format!("-t{threads}"),
                &format!("-c{}", case.connections),
                &format!("-d{duration}"),
                "-s",
            ])
            .arg(script.path())
            .arg(&url)
            .output()
            .expect("run wrk");
        let text = String::from_utf8_lossy(&out.stdout);
        let numbers: Vec<u64> = text
            .lines()
            .find_map(|line| line.strip_prefix("toolcell-bench "))
            .unwrap_or_else(|| panic!("wrk printed no summary: {text}"))
            .split_whitespace()
            .map(|n| n.parse().expect("a number"))
            .collect();
        (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
    };
    wrk(HTTP_WARMUP);
    let cpu_before = cpu_time(child.id(), ticks_per_second);
    let (requests, duration_us, errors, p50_us, p99_us) = wrk(HTTP_RUN);
    let cpu = cpu_time(child.id(), ticks_per_second) - cpu_before;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(errors, 0, "wrk saw errors");
    Some(Served {
        p50: Duration::from_micros(p50_us),
        p99: Duration::from_micros(p99_us),
        calls_per_second: requests as f64 / (duration_us as f64 / 1e6),
        cpu_per_call: cpu / u32::try_from(requests).unwrap_or(u32::MAX).max(1),
    })
}

/// The kernel's clock ticks per second, the unit of `/proc/PID/stat`'s CPU times.
fn ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100)
}

/// The CPU time (user + system, all threads) process `pid` has used so far.
fn cpu_time(pid: u32, ticks_per_second: u64) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    // The fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_secs_f64(ticks as f64 / ticks_per_second as f64)
}

/// A served bench's server: `binary serve` (after `args`), its input and its output, past the
/// `initialize` handshake in which the client declared `capabilities` (JSON text).
struct ServedChild {
    child: std::process::Child,
    input: std::io::BufWriter<std::process::ChildStdin>,
    output: std::io::BufReader<std::process::ChildStdout>,
    /// Whether the server ends when its input does (toolcell does, and the bench checks it;
    /// Wassette 0.2 does not, and is killed once measured).
    ends_at_eof: bool,
}

impl ServedChild {
    fn start(
        binary: &std::path::Path,
        cache: &std::path::Path,
        key: &std::path::Path,
        args: &[&std::ffi::OsStr],
        capabilities: &str,
    ) -> ServedChild {
        let mut command = Command::new(binary);
        command
            .args(args)
            .arg("serve")
            .env(toolcell::cache::CACHE_DIR_ENV, cache)
            .env(toolcell::cache::CACHE_KEY_ENV, key);
        ServedChild::spawn(command, capabilities)
    }

    /// Any MCP server on stdio started by `command` (Wassette, for the comparison), past the
    /// same handshake.
    fn spawn(mut command: Command, capabilities: &str) -> ServedChild {
        use std::io::{BufRead as _, Write as _};
        let mut child = command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("start the MCP server");
        let mut input = std::io::BufWriter::new(child.stdin.take().expect("stdin"));
        let mut output = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{capabilities},"clientInfo":{{"name":"bench","version":"0"}}}}}}"#
        )
        .and_then(|()| input.flush())
        .expect("initialize");
        let mut line = String::new();
        output.read_line(&mut line).expect("initialize response");
        writeln!(
            input,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("initialized");
        ServedChild {
            child,
            input,
            output,
            ends_at_eof: true,
        }
    }

    /// `run(self, calls)` once to warm up and once measured (round trips, wall time and the
    /// server's CPU), then end the server.
    fn measure(
        mut self,
        calls: usize,
        mut run: impl FnMut(&mut ServedChild, usize) -> Vec<Duration>,
    ) -> Served {
        let ticks_per_second = ticks_per_second();
        run(&mut self, calls);
        let cpu_before = cpu_time(self.child.id(), ticks_per_second);
        let started = Instant::now();
        let mut times = run(&mut self, calls);
        let wall = started.elapsed();
        let cpu = cpu_time(self.child.id(), ticks_per_second) - cpu_before;
        let ServedChild {
            mut child,
            input,
            ends_at_eof,
            ..
        } = self;
        drop(input);
        if !ends_at_eof {
            child.kill().expect("end the server");
        }
        child.wait().expect("the server exits");
        times.sort();
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        Served {
            p50: at(0.50),
            p99: at(0.99),
            calls_per_second: calls as f64 / wall.as_secs_f64(),
            cpu_per_call: cpu / calls as u32,
        }
    }
}

/// The pipe's floor under a stdio server one call at a time: `cat`, which reads its input
/// pipe and writes what it read back, with no runtime, no parse and no call, sent the echo's
/// request line `calls` times one at a time (after as many to warm up), every line checked
/// coming back. Its CPU per line is what this machine charges a process to be woken by a pipe,
/// read a line and answer it; a served call one at a time pays that and the call, run on a
/// core that slept since the last one.
fn pipe_floor(calls: usize) -> Served {
    use std::io::{BufRead as _, Write as _};
    let mut child = Command::new("cat")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start cat");
    let served = ServedChild {
        input: std::io::BufWriter::new(child.stdin.take().expect("stdin")),
        output: std::io::BufReader::new(child.stdout.take().expect("stdout")),
        child,
        ends_at_eof: true,
    };
    let request = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}"#;
    let mut line = String::new();
    served.measure(calls, |served, count| {
        let mut times = Vec::with_capacity(count);
        for _ in 0..count {
            let started = Instant::now();
            writeln!(served.input, "{request}")
                .and_then(|()| served.input.flush())
                .expect("a line to cat");
            line.clear();
            served.output.read_line(&mut line).expect("the line back");
            times.push(started.elapsed());
            assert_eq!(line.trim_end(), request, "cat answered another line");
        }
        times
    })
}

/// Start `toolcell serve`, shake hands, then make `calls` echo calls with `window` in
/// flight (after as many to warm up), checking every answer.
fn serve_echo(
    binary: &std::path::Path,
    cache: &std::path::Path,
    key: &std::path::Path,
    calls: usize,
    window: usize,
) -> Served {
    let served = ServedChild::start(binary, cache, key, &[], "{}");
    echo_served(served, calls, window, "hello")
}

/// [`serve_echo`] of the typed echo in `tools` (a directory holding it alone), served as an
/// operator serves components they have: `--no-builtin --tools DIR serve`.
fn serve_typed_echo(
    binary: &std::path::Path,
    cache: &std::path::Path,
    key: &std::path::Path,
    tools: &std::path::Path,
    calls: usize,
    window: usize,
) -> Served {
    let args = [
        "--no-builtin".as_ref(),
        "--tools".as_ref(),
        tools.as_os_str(),
    ];
    let served = ServedChild::start(binary, cache, key, &args, "{}");
    echo_served(served, calls, window, "hello")
}

/// Make `calls` echo calls with `window` in flight on `served` (after as many to warm up),
/// checking that every answer's text is `answer`.
fn echo_served(served: ServedChild, calls: usize, window: usize, answer: &str) -> Served {
    use std::io::{BufRead as _, Write as _};
    let mut next_id = 1usize;
    let mut line = String::new();
    served.measure(calls, |served, count| {
        let mut sent = std::collections::HashMap::with_capacity(window);
        let mut times = Vec::with_capacity(count);
        let (first, end) = (next_id, next_id + count);
        let mut to_send = first;
        while times.len() < count {
            while to_send < end && sent.len() < window {
                writeln!(
                    served.input,
                    r#"{{"jsonrpc":"2.0","id":{to_send},"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello"}}}}}}"#
                )
                .expect("request");
                sent.insert(to_send, Instant::now());
                to_send += 1;
            }
            served.input.flush().expect("flush");
            line.clear();
            served.output.read_line(&mut line).expect("response");
            let response: serde_json::Value = serde_json::from_str(&line).expect("JSON");
            let id = response["id"].as_u64().expect("an id") as usize;
            let started = sent.remove(&id).expect("a request in flight");
            times.push(started.elapsed());
            assert_eq!(
                response["result"]["content"][0]["text"], answer,
                "echo answered wrongly: {line}"
            );
        }
        next_id = end;
        times
    })
}

/// Gated writes served and approved, one at a time.
const WRITE_CALLS: usize = 2_000;

/// Serve `write_file` from `binary` with writes allowed by the policy, or gated and approved
/// by the client (`asked`: it declares elicitation and approves every question "once" at
/// once), and make [`WRITE_CALLS`] calls one at a time (after as many to warm up), checking
/// every answer. In a session (`initialize`) the server asks by `elicitation/create`; with
/// `stateless` 2026-07-28 requests it answers `input_required` and the client sends the call
/// again with the answer.
fn serve_write(
    binary: &std::path::Path,
    cache: &std::path::Path,
    key: &std::path::Path,
    asked: bool,
    stateless: bool,
) -> Served {
    use std::io::{BufRead as _, Write as _};
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = dir.path().join("workspace");
    std::fs::create_dir(&workspace).expect("workspace");
    let policy = dir.path().join("policy.toml");
    let access = if asked { "gated" } else { "allow" };
    std::fs::write(
        &policy,
        format!(
            "[tools.write_file]\ncore = true\nfilesystem.write = {{ access = \"{access}\", roots = [\".\"] }}\n"
        ),
    )
    .expect("policy");
    let args = [
        std::ffi::OsStr::new("--policy"),
        policy.as_os_str(),
        std::ffi::OsStr::new("--workspace"),
        workspace.as_os_str(),
    ];
    let capabilities = r#"{"elicitation":{"form":{}}}"#;
    let served = ServedChild::start(binary, cache, key, &args, capabilities);
    // A stateless request carries the era and the client in its `_meta`.
    let meta = if stateless {
        format!(
            r#","_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{capabilities},"io.modelcontextprotocol/clientInfo":{{"name":"bench","version":"0"}}}}"#
        )
    } else {
        String::new()
    };
    let mut next_id = 1usize;
    let mut questions = 0usize;
    let mut line = String::new();
    let measured = served.measure(WRITE_CALLS, |served, count| {
        let mut times = Vec::with_capacity(count);
        for call in next_id..next_id + count {
            let started = Instant::now();
            let arguments = format!(r#""arguments":{{"path":"bench.txt","content":"{call}"}}"#);
            let mut id = 2 * call;
            writeln!(
                served.input,
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"write_file",{arguments}{meta}}}}}"#
            )
            .and_then(|()| served.input.flush())
            .expect("request");
            loop {
                line.clear();
                served.output.read_line(&mut line).expect("a line");
                let message: serde_json::Value = serde_json::from_str(&line).expect("JSON");
                if message["method"] == "elicitation/create" {
                    questions += 1;
                    writeln!(
                        served.input,
                        r#"{{"jsonrpc":"2.0","id":{},"result":{{"action":"accept","content":{{"decision":"once"}}}}}}"#,
                        message["id"]
                    )
                    .and_then(|()| served.input.flush())
                    .expect("answer");
                    continue;
                }
                if message["id"] != id {
                    continue;
                }
                let result = &message["result"];
                if result["resultType"] == "input_required" {
                    // The same call again, with the answer and the server's handle.
                    questions += 1;
                    let key = result["inputRequests"]
                        .as_object()
                        .and_then(|requests| requests.keys().next())
                        .expect("a question");
                    id += 1;
                    writeln!(
                        served.input,
                        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"write_file",{arguments}{meta},"inputResponses":{{{}:{{"action":"accept","content":{{"decision":"once"}}}}}},"requestState":{}}}}}"#,
                        serde_json::Value::from(key.as_str()),
                        result["requestState"]
                    )
                    .and_then(|()| served.input.flush())
                    .expect("retry");
                    continue;
                }
                assert_eq!(result["isError"], false, "the write failed: {line}");
                break;
            }
            times.push(started.elapsed());
        }
        next_id += count;
        times
    });
    assert_eq!(
        questions,
        if asked { 2 * WRITE_CALLS } else { 0 },
        "each gated write was asked once, and no allowed one"
    );
    measured
}

/// A ratio as the tables print it: "-" where a case the filter left out made it NaN.
fn ratio(value: f64) -> String {
    if value.is_finite() {
        format!("{value:.1}x")
    } else {
        "-".to_owned()
    }
}

/// The in-process echo's p50 in this run (seconds), what a served call is compared with.
fn in_process_p50(cases: &[Case]) -> f64 {
    cases
        .iter()
        .find(|case| {
            case.name
                .starts_with("echo through the runtime as a ToolPort")
        })
        .map_or(f64::NAN, |case| case.p50.as_secs_f64())
}

fn print_served(cases: &[Case], served: &[(String, Served)]) {
    if served.is_empty() {
        return;
    }
    let in_process = in_process_p50(cases);
    println!();
    println!("| echo served over MCP | calls/s | server CPU per call | / in-process p50 |");
    println!("|---|---:|---:|---:|");
    for (how, run) in served {
        let cpu = run.cpu_per_call.as_secs_f64();
        println!(
            "| {how} | {:.0} | {:.1} µs | {} |",
            run.calls_per_second,
            cpu * 1e6,
            ratio(cpu / in_process)
        );
    }
}

/// The pipe's floor, once per round of the served stdio case one call at a time
/// ([`pipe_floor`]), against the in-process call.
fn print_floors(cases: &[Case], floors: &[Served]) {
    if floors.is_empty() {
        return;
    }
    let in_process = in_process_p50(cases);
    println!();
    println!(
        "| the pipe's floor (`cat`, one line at a time) | round trip p50 | CPU per line | / in-process p50 |"
    );
    println!("|---|---:|---:|---:|");
    for (round, run) in floors.iter().enumerate() {
        let cpu = run.cpu_per_call.as_secs_f64();
        println!(
            "| round {} | {:.1} µs | {:.1} µs | {} |",
            round + 1,
            run.p50.as_secs_f64() * 1e6,
            cpu * 1e6,
            ratio(cpu / in_process)
        );
    }
}

/// A distinct directory name per cold start, so each starts from an empty cache.
fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

fn print_table(cases: &[Case], throughputs: &[(usize, f64)]) {
    // A case left out by the filter leaves its ratio as NaN, printed as "-".
    let p50_of = |prefix: &str| {
        cases
            .iter()
            .find(|case| case.name.starts_with(prefix))
            .map_or(f64::NAN, |case| case.p50.as_secs_f64())
    };
    let floor = p50_of("native in-process call");
    let process = p50_of("a process per call");
    let show = |d: Duration| {
        let us = d.as_secs_f64() * 1e6;
        if us < 1000.0 {
            format!("{us:.1} µs")
        } else {
            format!("{:.2} ms", us / 1000.0)
        }
    };
    println!("| case | p50 | p99 | p50 / floor | process p50 / p50 |");
    println!("|---|---:|---:|---:|---:|");
    for case in cases {
        let p50 = case.p50.as_secs_f64();
        println!(
            "| {} | {} | {} | {} | {} |",
            case.name,
            show(case.p50),
            show(case.p99),
            ratio(p50 / floor),
            ratio(process / p50)
        );
    }
    let wasm_over_native =
        |what: &str| p50_of(&format!("{what}, in wasm")) / p50_of(&format!("{what}, native"));
    let whole = wasm_over_native("grep a generated 20 MB corpus");
    let generate = wasm_over_native("generate the 20 MB corpus only");
    if whole.is_finite() {
        println!();
        println!(
            "compute, wasm p50 / native p50: {whole:.2}x (generating the corpus alone: {generate:.2}x)"
        );
    }
    if !throughputs.is_empty() {
        println!();
        println!("| throughput, echo through the runtime as a ToolPort | calls/s |");
        println!("|---|---:|");
        for (threads, calls) in throughputs {
            let plural = if *threads == 1 { "" } else { "s" };
            println!("| {threads} thread{plural} | {calls:.0} |");
        }
    }
}
