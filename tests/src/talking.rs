//! A tool talking to the client that made its call (`toolcell:tool@0.4.0`'s `client`
//! interface): log messages, progress and questions, each granted per call by the gate,
//! offered (or not) by the request's client, bounded, and counted in the audit by shape.
//!
//! In process, the client is a [`Recorder`] (a [`ClientLink`] that answers from a script and
//! keeps what it was sent); over stdio, a real MCP client (`tests/mcp/talking.py`).

use crate::support::{exclusive, toolcell_binary, tools_dir};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use toolcell::client::{
    AskFailure, Asked, ClientLink, LogLevel, MAX_LOGS_PER_CALL, Offered, Question, Sent,
};
use toolcell::{Call, CallContext, CallReport, DenyReason, Policy, Runtime, ToolResponse};

/// A client that offers what it is told and records what it is sent.
#[derive(Default)]
struct Recorder {
    offered: Offered,
    logs: Mutex<Vec<(LogLevel, String)>>,
    progress: Mutex<Vec<f64>>,
    questions: Mutex<Vec<Question>>,
}

impl Recorder {
    fn offering(offered: Offered) -> Arc<Recorder> {
        Arc::new(Recorder {
            offered,
            ..Recorder::default()
        })
    }

    fn logs(&self) -> Vec<(LogLevel, String)> {
        self.logs.lock().expect("logs").clone()
    }
}

impl ClientLink for Recorder {
    fn offers(&self) -> Offered {
        self.offered
    }

    fn log(&self, level: LogLevel, _logger: Option<String>, message: String) -> Sent<'_> {
        self.logs.lock().expect("logs").push((level, message));
        Box::pin(async {})
    }

    fn progress(&self, progress: f64, _total: Option<f64>, _message: Option<String>) -> Sent<'_> {
        self.progress.lock().expect("progress").push(progress);
        Box::pin(async {})
    }

    fn ask(&self, questions: Vec<Question>) -> Asked<'_> {
        let answers = questions
            .iter()
            .map(|question| match question.method {
                "sampling/createMessage" => json!({
                    "role": "assistant", "model": "recorded",
                    "content": { "type": "text", "text": "an answer" }
                }),
                "elicitation/create" => json!({ "action": "accept", "content": { "name": "Bo" } }),
                _ => json!({ "roots": [] }),
            })
            .collect();
        self.questions.lock().expect("questions").extend(questions);
        Box::pin(async move { Ok::<_, AskFailure>(answers) })
    }
}

/// Everything a client can offer.
fn everything() -> Offered {
    Offered {
        log_level: Some(LogLevel::Debug),
        progress: true,
        sample: true,
        elicit: true,
        elicit_url: true,
        list_roots: true,
    }
}

/// `talker` may do all of it without asking anyone.
const OPEN: &str = "[tools.talker]\nclient.sample = { access = \"allow\" }\n\
    client.elicit = { access = \"allow\" }\nclient.elicit_url = { access = \"allow\" }\n\
    client.list_roots = { access = \"allow\" }\n";

fn runtime(policy: &str, audit: Option<&std::path::Path>) -> Runtime {
    let builder = crate::support::builder()
        .builtin_tools(false)
        .policy(Policy::from_toml(policy).expect("the policy"))
        .component("talker.wasm", crate::guests::TALKER)
        .component(
            "test_missing_capability.wasm",
            crate::guests::TEST_MISSING_CAPABILITY,
        )
        .component(
            "test_tool_with_logging.wasm",
            crate::guests::TEST_TOOL_WITH_LOGGING,
        )
        .component(
            "test_tool_with_progress.wasm",
            crate::guests::TEST_TOOL_WITH_PROGRESS,
        )
        .component("test_logging_tool.wasm", crate::guests::TEST_LOGGING_TOOL)
        .component(
            "test_streaming_elicitation.wasm",
            crate::guests::TEST_STREAMING_ELICITATION,
        )
        .component("test_sampling.wasm", crate::guests::TEST_SAMPLING)
        .component("test_elicitation.wasm", crate::guests::TEST_ELICITATION)
        .component(
            "test_elicitation_sep1034_defaults.wasm",
            crate::guests::TEST_ELICITATION_SEP1034_DEFAULTS,
        )
        .component(
            "test_elicitation_sep1330_enums.wasm",
            crate::guests::TEST_ELICITATION_SEP1330_ENUMS,
        );
    let mut runtime = builder.build().expect("runtime");
    if let Some(audit) = audit {
        runtime = runtime.with_audit(toolcell::audit::Audit::open(audit).expect("the audit"));
    }
    assert_eq!(runtime.load_errors(), &[], "every talking guest loads");
    runtime
}

/// Run `tool` with `arguments` in a context whose client is `client`, if any.
fn run(
    runtime: &Runtime,
    client: Option<Arc<Recorder>>,
    tool: &str,
    arguments: Value,
) -> CallReport {
    let mut context: CallContext = runtime.default_context().clone();
    if let Some(client) = client {
        context = context.with_client(client);
    }
    let call = Call::new("t", tool, arguments.to_string()).in_context(context);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("an executor")
        .block_on(runtime.run(&call))
}

/// What `talker` said it held and was told.
fn said(report: &CallReport) -> Value {
    match &report.response {
        ToolResponse::Result { text, .. } => serde_json::from_str(text).expect("talker's JSON"),
        other => panic!("talker did not answer: {other:?}"),
    }
}

/// Each call is its own: the log bound, the progress order and the question keys start again
/// in a fresh instance, and what the tool holds is what this call's client offers, whatever
/// the call before it held.
#[test]
pub(crate) fn talker() {
    let runtime = runtime(OPEN, None);
    let flood = json!({ "logs": [{ "level": "info", "message": "m", "times": 300 }],
                        "progress": [{ "value": 5 }, { "value": 1 }, { "value": 7 }],
                        "ask": [{ "key": "k", "sample": "hi" }] });
    let client = Recorder::offering(everything());
    let first = run(&runtime, Some(Arc::clone(&client)), "talker", flood.clone());
    assert_eq!(said(&first)["answers"][0]["model"], "recorded", "{first:?}");
    assert_eq!(client.logs().len(), MAX_LOGS_PER_CALL as usize);
    assert_eq!(*client.progress.lock().expect("progress"), [5.0, 7.0]);
    assert_eq!(first.client.logs, MAX_LOGS_PER_CALL);
    assert_eq!(first.client.progress, 2);
    assert_eq!(first.client.dropped, 300 - MAX_LOGS_PER_CALL + 1);
    assert_eq!(first.client.questions, 1);

    // The next call, to another client: a fresh bound, the same key asked again, progress
    // starting low again.
    let next = Recorder::offering(everything());
    let second = run(&runtime, Some(Arc::clone(&next)), "talker", flood);
    assert!(said(&second).get("answers").is_some(), "{second:?}");
    assert_eq!(next.logs().len(), MAX_LOGS_PER_CALL as usize);
    assert_eq!(*next.progress.lock().expect("progress"), [5.0, 7.0]);

    // A call whose client offers nothing holds nothing, after calls that held everything.
    let bare = Recorder::offering(Offered::default());
    let third = run(
        &runtime,
        Some(Arc::clone(&bare)),
        "talker",
        json!({ "logs": [{ "level": "error", "message": "x" }],
                "ask": [{ "key": "k", "elicit": "?" }] }),
    );
    let told = said(&third);
    assert_eq!(told["features"], json!([]), "{told}");
    assert_eq!(told["ask_error"]["kind"], "unsupported", "{told}");
    assert!(bare.logs().is_empty() && bare.questions.lock().expect("q").is_empty());

    // And with no client at all (an embedder that gives none): the same, never a hang.
    let alone = run(
        &runtime,
        None,
        "talker",
        json!({ "ask": [{ "key": "k", "sample": "x" }] }),
    );
    assert_eq!(said(&alone)["ask_error"]["kind"], "unsupported");
}

/// The levels: a client that wants `warning` and above gets those only; the tool's questions
/// are labelled with its name before a person reads them.
#[test]
fn log_levels_are_the_clients_and_questions_carry_the_tools_name() {
    let runtime = runtime(OPEN, None);
    let client = Recorder::offering(Offered {
        log_level: Some(LogLevel::Warning),
        ..everything()
    });
    run(
        &runtime,
        Some(Arc::clone(&client)),
        "talker",
        json!({ "logs": [{ "level": "info", "message": "quiet" },
                         { "level": "error", "message": "loud" }],
                "ask": [{ "key": "form", "elicit": "Your name?" },
                        { "key": "page", "url": "https://example.invalid/login" }] }),
    );
    assert_eq!(client.logs(), [(LogLevel::Error, "loud".to_owned())]);
    let questions = client.questions.lock().expect("questions").clone();
    assert_eq!(questions.len(), 2);
    for question in &questions {
        assert!(
            question.params["message"]
                .as_str()
                .is_some_and(|message| message.starts_with("[tool talker] ")),
            "{question:?}"
        );
    }
    assert_eq!(questions[1].params["mode"], "url");
}

/// Without a policy entry, log and progress are allowed and every question is gated: with no
/// one to approve it (no approver here), the tool is told `denied`, and nothing is asked of
/// the client. A URL is denied outright unless the policy allows it.
#[test]
fn by_default_questions_wait_for_a_person_and_urls_are_denied() {
    let runtime = runtime("", None);
    let client = Recorder::offering(everything());
    for ask in [
        json!({ "key": "k", "sample": "x" }),
        json!({ "key": "k", "elicit": "x" }),
        json!({ "key": "k" }),
        json!({ "key": "k", "url": "https://example.invalid/" }),
    ] {
        let report = run(
            &runtime,
            Some(Arc::clone(&client)),
            "talker",
            json!({ "logs": [{ "level": "info", "message": "fine" }], "ask": [ask] }),
        );
        let told = said(&report);
        assert_eq!(told["ask_error"]["kind"], "denied", "{ask}: {told}");
        assert_eq!(told["features"], json!(["log", "progress"]), "{told}");
    }
    assert!(client.questions.lock().expect("q").is_empty());
    assert_eq!(client.logs().len(), 4);
}

/// A tool that cannot work without sampling is refused before it runs when its client does
/// not offer it (the MCP server turns this into -32021), and runs when it does.
#[test]
pub(crate) fn test_missing_capability() {
    let runtime = runtime(
        "[tools.test_missing_capability]\nclient.sample = { access = \"allow\" }\n",
        None,
    );
    let without = run(
        &runtime,
        Some(Recorder::offering(Offered::default())),
        "test_missing_capability",
        json!({}),
    );
    assert_eq!(
        without.response,
        ToolResponse::Denied {
            reason: DenyReason::ClientLacks {
                capability: "client.sample".to_owned()
            }
        }
    );
    assert_eq!(without.cost.memory_bytes, None, "nothing ran");
    let with = run(
        &runtime,
        Some(Recorder::offering(everything())),
        "test_missing_capability",
        json!({}),
    );
    assert_eq!(
        with.response,
        ToolResponse::text("the model (recorded) answered"),
        "{with:?}"
    );
    // Denied by the policy, a required feature refuses the call too.
    let denied = run(
        &crate::support::builder()
            .builtin_tools(false)
            .policy(
                Policy::from_toml(
                    "[tools.test_missing_capability]\nclient.sample = { access = \"deny\" }\n",
                )
                .expect("policy"),
            )
            .component("t.wasm", crate::guests::TEST_MISSING_CAPABILITY)
            .build()
            .expect("runtime"),
        Some(Recorder::offering(everything())),
        "test_missing_capability",
        json!({}),
    );
    assert!(
        matches!(denied.response, ToolResponse::Denied { .. }),
        "{denied:?}"
    );
}

/// The conformance suite's logging fixture logs three lines at `info`.
#[test]
pub(crate) fn test_tool_with_logging() {
    let runtime = runtime("", None);
    let client = Recorder::offering(everything());
    let report = run(
        &runtime,
        Some(Arc::clone(&client)),
        "test_tool_with_logging",
        json!({}),
    );
    assert!(!report.response.is_error(), "{report:?}");
    let logs = client.logs();
    assert_eq!(logs.len(), 3, "{logs:?}");
    assert!(logs.iter().all(|(level, _)| *level == LogLevel::Info));
}

/// The conformance suite's progress fixture reports 0, 50, 100.
#[test]
pub(crate) fn test_tool_with_progress() {
    let runtime = runtime("", None);
    let client = Recorder::offering(everything());
    run(
        &runtime,
        Some(Arc::clone(&client)),
        "test_tool_with_progress",
        json!({}),
    );
    assert_eq!(
        *client.progress.lock().expect("progress"),
        [0.0, 50.0, 100.0]
    );
}

/// The conformance suite's 2026 logging fixture: a request that wants `warning` and above
/// gets those; one that names no level gets nothing, though the tool logs the same.
#[test]
pub(crate) fn test_logging_tool() {
    let runtime = runtime("", None);
    let warned = Recorder::offering(Offered {
        log_level: Some(LogLevel::Warning),
        ..Offered::default()
    });
    run(
        &runtime,
        Some(Arc::clone(&warned)),
        "test_logging_tool",
        json!({}),
    );
    assert_eq!(
        warned
            .logs()
            .iter()
            .map(|(level, _)| *level)
            .collect::<Vec<_>>(),
        [LogLevel::Warning, LogLevel::Error]
    );
    let silent = Recorder::offering(Offered::default());
    let report = run(
        &runtime,
        Some(Arc::clone(&silent)),
        "test_logging_tool",
        json!({}),
    );
    assert!(silent.logs().is_empty());
    assert_eq!(report.client.dropped, 4, "{report:?}");
    assert!(!report.response.is_error());
}

/// The conformance suite's streaming-elicitation fixture asks the person for a name: answered
/// where its client can be asked and the policy allows it, told why not where it cannot.
#[test]
pub(crate) fn test_streaming_elicitation() {
    let runtime = runtime(
        "[tools.test_streaming_elicitation]\nclient.elicit = { access = \"allow\" }\n",
        None,
    );
    let asked = run(
        &runtime,
        Some(Recorder::offering(everything())),
        "test_streaming_elicitation",
        json!({}),
    );
    assert_eq!(
        asked.response,
        ToolResponse::text(r#"Hello: {"name":"Bo"}"#)
    );
    let unasked = run(
        &runtime,
        Some(Recorder::offering(Offered::default())),
        "test_streaming_elicitation",
        json!({}),
    );
    assert!(
        matches!(&unasked.response, ToolResponse::Result { text, .. } if text.starts_with("Could not ask: AskError::Unsupported")),
        "{unasked:?}"
    );
}

/// The policy that lets the 2025-11-25 suite's four asking fixtures ask without a person's
/// approval first, as the conformance test's operator does.
const FIXTURES_MAY_ASK: &str = "[tools.test_sampling]\nclient.sample = { access = \"allow\" }\n\
    [tools.test_elicitation]\nclient.elicit = { access = \"allow\" }\n\
    [tools.test_elicitation_sep1034_defaults]\nclient.elicit = { access = \"allow\" }\n\
    [tools.test_elicitation_sep1330_enums]\nclient.elicit = { access = \"allow\" }\n";

/// Run one of the asking fixtures for a client that offers everything and for one that offers
/// nothing: the one question it asked the first (method and params), the first's answer, and
/// the second's.
fn ask_fixture(tool: &str, arguments: Value) -> (Question, ToolResponse, ToolResponse) {
    let runtime = runtime(FIXTURES_MAY_ASK, None);
    let client = Recorder::offering(everything());
    let asked = run(&runtime, Some(Arc::clone(&client)), tool, arguments.clone());
    let mut questions = client.questions.lock().expect("questions").clone();
    assert_eq!(
        questions.len(),
        1,
        "{tool} asks one question: {questions:?}"
    );
    let unasked = run(
        &runtime,
        Some(Recorder::offering(Offered::default())),
        tool,
        arguments,
    );
    (
        questions.pop().expect("one"),
        asked.response,
        unasked.response,
    )
}

/// A client that cannot be asked gets the fixture's error saying so, never a hang.
fn says_it_cannot_ask(response: &ToolResponse) -> bool {
    response.is_error() && format!("{response:?}").contains("cannot be asked")
}

/// `tools-call-sampling`: the prompt goes to the model as one user message of at most 100
/// tokens; the model's text comes back.
#[test]
pub(crate) fn test_sampling() {
    let (question, answer, unasked) = ask_fixture("test_sampling", json!({ "prompt": "Hi?" }));
    assert_eq!(question.method, "sampling/createMessage");
    assert_eq!(question.params["maxTokens"], 100);
    assert_eq!(
        question.params["messages"],
        json!([{ "role": "user", "content": { "type": "text", "text": "Hi?" } }])
    );
    assert_eq!(answer, ToolResponse::text("LLM response: an answer"));
    assert!(says_it_cannot_ask(&unasked), "{unasked:?}");
}

/// `tools-call-elicitation`: the message, labelled with the tool's name, and a form of a user
/// name and an email address, both required; the person's answer comes back.
#[test]
pub(crate) fn test_elicitation() {
    let (question, answer, unasked) =
        ask_fixture("test_elicitation", json!({ "message": "Who are you?" }));
    assert_eq!(question.method, "elicitation/create");
    let message = question.params["message"].as_str().expect("a message");
    assert!(message.contains("test_elicitation") && message.contains("Who are you?"));
    let schema = &question.params["requestedSchema"];
    assert_eq!(schema["required"], json!(["username", "email"]));
    assert_eq!(schema["properties"]["email"]["type"], "string");
    assert_eq!(
        answer,
        ToolResponse::text(r#"User response: action=accept, content={"name":"Bo"}"#)
    );
    assert!(says_it_cannot_ask(&unasked), "{unasked:?}");
}

/// `elicitation-sep1034-defaults`: each kind of field carries its default.
#[test]
pub(crate) fn test_elicitation_sep1034_defaults() {
    let (question, answer, unasked) = ask_fixture("test_elicitation_sep1034_defaults", json!({}));
    let properties = &question.params["requestedSchema"]["properties"];
    for (field, kind, default) in [
        ("name", "string", json!("John Doe")),
        ("age", "integer", json!(30)),
        ("score", "number", json!(95.5)),
        ("status", "string", json!("active")),
        ("verified", "boolean", json!(true)),
    ] {
        assert_eq!(properties[field]["type"], kind, "{field}");
        assert_eq!(properties[field]["default"], default, "{field}");
    }
    assert!(
        matches!(&answer, ToolResponse::Result { text, .. } if text.starts_with("Elicitation completed: action=accept")),
        "{answer:?}"
    );
    assert!(says_it_cannot_ask(&unasked), "{unasked:?}");
}

/// `elicitation-sep1330-enums`: the five ways a form offers a choice, each as the suite reads
/// it.
#[test]
pub(crate) fn test_elicitation_sep1330_enums() {
    let (question, answer, unasked) = ask_fixture("test_elicitation_sep1330_enums", json!({}));
    let properties = &question.params["requestedSchema"]["properties"];
    assert_eq!(
        properties["untitledSingle"]["enum"],
        json!(["option1", "option2", "option3"])
    );
    assert!(properties["untitledSingle"].get("oneOf").is_none());
    assert_eq!(
        properties["titledSingle"]["oneOf"][0]["title"],
        "First Option"
    );
    assert!(properties["titledSingle"].get("enum").is_none());
    assert_eq!(properties["legacyEnum"]["enumNames"][2], "Option Three");
    assert_eq!(properties["untitledMulti"]["type"], "array");
    assert_eq!(
        properties["titledMulti"]["items"]["anyOf"][1]["const"],
        "value2"
    );
    assert!(
        matches!(&answer, ToolResponse::Result { text, .. } if text.starts_with("Elicitation completed: action=accept")),
        "{answer:?}"
    );
    assert!(says_it_cannot_ask(&unasked), "{unasked:?}");
}

/// A hostile tool's questions are refused before they cost the host: 100,000 model hints
/// (tiny in the guest, a JSON object each on the host) and a 2 MiB form schema are over the
/// bound before anything is built or sent, and a tool may not speak as the host: every line of
/// its message is labelled, and a schema that says `toolcell:` or hides characters is refused.
#[test]
fn questions_are_bounded_before_they_are_built_and_cannot_speak_as_the_host() {
    let runtime = runtime(OPEN, None);
    let client = Recorder::offering(everything());
    let ask = |question: Value| {
        said(&run(
            &runtime,
            Some(Arc::clone(&client)),
            "talker",
            json!({ "ask": [question] }),
        ))
    };
    let told = ask(json!({ "key": "k", "sample": "x", "hints": 100_000 }));
    assert_eq!(told["ask_error"]["kind"], "over-limit", "{told}");
    let told = ask(json!({ "key": "k", "elicit": "?", "pad": 2 * 1024 * 1024 }));
    assert_eq!(told["ask_error"]["kind"], "over-limit", "{told}");
    for schema in [
        json!({ "type": "object", "properties": { "d": { "type": "string",
            "title": "toolcell: agent cli: approve?" } } }),
        json!({ "type": "object", "properties": { "d": { "type": "string",
            "description": "hidden\u{202e}txt" } } }),
        json!({ "type": "object", "properties": { "d": { "type": "array",
            "items": { "type": "object" } } } }),
    ] {
        let told = ask(json!({ "key": "k", "elicit": "?", "schema": schema }));
        assert_eq!(told["ask_error"]["kind"], "invalid", "{told}");
    }
    for url in [
        "https://bank.example@evil.example/",
        "https://ok.example/a b",
        "https://",
        "http://plain.example/",
    ] {
        let told = ask(json!({ "key": "k", "url": url }));
        assert_eq!(told["ask_error"]["kind"], "invalid", "{url}: {told}");
    }
    assert!(
        client.questions.lock().expect("q").is_empty(),
        "nothing was sent"
    );
    ask(json!({ "key": "k", "elicit": "first\ntoolcell: agent cli: fs wants more\u{1b}[2J" }));
    let sent = client.questions.lock().expect("q").clone();
    assert_eq!(
        sent[0].params["message"],
        "[tool talker] first\n[tool talker] toolcell: agent cli: fs wants more\\u{1b}[2J"
    );
}

/// A person asked about a gated question and saying no is not asked again in that call: the
/// rounds after are `denied` at once. Gated log messages are decided before the call like any
/// capability: with no one to ask, none is sent, and the tool does not hold `log`.
#[test]
fn a_person_who_said_no_is_not_asked_again_and_gated_logs_are_not_sent_unasked() {
    let runtime = runtime(
        "[tools.talker]\nclient.log = { access = \"gated\" }\n",
        None,
    );
    let client = Recorder::offering(everything());
    let person = Arc::new(toolcell::approval::FixedApprover::new(
        toolcell::approval::Approval::Deny,
    ));
    let context = runtime
        .default_context()
        .clone()
        .with_client(Arc::clone(&client) as Arc<dyn ClientLink>)
        .with_approver(Arc::clone(&person) as Arc<dyn toolcell::approval::Approver>);
    let call = Call::new(
        "t",
        "talker",
        json!({ "ask": [{ "key": "k", "sample": "x" }], "rounds": 3 }).to_string(),
    )
    .in_context(context);
    let report = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("an executor")
        .block_on(runtime.run(&call));
    // The gate asked about client.log before the call (denied: withheld), then the first round
    // asked about client.sample (denied); the second and third asked no one.
    let asked: Vec<String> = person
        .asked()
        .iter()
        .map(|r| r.capability.clone())
        .collect();
    assert_eq!(asked, ["client.log", "client.sample"], "{report:?}");
    let told = said(&report);
    for round in told["rounds"].as_array().expect("three rounds") {
        assert_eq!(round["ask_error"]["kind"], "denied", "{told}");
    }
    assert!(
        !told["features"]
            .as_array()
            .expect("features")
            .contains(&json!("log"))
    );
    assert!(client.questions.lock().expect("q").is_empty());
}

/// The audit records what a call sent and asked by shape (counts and bytes), never what was
/// said.
#[test]
fn the_audit_counts_what_was_said_but_not_what() {
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    let runtime = runtime(OPEN, Some(&audit));
    run(
        &runtime,
        Some(Recorder::offering(everything())),
        "talker",
        json!({ "logs": [{ "level": "info", "message": "SECRET-LOG" }],
                "ask": [{ "key": "k", "elicit": "SECRET-QUESTION" }] }),
    );
    drop(runtime);
    let text = std::fs::read_to_string(&audit).expect("the audit");
    let line: Value = serde_json::from_str(text.lines().last().expect("a line")).expect("JSON");
    assert_eq!(line["client"]["logs"], 1, "{line}");
    assert_eq!(line["client"]["questions"], 1, "{line}");
    assert!(
        line["client"]["question_bytes"].as_u64() > Some(0),
        "{line}"
    );
    assert!(!text.contains("SECRET"), "{text}");
    assert!(
        line["granted"]
            .as_array()
            .is_some_and(|granted| granted.iter().any(|g| g["capability"] == "client.elicit")),
        "{line}"
    );
}

/// A real MCP client over stdio: the tool logs at the session's level, reports rising
/// progress, asks the model, the person and the roots and gets their answers, is bounded and
/// refused in typed ways, is told `unsupported` by a client that offers nothing, `denied` by
/// the policy, and is gated by the person where the policy says nothing.
#[test]
fn a_tool_talks_to_a_real_mcp_client_over_stdio() {
    let _guard = exclusive();
    let tools = tools_dir(&[("talker", crate::guests::TALKER)]);
    let open = tools.path().join("open.toml");
    std::fs::write(&open, OPEN).expect("policy");
    let deny = tools.path().join("deny.toml");
    std::fs::write(
        &deny,
        "[tools.talker]\nclient.sample = { access = \"deny\" }\n",
    )
    .expect("policy");
    let audit = tools.path().join("audit.jsonl");
    let (passed, said) = crate::mcp::run_client(
        "talking.py",
        [
            toolcell_binary().as_os_str(),
            tools.path().as_os_str(),
            open.as_os_str(),
            deny.as_os_str(),
            audit.as_os_str(),
        ],
    );
    assert!(passed, "{said}");
}

/// A real MCP client in both eras: log messages and progress reach it over stdio and HTTP (a
/// 2026-07-28 request only gets log messages when it names a level); a question is an
/// `input_required` round over 2026-07-28, which the client answers, and `unsupported` over
/// HTTP in the 2025-11-25 era.
#[test]
fn a_tools_log_and_progress_reach_a_real_client_in_both_eras_over_stdio_and_http() {
    let _guard = exclusive();
    let tools = tools_dir(&[("talker", crate::guests::TALKER)]);
    let policy_dir = tempfile::tempdir().expect("temp dir");
    let policy = policy_dir.path().join("open.toml");
    std::fs::write(&policy, OPEN).expect("policy");
    let server = crate::http::Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &policy.to_string_lossy(),
    ]);
    let url = server.url();
    let (passed, said) = crate::mcp::run_client(
        "talking_eras.py",
        [
            toolcell_binary().as_os_str(),
            tools.path().as_os_str(),
            policy.as_os_str(),
            std::ffi::OsStr::new(&url),
        ],
    );
    assert!(passed, "{said}\nserver:\n{}", server.stderr());
}
