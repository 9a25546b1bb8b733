//! What a start costs as more tools are installed (issue: start cost independent of installed
//! tools): `toolcell call echo` wall time and peak RSS with 0, 10 and 40 installed Rust tools
//! and with the Python and JavaScript examples installed; a stdio server's RSS once it has
//! answered `tools/list`; and a tool's first call against its later ones, in process.
//!
//! One run measures every case in rotation (round after round, each case once per round), so
//! the machine's noise falls on all of them alike; the medians and their ratios to the case
//! with no tools installed are what to read. The cache is warmed first: what is measured is
//! every start after the first.
//!
//! `cargo build --release && cargo bench -p toolcell-tests --bench start`
//! (`TOOLCELL_BENCH_BINARY=/path/to/toolcell` measures another build;
//! `TOOLCELL_BENCH_START_ROUNDS` sets the rounds, default 30).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use toolcell::{Runtime, ToolPort as _, ToolRequest};

/// Rounds by default: each case runs once per round.
const ROUNDS: usize = 30;

/// The `numbered` test guest as the tool `numbered_NNN` (its name marker rewritten).
fn numbered(number: u16) -> Vec<u8> {
    let mut bytes = toolcell_tests::guests::NUMBERED.to_vec();
    let marker = b"numbered_000";
    let at = bytes
        .windows(marker.len())
        .position(|window| window == marker)
        .expect("the name marker");
    bytes[at..at + marker.len()].copy_from_slice(format!("numbered_{number:03}").as_bytes());
    bytes
}

fn toolcell_binary() -> PathBuf {
    if let Some(binary) = std::env::var_os("TOOLCELL_BENCH_BINARY") {
        return PathBuf::from(binary);
    }
    let exe = std::env::current_exe().expect("bench path");
    let binary = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|release| release.join("toolcell"))
        .expect("target dir");
    assert!(
        binary.is_file(),
        "{} is missing: run `cargo build --release` first",
        binary.display()
    );
    binary
}

/// Run `command` to its end; its wall time and peak RSS (KiB), from wait4's rusage (the
/// standard library's `wait` does not return a child's resource usage).
#[allow(unsafe_code)]
fn run_measured(command: &mut Command) -> (Duration, u64) {
    let started = Instant::now();
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start toolcell");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data, zeroed is a valid value; wait4 writes it for our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, whose pid we hold, once.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let took = started.elapsed();
    assert_eq!(waited, pid, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "toolcell failed: {status}"
    );
    std::mem::forget(child);
    (took, u64::try_from(usage.ru_maxrss).unwrap_or(0))
}

/// A stdio server's resident memory once it has answered `initialize` and `tools/list`.
fn server_idle_rss(binary: &Path, env: &[(&str, &Path)], args: &[String]) -> u64 {
    let mut command = Command::new(binary);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command
        .args(args)
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"bench","version":"0"}}}}}}"#
    )
    .expect("write");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("w");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#).expect("write");
    stdin.flush().expect("flush");
    let mut answered = 0;
    for line in lines.by_ref() {
        let line = line.expect("line");
        if line.contains(r#""id":0"#) || line.contains(r#""id":1"#) {
            answered += 1;
        }
        if answered == 2 {
            break;
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("status");
    let rss = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    drop(stdin);
    let _ = child.wait();
    rss
}

fn median<T: Copy + Ord>(values: &mut [T]) -> T {
    values.sort();
    values[values.len() / 2]
}

fn main() {
    let rounds = std::env::var("TOOLCELL_BENCH_START_ROUNDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(ROUNDS);
    let binary = toolcell_binary();
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    let key = temp.path().join("cache.key");
    let env: [(&str, &Path); 2] = [
        (toolcell::cache::CACHE_DIR_ENV, &cache),
        (toolcell::cache::CACHE_KEY_ENV, &key),
    ];

    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    for count in [0u16, 10, 40] {
        let dir = temp.path().join(format!("rust-{count}"));
        std::fs::create_dir(&dir).expect("dir");
        for number in 1..=count {
            std::fs::write(
                dir.join(format!("numbered_{number:03}.wasm")),
                numbered(number),
            )
            .expect("write tool");
        }
        cases.push((
            format!("{count} Rust tools installed"),
            vec!["--tools".to_owned(), dir.display().to_string()],
        ));
    }
    let examples = temp.path().join("examples");
    std::fs::create_dir(&examples).expect("dir");
    std::fs::write(
        examples.join("csv_query.wasm"),
        toolcell_tests::toolchains::python_tool("csv_query"),
    )
    .expect("python example");
    std::fs::write(
        examples.join("json_pick.wasm"),
        toolcell_tests::toolchains::js_tool(
            "json_pick",
            toolcell_tests::toolchains::Js::StarlingMonkey,
        ),
    )
    .expect("js example");
    cases.push((
        "Python and JS examples installed".to_owned(),
        vec!["--tools".to_owned(), examples.display().to_string()],
    ));

    let call = |args: &[String]| {
        let mut command = Command::new(&binary);
        for (key, value) in env {
            command.env(key, value);
        }
        command
            .args(args)
            .args(["call", "echo", r#"{"text":"hello"}"#]);
        command
    };
    // The first start describes and compiles; every later one is what is measured.
    for (_, args) in &cases {
        run_measured(&mut call(args));
    }
    let mut walls: Vec<Vec<Duration>> = vec![Vec::new(); cases.len()];
    let mut rss: Vec<Vec<u64>> = vec![Vec::new(); cases.len()];
    for _ in 0..rounds {
        for (at, (_, args)) in cases.iter().enumerate() {
            let (took, peak) = run_measured(&mut call(args));
            walls[at].push(took);
            rss[at].push(peak);
        }
    }
    println!(
        "`toolcell call echo`, {rounds} rounds, {}",
        binary.display()
    );
    println!(
        "{:<36} {:>10} {:>8} {:>12} {:>8} {:>14}",
        "case", "wall p50", "ratio", "peak RSS p50", "ratio", "server idle RSS"
    );
    let base_wall = median(&mut walls[0].clone());
    let base_rss = median(&mut rss[0].clone());
    for (at, (name, args)) in cases.iter().enumerate() {
        let wall = median(&mut walls[at]);
        let peak = median(&mut rss[at]);
        let idle = server_idle_rss(&binary, &env, args);
        println!(
            "{name:<36} {:>8.1}ms {:>7.2}x {:>9} KiB {:>7.2}x {:>10} KiB",
            wall.as_secs_f64() * 1e3,
            wall.as_secs_f64() / base_wall.as_secs_f64(),
            peak,
            peak as f64 / base_rss as f64,
            idle
        );
    }

    // A tool's first call (its code read from the cache and linked) against its later ones.
    let runtime = Runtime::builder()
        .builtin_tools(false)
        .tools_dir(temp.path().join("rust-40"))
        .tools_dir(&examples)
        .cache_dir(Some(cache.clone()))
        .cache_key_file(Some(key.clone()))
        .build()
        .expect("runtime");
    for (tool, arguments) in [
        ("numbered_001", "{}".to_owned()),
        (
            "csv_query",
            r#"{"csv":"a,b\n1,2\n","columns":["b"]}"#.to_owned(),
        ),
    ] {
        let request = ToolRequest::new("bench", tool, &arguments);
        let started = Instant::now();
        let first = runtime.call(&request);
        let first_took = started.elapsed();
        let mut later: Vec<Duration> = (0..50)
            .map(|_| {
                let started = Instant::now();
                std::hint::black_box(runtime.call(&request));
                started.elapsed()
            })
            .collect();
        println!(
            "{tool}: first call {:.2} ms ({}), later calls p50 {:.3} ms",
            first_took.as_secs_f64() * 1e3,
            first.outcome(),
            median(&mut later).as_secs_f64() * 1e3
        );
    }
    println!(
        "resident code after those calls: {} KiB",
        runtime.resident_code_bytes() / 1024
    );
}
