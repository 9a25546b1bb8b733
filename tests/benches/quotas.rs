//! Tenants on one `toolcell serve --http`: B's echo latency alone, then beside A, which
//! calls past its quota (its rate and its in-flight bound) from six threads, never waiting for
//! `Retry-After`: first paced (each thread pauses between attempts: about ten times its rate),
//! then flat out (as fast as the machine lets it). Prints both tenants' p50s and A's refusals.
//! Last, the fair share: B's echo beside three tenants (C, D, E, no quotas) that each keep
//! their whole share of the pool busy with long calls that become tasks, and call again as
//! soon as a place is free (issue 40: B's p50 within 2x of alone).
//!
//! `cargo build --release --workspace && cargo bench --workspace --bench quotas`
//! (`TOOLCELL_BENCH_QUOTA_CALLS`: B's calls per run, default 1000).

use std::io::{BufRead as _, Read as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// B's calls per run, over two threads.
const B_CALLS: usize = 1000;
/// How long each of A's threads pauses between attempts in the paced run: six threads make
/// about 200 attempts a second, ten times A's rate.
const A_PAUSE: Duration = Duration::from_millis(30);
/// A's threads: more than its in-flight bound.
const A_THREADS: usize = 6;
/// How long each of A's calls runs, so that its calls are in flight at once.
const A_SLEEP_MS: u64 = 20;
const A_QUOTA: &str = "[quota.team-a]\nrate = 20\nburst = 5\nin_flight = 2\n";
/// B has a quota too (far above its use), so its calls pay for the admission.
const B_QUOTA: &str = "[quota.team-b]\nrate = 10000\nburst = 10000\nin_flight = 16\n";

fn binary() -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/toolcell");
    assert!(
        binary.is_file(),
        "build it first: cargo build --release --workspace"
    );
    binary
}

/// One stateless `tools/call` on a fresh connection; the status and how long it took.
fn call(addr: SocketAddr, token: &str, tool: &str, arguments: &str) -> (u16, Duration) {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    let started = Instant::now();
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\n\
         Authorization: Bearer {token}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer");
    let took = started.elapsed();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    if status == 200 {
        assert!(!answer.contains("\"isError\":true"), "{answer}");
    }
    (status, took)
}

fn percentile(latencies: &mut [Duration], at: f64) -> Duration {
    latencies.sort();
    let index = ((latencies.len() as f64 - 1.0) * at).round() as usize;
    latencies.get(index).copied().unwrap_or_default()
}

fn tenant_b(addr: SocketAddr, token: &str, calls: usize) -> Vec<Duration> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(move || {
                    (0..calls / 2)
                        .map(|_| {
                            let (status, took) = call(addr, token, "echo", r#"{"text":"hello"}"#);
                            assert_eq!(status, 200, "every call of B's succeeds");
                            took
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("B"))
            .collect()
    })
}

fn main() {
    let calls: usize = std::env::var("TOOLCELL_BENCH_QUOTA_CALLS")
        .ok()
        .and_then(|calls| calls.parse().ok())
        .unwrap_or(B_CALLS);
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("structured.wasm"),
        toolcell_tests::guests::STRUCTURED,
    )
    .expect("the guest");
    let mut tokens_file = String::new();
    let mut tokens = Vec::new();
    for tenant in ["team-a", "team-b", "team-c", "team-d", "team-e"] {
        let out = Command::new(binary())
            .args(["token", tenant])
            .output()
            .expect("toolcell token");
        let printed = String::from_utf8(out.stdout).expect("UTF-8");
        let (token, table) = printed.split_once('\n').expect("token, then table");
        tokens.push(token.to_owned());
        tokens_file.push_str(table);
        tokens_file.push('\n');
    }
    tokens_file.push_str(A_QUOTA);
    tokens_file.push_str(B_QUOTA);
    let file = dir.path().join("tokens.toml");
    std::fs::write(&file, tokens_file).expect("tokens file");
    let mut child = Command::new(binary())
        .args(["serve", "--http", "127.0.0.1:0", "--tools"])
        .arg(dir.path())
        .arg("--tokens")
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolcell serve --http");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let addr: SocketAddr = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).expect("stderr") > 0,
            "the server ended"
        );
        if let Some(url) = line
            .trim_end()
            .strip_prefix("toolcell: serving MCP at http://")
        {
            break url.trim_end_matches("/mcp").parse().expect("address");
        }
    };
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let (a, b) = (tokens[0].as_str(), tokens[1].as_str());

    // Warm up: the guest's first instance, the connections' path.
    tenant_b(addr, b, 100);
    let mut alone = tenant_b(addr, b, calls);
    println!("| tenant | calls | p50 | p99 |");
    println!("|---|---:|---:|---:|");
    println!(
        "| B alone (echo, 2 threads) | {} | {:.0?} | {:.0?} |",
        alone.len(),
        percentile(&mut alone, 0.5),
        percentile(&mut alone, 0.99)
    );
    for (pause, how) in [(Some(A_PAUSE), "paced"), (None, "flat out")] {
        beside_a(addr, a, b, calls, pause, how);
    }
    let alone_p50 = percentile(&mut alone, 0.5);
    beside_busy_tenants(addr, &tokens[2..], b, calls, alone_p50);
    let _ = child.kill();
    let _ = child.wait();
}

/// B's calls while A calls past its quota, pausing `pause` between attempts (or not).
fn beside_a(addr: SocketAddr, a: &str, b: &str, calls: usize, pause: Option<Duration>, how: &str) {
    let done = AtomicBool::new(false);
    let (mut beside, a_results) = std::thread::scope(|scope| {
        let a_threads: Vec<_> = (0..A_THREADS)
            .map(|_| {
                let done = &done;
                scope.spawn(move || {
                    let arguments = format!(r#"{{"a":1,"b":2,"sleep_ms":{A_SLEEP_MS}}}"#);
                    let mut results = Vec::new();
                    while !done.load(Ordering::Relaxed) {
                        results.push(call(addr, a, "structured", &arguments));
                        if let Some(pause) = pause {
                            std::thread::sleep(pause);
                        }
                    }
                    results
                })
            })
            .collect();
        let beside = tenant_b(addr, b, calls);
        done.store(true, Ordering::Relaxed);
        let a_results: Vec<(u16, Duration)> = a_threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("A"))
            .collect();
        (beside, a_results)
    });
    assert!(
        a_results
            .iter()
            .all(|(status, _)| *status == 200 || *status == 429),
        "A's answers are 200 or 429"
    );
    let mut admitted: Vec<Duration> = a_results
        .iter()
        .filter(|(status, _)| *status == 200)
        .map(|(_, took)| *took)
        .collect();
    let mut refused: Vec<Duration> = a_results
        .iter()
        .filter(|(status, _)| *status == 429)
        .map(|(_, took)| *took)
        .collect();
    let (refused_count, admitted_count) = (refused.len(), admitted.len());
    println!(
        "| B beside A {how} (echo, 2 threads) | {} (all 200) | {:.0?} | {:.0?} |",
        beside.len(),
        percentile(&mut beside, 0.5),
        percentile(&mut beside, 0.99)
    );
    println!(
        "| A {how}, admitted (structured, {A_SLEEP_MS} ms, {A_THREADS} threads) | {admitted_count} | {:.1?} | {:.1?} |",
        percentile(&mut admitted, 0.5),
        percentile(&mut admitted, 0.99)
    );
    println!(
        "| A {how}, refused (429) | {refused_count} | {:.0?} | {:.0?} |",
        percentile(&mut refused, 0.5),
        percentile(&mut refused, 0.99)
    );
}

/// How long each busy tenant's call sleeps: past a second, so it becomes a task.
const BUSY_SLEEP_MS: u64 = 1500;

/// One stateless call from a client that takes tasks: the status.
fn task_call(addr: SocketAddr, token: &str, arguments: &str) -> u16 {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"structured","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{"extensions":{{"io.modelcontextprotocol/tasks":{{}}}}}}}}}}}}"#
    );
    let mut stream = std::net::TcpStream::connect(addr).expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: structured\r\n\
         Authorization: Bearer {token}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).expect("send");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("the answer");
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}

/// B's echoes while each of `busy` keeps its whole share of the pool in long calls (and the
/// tasks they become), calling again whenever a place frees.
fn beside_busy_tenants(
    addr: SocketAddr,
    busy: &[String],
    b: &str,
    calls: usize,
    alone_p50: Duration,
) {
    let share = toolcell_mcp::http::share::calls_per_client(toolcell::limits::POOL_SLOTS as usize);
    let done = AtomicBool::new(false);
    // Each busy tenant's refusals: once each has one, every share is full.
    let full: Vec<std::sync::atomic::AtomicUsize> =
        busy.iter().map(|_| Default::default()).collect();
    let (mut beside, refused) = std::thread::scope(|scope| {
        let busy_threads: Vec<_> = busy
            .iter()
            .zip(&full)
            .flat_map(|(token, full)| {
                let done = &done;
                (0..share + 2).map(move |_| {
                    scope.spawn(move || {
                        let arguments = format!(r#"{{"a":1,"b":2,"sleep_ms":{BUSY_SLEEP_MS}}}"#);
                        let mut refused = 0usize;
                        while !done.load(Ordering::Relaxed) {
                            match task_call(addr, token, &arguments) {
                                200 => {}
                                429 => {
                                    refused += 1;
                                    full.fetch_add(1, Ordering::Relaxed);
                                    std::thread::sleep(Duration::from_millis(50));
                                }
                                other => panic!("a busy tenant's call answered {other}"),
                            }
                        }
                        refused
                    })
                })
            })
            .collect();
        // Every busy tenant's share full first (each has been refused a call past it).
        while full
            .iter()
            .any(|refused| refused.load(Ordering::Relaxed) == 0)
        {
            std::thread::yield_now();
        }
        let beside = tenant_b(addr, b, calls);
        done.store(true, Ordering::Relaxed);
        let refused: usize = busy_threads
            .into_iter()
            .map(|thread| thread.join().expect("a busy tenant"))
            .sum();
        (beside, refused)
    });
    let p50 = percentile(&mut beside, 0.5);
    println!(
        "| B beside {} tenants each holding its share ({share} calls and tasks, {BUSY_SLEEP_MS} ms each) | {} (all 200) | {:.0?} | {:.0?} |",
        busy.len(),
        beside.len(),
        p50,
        percentile(&mut beside, 0.99)
    );
    println!(
        "\nB's p50 beside the busy tenants is {:.2}x its p50 alone; the busy tenants were refused \
         {refused} calls past their share",
        p50.as_secs_f64() / alone_p50.as_secs_f64().max(f64::MIN_POSITIVE)
    );
}
