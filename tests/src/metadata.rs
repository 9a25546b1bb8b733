//! What a tool says about itself cannot hurt the host: each attack a hostile review made with
//! its own metadata, made again. Metadata over a limit refuses its tool at load, by name, and
//! the others load; a schema inside every limit that is still slow to check ends at the
//! call's deadline or its stop, off the threads that answer everyone else.

use crate::support::{builder, exclusive, tools_dir};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcell::limits::{MAX_CAPABILITIES, MAX_DESCRIPTION_BYTES};
use toolcell::{
    Call, CallOptions, CapabilityKind, FnTool, ResourceRef, Runtime, StopToken, ToolInfo,
    ToolResponse,
};

/// A native tool that describes itself with `info` and answers "ran".
fn native(info: ToolInfo) -> impl toolcell::NativeTool {
    FnTool::new(info, |_, _| async { Ok("ran".to_owned()) })
}

/// A schema of one property whose value is `inner`.
fn with_property(inner: Value, defs: Map<String, Value>) -> Value {
    json!({ "type": "object", "properties": { "x": inner }, "$defs": defs })
}

/// The attacks of the review, as metadata: (tool name, description, schema, capabilities,
/// what the refusal must say).
fn attacks() -> Vec<(&'static str, ToolInfo, &'static str)> {
    let mut chain = Map::new();
    for i in 0..20_000 {
        chain.insert(
            format!("d{i}"),
            json!({ "$ref": format!("#/$defs/d{}", i + 1) }),
        );
    }
    chain.insert("d20000".to_owned(), json!({ "type": "string" }));
    let mut doubling = Map::new();
    for level in 0..26 {
        let next = format!("#/$defs/l{}", level + 1);
        doubling.insert(
            format!("l{level}"),
            json!({ "anyOf": [{ "$ref": next }, { "$ref": next }] }),
        );
    }
    doubling.insert("l26".to_owned(), json!({ "type": "string" }));
    let patterns: Map<String, Value> = (0..20_000)
        .map(|i| (format!("^p{i}[a-z]+$"), json!({ "type": "string" })))
        .collect();
    let properties: Map<String, Value> = (0..1_000_000)
        .map(|i| (format!("p{i}"), json!({ "type": "string" })))
        .collect();
    let many_capabilities = (0..5000).fold(
        ToolInfo::new(
            "many_capabilities",
            "Needs a lot.",
            json!({ "type": "object" }),
        ),
        |info, i| {
            info.capability(
                CapabilityKind::FilesystemRead,
                ResourceRef::Fixed(format!("dir{i}")),
            )
        },
    );
    let schema = |name, schema| ToolInfo::new(name, "A hostile schema.", schema);
    vec![
        (
            "ref_chain",
            schema(
                "ref_chain",
                with_property(json!({ "$ref": "#/$defs/d0" }), chain),
            ),
            "bytes or more",
        ),
        (
            "doubling",
            schema(
                "doubling",
                with_property(json!({ "$ref": "#/$defs/l0" }), doubling),
            ),
            "more than 4096 subschemas",
        ),
        (
            "backtracking",
            schema(
                "backtracking",
                json!({ "properties": { "s": { "type": "string", "pattern": r"^(a|a)*\1b" } } }),
            ),
            "not a valid JSON Schema",
        ),
        // Valid patterns, linear for the host's engine, but exponential for the backtracking
        // engines of clients that check arguments against the schema (issue 40).
        (
            "nested_quantifiers",
            schema(
                "nested_quantifiers",
                json!({ "properties": { "s": { "type": "string", "pattern": "^(a+)+$" } } }),
            ),
            "backtracking regex engine",
        ),
        (
            "overlapping_alternatives",
            schema(
                "overlapping_alternatives",
                json!({ "patternProperties": { r"^(\w|\d)+$": { "type": "string" } } }),
            ),
            "backtracking regex engine",
        ),
        (
            "patterns",
            schema("patterns", json!({ "patternProperties": patterns })),
            "bytes or more",
        ),
        (
            "properties",
            schema("properties", json!({ "properties": properties })),
            "bytes or more",
        ),
        (
            "ref_loop",
            schema(
                "ref_loop",
                json!({ "$ref": "#/$defs/a", "$defs": { "a": { "$ref": "#" } } }),
            ),
            "loops",
        ),
        (
            "description",
            ToolInfo::new(
                "description",
                "x".repeat(50 * 1024 * 1024),
                json!({ "type": "object" }),
            ),
            "description is",
        ),
        ("many_capabilities", many_capabilities, "capabilities"),
    ]
}

#[test]
fn hostile_metadata_refuses_its_tool_by_name_and_the_others_load() {
    let _guard = exclusive();
    let attacks = attacks();
    let expected: Vec<(String, &str)> = attacks
        .iter()
        .map(|(name, _, why)| (format!("native:{name}"), *why))
        .collect();
    let built = attacks
        .into_iter()
        .fold(builder(), |builder, (_, info, _)| builder.native(native(info)))
        .native(native(ToolInfo::new(
            "honest",
            "Fits every limit.",
            json!({ "type": "object", "properties": { "s": { "type": "string", "pattern": "^[a-z]+$" } } }),
        )));
    let started = Instant::now();
    let runtime = built.build().expect("the runtime builds");
    let took = started.elapsed();
    let errors = runtime.load_errors();
    assert_eq!(errors.len(), expected.len(), "{errors:#?}");
    for (source, why) in &expected {
        let error = errors
            .iter()
            .find(|error| &error.source == source)
            .unwrap_or_else(|| panic!("{source} was not refused: {errors:#?}"));
        assert!(error.message.contains(why), "{source}: {}", error.message);
    }
    // The limits are checked before anything is compiled: the load took seconds before them
    // (203 s for the patterns alone); now it is mostly building the fixtures' strings.
    assert!(took < Duration::from_secs(30), "loading took {took:?}");
    let report = runtime.run_blocking(&Call::new("1", "honest", r#"{"s":"abc"}"#));
    assert_eq!(report.response, ToolResponse::text("ran"));
    crate::support::assert_echo_still_works_on(&runtime);
}

/// The guest whose schema doubles per level: refused at load, named, before any validation.
#[test]
pub(crate) fn bomb_schema() {
    let runtime = builder()
        .component("test:bomb_schema", crate::guests::BOMB_SCHEMA)
        .build()
        .expect("the runtime builds");
    let errors = runtime.load_errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].source, "test:bomb_schema");
    assert!(
        errors[0].message.contains("more than 4096 subschemas"),
        "{}",
        errors[0].message
    );
    assert!(runtime.info("bomb_schema").is_none());
    crate::support::assert_echo_still_works_on(&runtime);
}

/// Arguments that take the slow schema about a minute to check: 100,000 items, each against
/// 4,000 subschemas.
fn slow_arguments() -> String {
    format!(r#"{{"xs":[{}1]}}"#, "-1,".repeat(100_000))
}

/// Make `echoes` echo calls one after another on `runtime` while something else runs; when
/// the last one answered.
fn echoes_answered(runtime: &Runtime, echoes: usize) -> Instant {
    for i in 0..echoes {
        let report = runtime.run_blocking(&Call::new(format!("e{i}"), "echo", r#"{"text":"hi"}"#));
        assert_eq!(report.response, ToolResponse::text("hi"));
    }
    Instant::now()
}

/// How far past its deadline a call may end on a loaded 2-core machine (the suite runs its
/// tests in parallel beside other builds): the property is that it ends at its deadline, not
/// how precisely, which the benches measure.
const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

/// The guest whose schema is slow but inside every limit: its calls end at their deadline and
/// at their stop, and echo keeps answering while two of them run: twenty echoes, one after
/// another, all answer before either attacker's deadline (they do not wait behind the check).
#[test]
pub(crate) fn slow_schema() {
    /// Long enough that twenty echoes fit in it on a loaded machine (each takes well under a
    /// millisecond idle), short enough to keep the test quick.
    const ATTACK_DEADLINE: Duration = Duration::from_millis(1500);
    let _guard = exclusive();
    let runtime = Arc::new(
        builder()
            .component("test:slow_schema", crate::guests::SLOW_SCHEMA)
            .build()
            .expect("the runtime builds"),
    );
    assert_eq!(runtime.load_errors(), &[]);
    // Short arguments are checked and run.
    let report = runtime.run_blocking(&Call::new("0", "slow_schema", r#"{"xs":[-1,-2,-3]}"#));
    assert_eq!(report.response, ToolResponse::text("checked 3 items"));

    let arguments = slow_arguments();
    let attackers: Vec<_> = (0..2)
        .map(|i| {
            let runtime = Arc::clone(&runtime);
            let arguments = arguments.clone();
            std::thread::spawn(move || {
                let call = Call::new(format!("a{i}"), "slow_schema", arguments).with_options(
                    CallOptions {
                        timeout: Some(ATTACK_DEADLINE),
                        ..CallOptions::default()
                    },
                );
                let started = Instant::now();
                let report = runtime.run_blocking(&call);
                (report.response, started, Instant::now())
            })
        })
        .collect();
    let echoed = echoes_answered(&runtime, 20);
    for attacker in attackers {
        let (response, started, ended) = attacker.join().expect("the attacker's thread");
        assert_eq!(
            response,
            ToolResponse::TimedOut {
                limit_ms: ATTACK_DEADLINE.as_millis() as u64
            }
        );
        let took = ended.duration_since(started);
        assert!(
            took < ATTACK_DEADLINE + DEADLINE_MARGIN,
            "ended after {took:?}"
        );
        assert!(
            echoed < started + ATTACK_DEADLINE,
            "the echoes waited behind an attacker: they ended {:?} after it started",
            echoed.duration_since(started)
        );
    }

    // Stopped: ends at the stop, long before its deadline.
    let stop = StopToken::new();
    let stopper = stop.clone();
    let stopping = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        let stopped_at = Instant::now();
        stopper.stop();
        stopped_at
    });
    let call = Call::new("s", "slow_schema", arguments).with_options(CallOptions {
        timeout: Some(Duration::from_secs(60)),
        stop: Some(stop),
        ..CallOptions::default()
    });
    let report = runtime.run_blocking(&call);
    let answered_at = Instant::now();
    let stopped_at = stopping.join().expect("the stopping thread");
    assert_eq!(report.response, ToolResponse::Cancelled);
    let after = answered_at.duration_since(stopped_at);
    assert!(
        after < DEADLINE_MARGIN,
        "answered {after:?} after the stop (its deadline was a minute away)"
    );
    // The watch unwound both checks: the blocking threads are free, and the host answers.
    crate::support::assert_echo_still_works_on(&runtime);
}

#[test]
fn limits_admit_what_real_tools_declare() {
    // Up to the limits, a tool loads.
    let info = (0..MAX_CAPABILITIES).fold(
        ToolInfo::new(
            "busy",
            "d".repeat(MAX_DESCRIPTION_BYTES),
            json!({ "type": "object" }),
        ),
        |info, _| info.capability(CapabilityKind::FilesystemRead, ResourceRef::Whole),
    );
    let runtime = builder()
        .builtin_tools(false)
        .native(native(info))
        .build()
        .expect("the runtime builds");
    assert_eq!(runtime.load_errors(), &[]);
}

/// `toolcell serve` answers `ping` while two calls' slow arguments are being checked: ten
/// pings, one after another, all answer before the calls' deadline (they do not wait behind
/// the checks), and both calls answer at that deadline.
#[test]
fn the_server_answers_others_while_arguments_are_checked() {
    let _guard = exclusive();
    let tools = tools_dir(&[("slow_schema", crate::guests::SLOW_SCHEMA)]);
    let policy = tempfile::NamedTempFile::new().expect("policy file");
    std::fs::write(
        policy.path(),
        "[tools.slow_schema]\nlimits = { timeout_ms = 1500 }\n",
    )
    .expect("write the policy");
    let mut server = crate::mcp::Server::start(&[
        "--tools",
        tools.path().to_str().expect("path"),
        "--policy",
        policy.path().to_str().expect("path"),
    ]);
    let arguments: Value = serde_json::from_str(&slow_arguments()).expect("JSON");
    let sent = Instant::now();
    server.call(1, "slow_schema", arguments.clone());
    server.call(2, "slow_schema", arguments);
    for id in 10..20 {
        server.send(json!({ "jsonrpc": "2.0", "id": id, "method": "ping" }));
        let pong = server.response(id);
        assert_eq!(pong["result"], json!({}), "{pong}");
    }
    let pinged = sent.elapsed();
    for id in [1, 2] {
        let answer = server.response(id);
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        assert!(
            crate::mcp::text(&answer).contains("1500 ms deadline"),
            "{answer}"
        );
    }
    let took = sent.elapsed();
    assert!(
        took < Duration::from_millis(1500) + DEADLINE_MARGIN,
        "the calls took {took:?}"
    );
    assert!(
        pinged < Duration::from_millis(1500),
        "the pings waited behind the checks: the tenth answered after {pinged:?}"
    );
    let (_, exited_cleanly, _, _) = server.close();
    assert!(exited_cleanly);
}
