//! Attacks on the stdio call answered in place (`runtime/mcp/src/transport/in_place.rs`,
//! `transport/mod.rs`): each test drives `toolcell serve` as a hostile client would, and most
//! compare what the server does with the lane on (the default) and off
//! (`TOOLCELL_STDIO_IN_PLACE=0`, every call through rmcp).

use crate::support::{exclusive, tools_dir};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long any one wait for the server lasts before the test fails.
const WAIT: Duration = Duration::from_secs(20);

/// The tasks extension, as a client declares it (SEP-2663).
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Whether the lane is on.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lane {
    InPlace,
    Rmcp,
}

/// A `toolcell serve` child with a client whose reading can be paused.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
    /// `true` while the client reads stdout.
    reading: Arc<(Mutex<bool>, Condvar)>,
}

impl Proc {
    fn start(lane: Lane, args: &[&str], capabilities: Value) -> Proc {
        let mut proc = Proc::spawn(lane, args);
        proc.send(&json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": capabilities,
                "clientInfo": { "name": "inplace-attacks", "version": "0" }
            }
        }));
        proc.response(&json!(0));
        proc.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        proc
    }

    fn spawn(lane: Lane, args: &[&str]) -> Proc {
        let mut command = crate::support::toolcell_command();
        command.arg("serve").args(args);
        match lane {
            Lane::InPlace => command.env_remove("TOOLCELL_STDIO_IN_PLACE"),
            Lane::Rmcp => command.env("TOOLCELL_STDIO_IN_PLACE", "0"),
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start toolcell serve");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = mpsc::channel();
        let reading = Arc::new((Mutex::new(true), Condvar::new()));
        let gate = Arc::clone(&reading);
        std::thread::spawn(move || {
            let mut stdout = BufReader::with_capacity(1024, stdout);
            loop {
                {
                    let (open, changed) = &*gate;
                    let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
                    while !*open {
                        open = changed.wait(open).unwrap_or_else(|e| e.into_inner());
                    }
                }
                let mut line = String::new();
                match stdout.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if sender.send(line.trim_end().to_owned()).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let stdin = child.stdin.take();
        Proc {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            reading,
        }
    }

    /// A session opened without `initialize`: its first request (`tools/list`) carries the
    /// 2026-07-28 metadata inline.
    fn start_inline(lane: Lane, args: &[&str]) -> Proc {
        let mut proc = Proc::spawn(lane, args);
        proc.send(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": { "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": { "name": "inplace-attacks", "version": "0" },
                "io.modelcontextprotocol/clientCapabilities": {}
            } }
        }));
        let listed = proc.response(&json!(1));
        assert!(listed["result"]["tools"].is_array(), "{listed}");
        proc
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&format!("{message}\n"));
    }

    /// Bytes exactly as given, in one write.
    fn send_raw(&mut self, bytes: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes.as_bytes()).expect("write");
        stdin.flush().expect("flush");
    }

    fn call(&mut self, id: i64, name: &str, arguments: Value) {
        self.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": name, "arguments": arguments }
        }));
    }

    fn pause_reading(&self, paused: bool) {
        let (open, changed) = &*self.reading;
        *open.lock().unwrap_or_else(|e| e.into_inner()) = !paused;
        changed.notify_all();
    }

    /// The next line the server writes, within `WAIT`.
    fn next_line(&mut self) -> String {
        let line = self
            .lines
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("nothing more from the server; saw {:?}", self.seen));
        self.seen.push(line.clone());
        line
    }

    /// The raw line of the response with this id.
    fn response_line(&mut self, id: &Value) -> String {
        if let Some(line) = self.seen.iter().find(|line| {
            serde_json::from_str::<Value>(line)
                .is_ok_and(|m| &m["id"] == id && m["method"].is_null())
        }) {
            return line.clone();
        }
        loop {
            let line = self.next_line();
            let message: Value = serde_json::from_str(&line).expect("JSON on stdout");
            if &message["id"] == id && message["method"].is_null() {
                return line;
            }
        }
    }

    fn response(&mut self, id: &Value) -> Value {
        serde_json::from_str(&self.response_line(id)).expect("JSON")
    }

    /// The next request the server sends its client with this method.
    fn request_from_server(&mut self, method: &str) -> Value {
        loop {
            let line = self.next_line();
            let message: Value = serde_json::from_str(&line).expect("JSON on stdout");
            if message["method"] == method && !message["id"].is_null() {
                return message;
            }
        }
    }

    /// Close stdin; how long the server took to exit, if it did within `limit` (else it is
    /// killed). Every line it wrote is in `seen` afterwards.
    fn close_within(&mut self, limit: Duration) -> Option<Duration> {
        drop(self.stdin.take());
        let closed = Instant::now();
        let exited = loop {
            if self.child.try_wait().expect("wait").is_some() {
                break Some(closed.elapsed());
            }
            if closed.elapsed() > limit {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.pause_reading(false);
        // The reader ends at the end of stdout, now that the child has exited.
        while let Ok(line) = self.lines.recv_timeout(WAIT) {
            self.seen.push(line);
        }
        exited
    }

    /// Every message with this id that is a response (not a request of the server's).
    fn responses_to(&self, id: &Value) -> Vec<Value> {
        self.seen
            .iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|m| &m["id"] == id && m["method"].is_null())
            .collect()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Only this test's own child.
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

/// The default policy and `extra`, written beside the tools.
fn policy_with(dir: &std::path::Path, extra: &str) -> std::path::PathBuf {
    let policy = dir.join("policy.toml");
    let mut text = toolcell::policy::DEFAULT_POLICY.to_owned();
    text.push('\n');
    text.push_str(extra);
    std::fs::write(&policy, text).expect("write the policy");
    policy
}

/// stdin closes while a call runs in place. Through rmcp, the session drains answers for at
/// most 5 s, then cancels what still runs and exits; in place, `fill` awaits the call to its
/// end with no bound and no cancellation, so the server outlives its client by the tool's
/// whole deadline (here a minute; an operator may set hours), and a call waiting on an
/// approval the departed client will never give waits for its deadline too.
#[test]
fn stdin_closing_while_a_call_runs_in_place_ends_the_session_as_rmcp_does() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let policy = policy_with(
        tools.path(),
        "[tools.hostile]\nlimits = { timeout_ms = 60000 }\n",
    );
    let dir = tools.path().to_str().expect("path").to_owned();
    let policy = policy.to_str().expect("path").to_owned();
    let mut took = Vec::new();
    for lane in [Lane::Rmcp, Lane::InPlace] {
        let mut server = Proc::start(lane, &["--tools", &dir, "--policy", &policy], json!({}));
        server.call(1, "echo", json!({ "text": "warm" }));
        server.response(&json!(1));
        server.call(2, "hostile", json!({ "do": "spin" }));
        let exited = server.close_within(Duration::from_secs(15));
        took.push((lane, exited));
    }
    println!("exit after stdin closed: {took:?}");
    for (lane, exited) in took {
        assert!(
            exited.is_some(),
            "{lane:?}: the server did not exit within 15 s of its client closing stdin \
             (a 60 s call kept it)"
        );
    }
}

/// A session-era call whose `_meta` carries the client's capabilities
/// (`io.modelcontextprotocol/clientCapabilities`, no protocol version): rmcp's handler reads
/// them (`RequestContext::client_capabilities`: the request's, else `initialize`'s); the call
/// in place reads only `initialize`'s (`in_place.rs`: `peer.peer_info()`). A tool the operator
/// runs only as a task must be answered alike on both lanes.
#[test]
fn capabilities_in_a_calls_meta_are_read_alike_in_place_and_through_rmcp() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let policy = policy_with(
        tools.path(),
        "[tools.hostile]\ntask = { support = \"required\", after_ms = 0 }\n",
    );
    let dir = tools.path().to_str().expect("path").to_owned();
    let policy = policy.to_str().expect("path").to_owned();
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {
            "name": "hostile",
            "arguments": { "do": "nothing" },
            "_meta": {
                "io.modelcontextprotocol/clientCapabilities": { "extensions": { TASKS: {} } }
            }
        }
    });
    let mut shapes = Vec::new();
    for lane in [Lane::Rmcp, Lane::InPlace] {
        let mut server = Proc::start(lane, &["--tools", &dir, "--policy", &policy], json!({}));
        server.call(1, "echo", json!({ "text": "warm" }));
        server.response(&json!(1));
        server.send(&call);
        let answer = server.response(&json!(2));
        let shape = (
            answer["error"]["code"].clone(),
            answer["result"]["resultType"].clone(),
        );
        println!("{lane:?}: {answer}");
        shapes.push(shape);
        server.close_within(WAIT);
    }
    assert_eq!(
        shapes[0], shapes[1],
        "the same call is answered differently in place (second) and through rmcp (first)"
    );
}

/// The same requests, one at a time (each read while nothing else is in flight, so each runs
/// in place on that lane), answered with the same bytes on both lanes: an unknown tool,
/// arguments the schema refuses, a tool error, a progress token, a gated write with no one
/// to ask, a call with no arguments, a string id.
#[test]
fn answers_in_place_are_byte_for_byte_rmcps() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let workspace = tempfile::tempdir().expect("workspace");
    // The default policy gates write_file.
    let policy = policy_with(tools.path(), "");
    let dir = tools.path().to_str().expect("path").to_owned();
    let policy = policy.to_str().expect("path").to_owned();
    let ws = workspace.path().to_str().expect("path").to_owned();
    let call = |id: Value, params: Value| json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
    let requests = [
        call(
            json!(1),
            json!({ "name": "echo", "arguments": { "text": "warm" } }),
        ),
        call(json!(2), json!({ "name": "no_such_tool", "arguments": {} })),
        call(
            json!(3),
            json!({ "name": "echo", "arguments": { "text": 5 } }),
        ),
        call(
            json!(4),
            json!({ "name": "hostile", "arguments": { "do": "nothing" } }),
        ),
        call(
            json!(5),
            json!({ "name": "echo", "arguments": { "text": "p" }, "_meta": { "progressToken": "t" } }),
        ),
        call(
            json!(6),
            json!({ "name": "write_file", "arguments": { "path": "x.txt", "content": "x" } }),
        ),
        call(json!(7), json!({ "name": "echo" })),
        call(
            json!("s-8"),
            json!({ "name": "echo", "arguments": { "text": "string id" } }),
        ),
        call(
            json!(9),
            json!({ "name": "hostile", "arguments": { "do": "panic" } }),
        ),
        call(
            json!(10),
            json!({ "name": "echo", "arguments": "not an object" }),
        ),
    ];
    let mut answers: Vec<Vec<String>> = Vec::new();
    for lane in [Lane::Rmcp, Lane::InPlace] {
        let mut server = Proc::start(
            lane,
            &["--tools", &dir, "--policy", &policy, "--workspace", &ws],
            json!({}),
        );
        let mut lines = Vec::new();
        for request in &requests {
            server.send(request);
            lines.push(server.response_line(&request["id"]));
        }
        server.close_within(WAIT);
        answers.push(lines);
    }
    let differ: Vec<String> = answers[0]
        .iter()
        .zip(&answers[1])
        .filter(|(rmcp, in_place)| rmcp != in_place)
        .map(|(rmcp, in_place)| format!("rmcp:     {rmcp}\nin place: {in_place}"))
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} answers differ in place:\n{}",
        differ.len(),
        requests.len(),
        differ.join("\n")
    );
}

/// A session opened without `initialize` (the inline lifecycle: the first request carries the
/// 2026-07-28 metadata), then a `tools/call` with no `_meta`: rmcp refuses it (every request of
/// such a session must carry its protocol version and capabilities), so the call never runs.
/// In place, a call whose `_meta` names no protocol version is taken as a session's and run.
#[test]
fn a_call_without_metadata_in_an_inline_session_is_refused_in_place_as_by_rmcp() {
    let _guard = exclusive();
    let workspace = tempfile::tempdir().expect("workspace");
    let ws = workspace.path().to_str().expect("path").to_owned();
    let mut answers = Vec::new();
    for lane in [Lane::Rmcp, Lane::InPlace] {
        let mut server = Proc::start_inline(lane, &["--workspace", &ws]);
        server.send(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": "echo", "arguments": { "text": "no metadata" } }
        }));
        let answer = server.response(&json!(2));
        println!("{lane:?}: {answer}");
        answers.push(answer);
        server.close_within(WAIT);
    }
    assert!(
        answers[0]["error"].is_object(),
        "rmcp refuses it: {}",
        answers[0]
    );
    assert_eq!(
        answers[1]["error"], answers[0]["error"],
        "in place, the call rmcp refuses was answered: {}",
        answers[1]
    );
}

/// An approval asked through the session by a call in place: the question reaches the client,
/// its answer (declined) reaches the call, and the call's answer is rmcp's, byte for byte.
#[test]
fn an_approval_asked_by_a_call_in_place_is_answered_as_through_rmcp() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let workspace = tempfile::tempdir().expect("workspace");
    // The default policy gates write_file.
    let policy = policy_with(tools.path(), "");
    let dir = tools.path().to_str().expect("path").to_owned();
    let policy = policy.to_str().expect("path").to_owned();
    let ws = workspace.path().to_str().expect("path").to_owned();
    let mut answers = Vec::new();
    for lane in [Lane::Rmcp, Lane::InPlace] {
        let mut server = Proc::start(
            lane,
            &["--tools", &dir, "--policy", &policy, "--workspace", &ws],
            json!({ "elicitation": {} }),
        );
        server.call(1, "echo", json!({ "text": "warm" }));
        server.response(&json!(1));
        server.call(2, "write_file", json!({ "path": "x.txt", "content": "x" }));
        let asked = server.request_from_server("elicitation/create");
        server.send(&json!({
            "jsonrpc": "2.0", "id": asked["id"], "result": { "action": "decline" }
        }));
        answers.push(server.response_line(&json!(2)));
        // The session goes on.
        server.call(3, "echo", json!({ "text": "after" }));
        assert_eq!(text(&server.response(&json!(3))), "after");
        assert!(server.close_within(WAIT).is_some());
    }
    assert!(!workspace.path().join("x.txt").exists());
    assert_eq!(
        answers[0], answers[1],
        "the declined call answered differently in place"
    );
}

/// A call in place cancelled, and its id used again at once by the next call (in the same
/// write): the cancelled call gets no answer, the new one exactly one, its own.
#[test]
fn a_cancelled_call_in_place_whose_id_is_reused_gets_one_answer_the_new_ones() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let dir = tools.path().to_str().expect("path").to_owned();
    let mut server = Proc::start(Lane::InPlace, &["--tools", &dir], json!({}));
    server.call(1, "echo", json!({ "text": "warm" }));
    server.response(&json!(1));
    server.call(7, "hostile", json!({ "do": "spin" }));
    // A request the server answers after it has read the call: the call is in place by then.
    server.send(&json!({ "jsonrpc": "2.0", "id": 100, "method": "ping" }));
    server.response(&json!(100));
    let cancel = json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": { "requestId": 7, "reason": "reused" }
    });
    let again = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": "echo", "arguments": { "text": "the second 7" } }
    });
    server.send_raw(&format!("{cancel}\n{again}\n"));
    let answer = server.response(&json!(7));
    assert_eq!(text(&answer), "the second 7", "{answer}");
    // Something after, so that a late second answer to 7 would be seen before it.
    server.call(8, "echo", json!({ "text": "after" }));
    server.response(&json!(8));
    assert!(server.close_within(WAIT).is_some());
    let sevens = server.responses_to(&json!(7));
    assert_eq!(sevens.len(), 1, "answers to id 7: {sevens:?}");
}

/// Cancellations racing the answers of quick calls in place: every call gets at most one
/// answer, a cancelled one none or one (never two), and the session goes on.
#[test]
fn cancellations_racing_answers_in_place_never_duplicate_an_answer() {
    let _guard = exclusive();
    let mut server = Proc::start(Lane::InPlace, &[], json!({}));
    server.call(1, "echo", json!({ "text": "warm" }));
    server.response(&json!(1));
    for id in 10..60 {
        server.call(id, "echo", json!({ "text": format!("call {id}") }));
        server.send(&json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": id }
        }));
    }
    server.call(99, "echo", json!({ "text": "last" }));
    assert_eq!(text(&server.response(&json!(99))), "last");
    assert!(server.close_within(WAIT).is_some());
    for id in 10..60 {
        let answers = server.responses_to(&json!(id));
        assert!(
            answers.len() <= 1,
            "id {id} answered {} times",
            answers.len()
        );
        if let Some(answer) = answers.first() {
            assert_eq!(text(answer), format!("call {id}"), "{answer}");
        }
    }
}

/// A client that stops reading while calls are answered in place, then reads again: every
/// answer arrives once, whole and its own (the in-place write's partial writes spliced back in
/// order), none lost.
#[test]
fn answers_in_place_to_a_client_that_stops_reading_are_neither_lost_nor_torn() {
    let _guard = exclusive();
    let mut server = Proc::start(Lane::InPlace, &[], json!({}));
    server.call(1, "echo", json!({ "text": "warm" }));
    server.response(&json!(1));
    server.pause_reading(true);
    // Far more than a pipe holds, one call at a time as the server reads them.
    let big = "y".repeat(48 * 1024);
    let ids: Vec<i64> = (100..140).collect();
    for id in &ids {
        server.call(*id, "echo", json!({ "text": format!("{id}:{big}") }));
    }
    server.pause_reading(false);
    for id in &ids {
        let answer = server.response(&json!(id));
        assert_eq!(text(&answer), format!("{id}:{big}"), "id {id}");
    }
    assert!(server.close_within(WAIT).is_some());
    for id in &ids {
        assert_eq!(server.responses_to(&json!(id)).len(), 1, "id {id}");
    }
}

/// stdin closes right after a quick call is read (the call and the end of input together):
/// the call in place is still answered before the session ends.
#[test]
fn a_call_in_place_read_just_before_stdin_closes_is_answered() {
    let _guard = exclusive();
    for round in 0..5 {
        let mut server = Proc::start(Lane::InPlace, &[], json!({}));
        server.call(1, "echo", json!({ "text": "warm" }));
        server.response(&json!(1));
        server.call(2, "echo", json!({ "text": "last words" }));
        assert!(server.close_within(WAIT).is_some(), "round {round}");
        let answers = server.responses_to(&json!(2));
        assert_eq!(answers.len(), 1, "round {round}: {:?}", server.seen);
        assert_eq!(text(&answers[0]), "last words");
    }
}

/// A line over the limit (16 MiB), written in pieces while a call runs in place: dropped, the
/// call answered, and the request after it read.
#[test]
fn a_huge_line_after_a_call_in_place_is_dropped_and_the_session_goes_on() {
    let _guard = exclusive();
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let dir = tools.path().to_str().expect("path").to_owned();
    let mut server = Proc::start(Lane::InPlace, &["--tools", &dir], json!({}));
    server.call(1, "echo", json!({ "text": "warm" }));
    server.response(&json!(1));
    server.call(2, "structured", json!({ "a": 1, "b": 2, "sleep_ms": 300 }));
    let chunk = " ".repeat(1024 * 1024);
    for _ in 0..17 {
        server.send_raw(&chunk);
    }
    server.send_raw("\n");
    server.call(3, "echo", json!({ "text": "after the huge line" }));
    let two = server.response(&json!(2));
    assert_eq!(
        two["result"]["structuredContent"],
        json!({ "sum": 3 }),
        "{two}"
    );
    assert_eq!(text(&server.response(&json!(3))), "after the huge line");
    assert!(server.close_within(WAIT).is_some());
}

/// A call in place whose progress is asked for: every progress notification precedes its
/// answer, and none follows it (a notification for a request already answered is one a client
/// must not get).
#[test]
fn progress_of_a_call_in_place_never_follows_its_answer() {
    let _guard = exclusive();
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let dir = tools.path().to_str().expect("path").to_owned();
    let mut server = Proc::start(Lane::InPlace, &["--tools", &dir], json!({}));
    server.call(1, "echo", json!({ "text": "warm" }));
    server.response(&json!(1));
    for id in 2..5 {
        server.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {
                "name": "structured",
                "arguments": { "a": 1, "b": id, "sleep_ms": 1200 },
                "_meta": { "progressToken": format!("p{id}") }
            }
        }));
        server.response(&json!(id));
    }
    server.call(9, "echo", json!({ "text": "after" }));
    server.response(&json!(9));
    assert!(server.close_within(WAIT).is_some());
    for id in 2..5 {
        let token = format!("p{id}");
        let answered = server
            .seen
            .iter()
            .position(|line| {
                serde_json::from_str::<Value>(line)
                    .is_ok_and(|m| m["id"] == id && m["method"].is_null())
            })
            .expect("answered");
        let progress: Vec<usize> = server
            .seen
            .iter()
            .enumerate()
            .filter(|(_, line)| {
                serde_json::from_str::<Value>(line)
                    .is_ok_and(|m| m["params"]["progressToken"] == token.as_str())
            })
            .map(|(at, _)| at)
            .collect();
        assert!(!progress.is_empty(), "no progress for {token}");
        assert!(
            progress.iter().all(|at| *at < answered),
            "{token}: progress after the answer: {:?}",
            server.seen
        );
    }
}
