//! Attacks on the way a 2025-11-25 client's answers come back over HTTP: a session id that is
//! another's or altered, an answer posted by another client, under a forged or reused name, or
//! twice, an answer too large for the tool, and a client that never answers. Each is refused
//! with a typed answer (`400`, `404`) and changes nothing: the call that asked gets its own
//! client's answer, once, or ends at its deadline. Raw HTTP on loopback.

use super::{Server, connect_from, request, request_on};
use crate::support::tools_dir;
use serde_json::{Value, json};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// `talker` may ask the person without a host's approval first, and runs at most 3 s.
pub(super) const POLICY: &str = "[tools.talker]\nclient.elicit = { access = \"allow\" }\n\
    limits = { timeout_ms = 3000 }\n";

/// The headers of a 2025-11-25 request in `session`.
pub(super) fn in_session(session: &str) -> Vec<(&'static str, String)> {
    vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
        ("MCP-Protocol-Version", "2025-11-25".to_owned()),
        ("Mcp-Session-Id", session.to_owned()),
    ]
}

/// Initialize a session declaring `capabilities`, from `from`: its id.
pub(super) fn initialize(addr: SocketAddr, from: &str, capabilities: Value) -> String {
    let body = json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities,
                   "clientInfo": {"name": "attacker", "version": "0"}},
    })
    .to_string();
    let answer = request_on(
        connect_from(from.parse().expect("an address"), addr).expect("connect"),
        addr,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ],
        &body,
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    answer
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned()
}

/// A call of `talker` asking the person one form, in `session`, its stream open.
pub(super) struct Asking {
    stream: TcpStream,
    seen: Vec<u8>,
}

impl Asking {
    pub(super) fn start(addr: SocketAddr, session: &str) -> Asking {
        let body = json!({
            "jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "talker", "arguments": {"ask": [{"key": "who", "elicit": "Who?"}]}},
        })
        .to_string();
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in in_session(session) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).expect("send");
        stream.write_all(body.as_bytes()).expect("send");
        Asking {
            stream,
            seen: Vec::new(),
        }
    }

    /// What the stream carried once `wanted` is in it (at most `within`).
    pub(super) fn until(&mut self, wanted: &str, within: Duration) -> String {
        let started = Instant::now();
        let mut buffer = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&self.seen).into_owned();
            if text.contains(wanted) {
                return text;
            }
            assert!(
                started.elapsed() < within,
                "no {wanted} within {within:?}: {text}"
            );
            match self.stream.read(&mut buffer) {
                Ok(0) => panic!("the stream ended before {wanted}: {text}"),
                Ok(n) => self.seen.extend_from_slice(&buffer[..n]),
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(error) => panic!("reading the stream: {error}"),
            }
        }
    }

    /// The question the stream carries: its name (the JSON-RPC id) and its params.
    pub(super) fn question(&mut self) -> (String, Value) {
        let text = self.until("elicitation/create", Duration::from_secs(20));
        let line = text
            .lines()
            .find(|line| line.contains("elicitation/create"))
            .and_then(|line| line.strip_prefix("data:"))
            .expect("a data line");
        let message: Value = serde_json::from_str(line.trim()).expect("JSON");
        (
            message["id"].as_str().expect("a named id").to_owned(),
            message["params"].clone(),
        )
    }

    /// The call's result, once the stream carries it: what `talker` said.
    pub(super) fn said(&mut self) -> Value {
        let text = self.until("\"result\"", Duration::from_secs(20));
        let line = text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .find(|line| line.contains("\"result\""))
            .expect("the result");
        let message: Value = serde_json::from_str(line.trim()).expect("JSON");
        let text = message["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("text: {message}"));
        serde_json::from_str(text).unwrap_or_else(|_| json!({ "text": text }))
    }
}

/// Post `result` as the answer to the question named `name`, from `from`, in `session`: the
/// status and the body.
pub(super) fn answer(
    addr: SocketAddr,
    from: &str,
    session: &str,
    name: &Value,
    result: &Value,
) -> (u16, String) {
    let body = json!({ "jsonrpc": "2.0", "id": name, "result": result }).to_string();
    let headers = in_session(session);
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let answer = request_on(
        connect_from(from.parse().expect("an address"), addr).expect("connect"),
        addr,
        "POST",
        "/mcp",
        &headers,
        &body,
    );
    (answer.status, answer.body)
}

/// An answer reaches the call that asked only from the client it asked, under the name it was
/// asked by, once: another client (with its own session, or with the asker's session id),
/// a forged name, rmcp's own id, a second answer are refused with `400` (or `404` for a
/// session id that is not the poster's), and the call gets the real answer.
#[test]
fn an_answer_is_taken_from_the_asked_client_once_and_from_no_one_else() {
    let tools = tools_dir(&[("talker", crate::guests::TALKER)]);
    let policy = tools.path().join("policy.toml");
    std::fs::write(&policy, POLICY).expect("policy");
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &policy.to_string_lossy(),
    ]);
    let addr = server.addr;
    let mine = initialize(addr, "127.0.0.1", json!({ "elicitation": {} }));
    let theirs = initialize(addr, "127.0.0.2", json!({ "elicitation": {} }));
    let mut call = Asking::start(addr, &mine);
    let (name, params) = call.question();
    assert!(name.starts_with("tc-q-"), "{name}");
    assert_eq!(params["message"], "[tool talker] Who?", "{params}");
    let form = json!({ "action": "accept", "content": { "name": "Mallory" } });
    // Another client, in its own session: not its question.
    let (status, body) = answer(addr, "127.0.0.2", &theirs, &json!(name), &form);
    assert_eq!(status, 400, "{body}");
    // Another client with the asker's session id: that session is not its.
    let (status, body) = answer(addr, "127.0.0.2", &mine, &json!(name), &form);
    assert_eq!(status, 404, "{body}");
    // The asker itself, under a forged name (one digit of the nonce changed), or the id rmcp
    // gave the question (0): neither names a question.
    let mut forged = name.clone().into_bytes();
    forged[5] = if forged[5] == b'a' { b'b' } else { b'a' };
    let forged = String::from_utf8(forged).expect("text");
    let (status, body) = answer(addr, "127.0.0.1", &mine, &json!(forged), &form);
    assert_eq!(status, 400, "{body}");
    let (status, body) = answer(addr, "127.0.0.1", &mine, &json!(0), &form);
    assert!((400..500).contains(&status), "{status} {body}");
    // The asker's answer is taken, once.
    let alice = json!({ "action": "accept", "content": { "name": "Alice" } });
    let (status, body) = answer(addr, "127.0.0.1", &mine, &json!(name), &alice);
    assert_eq!(status, 202, "{body}");
    let (status, body) = answer(addr, "127.0.0.1", &mine, &json!(name), &form);
    assert_eq!(status, 400, "a second answer: {body}");
    let said = call.said();
    assert_eq!(
        said["answers"][0]["content"],
        json!({ "name": "Alice" }),
        "{said}"
    );
}

/// An answer too large for a tool (over `toolcell::client::MAX_ANSWER_BYTES`) is taken off the
/// wire but never handed on: the tool is told `over-limit`. A client that never answers holds
/// the call no longer than its deadline.
#[test]
fn an_oversized_answer_and_no_answer_end_the_question_not_the_server() {
    let tools = tools_dir(&[("talker", crate::guests::TALKER)]);
    let policy = tools.path().join("policy.toml");
    std::fs::write(&policy, POLICY).expect("policy");
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &policy.to_string_lossy(),
    ]);
    let addr = server.addr;
    let mine = initialize(addr, "127.0.0.1", json!({ "elicitation": {} }));
    let mut call = Asking::start(addr, &mine);
    let (name, _) = call.question();
    let big = json!({
        "action": "accept",
        "content": { "name": "x".repeat(toolcell::client::MAX_ANSWER_BYTES + 1) },
    });
    let (status, body) = answer(addr, "127.0.0.1", &mine, &json!(name), &big);
    assert_eq!(status, 202, "{body}");
    let said = call.said();
    assert_eq!(said["ask_error"]["kind"], "over-limit", "{said}");

    let started = Instant::now();
    let mut silent = Asking::start(addr, &mine);
    let _ = silent.question();
    let ended = silent.until("\"result\"", Duration::from_secs(20));
    assert!(ended.contains("deadline"), "{ended}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the call ended at its deadline: {:?}",
        started.elapsed()
    );
    // And the server serves on.
    let listed = request(
        addr,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Session-Id", &mine),
        ],
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string(),
    );
    assert_eq!(listed.status, 200, "{listed:?}");
}

/// A session's log level is kept for at most 16 sessions of one client: the next is told so
/// (its calls keep the default level), and another client's level is kept all the same.
#[test]
fn one_client_cannot_crowd_out_anothers_log_levels() {
    let server = Server::start(&[]);
    let addr = server.addr;
    let set_level = |from: &str, session: &str| {
        let headers = in_session(session);
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel",
                          "params": {"level": "error"}})
        .to_string();
        request_on(
            connect_from(from.parse().expect("an address"), addr).expect("connect"),
            addr,
            "POST",
            "/mcp",
            &headers,
            &body,
        )
        .json()
    };
    let limit = toolcell_mcp::http::session::MAX_SESSION_LEVELS_PER_CLIENT;
    for _ in 0..limit {
        let session = initialize(addr, "127.0.0.3", json!({}));
        let kept = set_level("127.0.0.3", &session);
        assert!(kept.get("error").is_none(), "{kept}");
    }
    let session = initialize(addr, "127.0.0.3", json!({}));
    let refused = set_level("127.0.0.3", &session);
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("too many sessions")),
        "{refused}"
    );
    let other = initialize(addr, "127.0.0.4", json!({}));
    let kept = set_level("127.0.0.4", &other);
    assert!(kept.get("error").is_none(), "another client: {kept}");
}

/// A 2025-11-25 session that declares the tasks extension gets its call answered in place: rmcp
/// answers that era over HTTP and takes no task there, so no call becomes a task no one can
/// see (it did: the client was told -32021 while its call went on).
#[test]
fn a_session_that_declares_tasks_gets_its_call_answered_in_place() {
    let tools = tools_dir(&[("talker", crate::guests::TALKER)]);
    let policy = tools.path().join("policy.toml");
    std::fs::write(&policy, "[tools.talker]\ntask = { after_ms = 0 }\n").expect("policy");
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &policy.to_string_lossy(),
    ]);
    let session = initialize(
        server.addr,
        "127.0.0.1",
        json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } }),
    );
    let headers = in_session(&session);
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                      "params": {"name": "talker", "arguments": {}}})
    .to_string();
    let answer = request(server.addr, "POST", "/mcp", &headers, &body);
    assert_eq!(answer.status, 200, "{answer:?}");
    let answered = answer.json();
    assert!(
        answered["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("features")),
        "answered in place: {answered}"
    );
    assert!(answered["result"].get("taskId").is_none(), "{answered}");
}
