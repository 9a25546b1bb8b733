//! Fair shares (issue 40): a client's calls and the tasks they became share one quarter of the
//! pool, so three tenants busy to their limits with calls and tasks leave room for a fourth.

use super::{Server, call, call_text, metrics_token, request, tokens_file, wait_for_slots};
use crate::support::{exclusive, tools_dir};
use serde_json::json;
use std::net::SocketAddr;

/// A `structured` call that sleeps `sleep_ms`, from a client that takes tasks: the answer (a
/// task once it has run for a second), or the refusal.
fn long_call(addr: SocketAddr, token: &str, id: u64, sleep_ms: u64) -> super::Answer {
    let body = json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": "structured",
            "arguments": { "a": 1, "b": 2, "sleep_ms": sleep_ms },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {
                    "extensions": { "io.modelcontextprotocol/tasks": {} }
                },
            },
        },
    });
    let headers = super::mcp_headers(Some(token), "structured");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    request(addr, "POST", "/mcp", &headers, &body.to_string())
}

/// Three tenants each fill their share of the pool with calls that became tasks (the requests
/// are answered; the calls run on): a further call of theirs is refused, tasks counted, and
/// the fourth tenant's echo is answered while all their calls still run. Before, a tenant
/// could hold its share in requests and as much again in tasks, and two filled the pool.
#[test]
fn three_tenants_busy_with_calls_and_tasks_leave_room_for_a_fourth() {
    let _guard = exclusive();
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let policy = tools.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[tools.echo]\ncore = true\n[tools.structured]\ncore = true\n\
         limits = { timeout_ms = 60000 }\n",
    )
    .expect("policy");
    let (file, tokens) = tokens_file(
        tools.path(),
        &[
            ("team-a", None),
            ("team-b", None),
            ("team-c", None),
            ("team-d", None),
        ],
    );
    let (metrics_file, operator) = metrics_token(tools.path());
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &policy.to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
        "--metrics-token",
        &metrics_file.to_string_lossy(),
    ]);
    let addr = server.addr;
    let operator = format!("Bearer {operator}");
    let share = toolcell_mcp::http::share::calls_per_client(toolcell::limits::POOL_SLOTS as usize);
    let busy = &tokens[..3];
    std::thread::scope(|scope| {
        let callers: Vec<_> = busy
            .iter()
            .flat_map(|token| {
                (0..share as u64)
                    .map(move |id| scope.spawn(move || long_call(addr, token, id, 40_000)))
            })
            .collect();
        for caller in callers {
            let answer = caller.join().expect("a caller");
            assert_eq!(answer.status, 200, "{answer:?}");
            assert_eq!(answer.json()["result"]["resultType"], "task", "{answer:?}");
        }
    });
    // Every call is a task now, still running.
    wait_for_slots(addr, Some(&operator), 3 * share);
    for token in busy {
        let refused = long_call(addr, token, 99, 0);
        assert_eq!(refused.status, 429, "tasks count in the share: {refused:?}");
        assert!(refused.body.contains("too many calls"), "{refused:?}");
    }
    let fourth = call(addr, Some(&tokens[3]), "echo", json!({ "text": "room" }));
    assert_eq!(call_text(&fourth), ("room".to_owned(), false));
    // Answered while the others' calls all still ran.
    let metrics = request(addr, "GET", "/metrics", &[("Authorization", &operator)], "");
    let in_use = metrics
        .body
        .lines()
        .find_map(|line| line.strip_prefix("toolcell_slots_in_use "))
        .and_then(|count| count.parse::<usize>().ok());
    assert_eq!(in_use, Some(3 * share), "{}", metrics.body);
}
