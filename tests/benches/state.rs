//! A quota'd echo over HTTP, with and without the shared store (`--state`), in one run: wrk
//! (one thread, 16 connections: a client's fair share of calls) against `toolcell serve
//! --http` with a tenant whose quota (in flight, a daily budget) is far above the load (so
//! every call goes through the admission and is charged, and none is refused). Prints p50, p99, calls a second, the server's CPU per call,
//! and, with the store, the commands the store ran per call (Redis's own count: what
//! "one round trip per admitted call" means) and its CPU per call.
//!
//! `cargo build --release --workspace && cargo bench --workspace --bench state`
//! (needs `wrk` and `redis-server`; `tests/src/system.rs` installs redis-server if missing).

use std::io::{BufRead as _, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CONNECTIONS: usize = 16;
const WARMUP: &str = "2s";
const RUN: &str = "5s";
/// A daily budget only: its use is charged after each answer, batched, so each admitted call
/// costs the store one round trip.
const BUDGET: &str = "[quota.bench]\ndaily_ms = 5000000000\n";
/// A bound on calls in flight too: each call's place is given back before its answer leaves,
/// a second round trip, so that the next call finds it free on any replica.
const BOUNDED: &str = "[quota.bench]\nin_flight = 16\ndaily_ms = 5000000000\n";

fn binary() -> PathBuf {
    let binary = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/toolcell");
    assert!(
        binary.is_file(),
        "build it first: cargo build --release --workspace"
    );
    binary
}

/// The kernel's clock ticks per second.
fn ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100)
}

/// CPU time (user + system) process `pid` has used.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/PID/stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: u64 =
        fields[11].parse::<u64>().unwrap_or(0) + fields[12].parse::<u64>().unwrap_or(0);
    Duration::from_secs_f64(ticks as f64 / ticks_per_second() as f64)
}

/// A `redis-server` on a loopback port.
struct Redis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start() -> Redis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a port")
            .port();
        let dir = tempfile::tempdir().expect("temp dir");
        let child = Command::new(toolcell_tests::system::require(
            &toolcell_tests::system::REDIS,
        ))
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server");
        let redis = Redis {
            child,
            port,
            _dir: dir,
        };
        let started = Instant::now();
        while redis.command("PING").is_none() {
            assert!(started.elapsed() < Duration::from_secs(10), "redis-server");
            std::thread::sleep(Duration::from_millis(20));
        }
        redis
    }

    /// One inline command's reply, as text.
    fn command(&self, command: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
        stream
            .write_all(format!("{command}\r\nQUIT\r\n").as_bytes())
            .ok()?;
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply);
        (!reply.is_empty()).then_some(reply)
    }

    /// How many requests toolcell has made of the server: its script calls (`EVALSHA`, and
    /// `EVAL` the first time), each one round trip, and the plain commands it sends (`SET`,
    /// `GET`, `MGET`, `PING`); what the scripts run inside is not a round trip and not counted
    /// (`INFO commandstats`).
    fn commands(&self) -> u64 {
        self.command("INFO commandstats")
            .unwrap_or_default()
            .lines()
            .filter(|line| {
                ["evalsha", "eval", "set", "get", "mget", "ping"]
                    .iter()
                    .any(|name| line.starts_with(&format!("cmdstat_{name}:")))
            })
            .filter_map(|line| line.split("calls=").nth(1))
            .filter_map(|rest| rest.split(',').next()?.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one configuration measured.
struct Measured {
    p50_us: u64,
    p99_us: u64,
    per_second: f64,
    cpu_per_call: Duration,
    store_commands_per_call: Option<f64>,
    store_cpu_per_call: Option<Duration>,
}

fn serve(dir: &Path, tokens: &str, token: &str, redis: Option<&Redis>) -> Measured {
    let mut command = Command::new(binary());
    command
        .args(["serve", "--http", "127.0.0.1:0", "--tokens"])
        .arg(dir.join(tokens))
        .env(toolcell::cache::CACHE_DIR_ENV, dir.join("cache"))
        .env(toolcell::cache::CACHE_KEY_ENV, dir.join("cache.key"));
    if let Some(redis) = redis {
        command.args(["--state", &format!("redis://127.0.0.1:{}", redis.port)]);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toolcell serve --http");
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
    let bearer = format!("Bearer {token}");
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
        ("Authorization", bearer.as_str()),
    ];
    let script = tempfile::NamedTempFile::new().expect("a script");
    let mut lua = format!("wrk.method = \"POST\"\nwrk.body = [[{body}]]\n");
    for (name, value) in headers {
        lua.push_str(&format!("wrk.headers[\"{name}\"] = \"{value}\"\n"));
    }
    lua.push_str(
        "done = function(summary, latency, requests)\n\
         io.write(string.format(\"toolcell-bench %d %d %d %d %d\\n\", summary.requests, \
         summary.duration, summary.errors.status + summary.errors.connect + summary.errors.read \
         + summary.errors.write + summary.errors.timeout, latency:percentile(50), latency:percentile(99)))\n\
         end\n",
    );
    std::fs::write(script.path(), lua).expect("the script");
    let wrk = |duration: &str| -> Vec<u64> {
        let out = Command::new("wrk")
            .args([
                "-t1",
                &format!("-c{CONNECTIONS}"),
                &format!("-d{duration}"),
                "-s",
            ])
            .arg(script.path())
            .arg(&url)
            .output()
            .expect("wrk");
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|line| line.strip_prefix("toolcell-bench "))
            .unwrap_or_else(|| panic!("wrk printed no summary: {text}"))
            .split_whitespace()
            .map(|n| n.parse().expect("a number"))
            .collect()
    };
    wrk(WARMUP);
    let cpu_before = cpu_time(child.id());
    let store_before = redis.map(|redis| (redis.commands(), cpu_time(redis.child.id())));
    let run = wrk(RUN);
    let cpu = cpu_time(child.id()) - cpu_before;
    // The leases of the last calls are given back just after their answers.
    std::thread::sleep(Duration::from_millis(200));
    let store_after = redis.map(|redis| (redis.commands(), cpu_time(redis.child.id())));
    let _ = child.kill();
    let _ = child.wait();
    let (requests, duration_us, errors, p50_us, p99_us) = (run[0], run[1], run[2], run[3], run[4]);
    assert_eq!(errors, 0, "wrk saw errors (a refusal, or worse)");
    let calls = requests.max(1);
    Measured {
        p50_us,
        p99_us,
        per_second: requests as f64 / (duration_us as f64 / 1e6),
        cpu_per_call: cpu / u32::try_from(calls).unwrap_or(u32::MAX),
        store_commands_per_call: store_before
            .zip(store_after)
            .map(|((before, _), (after, _))| (after - before) as f64 / calls as f64),
        store_cpu_per_call: store_before
            .zip(store_after)
            .map(|((_, before), (_, after))| {
                (after - before) / u32::try_from(calls).unwrap_or(u32::MAX)
            }),
    }
}

fn main() {
    Command::new("wrk")
        .arg("--version")
        .output()
        .expect("wrk is needed: apt-get install wrk");
    let dir = tempfile::tempdir().expect("temp dir");
    let made = Command::new(binary())
        .args(["token", "bench"])
        .output()
        .expect("toolcell token");
    let printed = String::from_utf8(made.stdout).expect("UTF-8");
    let (token, table) = printed.split_once('\n').expect("token, then table");
    std::fs::write(dir.path().join("budget.toml"), format!("{table}\n{BUDGET}")).expect("tokens");
    std::fs::write(
        dir.path().join("bounded.toml"),
        format!("{table}\n{BOUNDED}"),
    )
    .expect("tokens");
    let redis = Redis::start();
    let runs = [
        (
            "daily budget, in the process",
            serve(dir.path(), "budget.toml", token, None),
        ),
        (
            "daily budget, --state",
            serve(dir.path(), "budget.toml", token, Some(&redis)),
        ),
        (
            "in_flight and budget, in the process",
            serve(dir.path(), "bounded.toml", token, None),
        ),
        (
            "in_flight and budget, --state",
            serve(dir.path(), "bounded.toml", token, Some(&redis)),
        ),
    ];
    println!(
        "| quota'd echo over HTTP ({CONNECTIONS} connections, wrk) | p50 | p99 | calls/s | server CPU per call | store round trips per call | store CPU per call |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (what, measured) in &runs {
        println!(
            "| {what} | {} µs | {} µs | {:.0} | {:.1} µs | {} | {} |",
            measured.p50_us,
            measured.p99_us,
            measured.per_second,
            measured.cpu_per_call.as_secs_f64() * 1e6,
            measured
                .store_commands_per_call
                .map_or("-".to_owned(), |commands| format!("{commands:.2}")),
            measured
                .store_cpu_per_call
                .map_or("-".to_owned(), |cpu| format!(
                    "{:.1} µs",
                    cpu.as_secs_f64() * 1e6
                )),
        );
    }
}
