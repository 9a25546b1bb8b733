//! The HTTP fast path answers as rmcp does: the same requests sent to a server with the fast
//! path and to one without it (`TOOLCELL_HTTP_FAST_PATH=0`) get the same status, headers and
//! body, and `/metrics` shows which requests the fast path took, so a fast path that always
//! fell back would fail here.

use super::{Answer, Server, call_body, request, wait_for_slots};
use serde_json::{Value, json};
use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// One request of the differential test: what it is, its headers, its body, its HTTP method,
/// and whether the fast path must take it.
struct Case {
    what: &'static str,
    method: &'static str,
    headers: Vec<(&'static str, String)>,
    body: String,
    fast: bool,
}

/// The headers of a stateless `tools/call` of `tool`, without `leave_out` (header names).
fn headers_without(tool: &str, leave_out: &[&str]) -> Vec<(&'static str, String)> {
    super::mcp_headers(None, tool)
        .into_iter()
        .filter(|(name, _)| !leave_out.contains(name))
        .collect()
}

/// A stateless `tools/call` body with `id` (any JSON), `params` beyond `name` and
/// `arguments`, and `capabilities` as the client's.
fn body_with(id: Value, tool: &str, arguments: Value, capabilities: Value) -> String {
    json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": capabilities,
            },
        },
    })
    .to_string()
}

/// The `_meta` of a stateless call, for the bodies written by hand below (`META` in them).
const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A case whose body is written by hand (`META` standing for [`META`]), sent with the headers
/// of a stateless call of `tool`.
fn shaped(what: &'static str, tool: &str, body: &str, fast: bool) -> Case {
    Case {
        what,
        method: "POST",
        headers: headers_without(tool, &[]),
        body: body.replace("META", META),
        fast,
    }
}

fn cases() -> Vec<Case> {
    let call = |what, tool: &str, arguments: Value, fast| Case {
        what,
        method: "POST",
        headers: headers_without(tool, &[]),
        body: call_body(7, tool, arguments),
        fast,
    };
    let echo = call_body(3, "echo", json!({ "text": "hello" }));
    let with_headers = |what, headers: Vec<(&'static str, String)>, fast| Case {
        what,
        method: "POST",
        headers,
        body: echo.clone(),
        fast,
    };
    let extra = |what, name: &'static str, value: &str| {
        let mut headers = headers_without("echo", &[name]);
        headers.push((name, value.to_owned()));
        with_headers(what, headers, false)
    };
    let mut cases = vec![
        call("echo", "echo", json!({ "text": "hello" }), true),
        call(
            "non-ASCII text",
            "echo",
            json!({ "text": "héllo ✓ 日本語 🦀 \u{0}\u{7f}" }),
            true,
        ),
        call(
            "arguments against the schema",
            "echo",
            json!({ "text": 5 }),
            true,
        ),
        call("an unknown tool (-32602)", "no_such_tool", json!({}), true),
        call("find_tool", "find_tool", json!({ "query": "file" }), true),
        call(
            "call_tool wrapping echo",
            "call_tool",
            json!({ "name": "echo", "arguments": { "text": "inner" } }),
            true,
        ),
        call(
            "a capability the policy denies",
            "read_file",
            json!({ "path": "/etc/passwd" }),
            true,
        ),
        call(
            "a tool that fails",
            "read_file",
            json!({ "path": "no-such-file.txt" }),
            true,
        ),
        call(
            "a big argument",
            "echo",
            json!({ "text": "x".repeat(150_000) }),
            true,
        ),
        // The front reads the body once and hands the fast path the value it read: length
        // is the pipeline's to bound, on both paths alike.
        call(
            "a longer argument",
            "echo",
            json!({ "text": "y".repeat(300_000) }),
            true,
        ),
        call(
            "a gated write, from a client that cannot be asked",
            "write_file",
            json!({ "path": "gated.txt", "content": "x" }),
            true,
        ),
        Case {
            what: "a string id",
            method: "POST",
            headers: headers_without("echo", &[]),
            body: body_with(
                json!("call-\u{e9}"),
                "echo",
                json!({ "text": "s" }),
                json!({}),
            ),
            fast: true,
        },
        Case {
            what: "no arguments at all",
            method: "POST",
            headers: headers_without("clock", &[]),
            body: json!({
                "jsonrpc": "2.0", "id": 9, "method": "tools/call",
                "params": { "name": "clock", "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }},
            })
            .to_string(),
            fast: true,
        },
        Case {
            what: "a gated write, from a client that can be asked (input_required)",
            method: "POST",
            headers: headers_without("write_file", &[]),
            body: body_with(
                json!(11),
                "write_file",
                json!({ "path": "gated.txt", "content": "x" }),
                json!({ "elicitation": { "form": {} } }),
            ),
            fast: true,
        },
        Case {
            what: "a client that takes tasks",
            method: "POST",
            headers: headers_without("echo", &[]),
            body: body_with(
                json!(12),
                "echo",
                json!({ "text": "t" }),
                json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } }),
            ),
            fast: true,
        },
        Case {
            what: "a progress token (rmcp's)",
            method: "POST",
            headers: headers_without("echo", &[]),
            body: json!({
                "jsonrpc": "2.0", "id": 13, "method": "tools/call",
                "params": { "name": "echo", "arguments": { "text": "p" }, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "progressToken": "p-1",
                }},
            })
            .to_string(),
            fast: false,
        },
        Case {
            what: "a task asked for (rmcp's)",
            method: "POST",
            headers: headers_without("echo", &[]),
            body: json!({
                "jsonrpc": "2.0", "id": 14, "method": "tools/call",
                "params": { "name": "echo", "arguments": { "text": "t" }, "task": {}, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }},
            })
            .to_string(),
            fast: false,
        },
        Case {
            what: "no clientCapabilities in _meta (rmcp's)",
            method: "POST",
            headers: headers_without("echo", &[]),
            body: json!({
                "jsonrpc": "2.0", "id": 15, "method": "tools/call",
                "params": { "name": "echo", "arguments": { "text": "c" }, "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                }},
            })
            .to_string(),
            fast: false,
        },
        Case {
            what: "the initialize era (rmcp's)",
            method: "POST",
            headers: vec![
                ("Content-Type", "application/json".to_owned()),
                ("Accept", "application/json, text/event-stream".to_owned()),
                ("MCP-Protocol-Version", "2025-11-25".to_owned()),
            ],
            body: json!({
                "jsonrpc": "2.0", "id": 16, "method": "tools/call",
                "params": { "name": "echo", "arguments": { "text": "old" } },
            })
            .to_string(),
            fast: false,
        },
        Case {
            what: "a batch (400)",
            method: "POST",
            headers: headers_without("echo", &[]),
            body: format!("[{echo}]"),
            fast: false,
        },
        // The shapes two readers of one body could read differently (issue 40): each is read
        // once by the front, refused there or run as read.
        shaped(
            "the message as an array (400)",
            "echo",
            r#"["2.0",21,"tools/call",{"name":"echo","arguments":{"text":"a"},"_meta":META}]"#,
            false,
        ),
        shaped(
            "params as an array (400)",
            "echo",
            r#"{"jsonrpc":"2.0","id":22,"method":"tools/call","params":["echo",{"text":"a"},META]}"#,
            false,
        ),
        shaped(
            "nested arrays (400)",
            "echo",
            r#"[["2.0",23,"tools/call",["echo",{"text":"a"},META]]]"#,
            false,
        ),
        shaped(
            "a lone surrogate in the arguments (400)",
            "echo",
            r#"{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\ud800"},"_meta":META}}"#,
            false,
        ),
        shaped(
            "a surrogate pair in the arguments",
            "echo",
            r#"{"jsonrpc":"2.0","id":25,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\ud83e\udd80"},"_meta":META}}"#,
            true,
        ),
        shaped(
            "duplicate keys (the last one is read, and run)",
            "echo",
            r#"{"jsonrpc":"2.0","id":26,"id":27,"method":"tools/list","method":"tools/call","params":{"name":"clock","name":"echo","arguments":{"text":"first","text":"last"},"_meta":META}}"#,
            true,
        ),
        shaped(
            "escaped keys and values",
            "echo",
            r#"{"jsonrp\u0063":"2.0","id":28,"method":"tools\/call","params":{"n\u0061me":"\u0065cho","arguments":{"text":"\u00e9\n"},"_meta":META}}"#,
            true,
        ),
        shaped(
            "a number beyond f64 in the arguments (400)",
            "echo",
            r#"{"jsonrpc":"2.0","id":29,"method":"tools/call","params":{"name":"echo","arguments":{"text":"n","n":1e400},"_meta":META}}"#,
            false,
        ),
        shaped(
            "not JSON (400)",
            "echo",
            r#"{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"echo""#,
            false,
        ),
        Case {
            what: "arguments that are not an object (rmcp's)",
            method: "POST",
            headers: headers_without("echo", &[]),
            body: echo.replace(r#"{"text":"hello"}"#, r#"["hello"]"#),
            fast: false,
        },
        Case {
            what: "GET (rmcp's)",
            method: "GET",
            headers: headers_without("echo", &[]),
            body: String::new(),
            fast: false,
        },
        with_headers(
            "no Accept (rmcp's 406)",
            headers_without("echo", &["Accept"]),
            false,
        ),
        with_headers(
            "Content-Type with a charset",
            {
                let mut headers = headers_without("echo", &["Content-Type"]);
                headers.push(("Content-Type", "application/json; charset=utf-8".to_owned()));
                headers
            },
            true,
        ),
        with_headers(
            "Accept in two headers, weighted",
            {
                let mut headers = headers_without("echo", &["Accept"]);
                headers.push(("Accept", "application/json;q=0.5".to_owned()));
                headers.push(("Accept", "text/event-stream".to_owned()));
                headers
            },
            true,
        ),
        with_headers(
            "no MCP-Protocol-Version (rmcp's -32020)",
            headers_without("echo", &["MCP-Protocol-Version"]),
            false,
        ),
        with_headers(
            "no Mcp-Name (rmcp's -32020)",
            headers_without("echo", &["Mcp-Name"]),
            false,
        ),
        with_headers(
            "no Mcp-Method (rmcp's -32020)",
            headers_without("echo", &["Mcp-Method"]),
            false,
        ),
    ];
    cases.extend([
        extra(
            "Accept: application/json only (406)",
            "Accept",
            "application/json",
        ),
        extra("Accept: */* (406)", "Accept", "*/*"),
        extra(
            "Accept with application/json weighted 0 (406)",
            "Accept",
            "application/json;q=0, text/event-stream",
        ),
        extra(
            "Content-Type: text/plain (415)",
            "Content-Type",
            "text/plain",
        ),
        extra(
            "an older MCP-Protocol-Version than _meta's",
            "MCP-Protocol-Version",
            "2025-11-25",
        ),
        extra(
            "an unknown MCP-Protocol-Version",
            "MCP-Protocol-Version",
            "2099-01-01",
        ),
        extra("a Mcp-Name of another tool", "Mcp-Name", "clock"),
        extra(
            "a Base64 Mcp-Name (rmcp decodes it)",
            "Mcp-Name",
            "=?base64?ZWNobw==?=",
        ),
        extra("a Mcp-Method of another method", "Mcp-Method", "tools/list"),
    ]);
    cases
}

/// How many requests the fast path has answered, from `/metrics`.
fn fast_path_count(addr: SocketAddr) -> u64 {
    let metrics = request(addr, "GET", "/metrics", &[], "");
    metrics
        .body
        .lines()
        .find_map(|line| line.strip_prefix("toolcell_http_fast_path_total "))
        .unwrap_or_else(|| panic!("no fast path counter in:\n{}", metrics.body))
        .parse()
        .expect("a count")
}

/// What may differ between the two servers' answers, set aside: the `Date` header, and the
/// handle an `input_required` answer gives (random, for the retry to name the question).
fn comparable(answer: &Answer) -> (u16, Vec<(String, String)>, String) {
    let mut headers: Vec<(String, String)> = answer
        .headers
        .iter()
        .filter(|(name, _)| name != "date")
        .cloned()
        .collect();
    headers.sort();
    let mut body = answer.body.clone();
    if let Ok(mut json) = serde_json::from_str::<Value>(&answer.body)
        && json["result"]["resultType"] == "input_required"
        && let Some(state) = json["result"].get_mut("requestState")
    {
        *state = json!("<handle>");
        // Only the handle is set aside (its length is fixed, so Content-Length still counts).
        body = serde_json::to_string(&json).expect("JSON");
    }
    (answer.status, headers, body)
}

fn send(addr: SocketAddr, case: &Case) -> Answer {
    let headers: Vec<(&str, &str)> = case
        .headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    request(addr, case.method, "/mcp", &headers, &case.body)
}

/// Two servers of the same tools and policy, the second without the fast path.
fn servers(
    tools: &std::path::Path,
    policy: &std::path::Path,
    workspace: &std::path::Path,
) -> (Server, Server) {
    let (tools, policy, workspace) = (
        tools.to_string_lossy(),
        policy.to_string_lossy(),
        workspace.to_string_lossy(),
    );
    let args = [
        "--tools",
        tools.as_ref(),
        "--policy",
        policy.as_ref(),
        "--workspace",
        workspace.as_ref(),
    ];
    let fast = Server::start(&args);
    let rmcp = Server::start_with_env(&args, &[("TOOLCELL_HTTP_FAST_PATH", "0")]);
    (fast, rmcp)
}

/// The fast path and rmcp give the same answer to every request of [`cases`], and the fast
/// path takes exactly the ones it should; then a call cancelled by notification and one whose
/// client went away end the same way on both, counted as cancelled.
#[test]
fn the_fast_path_answers_every_request_as_rmcp_does() {
    let _guard = crate::support::exclusive();
    let tools = crate::support::tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, crate::mcp::GATED_WRITES).expect("policy");
    let (fast, rmcp) = servers(tools.path(), &policy, dir.path());
    let mut taken = 0;
    for case in cases() {
        let before = fast_path_count(fast.addr);
        let answer = send(fast.addr, &case);
        let took_fast_path = fast_path_count(fast.addr) - before;
        let expected = send(rmcp.addr, &case);
        assert_eq!(
            took_fast_path,
            u64::from(case.fast),
            "{}: the fast path {} it",
            case.what,
            if case.fast { "did not take" } else { "took" }
        );
        taken += took_fast_path;
        println!(
            "{}: {} {}",
            case.what,
            answer.status,
            if case.fast { "(fast path)" } else { "(rmcp)" }
        );
        assert_eq!(
            comparable(&answer),
            comparable(&expected),
            "{}: the fast path's answer, then rmcp's",
            case.what
        );
        // Answers that are what they say (not two servers failing alike).
        if case.what == "echo" {
            assert_eq!(super::call_text(&answer), ("hello".to_owned(), false));
        }
        if case.what.ends_with("(400)") {
            assert_eq!(answer.status, 400, "{}: {answer:?}", case.what);
            let code = &answer.json()["error"]["code"];
            assert!(
                code == -32600 || code == -32700,
                "{}: {answer:?}",
                case.what
            );
        }
        if case.what.starts_with("duplicate keys") {
            assert_eq!(super::call_text(&answer), ("last".to_owned(), false));
            assert_eq!(answer.json()["id"], 27, "{answer:?}");
        }
        if case.what.starts_with("escaped keys") {
            assert_eq!(super::call_text(&answer), ("\u{e9}\n".to_owned(), false));
        }
        if case.what.starts_with("an unknown tool") {
            assert_eq!(answer.json()["error"]["code"], -32602, "{answer:?}");
        }
        if case.what.starts_with("a capability the policy denies") {
            let (text, error) = super::call_text(&answer);
            assert!(error && text.to_lowercase().contains("denied"), "{text}");
        }
        if case
            .what
            .starts_with("a gated write, from a client that can be asked")
        {
            assert_eq!(
                answer.json()["result"]["resultType"],
                "input_required",
                "{answer:?}"
            );
        }
    }
    assert!(taken >= 10, "the fast path took {taken} requests");
    assert_eq!(
        fast_path_count(rmcp.addr),
        0,
        "the fast path was switched off"
    );

    // Cancelled by `notifications/cancelled`: the same answer from both.
    let cancelled: Vec<Answer> = [&fast, &rmcp]
        .iter()
        .map(|server| cancelled_by_notification(server.addr))
        .collect();
    assert_eq!(comparable(&cancelled[0]), comparable(&cancelled[1]));
    let (text, error) = super::call_text(&cancelled[0]);
    assert!(error && text.contains("Cancelled"), "{text}");
    // The client goes away: on both, the call is stopped and counted as cancelled.
    for server in [&fast, &rmcp] {
        let before = fast_path_count(server.addr);
        abandoned_call_is_stopped(server.addr);
        let through_fast_path = fast_path_count(server.addr) - before;
        assert_eq!(through_fast_path, u64::from(std::ptr::eq(server, &fast)));
    }
}

/// A call of the hostile guest's endless loop as request 42, cancelled by a notification
/// once it runs; its answer.
fn cancelled_by_notification(addr: SocketAddr) -> Answer {
    std::thread::scope(|scope| {
        let spinning = scope.spawn(move || super::spin_as_request_42(addr));
        wait_for_slots(addr, None, 1);
        let cancel = json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": 42, "reason": "the user moved on" },
        });
        let answer = request(
            addr,
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "notifications/cancelled"),
            ],
            &cancel.to_string(),
        );
        assert!(answer.status < 300, "{answer:?}");
        spinning.join().expect("the spinning call")
    })
}

/// How many calls of the hostile guest `/metrics` counts as cancelled.
fn cancelled_count(addr: SocketAddr) -> u64 {
    request(addr, "GET", "/metrics", &[], "")
        .body
        .lines()
        .find(|line| {
            line.starts_with("toolcell_calls_total{")
                && line.contains(r#"tool="hostile""#)
                && line.contains(r#"outcome="cancelled""#)
        })
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|count| count.parse().ok())
        .unwrap_or(0)
}

/// A spinning call whose client closes the connection: it stops (well before its own 5 s
/// deadline) and is counted as cancelled.
fn abandoned_call_is_stopped(addr: SocketAddr) {
    let before = cancelled_count(addr);
    let body = call_body(43, "hostile", json!({ "do": "spin" }));
    let headers: String = super::mcp_headers(None, "hostile")
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let mut stream = TcpStream::connect(addr).expect("connect");
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        body.len()
    )
    .expect("send");
    wait_for_slots(addr, None, 1);
    let closed = Instant::now();
    drop(stream);
    while cancelled_count(addr) == before {
        assert!(
            closed.elapsed() < Duration::from_secs(3),
            "the abandoned call was not stopped"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
