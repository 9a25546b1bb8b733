//! `toolcell serve`, driven as an MCP client would: raw JSON-RPC over the child's stdio for
//! what must be measured exactly, and the real Python client (`mcp` from PyPI) in both eras.

use crate::support::{exclusive, toolcell_binary, tools_dir};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long a test waits for any one response before it fails.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(20);

/// A `toolcell serve` child, the lines it writes to stdout, and what it logs on stderr.
pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    stderr: std::thread::JoinHandle<String>,
}

impl Server {
    pub(crate) fn start(args: &[&str]) -> Server {
        Server::start_with_capabilities(args, json!({}))
    }

    /// A server whose client declared `capabilities` at `initialize`.
    pub(crate) fn start_with_capabilities(args: &[&str], capabilities: Value) -> Server {
        let mut child = crate::support::toolcell_command()
            .arg("serve")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start toolcell serve");
        let mut stderr = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut server = Server {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            stderr,
        };
        server.send(json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": capabilities,
                "clientInfo": { "name": "toolcell-tests", "version": "0" }
            }
        }));
        server.response(0);
        server.send(json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        server
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("write to the server");
        stdin.flush().expect("flush");
    }

    /// One line exactly as given (for what `json!` cannot write, such as a duplicate key).
    pub(crate) fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{line}").expect("write to the server");
        stdin.flush().expect("flush");
    }

    pub(crate) fn call(&mut self, id: i64, name: &str, arguments: Value) {
        self.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": name, "arguments": arguments }
        }));
    }

    /// The response with this id (every line read on the way is kept in `seen`).
    pub(crate) fn response(&mut self, id: i64) -> Value {
        if let Some(seen) = self
            .seen
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|message| message["id"] == id)
        {
            return seen;
        }
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no response {id}; saw {:?}", self.seen));
            self.seen.push(line.clone());
            let message: Value = serde_json::from_str(&line).expect("stdout carries only JSON");
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Wait for the next notification `method` the server sends (lines read on the way are kept
    /// in `seen`; one already seen and not yet awaited counts).
    pub(crate) fn notification(&mut self, method: &str) -> Value {
        let deadline = Instant::now() + RESPONSE_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {method}; saw {:?}", self.seen));
            self.seen.push(line.clone());
            let message: Value = serde_json::from_str(&line).expect("stdout carries only JSON");
            if message["method"] == method {
                return message;
            }
        }
    }

    /// Close stdin and wait for the server to exit; returns how long that took, whether it
    /// exited cleanly, every stdout line, and its stderr.
    pub(crate) fn close(mut self) -> (Duration, bool, Vec<String>, String) {
        drop(self.stdin.take());
        let closed = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                closed.elapsed() < RESPONSE_TIMEOUT,
                "the server did not exit"
            );
            std::thread::yield_now();
        };
        let took = closed.elapsed();
        self.seen.extend(self.lines.iter());
        let stderr = self.stderr.join().unwrap_or_default();
        (took, status.success(), self.seen, stderr)
    }
}

pub(crate) fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn a_legacy_session_lists_calls_and_refuses() {
    let mut server = Server::start(&[]);
    server.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
    let list = server.response(1);
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| tool["name"].as_str().unwrap_or_default())
        .collect();
    // The core tools in registry order (the embedded policy's), then the loop's own two.
    assert_eq!(
        names,
        [
            "clock",
            "edit_file",
            "glob",
            "grep",
            "list_dir",
            "read_file",
            "write_file",
            "find_tool",
            "call_tool"
        ]
    );
    assert_eq!(
        list["result"]["tools"][0]["annotations"]["readOnlyHint"],
        true
    );

    server.call(
        2,
        "call_tool",
        json!({ "name": "echo", "arguments": { "text": "hi" } }),
    );
    let echo = server.response(2);
    assert_eq!(text(&echo), "hi");
    assert_eq!(echo["result"]["isError"], false);

    server.call(3, "echo", json!({ "text": 7 }));
    let bad = server.response(3);
    assert_eq!(bad["result"]["isError"], true);
    assert!(text(&bad).contains("/text"), "{bad}");

    server.call(4, "no_such_tool", json!({}));
    assert_eq!(server.response(4)["error"]["code"], -32602);

    let (_, exited_cleanly, _, stderr) = server.close();
    assert!(exited_cleanly);
    // Refusing a bad call is the protocol's normal course, not something to log.
    assert_eq!(stderr, "", "serve is quiet by default");
}

/// With one instance slot, the call after a cancelled one can only run once the cancelled
/// instance has stopped: the time from the cancel to its answer bounds the stop.
#[test]
fn a_cancelled_call_stops_its_instance_at_once() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let dir = tools.path().to_str().expect("path");
    let mut server = Server::start(&["--tools", dir, "--pool-slots", "1"]);
    server.call(1, "echo", json!({ "text": "warm" }));
    server.response(1);

    server.call(2, "hostile", json!({ "do": "spin" }));
    // Give the call time to be well into its loop (this orders the test; it measures nothing).
    std::thread::sleep(Duration::from_millis(200));
    let cancelled_at = Instant::now();
    server.send(json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": 2, "reason": "the test gave up" }
    }));
    server.call(3, "echo", json!({ "text": "next" }));
    let next = server.response(3);
    let took = cancelled_at.elapsed();
    println!("the call after the cancel answered {took:?} after it");
    assert_eq!(text(&next), "next");
    assert!(
        took <= Duration::from_millis(10),
        "the next call waited {took:?} for the cancelled instance"
    );

    let (_, _, seen, _) = server.close();
    let answered_cancelled = seen
        .iter()
        .any(|line| serde_json::from_str::<Value>(line).is_ok_and(|message| message["id"] == 2));
    assert!(
        !answered_cancelled,
        "a cancelled request must get no response"
    );
}

/// A call read while nothing else is in flight runs where it was read (`transport/in_place.rs`),
/// and holds up nothing: a spinning call runs there, and the client's next call, read while it
/// spins, is answered at once, in parallel; the spinning one stops when cancelled, with no
/// answer.
#[test]
fn a_call_answered_in_place_holds_up_no_other() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let dir = tools.path().to_str().expect("path");
    let mut server = Server::start(&["--tools", dir]);
    server.call(1, "echo", json!({ "text": "warm" }));
    server.response(1);
    server.call(2, "hostile", json!({ "do": "spin" }));
    let sent = Instant::now();
    server.call(3, "echo", json!({ "text": "beside it" }));
    let beside = server.response(3);
    let took = sent.elapsed();
    assert_eq!(text(&beside), "beside it");
    println!("the call beside a spinning one answered in {took:?}");
    assert!(
        took < Duration::from_secs(2),
        "the next call waited {took:?} behind the spinning one"
    );
    server.send(json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": 2, "reason": "done" }
    }));
    server.call(4, "echo", json!({ "text": "after" }));
    assert_eq!(text(&server.response(4)), "after");
    let (_, _, seen, _) = server.close();
    assert!(
        !seen
            .iter()
            .any(|line| serde_json::from_str::<Value>(line).is_ok_and(|m| m["id"] == 2)),
        "a cancelled call in place gets no answer"
    );
}

#[test]
fn guest_output_never_reaches_the_servers_stdout() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let dir = tools.path().to_str().expect("path");
    let mut server = Server::start(&["--tools", dir]);
    server.call(1, "hostile", json!({ "do": "flood" }));
    assert_eq!(text(&server.response(1)), "flooded");
    server.call(2, "hostile", json!({ "do": "panic" }));
    assert_eq!(server.response(2)["result"]["isError"], true);
    let (took, exited_cleanly, seen, _) = server.close();
    assert!(exited_cleanly);
    assert!(
        took < Duration::from_secs(2),
        "exit took {took:?} after stdin closed"
    );
    for line in &seen {
        let message: Value = serde_json::from_str(line).expect("only JSON on stdout");
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        assert!(
            !line.contains("HOSTILE-FLOOD-HOSTILE"),
            "guest output on stdout"
        );
    }
}

/// The Python virtual environment with the `mcp` client, made on first use under `target/`
/// (`.ci/run` makes it before the tests).
pub(crate) fn python_with_mcp() -> std::path::PathBuf {
    let venv = crate::support::python_venv("mcp-venv", "mcp>=2.3,<3", |venv| {
        Command::new(venv.join("bin/python"))
            // Everything the client imports: an interrupted install can leave `mcp` without
            // its dependencies.
            .args(["-c", "import anyio, mcp"])
            .status()
            .is_ok_and(|status| status.success())
    });
    venv.join("bin/python")
}

/// Run the Python client `script` (in `tests/mcp/`) with `args`, handing on the tests' compile
/// cache (the SDK starts a stdio server with a few variables only), and print what it said.
/// Whether it passed every check (it exits 0 and says `client: all checks passed`), and its
/// output for a failure's message.
pub(crate) fn run_client(
    script: &str,
    args: impl IntoIterator<Item = impl AsRef<std::ffi::OsStr>>,
) -> (bool, String) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mcp")
        .join(script);
    let (cache, key) = crate::support::test_cache();
    let output = Command::new(python_with_mcp())
        .env(toolcell::cache::CACHE_DIR_ENV, cache)
        .env(toolcell::cache::CACHE_KEY_ENV, key)
        // The scripts import their shared checks (`tests/mcp/checks.py`): no bytecode cache
        // written into the source tree.
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .arg(&script)
        .args(args)
        .output()
        .expect("run the client");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    let passed = output.status.success() && stdout.contains("client: all checks passed");
    (passed, format!("{stdout}\n{stderr}"))
}

#[test]
fn the_python_mcp_client_passes_in_both_eras() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    for mode in ["auto", "legacy"] {
        let audit = tools.path().join(format!("audit-{mode}.jsonl"));
        let (passed, said) = run_client(
            "client.py",
            [
                toolcell_binary().as_os_str(),
                tools.path().as_os_str(),
                audit.as_os_str(),
                mode.as_ref(),
            ],
        );
        assert!(passed, "{mode}: {said}");

        // Every call that reached the pipeline has one well-formed audit line (in the order
        // the calls ended: the call after the cancel may end first).
        let lines: Vec<Value> = std::fs::read_to_string(&audit)
            .expect("audit")
            .lines()
            .map(|line| serde_json::from_str(line).expect("whole JSON line"))
            .collect();
        let mut outcomes: Vec<&str> = lines
            .iter()
            .map(|line| line["outcome"].as_str().unwrap_or_default())
            .collect();
        outcomes.sort_unstable();
        assert_eq!(
            outcomes,
            ["cancelled", "failed", "result", "result", "result"],
            "{mode}"
        );
        let cancelled = lines
            .iter()
            .find(|line| line["outcome"] == "cancelled")
            .expect("the cancelled call");
        assert!(
            cancelled["duration_us"].as_u64().unwrap_or(u64::MAX) < 1_000_000,
            "{mode}: the cancelled call ran for {cancelled}"
        );
    }
}

/// A guest receives the arguments the pipeline validated, written out again from the checked
/// value, never the client's own text: a duplicate key (which another parser may read first)
/// cannot slip a value past the schema. Over MCP, by the transport's fast path (the
/// arguments stay raw text until the pipeline's one parse) and by rmcp's parse (a field the
/// fast path does not take), and in process.
#[test]
pub(crate) fn mirror() {
    let tools = tools_dir(&[("mirror", crate::guests::MIRROR)]);
    let mut server = Server::start(&["--tools", tools.path().to_str().expect("path")]);
    let call = |id: u32, arguments: &str, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"mirror","arguments":{arguments}{extra}}}}}"#
        )
    };
    for (id, extra) in [(1, ""), (3, r#","requestState":"x""#)] {
        // The schema allows 4 characters: the first value is too long, the last (what the
        // validator reads) is not, and it is all the guest sees.
        server.send_raw(&call(
            id,
            r#"{ "text" : "far too long", "text": "ok" }"#,
            extra,
        ));
        let answer = server.response(id.into());
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        assert_eq!(text(&answer), r#"{"text":"ok"}"#);
        // The other way round, the value the validator reads is refused.
        server.send_raw(&call(
            id + 1,
            r#"{"text":"ok","text":"far too long"}"#,
            extra,
        ));
        let answer = server.response((id + 1).into());
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        assert!(text(&answer).contains("longer than 4"), "{answer}");
    }
    let (_, clean, _, stderr) = server.close();
    assert!(clean, "{stderr}");

    let runtime = crate::support::builder()
        .component("test:mirror", crate::guests::MIRROR)
        .build()
        .expect("the runtime builds");
    let report = runtime.run_blocking(&toolcell::Call::new(
        "1",
        "mirror",
        "{\"text\":\"far too long\",\n \"text\":\"\\u006f\\u006b\"}",
    ));
    assert_eq!(
        report.response,
        toolcell::ToolResponse::text(r#"{"text":"ok"}"#)
    );
}

/// The size limit on arguments gives the same answer whichever way the transport parsed the
/// call: arguments padded past 1 MiB with whitespace are not refused for it (written out
/// again they are small), and arguments under 1 MiB as sent that grow past it written out
/// again (`1e5` becomes `100000.0`) are refused on both paths.
#[test]
fn the_argument_size_limit_is_measured_alike_on_both_parse_paths() {
    let mut server = Server::start(&[]);
    let padded = format!(r#"{{"text":"hi"{}}}"#, " ".repeat(1 << 20));
    let floats = format!(r#"{{"text":"hi","a":[{}1e5]}}"#, "1e5,".repeat(250_000));
    assert!(floats.len() < 1 << 20);
    let call = |id: u32, arguments: &str, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{arguments}{extra}}}}}"#
        )
    };
    // The second of each pair takes rmcp's parse (a field the fast path does not take).
    for (id, extra) in [(1, ""), (3, r#","requestState":"x""#)] {
        server.send_raw(&call(id, &padded, extra));
        let answer = server.response(id.into());
        assert_eq!(text(&answer), "hi", "{answer}");
        server.send_raw(&call(id + 1, &floats, extra));
        let answer = server.response((id + 1).into());
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        assert!(
            text(&answer).contains("a call may carry at most"),
            "{answer}"
        );
    }
    let (_, clean, _, stderr) = server.close();
    assert!(clean, "{stderr}");
}

/// Requests from a file (not a pipe) and answers to a file: the transport falls back to
/// tokio's blocking stdio, answers each request, and exits at the end of the input.
#[test]
fn requests_from_a_file_are_answered_through_the_fallback_transport() {
    let dir = tempfile::tempdir().expect("temp dir");
    let requests = dir.path().join("requests.jsonl");
    let lines = [
        json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": { "name": "toolcell-tests", "version": "0" }
            }
        }),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": { "name": "echo", "arguments": { "text": "from a file" } }
        }),
    ];
    let text_of_requests: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&requests, text_of_requests).expect("write the requests");
    let answers = dir.path().join("answers.jsonl");
    let status = crate::support::toolcell_command()
        .arg("serve")
        .stdin(std::fs::File::open(&requests).expect("open the requests"))
        .stdout(std::fs::File::create(&answers).expect("create the answers"))
        .stderr(Stdio::null())
        .status()
        .expect("run toolcell serve");
    assert!(status.success(), "{status}");
    let answered = std::fs::read_to_string(&answers).expect("read the answers");
    let echo = answered
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("only JSON"))
        .find(|message| message["id"] == 1)
        .unwrap_or_else(|| panic!("no answer to the call in {answered}"));
    assert_eq!(text(&echo), "from a file");
}

/// Over MCP, a headless gated write is `approval_required` and a deadline is a timeout, both
/// results with `isError: true` and a text that says which; the tools carry the hints their
/// flags give.
#[test]
fn denials_and_timeouts_are_errors_the_model_can_read_and_tools_carry_hints() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let workspace = tempfile::tempdir().expect("workspace");
    let policy = tools.path().join("policy.toml");
    let mut text_of_policy = toolcell::policy::DEFAULT_POLICY.to_owned();
    text_of_policy.push_str("\n[tools.hostile]\nlimits = { timeout_ms = 100 }\n");
    std::fs::write(&policy, text_of_policy).expect("write the policy");
    let mut server = Server::start(&[
        "--tools",
        tools.path().to_str().expect("path"),
        "--workspace",
        workspace.path().to_str().expect("path"),
        "--policy",
        policy.to_str().expect("path"),
    ]);

    server.send(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }));
    let list = server.response(1);
    let hints = |name: &str| {
        list["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|tool| tool["name"] == name)
            .map(|tool| tool["annotations"].clone())
            .unwrap_or_else(|| panic!("{name} not listed: {list}"))
    };
    assert_eq!(hints("read_file")["readOnlyHint"], true);
    assert_eq!(hints("read_file")["destructiveHint"], false);
    assert_eq!(hints("write_file")["readOnlyHint"], false);
    assert_eq!(hints("write_file")["destructiveHint"], true);
    assert_eq!(hints("find_tool")["readOnlyHint"], true);
    assert_eq!(
        hints("call_tool"),
        Value::Null,
        "call_tool is whatever it calls"
    );

    server.call(
        2,
        "write_file",
        json!({ "path": "new.txt", "content": "x" }),
    );
    let denied = server.response(2);
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(
        text(&denied).contains("needs a person's approval, and none can be asked here"),
        "{denied}"
    );
    assert!(!workspace.path().join("new.txt").exists());

    server.call(
        3,
        "call_tool",
        json!({ "name": "hostile", "arguments": { "do": "spin" } }),
    );
    let timed_out = server.response(3);
    assert_eq!(timed_out["result"]["isError"], true, "{timed_out}");
    assert!(text(&timed_out).contains("100 ms deadline"), "{timed_out}");

    let (_, exited_cleanly, _, _) = server.close();
    assert!(exited_cleanly);
}

/// The policy of the approval tests: write_file gated, with a deadline short enough that "no
/// answer in time" is quick to reach (`tests/mcp/approvals.py`'s `DEADLINE_S`).
pub(crate) const GATED_WRITES: &str = "[tools.write_file]\ncore = true\n\
    filesystem.write = { access = \"gated\", roots = [\".\"] }\nlimits = { timeout_ms = 1500 }\n";

/// A person decides gated calls from a real MCP client over stdio, in both eras: approve once
/// (written), always (the next call is not asked, the rule is saved), deny, decline and
/// dismiss (nothing written), an answer after the deadline (nothing written), and a client
/// that declared no elicitation (approval_required, as before).
#[test]
fn a_person_approves_gated_calls_from_the_mcp_client_in_both_eras() {
    let _guard = exclusive();
    for mode in ["auto", "legacy"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir(&workspace).expect("workspace");
        let policy = dir.path().join("policy.toml");
        std::fs::write(&policy, GATED_WRITES).expect("policy");
        let (passed, said) = run_client(
            "approvals.py",
            [
                "stdio".as_ref(),
                toolcell_binary().as_os_str(),
                policy.as_os_str(),
                workspace.as_os_str(),
                mode.as_ref(),
            ],
        );
        assert!(passed, "{mode}: {said}");
        // The saved rule is the one approved, and only it.
        let saved = std::fs::read_to_string(workspace.join(toolcell::approval::PERMISSIONS_FILE))
            .expect("the saved rules");
        assert!(saved.contains("always.txt"), "{saved}");
        assert!(!saved.contains("once.txt"), "{saved}");
    }
}

/// The tasks extension, as a client declares it (SEP-2663).
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A call that runs longer than a moment tells a client that sent a progress token that it
/// started and that it is done (in order, counting up); a quick call sends nothing.
#[test]
fn a_long_call_reports_progress_and_a_quick_one_does_not() {
    let tools = crate::support::tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let mut server = Server::start(&["--tools", &tools.path().to_string_lossy()]);
    let call = |id: i64, sleep_ms: u64, token: &str| {
        json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {
                "name": "structured",
                "arguments": { "a": 1, "b": 2, "sleep_ms": sleep_ms },
                "_meta": { "progressToken": token }
            }
        })
    };
    server.send(call(1, 1500, "slow"));
    let answer = server.response(1);
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({ "sum": 3 }),
        "{answer}"
    );
    server.send(call(2, 0, "quick"));
    server.response(2);
    let progress: Vec<Value> = server
        .seen
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message["method"] == "notifications/progress")
        .map(|message| message["params"].clone())
        .collect();
    let messages: Vec<&str> = progress
        .iter()
        .filter(|params| params["progressToken"] == "slow")
        .filter_map(|params| params["message"].as_str())
        .collect();
    assert_eq!(messages.first(), Some(&"started"), "{progress:?}");
    assert_eq!(messages.last(), Some(&"done"), "{progress:?}");
    assert!(
        messages.len() >= 3,
        "a 1.5 s call also reports that it runs: {progress:?}"
    );
    let counts: Vec<f64> = progress
        .iter()
        .filter_map(|params| params["progress"].as_f64())
        .collect();
    assert!(
        counts.windows(2).all(|pair| pair[0] < pair[1]),
        "{counts:?}"
    );
    assert!(
        progress
            .iter()
            .all(|params| params["progressToken"] != "quick"),
        "{progress:?}"
    );
    // The done notification precedes the answer.
    let order: Vec<usize> = ["\"done\"", "\"id\":1,"]
        .iter()
        .map(|needle| {
            server
                .seen
                .iter()
                .position(|line| line.contains(needle))
                .expect("seen")
        })
        .collect();
    assert!(order[0] < order[1], "{:?}", server.seen);
    server.close();
}

/// A client that declared the tasks extension gets a task for a call that runs longer than a
/// moment: polled while working, completed with its (structured) result; a task cancelled
/// stops its instance at once; a quick call is answered directly.
#[test]
fn long_calls_become_tasks_that_can_be_polled_cancelled_and_completed() {
    let tools = crate::support::tools_dir(&[
        ("structured", crate::guests::STRUCTURED),
        ("hostile", crate::guests::HOSTILE),
    ]);
    let mut server = Server::start_with_capabilities(
        &["--tools", &tools.path().to_string_lossy()],
        json!({ "extensions": { TASKS: {} } }),
    );
    let get = |server: &mut Server, id: i64, task: &str| -> Value {
        server.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tasks/get", "params": { "taskId": task }
        }));
        server.response(id)["result"].clone()
    };
    // Poll `task` (request ids from `first`, at most 200 polls `pause` apart) until it is no
    // longer working.
    let settle = |server: &mut Server, first: i64, task: &str, pause: Duration| -> Value {
        for id in first..first + 200 {
            let state = get(server, id, task);
            if state["status"] != "working" {
                return state;
            }
            std::thread::sleep(pause);
        }
        panic!("task {task} never ended");
    };

    server.call(1, "structured", json!({ "a": 1, "b": 1 }));
    let quick = server.response(1);
    assert_eq!(
        quick["result"]["structuredContent"],
        json!({ "sum": 2 }),
        "{quick}"
    );

    server.call(2, "structured", json!({ "a": 2, "b": 3, "sleep_ms": 2500 }));
    let created = server.response(2);
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {created}"))
        .to_owned();
    let working = get(&mut server, 3, &task);
    assert_eq!(working["status"], "working", "{working}");
    let done = settle(&mut server, 4, &task, Duration::from_millis(100));
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"],
        json!({ "sum": 5 }),
        "{done}"
    );

    server.call(300, "hostile", json!({ "do": "spin" }));
    let created = server.response(300);
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {created}"))
        .to_owned();
    let cancelled_at = Instant::now();
    server.send(json!({
        "jsonrpc": "2.0", "id": 301, "method": "tasks/cancel", "params": { "taskId": task }
    }));
    let acknowledged = server.response(301);
    assert!(acknowledged.get("error").is_none(), "{acknowledged}");
    let state = settle(&mut server, 302, &task, Duration::from_millis(20));
    assert_eq!(state["status"], "cancelled", "{state}");
    assert!(
        cancelled_at.elapsed() < Duration::from_secs(3),
        "the spinning instance stopped at the cancel, well before its 5 s deadline"
    );
    // An unknown task is invalid params.
    server.send(json!({
        "jsonrpc": "2.0", "id": 600, "method": "tasks/get", "params": { "taskId": "nope" }
    }));
    assert_eq!(server.response(600)["error"]["code"], -32602);
    server.close();
}
