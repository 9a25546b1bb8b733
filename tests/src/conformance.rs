//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `tests/conformance/`) against `toolcell serve --http`, with the suite's fixture tools built
//! as components (`tests/guests/test_*`, `json_schema_2020_12_tool`).
//!
//! Every server scenario must pass, except those in `tests/conformance/expected-failures.yml`,
//! each listed there with its reason; and a listed scenario that starts to pass fails the test
//! too, so the list stays true. The suite speaks Streamable HTTP only (it has no stdio mode).
//!
//! Each fixture also has a test of its own here, through the pipeline, named after it.

use crate::support::{exclusive, tools_dir};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};
use toolcell::content::Part;
use toolcell::{CallOptions, CallReport, Runtime, ToolPort as _, ToolRequest, ToolResponse};

/// The fixture tools, as the suite names them.
fn fixtures() -> Vec<(&'static str, &'static [u8])> {
    use crate::guests::*;
    let mut fixtures = vec![
        ("test_simple_text", TEST_SIMPLE_TEXT),
        ("test_image_content", TEST_IMAGE_CONTENT),
        ("test_audio_content", TEST_AUDIO_CONTENT),
        ("test_embedded_resource", TEST_EMBEDDED_RESOURCE),
        ("test_multiple_content_types", TEST_MULTIPLE_CONTENT_TYPES),
        ("test_error_handling", TEST_ERROR_HANDLING),
        ("json_schema_2020_12_tool", JSON_SCHEMA_2020_12_TOOL),
        ("test_tool_with_logging", TEST_TOOL_WITH_LOGGING),
        ("test_tool_with_progress", TEST_TOOL_WITH_PROGRESS),
        ("test_missing_capability", TEST_MISSING_CAPABILITY),
        ("test_logging_tool", TEST_LOGGING_TOOL),
        ("test_streaming_elicitation", TEST_STREAMING_ELICITATION),
        // The 2025-11-25 era's tools that ask their client on the call's stream.
        ("test_sampling", TEST_SAMPLING),
        ("test_elicitation", TEST_ELICITATION),
        (
            "test_elicitation_sep1034_defaults",
            TEST_ELICITATION_SEP1034_DEFAULTS,
        ),
        (
            "test_elicitation_sep1330_enums",
            TEST_ELICITATION_SEP1330_ENUMS,
        ),
        ("header_echo", HEADER_ECHO),
        // The suite's prompts, resources and completion, from one component.
        ("offers_fixture", OFFERS_FIXTURE),
        // The tasks extension's (SEP-2663), each made a task (or not) by the policy below.
        ("greet", GREET),
        ("slow_compute", SLOW_COMPUTE),
        ("failing_job", FAILING_JOB),
        ("protocol_error_job", PROTOCOL_ERROR_JOB),
        ("confirm_delete", CONFIRM_DELETE),
        ("multi_input", MULTI_INPUT),
        ("test_tool_with_task", TEST_TOOL_WITH_TASK),
    ];
    // Tools whose questions travel as `input_required` rounds over 2026-07-28.
    fixtures.extend(crate::http::rounds::FIXTURES);
    fixtures
}

/// `toolcell serve --http` with the fixtures, each listed to clients (core), and the ways of
/// talking to the client the suite's fixtures use allowed: as an operator serving them would
/// write it. Its files live as long as the server.
struct Served {
    server: crate::http::Server,
    _tools: tempfile::TempDir,
    _policy: tempfile::TempDir,
}

fn serve(extra: &[&str]) -> Served {
    let tools = tools_dir(&fixtures());
    let policy_dir = tempfile::tempdir().expect("temp dir");
    let policy = policy_dir.path().join("policy.toml");
    let mut text = String::new();
    for (name, _) in fixtures() {
        if name == "offers_fixture" {
            // No tool of that name: it offers prompts and resources, which run with no grants;
            // the prompt that asks the person may ask without an approval first.
            text.push_str(
                "[tools.\"prompt:test_input_required_result_prompt\"]\n\
                 client.elicit = { access = \"allow\" }\n",
            );
            continue;
        }
        text.push_str(&format!("[tools.{name}]\ncore = true\n"));
        if name == "test_missing_capability" {
            text.push_str("client.sample = { access = \"allow\" }\n");
        }
        if name == "test_streaming_elicitation" || name.starts_with("test_elicitation") {
            text.push_str("client.elicit = { access = \"allow\" }\n");
        }
        if name == "test_sampling" {
            text.push_str("client.sample = { access = \"allow\" }\n");
        }
        // How the operator lets each of the tasks extension's tools become a task: a long
        // job after a tenth of a second, one that asks (and waits in its task for the
        // answers) from the start, the quick one never, and two that must be tasks.
        text.push_str(match name {
            "greet" => "task = { support = \"forbidden\" }\n",
            "slow_compute" | "protocol_error_job" => "task = { after_ms = 100 }\n",
            "failing_job" => "task = { support = \"required\", after_ms = 100 }\n",
            "confirm_delete" | "multi_input" => {
                "task = { after_ms = 0 }\nclient.elicit = { access = \"allow\" }\n"
            }
            // The default second before a task: its first run, which only asks, ends well
            // within it even while its component is still being compiled.
            "test_tool_with_task" => {
                "task = { support = \"required\" }\nclient.elicit = { access = \"allow\" }\n"
            }
            _ => "",
        });
        if name.starts_with("test_input_required_result_") {
            // An operator serving these lets them ask without a person's approval first.
            for way in ["elicit", "sample", "list_roots"] {
                text.push_str(&format!("client.{way} = {{ access = \"allow\" }}\n"));
            }
        }
    }
    std::fs::write(&policy, text).expect("the policy");
    let mut args = vec![
        "--tools".to_owned(),
        tools.path().to_string_lossy().into_owned(),
        "--policy".to_owned(),
        policy.to_string_lossy().into_owned(),
    ];
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Served {
        server: crate::http::Server::start(&args),
        _tools: tools,
        _policy: policy_dir,
    }
}

/// `tests/conformance/`.
fn here() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance")
}

/// The scenarios the expected-failures file lists.
fn expected_failures() -> Vec<String> {
    let text = std::fs::read_to_string(here().join("expected-failures.yml")).expect("the list");
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .map(|name| name.split('#').next().unwrap_or_default().trim().to_owned())
        .collect()
}

/// Run the suite's `server` command against `url` with `args`, its results written to `out`.
fn suite(url: &str, out: &Path, args: &[&str]) -> Output {
    let suite = crate::toolchains::conformance_suite();
    Command::new("node")
        .arg(suite)
        .args(["server", "--url", url, "-o"])
        .arg(out)
        .arg("--expected-failures")
        .arg(here().join("expected-failures.yml"))
        .args(args)
        .output()
        .expect("node is needed for the conformance test")
}

/// Each scenario's checks as `-o` wrote them: (scenario, its checks' statuses).
fn results(out: &Path) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    let mut dirs = vec![out.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("the results").flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|name| name == "checks.json") {
                let checks: Value =
                    serde_json::from_slice(&std::fs::read(&path).expect("checks")).expect("JSON");
                let statuses = checks
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|check| {
                        let status = check["status"].as_str().unwrap_or_default();
                        // A check that fails says which and why, for the report.
                        if failing(status) {
                            format!(
                                "{status} ({}: {})",
                                check["id"].as_str().unwrap_or_default(),
                                check["errorMessage"].as_str().unwrap_or_default()
                            )
                        } else {
                            status.to_owned()
                        }
                    })
                    .collect();
                let scenario = dir
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
                    .unwrap_or_default();
                found.push((scenario, statuses));
            }
        }
    }
    found.sort();
    found
}

/// Whether `scenario`, a results directory's name (`-o` writes `server-NAME-TIMESTAMP`), is
/// `name`.
fn is(scenario: &str, name: &str) -> bool {
    let scenario = scenario.strip_prefix("server-").unwrap_or(scenario);
    scenario == name || scenario.starts_with(&format!("{name}-"))
}

/// Whether a check's status counts against its scenario, as the suite counts it: a warning
/// (a check it could not make, such as one that needs a session id) as much as a failure.
fn failing(status: &str) -> bool {
    ["FAILURE", "WARNING"]
        .iter()
        .any(|failed| status.split(' ').next() == Some(*failed))
}

#[test]
fn the_official_conformance_suite_passes_but_for_its_listed_exceptions() {
    let _guard = exclusive();
    let served = serve(&[]);
    let server = &served.server;
    let out = tempfile::tempdir().expect("temp dir");
    let output = suite(&server.url(), out.path(), &[]);
    let said = format!(
        "{}\n{}\nserver:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        server.stderr()
    );
    assert!(output.status.success(), "the suite failed:\n{said}");
    let results = results(out.path());
    assert!(
        results.len() >= 25,
        "too few scenarios ran: {results:?}\n{said}"
    );
    let expected = expected_failures();
    for (scenario, statuses) in &results {
        let failed = statuses.iter().any(|status| failing(status));
        let listed = expected.iter().any(|name| is(scenario, name));
        assert_eq!(
            failed,
            listed,
            "{scenario}: {statuses:?}, but the list says it {} fail\n{said}",
            if listed { "should" } else { "should not" }
        );
    }
    // Every listed scenario ran (a renamed one would otherwise hide behind the list).
    for name in &expected {
        assert!(
            results.iter().any(|(scenario, _)| is(scenario, name)),
            "{name} is listed but did not run"
        );
    }
}

/// The test above can fail: with the result cap cut below the image fixture's base64, the
/// host refuses its result (a typed failure, `isError`), and the suite's image scenario fails.
#[test]
fn the_conformance_test_fails_when_a_fixture_is_broken() {
    let _guard = exclusive();
    let served = serve(&["--cap", "64"]);
    let server = &served.server;
    let out = tempfile::tempdir().expect("temp dir");
    let output = suite(
        &server.url(),
        out.path(),
        &["--scenario", "tools-call-image"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !output.status.success(),
        "the suite passed a broken fixture:\n{stdout}"
    );
    let results = results(out.path());
    assert!(
        results
            .iter()
            .any(|(scenario, statuses)| is(scenario, "tools-call-image")
                && statuses
                    .iter()
                    .any(|status| status.split(' ').next() == Some("FAILURE"))),
        "{results:?}\n{stdout}"
    );
}

/// The revisions of MCP whose requirement sets the newest line of the suite is run under.
const REVISIONS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// A listed scenario's name, and the checks it may fail (`- NAME: CHECK, CHECK`; none named:
/// any).
fn listed_checks(entry: &str) -> (&str, Vec<&str>) {
    match entry.split_once(':') {
        Some((name, checks)) => (
            name.trim(),
            checks
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect(),
        ),
        None => (entry.trim(), Vec::new()),
    }
}

/// The scenarios `tests/conformance-next/expected-failures.yml` lists for `revision` (under a
/// `REVISION:` line, one `- name  # why` a line).
fn expected_next(revision: &str) -> Vec<String> {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance-next/expected-failures.yml"),
    )
    .expect("the list");
    let mut current = None;
    let mut listed = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(header) = trimmed.strip_suffix(':')
            && !line.starts_with(' ')
        {
            current = Some(header.trim_matches('"').to_owned());
        } else if let Some(name) = trimmed.strip_prefix("- ")
            && current.as_deref() == Some(revision)
        {
            listed.push(name.split('#').next().unwrap_or_default().trim().to_owned());
        }
    }
    listed
}

/// The suite's newest line (`@modelcontextprotocol/conformance` 0.2.0-alpha.12, pinned in
/// `tests/conformance-next/`), run as each revision's requirement set (`--requirements`: every
/// server scenario the revision requires, at its own wire, the tasks extension's among the
/// 2026-07-28 set): a scenario fails (a FAILURE or a WARNING in its checks) exactly when
/// `tests/conformance-next/expected-failures.yml` lists it for that revision, with its reason.
/// The suite's exit code is not what is checked (it fails on any scored failure); its
/// `checks.json` are.
#[test]
fn the_newest_conformance_suite_passes_each_revision_but_for_its_listed_exceptions() {
    let _guard = exclusive();
    let (suite, loader) = crate::toolchains::conformance_suite_next();
    let served = serve(&[]);
    let server = &served.server;
    let mut wrong = Vec::new();
    for revision in REVISIONS {
        let out = tempfile::tempdir().expect("temp dir");
        let output = Command::new("node")
            .arg("--import")
            .arg(&loader)
            .arg(&suite)
            .args([
                "server",
                "--url",
                &server.url(),
                "--requirements",
                revision,
                "-o",
            ])
            .arg(out.path())
            .output()
            .expect("node is needed for the conformance test");
        let said = format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let results = results(out.path());
        assert!(
            results.len() >= 25,
            "{revision}: too few scenarios ran: {results:?}\n{said}\nserver:\n{}",
            server.stderr()
        );
        let expected = expected_next(revision);
        for (scenario, statuses) in &results {
            let failed = statuses.iter().any(|status| failing(status));
            let entry = expected
                .iter()
                .map(|entry| listed_checks(entry))
                .find(|(name, _)| is(scenario, name));
            let listed = entry.is_some();
            if failed != listed {
                wrong.push(format!(
                    "{revision} {scenario}: {statuses:?}, but the list says it {} fail",
                    if listed { "should" } else { "should not" }
                ));
            }
            // A listed scenario that names its failing checks fails in those only: the rest
            // of it is held to pass.
            if let Some((_, checks)) = entry.filter(|(_, checks)| !checks.is_empty()) {
                for status in statuses.iter().filter(|status| failing(status)) {
                    if !checks
                        .iter()
                        .any(|check| status.contains(&format!("({check}:")))
                    {
                        wrong.push(format!(
                            "{revision} {scenario}: {status}, a check the list does not name"
                        ));
                    }
                }
            }
        }
        for entry in &expected {
            let (name, _) = listed_checks(entry);
            if !results.iter().any(|(scenario, _)| is(scenario, name)) {
                wrong.push(format!("{revision} {name} is listed but did not run"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn runtime() -> Runtime {
    let mut builder = crate::support::builder().builtin_tools(false);
    for (name, bytes) in fixtures() {
        builder = builder.component(format!("{name}.wasm"), bytes);
    }
    let runtime = builder.build().expect("runtime");
    assert_eq!(runtime.load_errors(), &[], "every fixture loads");
    runtime
}

fn call(tool: &str) -> CallReport {
    runtime().call_with_report(&ToolRequest::new("t", tool, "{}"), &CallOptions::default())
}

#[test]
pub(crate) fn test_simple_text() {
    assert_eq!(
        call("test_simple_text").response,
        ToolResponse::text("This is a simple text response for testing.")
    );
}

#[test]
pub(crate) fn test_image_content() {
    let report = call("test_image_content");
    assert!(
        matches!(&report.parts[..], [Part::Image(image)] if image.mime_type == "image/png" && image.data.len() == 70),
        "{report:?}"
    );
}

#[test]
pub(crate) fn test_audio_content() {
    let report = call("test_audio_content");
    assert!(
        matches!(&report.parts[..], [Part::Audio(audio)] if audio.mime_type == "audio/wav"),
        "{report:?}"
    );
}

#[test]
pub(crate) fn test_embedded_resource() {
    let report = call("test_embedded_resource");
    assert!(
        matches!(&report.parts[..], [Part::Resource { uri, mime_type: Some(kind), .. }] if uri == "test://embedded-resource" && kind == "text/plain"),
        "{report:?}"
    );
}

#[test]
pub(crate) fn test_multiple_content_types() {
    let report = call("test_multiple_content_types");
    assert!(
        matches!(
            &report.parts[..],
            [Part::Text { .. }, Part::Image(_), Part::Resource { .. }]
        ),
        "{report:?}"
    );
}

#[test]
pub(crate) fn test_error_handling() {
    assert!(matches!(
        call("test_error_handling").response,
        ToolResponse::Failed { message, .. } if message == "This tool intentionally returns an error for testing"
    ));
}

/// Its input schema is served as the tool wrote it (the suite checks `$schema`, `$defs` and
/// `additionalProperties`), and enforced: `$ref` into `$defs` resolves, unknown properties are
/// named.
#[test]
pub(crate) fn json_schema_2020_12_tool() {
    let runtime = runtime();
    let info = runtime.info("json_schema_2020_12_tool").expect("listed");
    assert_eq!(
        info.input_schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(info.input_schema["additionalProperties"], false);
    assert_eq!(info.input_schema["$defs"]["address"]["$anchor"], "address");
    let call = |arguments: Value| {
        runtime.call(&ToolRequest::new(
            "t",
            "json_schema_2020_12_tool",
            arguments.to_string(),
        ))
    };
    assert!(matches!(
        call(json!({"name": "a", "address": {"city": "b"}})),
        ToolResponse::Result { .. }
    ));
    // The composition and conditional keywords are enforced, not only served: neither a name
    // nor an address (`anyOf`), and an admin without an address (`if` / `then`), are refused.
    for refused in [json!({}), json!({"name": "admin"})] {
        assert!(
            matches!(call(refused.clone()), ToolResponse::Failed { .. }),
            "{refused}"
        );
    }
    let refused = call(json!({"name": "a", "address": {"city": 7}, "nmae": "x"}));
    let ToolResponse::Failed { message, .. } = &refused else {
        panic!("{refused:?}")
    };
    assert!(message.contains("/address/city"), "{message}");
    assert!(
        message.contains(r#""nmae" is not a property here (did you mean "name"?)"#),
        "{message}"
    );
}

/// A tool whose parameter travels as a header too answers from the body it was checked with.
#[test]
pub(crate) fn header_echo() {
    let runtime = runtime();
    let info = runtime.info("header_echo").expect("listed");
    assert_eq!(
        info.input_schema["properties"]["region"]["x-mcp-header"],
        "Region"
    );
    let answer = runtime.call(&ToolRequest::new(
        "t",
        "header_echo",
        json!({ "region": "eu", "query": "q" }).to_string(),
    ));
    assert_eq!(answer, ToolResponse::text("eu: q"));
}
