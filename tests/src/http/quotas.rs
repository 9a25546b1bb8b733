//! Quotas over HTTP: two tenants under load, a spent daily budget, and SIGHUP changing a
//! quota while calls keep coming.

use super::{Answer, Server, call_with, metrics_token, request, tokens_file};
use crate::support::{exclusive, tools_dir};
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// A call of the `structured` guest that takes `sleep_ms` (so that calls are in flight at
/// once), as `token`'s tenant, and how long its answer took.
fn sum(addr: SocketAddr, token: &str, id: u64, sleep_ms: u64) -> (Answer, Duration) {
    let started = Instant::now();
    let answer = call_with(
        addr,
        Some(token),
        id,
        "structured",
        serde_json::json!({ "a": 40, "b": 2, "sleep_ms": sleep_ms }),
        &[],
    );
    (answer, started.elapsed())
}

/// Whether `answer` is the call's result, or else a quota's refusal (429, `Retry-After`, the
/// typed error): the quota it names. Anything else fails the test.
fn outcome(answer: &Answer, tenant: &str, id: u64) -> Option<String> {
    if answer.status == 200 {
        let json = answer.json();
        assert_eq!(
            json["result"]["structuredContent"],
            serde_json::json!({ "sum": 42 }),
            "{answer:?}"
        );
        return None;
    }
    assert_eq!(answer.status, 429, "{answer:?}");
    let retry_after: u64 = answer
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no Retry-After: {answer:?}"));
    assert!(retry_after >= 1, "{answer:?}");
    assert!(
        answer.body.len() <= toolcell_mcp::http::quota::MAX_REFUSAL_BYTES,
        "{answer:?}"
    );
    let json = answer.json();
    assert_eq!(json["id"], id, "{json}");
    assert_eq!(
        json["error"]["code"],
        toolcell_mcp::http::quota::QUOTA_ERROR_CODE,
        "{json}"
    );
    let data = &json["error"]["data"];
    assert_eq!(data["tenant"], tenant, "{json}");
    assert_eq!(data["retry_after"], retry_after, "{json}");
    let message = json["error"]["message"].as_str().expect("a message");
    assert!(message.starts_with("quota exceeded: "), "{message}");
    Some(data["quota"].as_str().expect("the quota").to_owned())
}

fn p50(latencies: &mut [Duration]) -> Duration {
    latencies.sort();
    latencies
        .get(latencies.len() / 2)
        .copied()
        .unwrap_or_default()
}

/// Append `text` (quota tables) to the tokens file at `file`.
fn append(file: &std::path::Path, text: &str) {
    std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .expect("append to the tokens file");
}

/// Wait until the server's stderr has said `what` `times` times (a condition, not a duration).
fn wait_for_log(server: &Server, what: &str, times: usize) {
    let started = Instant::now();
    while server.stderr().matches(what).count() < times {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the server never said {what:?}:\n{}",
            server.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn send_hangup(server: &Server) {
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// Tenant A calls from six threads at once, past its rate and its in-flight bound; tenant B
/// calls from two, within its own. A gets 429s for both reasons; every call of B's succeeds.
/// B's p50 alone and beside A, and A's, are printed (timing is not asserted: the machine is
/// shared).
#[test]
fn a_tenant_past_its_quota_gets_429s_and_the_other_tenant_none() {
    let _guard = exclusive();
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let (file, tokens) = tokens_file(tools.path(), &[("team-a", None), ("team-b", None)]);
    append(
        &file,
        "[quota.team-a]\nrate = 4\nburst = 4\nin_flight = 2\n\
         [quota.team-b]\nrate = 1000\nin_flight = 16\n",
    );
    let (metrics_file, operator) = metrics_token(tools.path());
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
        "--metrics-token",
        &metrics_file.to_string_lossy(),
    ]);
    let addr = server.addr;
    let (a, b) = (tokens[0].as_str(), tokens[1].as_str());
    const B_CALLS: u64 = 40;
    const B_SLEEP_MS: u64 = 20;
    // B alone first: its latency without A.
    let mut alone: Vec<Duration> = (0..B_CALLS)
        .map(|id| {
            let (answer, took) = sum(addr, b, id, B_SLEEP_MS);
            assert_eq!(outcome(&answer, "team-b", id), None, "B alone");
            took
        })
        .collect();
    let b_done = AtomicBool::new(false);
    let (a_results, mut beside) = std::thread::scope(|scope| {
        let a_threads: Vec<_> = (0..6)
            .map(|thread| {
                let b_done = &b_done;
                scope.spawn(move || {
                    let mut results = Vec::new();
                    let mut id = thread * 10_000;
                    // At least 20 calls each, and on until B is done.
                    while results.len() < 20 || !b_done.load(Ordering::Relaxed) {
                        id += 1;
                        let (answer, took) = sum(addr, a, id, 100);
                        results.push((outcome(&answer, "team-a", id), took));
                    }
                    results
                })
            })
            .collect();
        let b_threads: Vec<_> = (0..2)
            .map(|thread| {
                scope.spawn(move || {
                    (0..B_CALLS / 2)
                        .map(|n| {
                            let id = 1_000_000 + thread * 1000 + n;
                            let (answer, took) = sum(addr, b, id, B_SLEEP_MS);
                            assert_eq!(outcome(&answer, "team-b", id), None, "B beside A");
                            took
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let beside: Vec<Duration> = b_threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("B's calls all succeed"))
            .collect();
        b_done.store(true, Ordering::Relaxed);
        let a_results: Vec<(Option<String>, Duration)> = a_threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("A's answers are all 200 or 429"))
            .collect();
        (a_results, beside)
    });
    let refused = |quota: &str| {
        a_results
            .iter()
            .filter(|(outcome, _)| outcome.as_deref() == Some(quota))
            .count()
    };
    let mut a_admitted: Vec<Duration> = a_results
        .iter()
        .filter(|(outcome, _)| outcome.is_none())
        .map(|(_, took)| *took)
        .collect();
    let (rate, in_flight) = (refused("rate"), refused("in_flight"));
    eprintln!(
        "quotas: B p50 alone {:?}, beside A {:?} ({} calls, all 200); A p50 of its {} admitted \
         calls (100 ms each) {:?}, {} refused for its rate, {} for its in-flight bound",
        p50(&mut alone),
        p50(&mut beside),
        beside.len(),
        a_admitted.len(),
        p50(&mut a_admitted),
        rate,
        in_flight,
    );
    assert!(
        rate > 0 && in_flight > 0,
        "rate {rate}, in flight {in_flight}"
    );
    assert_eq!(
        a_admitted.len() + rate + in_flight,
        a_results.len(),
        "A's refusals are its quota's only"
    );
    let bearer = format!("Bearer {operator}");
    // Every place is given back once its request is done (a moment after its answer is sent).
    let released = r#"toolcell_quota_in_flight{tenant="team-a"} 0"#;
    let started = Instant::now();
    let metrics = loop {
        let metrics = request(addr, "GET", "/metrics", &[("Authorization", &bearer)], "");
        assert_eq!(metrics.status, 200, "{metrics:?}");
        if metrics.body.lines().any(|l| l == released) {
            break metrics;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "places never given back:\n{}",
            metrics.body
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    for (quota, count) in [("rate", rate), ("in_flight", in_flight)] {
        let line = format!(
            r#"toolcell_quota_refusals_total{{tenant="team-a",quota="{quota}",scope="tenant"}} {count}"#
        );
        assert!(
            metrics.body.lines().any(|l| l == line),
            "no {line:?} in:\n{}",
            metrics.body
        );
    }
    assert!(
        !metrics
            .body
            .contains(r#"toolcell_quota_refusals_total{tenant="team-b""#),
        "{}",
        metrics.body
    );
}

/// A daily budget of 1 ms is spent by the first call (charged in full when it ends, never
/// cut); the next is refused until midnight UTC, as `Retry-After` says. A token's own quota
/// refuses it alone, not its tenant's other token.
#[test]
fn a_spent_daily_budget_is_refused_until_midnight_utc() {
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let (file, tokens) = tokens_file(tools.path(), &[("team-a", None), ("team-a", None)]);
    // The first token of team-a has a budget of its own; the tenant's is larger.
    let text = std::fs::read_to_string(&file).expect("tokens file");
    let first_table_end = text.find("\n\n").expect("two tables");
    let text = format!(
        "{}\nquota = {{ daily_ms = 1 }}{}\n[quota.team-a]\ndaily_ms = 60000\n",
        &text[..first_table_end],
        &text[first_table_end..]
    );
    std::fs::write(&file, text).expect("tokens file");
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
    ]);
    let (limited, other) = (tokens[0].as_str(), tokens[1].as_str());
    let (answer, took) = sum(server.addr, limited, 1, 30);
    assert_eq!(outcome(&answer, "team-a", 1), None, "within the budget");
    assert!(took >= Duration::from_millis(30), "it ran to its end");
    let before = toolcell_mcp::http::quota::utc_day(SystemTime::now()).1;
    let (answer, _) = sum(server.addr, limited, 2, 0);
    let after = toolcell_mcp::http::quota::utc_day(SystemTime::now()).1;
    assert_eq!(
        outcome(&answer, "team-a", 2).as_deref(),
        Some("daily_ms"),
        "{answer:?}"
    );
    let json = answer.json();
    assert_eq!(json["error"]["data"]["scope"], "token", "{json}");
    let retry_after: u64 = json["error"]["data"]["retry_after"]
        .as_u64()
        .expect("seconds");
    // `before` and `after` bracket it (across midnight itself, `after` is a day's length).
    assert!(
        (after..=before).contains(&retry_after) || after > before,
        "{retry_after} s to midnight UTC, expected {after} to {before}"
    );
    let message = json["error"]["message"].as_str().expect("message");
    assert!(message.contains("midnight UTC"), "{message}");
    // A call whose method is spelled with a JSON escape is still a call, and still counted.
    let escaped = r#"{"jsonrpc":"2.0","id":4,"method":"tools\/call","params":{"name":"structured","arguments":{"a":40,"b":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let headers = super::mcp_headers(Some(limited), "structured");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let answer = request(server.addr, "POST", "/mcp", &headers, escaped);
    assert_eq!(
        outcome(&answer, "team-a", 4).as_deref(),
        Some("daily_ms"),
        "{answer:?}"
    );
    // The tenant's other token has no budget of its own; the tenant's is not spent.
    let (answer, _) = sum(server.addr, other, 3, 0);
    assert_eq!(outcome(&answer, "team-a", 3), None, "{answer:?}");
}

/// A client keeps calling from four threads while the tokens file's in-flight bound goes from
/// 1 to 4 and SIGHUP is sent: before, calls past one are refused; after, none is; every
/// request gets an HTTP answer. A bad file on the next SIGHUP is refused and the one in use
/// keeps serving.
#[test]
fn sighup_changes_a_quota_mid_run_and_no_call_is_lost() {
    let _guard = exclusive();
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let (file, tokens) = tokens_file(tools.path(), &[("team-a", None)]);
    let tables = std::fs::read_to_string(&file).expect("tokens file");
    std::fs::write(&file, format!("{tables}[quota.team-a]\nin_flight = 1\n")).expect("file");
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
    ]);
    let addr = server.addr;
    let token = tokens[0].as_str();
    // 0: in_flight = 1; 1: reloading; 2: in_flight = 4 in use; 3: a bad file refused; 4: stop.
    let phase = AtomicU8::new(0);
    // Per phase: calls answered, and calls refused.
    let answered: [AtomicUsize; 4] = Default::default();
    let refused: [AtomicUsize; 4] = Default::default();
    let answers = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4u64)
            .map(|thread| {
                let (phase, answered, refused) = (&phase, &answered, &refused);
                scope.spawn(move || {
                    let mut answers = Vec::new();
                    let mut id = thread * 100_000;
                    loop {
                        let sent_in = phase.load(Ordering::SeqCst);
                        if sent_in == 4 {
                            return answers;
                        }
                        id += 1;
                        let (answer, _) = sum(addr, token, id, 50);
                        let outcome = outcome(&answer, "team-a", id);
                        answered[usize::from(sent_in)].fetch_add(1, Ordering::SeqCst);
                        if outcome.is_some() {
                            refused[usize::from(sent_in)].fetch_add(1, Ordering::SeqCst);
                        }
                        answers.push((sent_in, outcome));
                    }
                })
            })
            .collect();
        let refused_in = |answers: &[(u8, Option<String>)], phase: u8| {
            answers
                .iter()
                .filter(|(sent, outcome)| *sent == phase && outcome.is_some())
                .count()
        };
        // Conditions, not durations: until calls were refused under the bound of 1; until
        // each thread could have made two calls after a SIGHUP.
        let until = |counter: &AtomicUsize, count: usize| {
            let started = Instant::now();
            while counter.load(Ordering::SeqCst) < count {
                assert!(started.elapsed() < Duration::from_secs(30), "stuck");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        until(&refused[0], 3);
        std::fs::write(&file, format!("{tables}[quota.team-a]\nin_flight = 4\n")).expect("file");
        phase.store(1, Ordering::SeqCst);
        send_hangup(&server);
        wait_for_log(&server, "read the tokens file", 1);
        phase.store(2, Ordering::SeqCst);
        until(&answered[2], 8);
        std::fs::write(&file, format!("{tables}[quota.team-a]\nin_flight = 0\n")).expect("file");
        send_hangup(&server);
        wait_for_log(&server, "kept the tokens in use", 1);
        phase.store(3, Ordering::SeqCst);
        until(&answered[3], 8);
        phase.store(4, Ordering::SeqCst);
        let answers: Vec<(u8, Option<String>)> = threads
            .into_iter()
            .flat_map(|thread| thread.join().expect("every request got 200 or 429"))
            .collect();
        let count = |phase: u8| answers.iter().filter(|(sent, _)| *sent == phase).count();
        eprintln!(
            "sighup: before {} calls ({} refused), after {} ({} refused), after a bad file {} ({} refused)",
            count(0),
            refused_in(&answers, 0),
            count(2),
            refused_in(&answers, 2),
            count(3),
            refused_in(&answers, 3),
        );
        assert!(refused_in(&answers, 0) > 0, "the bound of 1 refused calls");
        assert!(
            count(2) > 0 && count(3) > 0,
            "calls were made after each SIGHUP"
        );
        assert_eq!(refused_in(&answers, 2), 0, "the bound of 4 refuses none");
        assert_eq!(refused_in(&answers, 3), 0, "the bad file was not taken");
        answers
    });
    assert!(
        answers
            .iter()
            .all(|(_, outcome)| outcome.as_deref().is_none_or(|quota| quota == "in_flight"))
    );
    let stderr = server.stderr();
    assert!(
        stderr.contains("[quota.team-a]: in_flight must be 1 to 16"),
        "the bad file's reason is logged:\n{stderr}"
    );
}

/// A request of what a component offers beside tools runs a guest as a call does, so it is
/// admitted and counted as one: a tenant at its rate gets 429 for a `prompts/get`, a
/// `resources/read` and a `completion/complete` as for a `tools/call`, and the burst they
/// spent is the one calls spend.
#[test]
fn a_prompt_a_read_and_a_completion_count_against_the_quota() {
    let _guard = exclusive();
    let tools = tools_dir(&[("offers_fixture", crate::guests::OFFERS_FIXTURE)]);
    let (file, tokens) = tokens_file(tools.path(), &[("team-a", None)]);
    append(&file, "[quota.team-a]\nrate = 0.01\nburst = 3\n");
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
    ]);
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let ask = |id: u64, method: &str, name: &str, params: serde_json::Value| {
        let mut params = params;
        params["_meta"] = meta.clone();
        let body =
            serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
                .to_string();
        let bearer = format!("Bearer {}", tokens[0]);
        let mut headers = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
            ("Authorization", bearer.as_str()),
        ];
        if !name.is_empty() {
            headers.push(("Mcp-Name", name));
        }
        request(server.addr, "POST", "/mcp", &headers, &body)
    };
    let prompt = |id| {
        ask(
            id,
            "prompts/get",
            "test_simple_prompt",
            serde_json::json!({ "name": "test_simple_prompt" }),
        )
    };
    let read = |id| {
        ask(
            id,
            "resources/read",
            "test://static-text",
            serde_json::json!({ "uri": "test://static-text" }),
        )
    };
    let complete = |id| {
        ask(
            id,
            "completion/complete",
            "",
            serde_json::json!({
                "ref": { "type": "ref/prompt", "name": "test_prompt_with_arguments" },
                "argument": { "name": "arg1", "value": "te" },
            }),
        )
    };
    // The burst of three: one of each, answered.
    for answer in [prompt(1), read(2), complete(3)] {
        assert_eq!(answer.status, 200, "{answer:?}");
        assert!(answer.json().get("result").is_some(), "{answer:?}");
    }
    // Past it: each refused by the rate, before it runs.
    for answer in [prompt(4), read(5), complete(6)] {
        assert_eq!(answer.status, 429, "{answer:?}");
    }
    // A list runs no guest: not counted.
    let listed = ask(7, "prompts/list", "", serde_json::json!({}));
    assert_eq!(listed.status, 200, "{listed:?}");
}
