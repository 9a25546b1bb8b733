//! One runtime, one engine, many workspaces: calls from several agents in two workspaces, on
//! several threads at once, each see only their own workspace, use only their own saved rules,
//! and are audited under their own names.
//!
//! A test binary of its own, so that the process-wide engine count it checks counts only what
//! this test made.

use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use toolcell::approval::{Approval, ApprovalRequest, Approver};
use toolcell::report::GrantedBy;
use toolcell::{Call, CallContext, DenyReason, FailureKind, Runtime, ToolResponse};

/// Answers "always" to the first request and "deny" to every later one, remembering each.
#[derive(Debug, Default)]
struct AlwaysOnce {
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Approver for AlwaysOnce {
    fn approve(&self, request: &ApprovalRequest) -> Approval {
        let mut asked = toolcell::sync::lock(&self.asked);
        asked.push(request.clone());
        if asked.len() == 1 {
            Approval::Always
        } else {
            Approval::Deny
        }
    }
}

fn run(
    runtime: &Runtime,
    context: &CallContext,
    tool: &str,
    arguments: Value,
) -> toolcell::CallReport {
    runtime.run_blocking(&Call::new("t", tool, arguments.to_string()).in_context(context.clone()))
}

fn text(report: &toolcell::CallReport) -> &str {
    match &report.response {
        ToolResponse::Result { text, .. } => text,
        other => panic!("expected a result, got {other:?}"),
    }
}

#[test]
fn one_runtime_serves_two_workspaces_at_once_and_keeps_them_apart() {
    let temp = tempfile::tempdir().expect("temp dir");
    let (a, b) = (temp.path().join("a"), temp.path().join("b"));
    for (dir, name) in [(&a, "A"), (&b, "B")] {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::write(dir.join("same.txt"), name).expect("write");
        std::fs::write(dir.join(format!("only_{name}.txt")), name).expect("write");
    }
    let audit_path = temp.path().join("audit.jsonl");
    let approver = Arc::new(AlwaysOnce::default());
    let engines_before = toolcell::engines_created();
    let runtime = Runtime::builder()
        .cache_dir(Some(temp.path().join("cache")))
        .cache_key_file(Some(temp.path().join("cache.key")))
        .approver(approver.clone())
        .build()
        .expect("runtime")
        .with_audit(toolcell::audit::Audit::open(&audit_path).expect("audit"));
    let context_a = runtime.context("agent-a", &a).expect("context a");
    let context_b = runtime.context("agent-b", &b).expect("context b");
    let root = |dir: &Path| dir.canonicalize().expect("canonical");

    // Reads in both workspaces, interleaved on four threads.
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let (runtime, context_a, context_b) = (&runtime, &context_a, &context_b);
            scope.spawn(move || {
                for round in 0..25 {
                    let (context, mine, theirs) = if (thread + round) % 2 == 0 {
                        (context_a, "A", "B")
                    } else {
                        (context_b, "B", "A")
                    };
                    let report = run(runtime, context, "read_file", json!({ "path": "same.txt" }));
                    assert!(text(&report).starts_with(mine), "{report:?}");
                    let other = format!("only_{theirs}.txt");
                    let report = run(runtime, context, "read_file", json!({ "path": other }));
                    assert!(
                        matches!(
                            report.response,
                            ToolResponse::Failed {
                                kind: FailureKind::NotFound,
                                ..
                            }
                        ),
                        "{mine} must not see {other}: {report:?}"
                    );
                }
            });
        }
    });

    // A person approves a write in A "always": later writes in A use the saved rule, and B's
    // do not.
    let write = |context: &CallContext, content: &str| {
        run(
            &runtime,
            context,
            "write_file",
            json!({ "path": "new.txt", "content": content }),
        )
    };
    let first = write(&context_a, "one");
    assert!(!first.response.is_error(), "{first:?}");
    assert_eq!(first.granted[0].by, GrantedBy::PersonAlways);
    let again = write(&context_a, "two");
    assert_eq!(again.granted[0].by, GrantedBy::SavedRule, "{again:?}");
    assert_eq!(
        std::fs::read_to_string(a.join("new.txt")).expect("written"),
        "two"
    );
    let in_b = write(&context_b, "three");
    assert!(
        matches!(
            in_b.response,
            ToolResponse::Denied {
                reason: DenyReason::ByPerson { .. }
            }
        ),
        "A's rule is not B's: {in_b:?}"
    );
    assert!(!b.join("new.txt").exists(), "nothing written in B");
    let asked = toolcell::sync::lock(&approver.asked).clone();
    assert_eq!(asked.len(), 2, "asked once in A, once in B: {asked:?}");
    assert_eq!(
        (asked[0].agent.as_str(), asked[0].workspace.clone()),
        ("agent-a", Some(root(&a)))
    );
    assert_eq!(
        (asked[1].agent.as_str(), asked[1].workspace.clone()),
        ("agent-b", Some(root(&b)))
    );

    // A context made later for the same directory shares the workspace, and so its rule.
    let later = runtime.context("agent-c", &a).expect("context");
    assert!(Arc::ptr_eq(
        later.workspace().expect("ws"),
        context_a.workspace().expect("ws")
    ));
    assert_eq!(write(&later, "four").granted[0].by, GrantedBy::SavedRule);

    // Every audit line names its own agent and workspace.
    let lines = std::fs::read_to_string(&audit_path).expect("audit");
    let records: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(records.len(), 4 * 25 * 2 + 4);
    for record in &records {
        let expected = match record["agent"].as_str() {
            Some("agent-a" | "agent-c") => root(&a),
            Some("agent-b") => root(&b),
            other => panic!("unexpected agent {other:?}"),
        };
        assert_eq!(
            record["workspace"],
            json!(expected.display().to_string()),
            "{record}"
        );
        assert_eq!(record["call_id"], "t");
    }

    // All of it ran on one engine.
    assert_eq!(toolcell::engines_created() - engines_before, 1);
}
