//! Tools that run as tasks over MCP 2026-07-28 (the tasks extension, SEP-2663), as the
//! operator's policy (`task = { support, after_ms }`) lets each: the conformance suite's
//! fixtures, each tested here by its own name, and the attacks on a task that waits for its
//! client's answers (an answer to a question it did not ask, another tenant's answers).

use super::{Server, request, tokens_file};
use crate::support::tools_dir;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The suite's task fixtures, served as the conformance test serves them, to two tenants.
struct Rig {
    server: Server,
    tokens: Vec<String>,
    _tools: tempfile::TempDir,
    _policy: tempfile::TempDir,
}

fn rig() -> Rig {
    use crate::guests::*;
    let fixtures: [(&str, &[u8]); 8] = [
        ("talker", TALKER),
        ("greet", GREET),
        ("slow_compute", SLOW_COMPUTE),
        ("failing_job", FAILING_JOB),
        ("protocol_error_job", PROTOCOL_ERROR_JOB),
        ("confirm_delete", CONFIRM_DELETE),
        ("multi_input", MULTI_INPUT),
        ("test_tool_with_task", TEST_TOOL_WITH_TASK),
    ];
    let tools = tools_dir(&fixtures);
    let policy_dir = tempfile::tempdir().expect("temp dir");
    let policy = policy_dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        r#"
[tools.greet]
task = { support = "forbidden" }
[tools.slow_compute]
task = { after_ms = 100 }
[tools.protocol_error_job]
task = { after_ms = 100 }
[tools.failing_job]
task = { support = "required", after_ms = 100 }
[tools.confirm_delete]
task = { after_ms = 0 }
client.elicit = { access = "allow" }
[tools.multi_input]
task = { after_ms = 0 }
client.elicit = { access = "allow" }
[tools.talker]
task = { after_ms = 0 }
client.elicit = { access = "allow" }
[tools.test_tool_with_task]
task = { support = "required" }
client.elicit = { access = "allow" }
"#,
    )
    .expect("the policy");
    let (file, tokens) = tokens_file(tools.path(), &[("team-a", None), ("team-b", None)]);
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &policy.to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
    ]);
    Rig {
        server,
        tokens,
        _tools: tools,
        _policy: policy_dir,
    }
}

/// What a client that takes tasks and shows forms declares.
pub(super) fn takes_tasks() -> Value {
    json!({ "elicitation": { "form": {} }, "extensions": { "io.modelcontextprotocol/tasks": {} } })
}

/// A stateless request of `method` (`Mcp-Name` carrying `name`) with `params`, from a client
/// declaring `capabilities`, as `token`'s tenant: the JSON-RPC answer.
pub(super) fn send(
    addr: SocketAddr,
    token: &str,
    method: &str,
    name: &str,
    mut params: Value,
    capabilities: Value,
) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    let bearer = format!("Bearer {token}");
    let answer = request(
        addr,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
            ("Mcp-Name", name),
            ("Authorization", &bearer),
        ],
        &body.to_string(),
    );
    answer.json()
}

impl Rig {
    fn call(&self, tenant: usize, tool: &str, arguments: Value, capabilities: Value) -> Value {
        send(
            self.server.addr,
            &self.tokens[tenant],
            "tools/call",
            tool,
            json!({ "name": tool, "arguments": arguments }),
            capabilities,
        )
    }

    /// A task's `tasks/get`, `tasks/update` or `tasks/cancel`, as `tenant`.
    fn task(&self, tenant: usize, method: &str, task: &str, mut params: Value) -> Value {
        params["taskId"] = json!(task);
        send(
            self.server.addr,
            &self.tokens[tenant],
            method,
            task,
            params,
            takes_tasks(),
        )
    }

    /// `tool` called as a task by team-a: its id.
    fn task_of(&self, tool: &str, arguments: Value) -> String {
        let created = self.call(0, tool, arguments, takes_tasks());
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        created["result"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("a task id: {created}"))
            .to_owned()
    }

    /// Team-a's task `task` once `until` holds of its `tasks/get` result (within 20 s).
    fn wait(&self, task: &str, until: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let now = self.task(0, "tasks/get", task, json!({}));
            let result = now["result"].clone();
            if until(&result) {
                return result;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "task {task} never got there: {now}\n{}",
                self.server.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn ended(&self, task: &str) -> Value {
        self.wait(task, |result| {
            ["completed", "failed", "cancelled"].contains(&result["status"].as_str().unwrap_or(""))
        })
    }

    fn waiting(&self, task: &str) -> Value {
        self.wait(task, |result| result["status"] == "input_required")
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// A tool the policy forbids tasks is answered directly, however the client asks.
#[test]
pub(crate) fn greet() {
    let rig = rig();
    let answer = rig.call(0, "greet", json!({ "name": "World" }), takes_tasks());
    assert_eq!(answer["result"]["resultType"], "complete", "{answer}");
    assert_eq!(text(&answer["result"]), "Hello, World!", "{answer}");
}

/// A long call becomes a task (after the policy's tenth of a second) for a client that takes
/// tasks, and is answered directly for one that does not; cancelled, it ends `cancelled`, and
/// a cancel of an ended task is the same empty acknowledgement.
#[test]
pub(crate) fn slow_compute() {
    let rig = rig();
    let direct = rig.call(
        0,
        "slow_compute",
        json!({ "seconds": 1, "label": "x" }),
        json!({}),
    );
    assert_eq!(direct["result"]["resultType"], "complete", "{direct}");
    assert_eq!(text(&direct["result"]), "Computed x in 1 s.", "{direct}");
    let task = rig.task_of("slow_compute", json!({ "seconds": 60 }));
    let working = rig.task(0, "tasks/get", &task, json!({}));
    assert_eq!(working["result"]["status"], "working", "{working}");
    let ack = rig.task(0, "tasks/cancel", &task, json!({}));
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    let ended = rig.ended(&task);
    assert_eq!(ended["status"], "cancelled", "{ended}");
    let again = rig.task(0, "tasks/cancel", &task, json!({}));
    assert_eq!(
        again["result"],
        json!({ "resultType": "complete" }),
        "{again}"
    );
}

/// A tool that must run as a task is refused, before it runs, to a client that takes none
/// (naming the extension it must declare); as a task, its own failure is a `completed` task
/// whose result is an error.
#[test]
pub(crate) fn failing_job() {
    let rig = rig();
    let refused = rig.call(0, "failing_job", json!({}), json!({}));
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "{refused}"
    );
    let task = rig.task_of("failing_job", json!({}));
    let ended = rig.ended(&task);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["result"]["isError"], true, "{ended}");
}

/// A tool whose instance traps has given no result: its task is `failed`, with the host's
/// error and no result.
#[test]
pub(crate) fn protocol_error_job() {
    let rig = rig();
    let task = rig.task_of("protocol_error_job", json!({}));
    let ended = rig.ended(&task);
    assert_eq!(ended["status"], "failed", "{ended}");
    assert_eq!(ended["error"]["code"], -32603, "{ended}");
    assert!(ended.get("result").is_none(), "{ended}");
}

/// A task whose tool asks waits `input_required` with the question; another tenant's answer is
/// refused, an answer to a question it did not ask is dropped, and the task still waits; the
/// answer runs the tool again, to its end, with it (and nothing of the stray answers).
#[test]
pub(crate) fn confirm_delete() {
    let rig = rig();
    let task = rig.task_of("confirm_delete", json!({ "filename": "a.txt" }));
    let waiting = rig.waiting(&task);
    let keys: Vec<&String> = waiting["inputRequests"]
        .as_object()
        .map(|requests| requests.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["confirm"], "{waiting}");
    assert_eq!(
        waiting["inputRequests"]["confirm"]["method"], "elicitation/create",
        "{waiting}"
    );
    let yes = json!({ "action": "accept", "content": { "confirm": true } });
    let no = json!({ "action": "accept", "content": { "confirm": false } });
    // Another tenant's answer: no such task, for it.
    let foreign = rig.task(
        1,
        "tasks/update",
        &task,
        json!({ "inputResponses": { "confirm": no } }),
    );
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    // An answer to a question it did not ask: acknowledged, and dropped.
    let stray = rig.task(
        0,
        "tasks/update",
        &task,
        json!({ "inputResponses": { "other": yes } }),
    );
    assert_eq!(
        stray["result"],
        json!({ "resultType": "complete" }),
        "{stray}"
    );
    let still = rig.task(0, "tasks/get", &task, json!({}));
    assert_eq!(still["result"]["status"], "input_required", "{still}");
    let ack = rig.task(
        0,
        "tasks/update",
        &task,
        json!({ "inputResponses": { "confirm": yes, "extra": no } }),
    );
    assert_eq!(ack["result"], json!({ "resultType": "complete" }), "{ack}");
    let ended = rig.ended(&task);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(text(&ended["result"]), "Deleted.", "{ended}");
    // Once it is not waiting, an answer is refused.
    let late = rig.task(
        0,
        "tasks/update",
        &task,
        json!({ "inputResponses": { "confirm": yes } }),
    );
    assert_eq!(late["error"]["code"], -32602, "{late}");
}

/// Two questions at once: answered one at a time, the task waits for the other (the answered
/// one gone from `inputRequests`), and ends with both answers.
#[test]
pub(crate) fn multi_input() {
    let rig = rig();
    let task = rig.task_of("multi_input", json!({}));
    let waiting = rig.waiting(&task);
    assert_eq!(
        waiting["inputRequests"]
            .as_object()
            .map(serde_json::Map::len),
        Some(2),
        "{waiting}"
    );
    let name = |name: &str| json!({ "action": "accept", "content": { "name": name } });
    rig.task(
        0,
        "tasks/update",
        &task,
        json!({ "inputResponses": { "author": name("Ada") } }),
    );
    let half = rig.task(0, "tasks/get", &task, json!({}));
    assert_eq!(half["result"]["status"], "input_required", "{half}");
    let left: Vec<&String> = half["result"]["inputRequests"]
        .as_object()
        .map(|requests| requests.keys().collect())
        .unwrap_or_default();
    assert_eq!(left, ["reviewer"], "{half}");
    rig.task(
        0,
        "tasks/update",
        &task,
        json!({ "inputResponses": { "reviewer": name("Grace") } }),
    );
    let ended = rig.ended(&task);
    assert_eq!(ended["status"], "completed", "{ended}");
    let said = text(&ended["result"]);
    assert!(said.contains("Ada") && said.contains("Grace"), "{ended}");
}

/// A tool that asks before it works: its first call ends asking (`input_required`, no task),
/// its retry with the answer becomes a task whose result has the answer in it.
#[test]
pub(crate) fn test_tool_with_task() {
    let rig = rig();
    let first = rig.call(0, "test_tool_with_task", json!({}), takes_tasks());
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    assert!(first["result"].get("taskId").is_none(), "{first}");
    let state = first["result"]["requestState"].clone();
    let answer = json!({ "action": "accept", "content": { "name": "Alice" } });
    let retry = send(
        rig.server.addr,
        &rig.tokens[0],
        "tools/call",
        "test_tool_with_task",
        json!({
            "name": "test_tool_with_task", "arguments": {},
            "inputResponses": { "user_name": answer }, "requestState": state,
        }),
        takes_tasks(),
    );
    assert_eq!(retry["result"]["resultType"], "task", "{retry}");
    assert!(retry["result"].get("requestState").is_none(), "{retry}");
    let task = retry["result"]["taskId"].as_str().unwrap_or_default();
    let ended = rig.ended(task);
    assert_eq!(ended["status"], "completed", "{ended}");
    assert!(text(&ended["result"]).contains("Alice"), "{ended}");
}

/// A task whose tool never stops asking (a new question each round, forty rounds asked) is
/// bounded: answered every time, it waits for at most `MAX_ASK_ROUNDS_PER_CALL` rounds of
/// answers (each run asks its earlier rounds' questions again), the next `ask` is told
/// `over-limit`, and the task ends; nothing waits for ever.
#[test]
fn a_task_that_keeps_asking_is_bounded() {
    let rig = rig();
    let task = rig.task_of(
        "talker",
        json!({ "ask": [{ "key": "q", "elicit": "Again?" }], "rounds": 40 }),
    );
    let yes = json!({ "action": "accept", "content": {} });
    let mut updates = 0;
    let ended = loop {
        let now = rig.wait(&task, |result| result["status"] != "working");
        if now["status"] != "input_required" {
            break now;
        }
        let answers: serde_json::Map<String, Value> = now["inputRequests"]
            .as_object()
            .map(|asked| asked.keys().map(|key| (key.clone(), yes.clone())).collect())
            .unwrap_or_default();
        updates += 1;
        assert!(updates <= 40, "the task asks without end: {now}");
        rig.task(
            0,
            "tasks/update",
            &task,
            json!({ "inputResponses": answers }),
        );
    };
    assert_eq!(ended["status"], "completed", "{ended}");
    let limit = toolcell::client::MAX_ASK_ROUNDS_PER_CALL as usize;
    assert_eq!(updates, limit, "one wait per round a call may ask: {ended}");
    let report: Value = serde_json::from_str(text(&ended["result"])).expect("the tool's report");
    let rounds = report["rounds"].as_array().map(Vec::len);
    assert_eq!(rounds, Some(40), "{report}");
    assert_eq!(
        report["rounds"][limit]["ask_error"]["kind"], "over-limit",
        "{report}"
    );
}
