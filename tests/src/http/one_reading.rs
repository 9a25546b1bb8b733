//! One reading of a request (issue 40): a body the checks would read one way and the call
//! another (a JSON array in field order, `params` as an array, a lone surrogate) is refused
//! before anything runs, so no per-tool scope and no quota can be skipped by it. Each attack
//! is made with its object-form control beside it, which the same check must catch.

use super::{Answer, Issuer, Server, call_with, mcp_headers, metrics_token, now, request};
use crate::support::tools_dir;
use serde_json::{Value, json};
use std::net::SocketAddr;

/// The `_meta` of a stateless call.
const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// A body written by hand (`META` standing for [`META`]), posted with the headers of a
/// stateless call of `tool` as `token`'s.
fn post(addr: SocketAddr, token: &str, tool: &str, body: &str) -> Answer {
    let headers = mcp_headers(Some(token), tool);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    request(addr, "POST", "/mcp", &headers, &body.replace("META", META))
}

/// The attacks of the review: the message as an array (serde reads it in field order), the
/// message's `params` as an array, both nested, and `call_tool` wrapping the tool in each.
fn array_forms(tool: &str, arguments: &str) -> Vec<String> {
    let inner = format!(r#"{{"name":"{tool}","arguments":{arguments}}}"#);
    vec![
        format!(
            r#"["2.0",7,"tools/call",{{"name":"{tool}","arguments":{arguments},"_meta":META}}]"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["{tool}",{arguments},META]}}"#
        ),
        format!(r#"["2.0",7,"tools/call",["{tool}",{arguments},META]]"#),
        format!(
            r#"["2.0",7,"tools/call",{{"name":"call_tool","arguments":{inner},"_meta":META}}]"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["call_tool",{inner},META]}}"#
        ),
    ]
}

/// Refused as the front refuses what is not one MCP message: `400`, a JSON-RPC error.
fn assert_unreadable(answer: &Answer, body: &str) {
    assert_eq!(answer.status, 400, "{body}: {answer:?}");
    let code = answer.json()["error"]["code"].clone();
    assert!(
        code == toolcell_mcp::http::INVALID_REQUEST || code == toolcell_mcp::http::PARSE_ERROR,
        "{body}: {answer:?}"
    );
}

/// A token with scope `mcp:tools` only, against `[tool_scopes] read_file = "files:read"`: the
/// object form is `403`; the array forms that the review got the file's content with are
/// `400`, and the file's content appears in no answer.
#[test]
fn an_array_body_cannot_skip_a_per_tool_scope() {
    const RESOURCE: &str = "https://tools.test/mcp";
    const ISSUER: &str = "https://auth.test";
    const SECRET: &str = "the content only files:read may see";
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = dir.path().join("a");
    std::fs::create_dir(&workspace).expect("workspace");
    std::fs::write(workspace.join("x.txt"), SECRET).expect("a file");
    let issuer = Issuer::new("k-1");
    std::fs::write(dir.path().join("jwks.json"), issuer.jwks().to_string()).expect("jwks");
    std::fs::write(
        dir.path().join("oauth.toml"),
        format!(
            "resource = \"{RESOURCE}\"\nissuer = \"{ISSUER}\"\njwks_file = \"jwks.json\"\n\
             scope = \"mcp:tools\"\n[tool_scopes]\nread_file = \"files:read\"\n\
             [tenants.team-a]\nworkspace = \"{}\"\n",
            workspace.display()
        ),
    )
    .expect("oauth config");
    let server = Server::start(&["--oauth", &dir.path().join("oauth.toml").to_string_lossy()]);
    let token = |scope: &str| {
        issuer.token(json!({
            "iss": ISSUER, "aud": RESOURCE, "sub": "team-a",
            "exp": now() + 300, "iat": now(), "scope": scope,
        }))
    };
    let (narrow, wide) = (token("mcp:tools"), token("mcp:tools files:read"));
    let arguments = r#"{"path":"x.txt"}"#;
    // The controls: the object form needs the scope, directly and through call_tool; with it,
    // the file is read (so the attacks below would have shown it).
    let object = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"read_file","arguments":{arguments},"_meta":META}}}}"#
    );
    let through = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"call_tool","arguments":{{"name":"read_file","arguments":{arguments}}},"_meta":META}}}}"#
    );
    assert_eq!(post(server.addr, &narrow, "read_file", &object).status, 403);
    assert_eq!(
        post(server.addr, &narrow, "call_tool", &through).status,
        403
    );
    let allowed = post(server.addr, &wide, "read_file", &object);
    assert!(allowed.body.contains(SECRET), "{allowed:?}");
    for body in array_forms("read_file", arguments) {
        for name in ["read_file", "call_tool"] {
            let answer = post(server.addr, &narrow, name, &body);
            assert_unreadable(&answer, &body);
            assert!(!answer.body.contains(SECRET), "{body}: {answer:?}");
            // With the scope too: what is not a message runs for no one.
            let answer = post(server.addr, &wide, name, &body);
            assert_unreadable(&answer, &body);
        }
    }
}

/// How many calls of `tool` the server has counted (any outcome), from `/metrics`.
fn calls_counted(addr: SocketAddr, operator: &str, tool: &str) -> u64 {
    let bearer = format!("Bearer {operator}");
    let metrics = request(addr, "GET", "/metrics", &[("Authorization", &bearer)], "");
    assert_eq!(metrics.status, 200, "{metrics:?}");
    metrics
        .body
        .lines()
        .filter(|line| {
            line.starts_with("toolcell_calls_total{") && line.contains(&format!("tool=\"{tool}\""))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// A server of the `structured` guest (whose calls sleep as long as they are asked) with one
/// tenant under `quota`, its token, and the operator's metrics token.
fn quota_server(quota: &str) -> (Server, String, String, tempfile::TempDir) {
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let (file, tokens) = super::tokens_file(tools.path(), &[("team-a", None)]);
    std::fs::write(
        &file,
        format!(
            "{}\n[quota.team-a]\n{quota}\n",
            std::fs::read_to_string(&file).expect("tokens")
        ),
    )
    .expect("quota");
    let (metrics_file, operator) = metrics_token(tools.path());
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
        "--metrics-token",
        &metrics_file.to_string_lossy(),
    ]);
    (server, tokens[0].clone(), operator, tools)
}

/// A `structured` call (`sleep_ms` long) as `token`'s tenant: its HTTP status.
fn sum(addr: SocketAddr, token: &str, id: u64, sleep_ms: u64) -> u16 {
    call_with(
        addr,
        Some(token),
        id,
        "structured",
        json!({ "a": 1, "b": 2, "sleep_ms": sleep_ms }),
        &[],
    )
    .status
}

/// Every array form of a `structured` call, and one whose arguments hold a lone surrogate,
/// sent `times` times: each refused before it runs.
fn attack(addr: SocketAddr, token: &str, times: usize) {
    let mut bodies = array_forms("structured", r#"{"a":1,"b":2,"sleep_ms":0}"#);
    bodies.push(
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"structured","arguments":{"a":1,"b":2,"note":"\ud800"},"_meta":META}}"#
            .to_owned(),
    );
    for _ in 0..times {
        for body in &bodies {
            for name in ["structured", "call_tool"] {
                assert_unreadable(&post(addr, token, name, body), body);
            }
        }
    }
}

/// A rate of 0.2 calls a second with a burst of 2: the review ran 20 of 20 array calls. Now
/// every array form (and a lone surrogate) is refused and runs nothing, and the bucket is
/// untouched: the two calls of the burst are still there for the object form, and the third
/// is refused by the rate.
#[test]
fn an_array_body_cannot_skip_a_rate() {
    let (server, token, operator, _dir) = quota_server("rate = 0.2\nburst = 2");
    attack(server.addr, &token, 4);
    assert_eq!(calls_counted(server.addr, &operator, "structured"), 0);
    assert_eq!(sum(server.addr, &token, 1, 0), 200);
    assert_eq!(sum(server.addr, &token, 2, 0), 200);
    assert_eq!(sum(server.addr, &token, 3, 0), 429);
    attack(server.addr, &token, 1);
    assert_eq!(calls_counted(server.addr, &operator, "structured"), 2);
}

/// `in_flight = 1`: the review ran four 5-second array calls at once. Now, with one object
/// call running, another object call is refused by the bound, and every array form is refused
/// as unreadable; nothing but the one call runs.
#[test]
fn an_array_body_cannot_skip_the_in_flight_bound() {
    let (server, token, operator, _dir) = quota_server("in_flight = 1");
    let addr = server.addr;
    std::thread::scope(|scope| {
        let long = scope.spawn(|| sum(addr, &token, 1, 3_000));
        super::wait_for_slots(addr, Some(&format!("Bearer {operator}")), 1);
        assert_eq!(sum(addr, &token, 2, 0), 429, "the bound holds");
        attack(addr, &token, 1);
        assert_eq!(long.join().expect("the long call"), 200);
    });
    assert_eq!(calls_counted(addr, &operator, "structured"), 1);
}

/// `daily_ms = 1`: the review's array calls ran after the day's budget was spent, and their
/// time was never charged. Now one object call spends the budget, the next is refused by
/// it, and the array forms are refused before they could run.
#[test]
fn an_array_body_cannot_skip_a_daily_budget() {
    let (server, token, operator, _dir) = quota_server("daily_ms = 1");
    assert_eq!(sum(server.addr, &token, 1, 20), 200, "within the budget");
    assert_eq!(sum(server.addr, &token, 2, 0), 429, "the budget is spent");
    attack(server.addr, &token, 1);
    assert_eq!(calls_counted(server.addr, &operator, "structured"), 1);
}

/// Over stdio too: rmcp refuses a message or its `params` sent as an array (`Invalid
/// request`), and so does the transport's fast path now, which answered them before. The
/// session goes on.
#[test]
fn over_stdio_an_array_form_is_an_invalid_request_and_runs_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    let mut server = crate::mcp::Server::start(&["--audit", &audit.to_string_lossy()]);
    for line in [
        r#"["2.0",7,"tools/call",{"name":"echo","arguments":{"text":"array"}}]"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":["echo",{"text":"params"}]}"#,
    ] {
        server.send_raw(line);
    }
    server.call(9, "echo", json!({ "text": "object" }));
    let answer = server.response(9);
    assert_eq!(crate::mcp::text(&answer), "object");
    let (_, _, lines, _) = server.close();
    let messages: Vec<Value> = lines
        .iter()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let invalid = messages
        .iter()
        .filter(|message| message["error"]["code"] == -32600 && message["id"].is_null())
        .count();
    assert_eq!(invalid, 2, "{messages:?}");
    assert!(
        !messages
            .iter()
            .any(|message| message["id"] == 7 || message["id"] == 8),
        "{messages:?}"
    );
    let audited = std::fs::read_to_string(&audit).unwrap_or_default();
    assert_eq!(
        audited.lines().count(),
        1,
        "only the object call ran: {audited}"
    );
}
