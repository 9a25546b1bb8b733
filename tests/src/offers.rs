//! Prompts, resources and completion from components (`toolcell:tool@0.4.0`'s `provider`
//! world), through the pipeline: what a component declares is checked and listed, each request
//! runs in a fresh instance with no authority under a call's limits and checks, a name is only
//! found where it was asked for, collisions between components are refused, what the index
//! keeps serves a later start, and the audit records what was asked, never the answer.

use serde_json::{Map, Value, json};
use toolcell::content::{Contents, Part};
use toolcell::offers::{Answered, OfferRequest, Reference, Role};
use toolcell::{
    CallOptions, CallReport, FailureKind, Runtime, ToolPort as _, ToolRequest, ToolResponse,
};

fn runtime_of(components: &[(&str, &[u8])], audit: Option<&std::path::Path>) -> Runtime {
    let mut builder = crate::support::builder().builtin_tools(false);
    for (name, bytes) in components {
        builder = builder.component(format!("{name}.wasm"), *bytes);
    }
    let mut runtime = builder.build().expect("runtime");
    if let Some(audit) = audit {
        runtime = runtime.with_audit(toolcell::audit::Audit::open(audit).expect("the audit"));
    }
    runtime
}

/// What could not be loaded, as the person who runs toolcell reads it.
fn errors_of(runtime: &Runtime) -> Vec<String> {
    runtime
        .load_errors()
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn fixture() -> Runtime {
    let runtime = runtime_of(&[("offers_fixture", crate::guests::OFFERS_FIXTURE)], None);
    assert_eq!(runtime.load_errors(), &[], "the fixture loads");
    runtime
}

fn offer(runtime: &Runtime, request: OfferRequest) -> CallReport {
    runtime.offer_blocking(
        "t",
        &request,
        runtime.default_context(),
        &CallOptions::default(),
    )
}

fn prompt(runtime: &Runtime, name: &str, arguments: Value) -> CallReport {
    let arguments: Map<String, Value> = arguments.as_object().cloned().unwrap_or_default();
    offer(
        runtime,
        OfferRequest::GetPrompt {
            name: name.to_owned(),
            arguments,
        },
    )
}

fn read(runtime: &Runtime, uri: &str) -> CallReport {
    offer(
        runtime,
        OfferRequest::ReadResource {
            uri: uri.to_owned(),
        },
    )
}

fn failure(report: &CallReport) -> (FailureKind, String) {
    match &report.response {
        ToolResponse::Failed { kind, message } => (*kind, message.clone()),
        other => panic!("expected a failure, got {other:?}"),
    }
}

/// The test named after the guest: the conformance suite's prompts, resources and completion,
/// each answered from what was asked.
#[test]
pub(crate) fn offers_fixture() {
    let runtime = fixture();
    let names: Vec<String> = runtime.prompts().into_iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "test_input_required_result_prompt",
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image",
            "test_simple_prompt"
        ]
    );
    let uris: Vec<String> = runtime.resources().into_iter().map(|r| r.uri).collect();
    assert_eq!(
        uris,
        [
            "test://static-binary",
            "test://static-text",
            "test://watched-resource"
        ]
    );
    let templates = runtime.resource_templates();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "test://template/{id}/data");
    let kinds = runtime.offered_kinds();
    assert!(kinds.prompts && kinds.resources && kinds.completion);
    // Nothing of it is a tool.
    assert_eq!(runtime.registry().entries().len(), 0);

    let filled = prompt(
        &runtime,
        "test_prompt_with_arguments",
        json!({ "arg1": "ALPHA", "arg2": "BETA" }),
    );
    let text = crate::support::result_text(filled.response.clone());
    assert!(text.contains("ALPHA") && text.contains("BETA"), "{text}");
    assert!(matches!(
        &filled.offered,
        Some(Answered::Prompt { roles, .. }) if roles == &[Role::User]
    ));

    // The prompt that asks the person, where no one can be asked: made without the context.
    let unasked = prompt(&runtime, "test_input_required_result_prompt", json!({}));
    let text = crate::support::result_text(unasked.response.clone());
    assert!(text.contains("could not be asked"), "{text}");
    let image = prompt(&runtime, "test_prompt_with_image", json!({}));
    assert!(
        matches!(&image.parts[..], [Part::Image(media), Part::Text { .. }] if media.mime_type == "image/png"),
        "{:?}",
        image.parts
    );
    let embedded = prompt(
        &runtime,
        "test_prompt_with_embedded_resource",
        json!({ "resourceUri": "test://chosen" }),
    );
    assert!(
        matches!(&embedded.parts[0], Part::Resource { uri, .. } if uri == "test://chosen"),
        "{:?}",
        embedded.parts
    );

    let binary = read(&runtime, "test://static-binary");
    assert!(matches!(
        &binary.parts[..],
        [Part::Resource { contents: Contents::Blob(blob), .. }] if blob.starts_with(b"\x89PNG")
    ));
    let templated = read(&runtime, "test://template/4242/data");
    assert!(
        matches!(&templated.parts[..], [Part::Resource { contents: Contents::Text(text), .. }] if text.contains("4242")),
        "{:?}",
        templated.response
    );

    let completed = offer(
        &runtime,
        OfferRequest::Complete {
            reference: Reference::Prompt("test_prompt_with_arguments".to_owned()),
            argument: "arg1".to_owned(),
            value: "tes".to_owned(),
            context: Map::new(),
        },
    );
    assert!(
        matches!(&completed.offered, Some(Answered::Completion { values, .. }) if values == &["test", "testing", "tested"]),
        "{:?}",
        completed.offered
    );
}

/// What nothing offers, and arguments a prompt did not declare, are refused by the host before
/// any guest runs, each with its own kind.
#[test]
fn unknown_names_and_bad_arguments_are_refused_before_anything_runs() {
    let runtime = fixture();
    let (kind, message) = failure(&read(
        &runtime,
        "test://nonexistent-resource-for-conformance-testing",
    ));
    assert_eq!(kind, FailureKind::NotFound, "{message}");
    let (kind, message) = failure(&prompt(&runtime, "no_such_prompt", json!({})));
    assert_eq!(kind, FailureKind::UnknownTool, "{message}");
    assert!(message.contains("no prompt named"), "{message}");
    // A required argument missing, one not declared, one not a string.
    for arguments in [
        json!({ "arg1": "only one" }),
        json!({ "arg1": "a", "arg2": "b", "arg3": "c" }),
        json!({ "arg1": 1, "arg2": "b" }),
    ] {
        let (kind, message) = failure(&prompt(&runtime, "test_prompt_with_arguments", arguments));
        assert_eq!(kind, FailureKind::InvalidInput, "{message}");
    }
    // A template's variable never spans a `/`: this URI is of no template.
    let (kind, _) = failure(&read(&runtime, "test://template/1/2/data"));
    assert_eq!(kind, FailureKind::NotFound);
}

/// A prompt, resource or template is never a tool: `tools/call` (and the loop's `call_tool`)
/// do not find one by its key, and the loop's `find_tool` does not list one.
#[test]
fn an_offer_cannot_be_called_as_a_tool() {
    let runtime = fixture();
    for name in [
        "prompt:test_simple_prompt",
        "resource:test://static-text",
        "template:template-data",
        "completion:prompt:test_prompt_with_arguments",
    ] {
        let response = runtime.call(&ToolRequest::new("t", name, "{}"));
        assert!(
            matches!(
                response,
                ToolResponse::Failed {
                    kind: FailureKind::UnknownTool,
                    ..
                }
            ),
            "{name}: {response:?}"
        );
    }
    assert!(runtime.info("prompt:test_simple_prompt").is_none());
}

/// Two components offering the same prompt, resource or template: the second's is refused at
/// load, naming it and the component that has it; the first serves.
#[test]
fn a_name_two_components_offer_is_refused_at_load() {
    let runtime = runtime_of(
        &[
            ("first", crate::guests::OFFERS_FIXTURE),
            ("second", crate::guests::OFFERS_FIXTURE),
        ],
        None,
    );
    let errors = errors_of(&runtime);
    assert!(
        errors
            .iter()
            .any(|e| e.contains(r#"a prompt named "test_simple_prompt" is already loaded"#)),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains(r#"a resource "test://static-text""#)),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("URI template")),
        "{errors:?}"
    );
    // A completion goes with its prompt or template: refused with it, not said twice.
    assert_eq!(errors.len(), 5 + 3 + 1, "{errors:?}");
    assert!(
        errors.iter().all(|e| e.starts_with("second.wasm")),
        "{errors:?}"
    );
    assert_eq!(runtime.prompts().len(), 5);
    assert!(matches!(
        read(&runtime, "test://static-text").response,
        ToolResponse::Result { .. }
    ));
}

/// The test named after the guest: what a hostile provider tries fails, each in its typed way,
/// and the runtime goes on.
#[test]
pub(crate) fn hostile_provider() {
    let runtime = runtime_of(
        &[("hostile_provider", crate::guests::HOSTILE_PROVIDER)],
        None,
    );
    assert_eq!(runtime.load_errors(), &[]);
    // Spinning: stopped at the deadline the policy gives (the default's, here cut short).
    let spun = runtime.offer_blocking(
        "t",
        &OfferRequest::GetPrompt {
            name: "spin".to_owned(),
            arguments: Map::new(),
        },
        runtime.default_context(),
        &CallOptions {
            timeout: Some(std::time::Duration::from_millis(300)),
            ..CallOptions::default()
        },
    );
    assert!(
        matches!(spun.response, ToolResponse::TimedOut { .. }),
        "{:?}",
        spun.response
    );
    // Past the result cap, an image that is not its type, a URI that hides an escape: each
    // the host's parts check refuses, and nothing of the answer is passed on.
    for report in [
        prompt(&runtime, "flood", json!({})),
        prompt(&runtime, "liar_image", json!({})),
        read(&runtime, "hostile://escape"),
    ] {
        let (kind, message) = failure(&report);
        assert_eq!(kind, FailureKind::InvalidOutput, "{message}");
        assert!(report.parts.is_empty());
    }
    // What is no URI is refused before any template sees it: 2 MB long, or hiding an escape.
    for uri in [
        format!("test://template/{}/data", "a".repeat(2_000_000)),
        "test://template/\u{1b}[2J/data".to_owned(),
    ] {
        let (kind, _) = failure(&read(&runtime, &uri));
        assert_eq!(kind, FailureKind::InvalidInput);
    }
    // A read of nothing is not a read.
    let (kind, message) = failure(&read(&runtime, "hostile://nothing"));
    assert_eq!(kind, FailureKind::Tool, "{message}");
    // More values than a completion may carry.
    let completed = offer(
        &runtime,
        OfferRequest::Complete {
            reference: Reference::Prompt("spin".to_owned()),
            argument: "x".to_owned(),
            value: String::new(),
            context: Map::new(),
        },
    );
    let (kind, message) = failure(&completed);
    assert_eq!(kind, FailureKind::Tool, "{message}");
    assert!(message.contains("at most 100"), "{message}");
    // No authority: no environment, no files, no real clock.
    let snooped = crate::support::result_text(prompt(&runtime, "snoop", json!({})).response);
    assert!(snooped.contains("env=[]"), "{snooped}");
    assert!(snooped.contains("root=None"), "{snooped}");
    let now: u64 = snooped
        .rsplit("now=")
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a time");
    assert!(
        now < 24 * 3600,
        "the real clock reached the guest: {snooped}"
    );
}

/// A component may not take over another's URIs: a template of the same shape (its variable
/// named otherwise) and a listed URI another's template matches are both refused at load,
/// and every read of the first component's template still reaches it.
#[test]
fn a_component_cannot_take_over_anothers_uris() {
    let runtime = runtime_of(
        &[
            ("offers", crate::guests::OFFERS_FIXTURE),
            ("hostile", crate::guests::HOSTILE_PROVIDER),
        ],
        None,
    );
    let errors = errors_of(&runtime);
    assert!(
        errors.iter().any(|e| e.starts_with("hostile.wasm")
            && e.contains(r#"a URI template named "hostile-template""#)),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with("hostile.wasm")
            && e.contains(r#"a resource "test://template/1/data" overlaps"#)),
        "{errors:?}"
    );
    for uri in ["test://template/1/data", "test://template/2/data"] {
        let report = read(&runtime, uri);
        assert!(
            matches!(&report.parts[..], [Part::Resource { contents: Contents::Text(text), .. }] if text.contains("templateTest")),
            "{uri}: {:?}",
            report.response
        );
    }
    // Loaded the other way round, the hostile one holds them, and the fixture's are refused.
    let reversed = runtime_of(
        &[
            ("hostile", crate::guests::HOSTILE_PROVIDER),
            ("offers", crate::guests::OFFERS_FIXTURE),
        ],
        None,
    );
    let errors = errors_of(&reversed);
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("offers.wasm") && e.contains("template-data")),
        "{errors:?}"
    );
}

/// The test named after the guest: a component that exports `prompts` alone loads and serves
/// (no tool, no resources, no completion); and when it holds a prompt's name first, the
/// completion another component offers for a prompt of that name is not served for it: the
/// other component never hears this one's arguments.
#[test]
pub(crate) fn prompts_only() {
    let alone = runtime_of(&[("only", crate::guests::PROMPTS_ONLY)], None);
    assert_eq!(alone.load_errors(), &[]);
    let kinds = alone.offered_kinds();
    assert!(kinds.prompts && !kinds.resources && !kinds.completion);
    let runtime = runtime_of(
        &[
            ("only", crate::guests::PROMPTS_ONLY),
            ("offers", crate::guests::OFFERS_FIXTURE),
        ],
        None,
    );
    let errors = errors_of(&runtime);
    assert!(
        errors.iter().any(|e| e.starts_with("offers.wasm")
            && e.contains(r#"a prompt named "test_prompt_with_arguments""#)),
        "{errors:?}"
    );
    let said = prompt(
        &runtime,
        "test_prompt_with_arguments",
        json!({ "arg1": "a", "arg2": "b" }),
    );
    assert!(
        crate::support::result_text(said.response).starts_with("prompts-only:"),
        "the first component's prompt serves"
    );
    let completed = offer(
        &runtime,
        OfferRequest::Complete {
            reference: Reference::Prompt("test_prompt_with_arguments".to_owned()),
            argument: "arg1".to_owned(),
            value: "te".to_owned(),
            context: Map::new(),
        },
    );
    assert!(
        matches!(&completed.offered, Some(Answered::Completion { values, .. }) if values.is_empty()),
        "the other component's completion is not served for this prompt: {:?}",
        completed.offered
    );
    // Its other prompts, and their completion, still serve.
    assert!(
        runtime
            .prompts()
            .iter()
            .any(|p| p.name == "test_simple_prompt")
    );
}

/// The audit records a prompt's `get` under its key, with the digest of its arguments, and
/// never the messages.
#[test]
fn the_audit_records_what_was_asked_never_the_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    let runtime = runtime_of(
        &[("offers_fixture", crate::guests::OFFERS_FIXTURE)],
        Some(&audit),
    );
    let report = prompt(
        &runtime,
        "test_prompt_with_arguments",
        json!({ "arg1": "SECRET-ONE", "arg2": "SECRET-TWO" }),
    );
    assert!(matches!(report.response, ToolResponse::Result { .. }));
    read(&runtime, "test://static-text");
    drop(runtime);
    let text = std::fs::read_to_string(&audit).expect("the audit");
    let lines: Vec<Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .collect();
    assert_eq!(
        lines[0]["tool"], "prompt:test_prompt_with_arguments",
        "{text}"
    );
    assert_eq!(lines[0]["outcome"], "result", "{text}");
    assert_eq!(lines[1]["tool"], "resource:test://static-text", "{text}");
    assert!(!text.contains("SECRET"), "{text}");
    assert!(!text.contains("static text resource"), "{text}");
}

/// What a component offers is kept in the index: a later start lists it with nothing read,
/// compiled or instantiated, and its first request reads the code from the cache.
#[test]
fn offers_are_known_from_the_index() {
    let _guard = crate::support::exclusive();
    let rig = crate::lazy::Rig::new();
    std::fs::write(rig.tools.join("offers.wasm"), crate::guests::OFFERS_FIXTURE).expect("write");
    let cold = rig.builder().build().expect("runtime");
    assert_eq!(cold.load_errors(), &[]);
    let prompts = cold.prompts();
    drop(cold);
    let warm = rig.builder().build().expect("runtime");
    assert_eq!(warm.cache_stats().indexed, 1, "{:?}", warm.cache_stats());
    assert_eq!(warm.resident_code_bytes(), 0);
    assert_eq!(warm.prompts(), prompts);
    let report = prompt(&warm, "test_simple_prompt", json!({}));
    assert!(
        crate::support::result_text(report.response).contains("simple prompt"),
        "answered from the cached code"
    );
    assert_eq!(warm.cache_stats().hits, 1, "{:?}", warm.cache_stats());
}

/// A real MCP client over stdio, in both eras: the lists, a prompt filled from its arguments
/// and one with an image, a blob read and a template's read, a resource not found (-32602 with
/// `data.uri`), a missing argument refused, completion of a prompt's argument and of a
/// template's variable, and (2025-11-25) a subscription.
#[test]
fn a_real_mcp_client_gets_prompts_resources_and_completions_over_stdio() {
    let _guard = crate::support::exclusive();
    let tools = crate::support::tools_dir(&[("offers_fixture", crate::guests::OFFERS_FIXTURE)]);
    let (passed, said) = crate::mcp::run_client(
        "offers.py",
        [
            crate::support::toolcell_binary().as_os_str(),
            tools.path().as_os_str(),
        ],
    );
    assert!(passed, "{said}");
}
