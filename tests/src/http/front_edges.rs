//! The HTTP front under what a careless or hostile client sends (issues 54 and 56): a body
//! declared too long is refused at once; calls in flight reserve their deadline of a daily
//! budget; anonymous callers can be made one client; a token in the URL is refused; slow heads
//! cost a bounded number of threads and bytes; 64 calls at once are each answered and audited
//! exactly once, the chain whole.

use super::{
    Answer, Server, call_body, call_text, call_with, connect_from, mcp_headers, request_on,
    tokens_file,
};
use crate::support::{exclusive, toolcell_command, tools_dir};
use serde_json::json;
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};

/// A server with `structured`, the policy `policy`, a tokens file of `tenants` with `quotas`
/// appended, and an audit file; the tokens, and the directory holding it all.
fn server(
    tenants: &[&str],
    quotas: &str,
    policy: &str,
) -> (Server, Vec<String>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let tools = dir.path().join("tools");
    std::fs::create_dir(&tools).expect("tools");
    std::fs::write(tools.join("structured.wasm"), crate::guests::STRUCTURED).expect("tool");
    let named: Vec<(&str, Option<&std::path::Path>)> =
        tenants.iter().map(|tenant| (*tenant, None)).collect();
    let (file, tokens) = tokens_file(dir.path(), &named);
    let text = std::fs::read_to_string(&file).expect("tokens");
    std::fs::write(&file, format!("{text}\n{quotas}")).expect("quotas");
    std::fs::write(dir.path().join("policy.toml"), policy).expect("policy");
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let server = Server::start(&[
        "--tools",
        &path("tools"),
        "--policy",
        &path("policy.toml"),
        "--tokens",
        &path("tokens.toml"),
        "--audit",
        &path("audit.jsonl"),
    ]);
    (server, tokens, dir)
}

const POLICY: &str = "[tools.echo]\ncore = true\n[tools.structured]\ncore = true\n\
    limits = { timeout_ms = 800 }\n";

fn structured(addr: std::net::SocketAddr, token: &str, id: u64, sleep_ms: u64) -> Answer {
    call_with(
        addr,
        Some(token),
        id,
        "structured",
        json!({ "a": 1, "b": 2, "sleep_ms": sleep_ms }),
        &[],
    )
}

/// A `Content-Length` past the body limit is answered `413` at once, not when the body timeout
/// has passed, and the connection is closed.
#[test]
fn a_body_declared_too_long_is_refused_at_once() {
    let _guard = exclusive();
    let (server, tokens, _dir) = server(&["team-a"], "", POLICY);
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let headers: String = mcp_headers(Some(&tokens[0]), "echo")
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let started = Instant::now();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n{headers}\r\n{{",
        100 * 1024 * 1024
    )
    .expect("send");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let took = started.elapsed();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    // A bound, not a measurement: well before the body's 30 s.
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// `daily_ms = 1000` and calls that may run 800 ms each, five at once: two are admitted (the
/// first reserves 800 ms, the second fits under 1000 beside it), the rest refused as the day's
/// budget, so calls in flight overshoot it by at most one call's deadline; once they end, what
/// they really used is what counts.
#[test]
fn calls_in_flight_reserve_their_deadline_of_a_daily_budget() {
    let _guard = exclusive();
    let (server, tokens, _dir) = server(&["team-a"], "[quota.team-a]\ndaily_ms = 1000\n", POLICY);
    let token = &tokens[0];
    let answers: Vec<Answer> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..5)
            .map(|id| scope.spawn(move || structured(server.addr, token, id, 600)))
            .collect();
        calls
            .into_iter()
            .map(|call| call.join().expect("a call"))
            .collect()
    });
    let admitted = answers.iter().filter(|answer| answer.status == 200).count();
    let refused: Vec<&Answer> = answers
        .iter()
        .filter(|answer| answer.status == 429)
        .collect();
    assert_eq!((admitted, refused.len()), (2, 3), "{answers:?}");
    for answer in refused {
        assert_eq!(
            answer.json()["error"]["data"]["quota"],
            "daily_ms",
            "{answer:?}"
        );
    }
    // 2 × 600 ms used: the budget is spent.
    let after = structured(server.addr, token, 9, 0);
    assert_eq!(after.status, 429, "{after:?}");
}

/// Without tokens, each loopback address is a client of its own for the fair shares; with
/// `--anonymous-clients one`, every anonymous caller is one client, whatever address it uses.
#[test]
fn anonymous_callers_can_be_made_one_client() {
    let _guard = exclusive();
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let tools = tools.path().to_string_lossy().into_owned();
    for (mode, second_runs) in [("per-address", true), ("one", false)] {
        // Four slots: a client's share is one call in flight.
        let server = Server::start(&[
            "--tools",
            &tools,
            "--pool-slots",
            "4",
            "--anonymous-clients",
            mode,
        ]);
        let call_from = |from: [u8; 4], sleep_ms: u64| {
            let stream = connect_from(IpAddr::from(from), server.addr).expect("connect");
            let headers = mcp_headers(None, "structured");
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            request_on(
                stream,
                server.addr,
                "POST",
                "/mcp",
                &headers,
                &call_body(
                    1,
                    "structured",
                    json!({ "a": 1, "b": 2, "sleep_ms": sleep_ms }),
                ),
            )
        };
        std::thread::scope(|scope| {
            let long = scope.spawn(|| call_from([127, 0, 0, 2], 1500));
            std::thread::sleep(Duration::from_millis(400));
            let second = call_from([127, 0, 0, 3], 0);
            assert_eq!(second.status == 200, second_runs, "{mode}: {second:?}");
            assert_eq!(long.join().expect("the long call").status, 200);
        });
    }
}

/// A token in the URL's query is refused (`400`), whether or not the header holds one too:
/// MCP puts tokens in the Authorization header only.
#[test]
fn a_token_in_the_url_is_refused() {
    let _guard = exclusive();
    let (server, tokens, _dir) = server(&["team-a"], "", POLICY);
    for (path, with_header) in [
        (format!("/mcp?access_token={}", tokens[0]), false),
        (format!("/mcp?x=1&ACCESS_TOKEN={}", tokens[0]), true),
        // As a server reading it would: percent-decoded, and `;` as a separator.
        (format!("/mcp?access%5Ftoken={}", tokens[0]), true),
        (format!("/mcp?x=1;access_token={}", tokens[0]), true),
        (format!("/mcp?access_token%3D{}", tokens[0]), true),
    ] {
        let headers = mcp_headers(with_header.then_some(tokens[0].as_str()), "echo");
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let answer = super::request(
            server.addr,
            "POST",
            &path,
            &headers,
            &call_body(1, "echo", json!({ "text": "x" })),
        );
        assert_eq!(answer.status, 400, "{path}: {answer:?}");
    }
}

/// The server's threads and resident memory (from `/proc/PID/status`).
fn threads_and_rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|value| value.parse().ok())
            .unwrap_or(0)
    };
    (field("Threads:"), field("VmRSS:"))
}

/// 200 connections sending their heads a byte a second (slowloris): each is closed at the
/// header timeout, the server's threads do not grow with them and its memory by little, and a
/// client is answered throughout.
#[test]
fn slow_heads_cost_a_bounded_number_of_threads_and_bytes() {
    let _guard = exclusive();
    let (server, tokens, _dir) = server(&["team-a"], "", POLICY);
    let pid = server.child_id();
    let (threads_before, rss_before) = threads_and_rss(pid);
    let mut slow: Vec<TcpStream> = (0..200)
        .map(|n| {
            let from = IpAddr::from([127, 0, 1, 1 + (n % 100) as u8]);
            connect_from(from, server.addr).expect("connect")
        })
        .collect();
    let started = Instant::now();
    let mut peak = (0, 0);
    while started.elapsed() < toolcell_mcp::http::HEADER_READ_TIMEOUT + Duration::from_secs(2) {
        for stream in &mut slow {
            let _ = stream.write_all(b"X");
        }
        let now = threads_and_rss(pid);
        peak = (peak.0.max(now.0), peak.1.max(now.1));
        let (text, error) = call_text(&call_with(
            server.addr,
            Some(&tokens[0]),
            1,
            "echo",
            json!({ "text": "through" }),
            &[],
        ));
        assert_eq!((text.as_str(), error), ("through", false));
        std::thread::sleep(Duration::from_secs(1));
    }
    // Every slow head was closed.
    let mut closed = 0;
    for stream in &mut slow {
        stream
            .set_read_timeout(Some(Duration::from_millis(100)))
            .expect("timeout");
        let mut byte = [0u8; 64];
        if matches!(stream.read(&mut byte), Ok(0)) || stream.write_all(b"X").is_err() {
            closed += 1;
        }
    }
    assert!(closed >= 190, "slow heads still open: {}", 200 - closed);
    println!(
        "threads {threads_before} -> at most {}, resident {rss_before} kB -> at most {} kB",
        peak.0, peak.1
    );
    assert!(
        peak.0 <= threads_before + 4,
        "threads grew with the connections"
    );
    assert!(
        peak.1 <= rss_before + 32 * 1024,
        "resident memory grew past 32 MiB"
    );
}

/// 64 calls at once, from four tenants (16 each, their fair share): each answered with its own
/// text, each in the audit exactly once, and `toolcell audit verify` passes.
#[test]
fn sixty_four_calls_at_once_are_each_audited_exactly_once() {
    let _guard = exclusive();
    let tenants = ["t1", "t2", "t3", "t4"];
    let (server, tokens, dir) = server(&tenants, "", POLICY);
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..64u64)
            .map(|id| {
                let token = &tokens[(id % 4) as usize];
                let addr = server.addr;
                scope.spawn(move || {
                    let text = format!("call {id}");
                    let answer =
                        call_with(addr, Some(token), id, "echo", json!({ "text": text }), &[]);
                    assert_eq!(call_text(&answer), (text, false), "call {id}");
                })
            })
            .collect();
        for call in calls {
            call.join().expect("a call");
        }
    });
    let audit = dir.path().join("audit.jsonl");
    let lines = super::audit_lines(&audit);
    let mut ids: Vec<(String, String)> = lines
        .iter()
        .map(|line| {
            (
                line["agent"].as_str().unwrap_or_default().to_owned(),
                line["call_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    ids.sort();
    let mut expected: Vec<(String, String)> = (0..64u64)
        .map(|id| (tenants[(id % 4) as usize].to_owned(), id.to_string()))
        .collect();
    expected.sort();
    assert_eq!(ids, expected, "each call audited exactly once");
    let verified = toolcell_command()
        .args(["audit", "verify"])
        .arg(&audit)
        .output()
        .expect("toolcell audit verify");
    assert!(verified.status.success(), "{verified:?}");
}
