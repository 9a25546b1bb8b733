//! Tools written in Python (`guest-tools/python/`), built with componentize-py against the same
//! WIT as the Rust ones and called through the same pipeline, error paths included.
//!
//! componentize-py (pinned, from PyPI) lives in a virtual environment under `target/`, made on
//! first use like the MCP client's (`.ci/run` makes it up front); see `toolchains.rs`.

use crate::toolchains::python_tool;
use toolcell::{Call, CallOptions, FailureKind, ToolResponse};

/// `csv_query`, the shipped Python example: its answers, a failure of each kind it reports,
/// and arguments its schema refuses before Python runs.
#[test]
fn csv_query_in_python_answers_fails_and_is_validated() {
    let runtime = {
        // Builds and compiles an 18 MB component: CPU-heavy, so not while a timing test
        // measures.
        let _guard = crate::support::exclusive();
        let bytes = python_tool("csv_query");
        crate::support::builder()
            .builtin_tools(false)
            .component("python:csv_query", bytes)
            .build()
            .expect("the runtime builds")
    };
    assert_eq!(runtime.load_errors(), &[]);
    let info = runtime.info("csv_query").expect("csv_query is registered");
    assert!(info.read_only);
    let call = |arguments: &str| {
        runtime
            .run_blocking(&Call::new("1", "csv_query", arguments))
            .response
    };
    let table = r#""name,lang\nwasmtime,rust\ncpython,c\nrmcp,rust\n""#;

    let rows = call(&format!(
        r#"{{"csv":{table},"where":{{"lang":"rust"}},"columns":["name"]}}"#
    ));
    let ToolResponse::Result { text, .. } = &rows else {
        panic!("not a result: {rows:?}")
    };
    let rows: serde_json::Value = serde_json::from_str(text).expect("JSON rows");
    assert_eq!(
        rows,
        serde_json::json!([{"name": "wasmtime"}, {"name": "rmcp"}])
    );
    let limited = call(&format!(r#"{{"csv":{table},"limit":1}}"#));
    assert!(
        matches!(&limited, ToolResponse::Result { text, .. } if text.contains("wasmtime") && !text.contains("cpython")),
        "{limited:?}"
    );

    // The tool's own failures, as the kinds it reports (not traps).
    let unknown = call(&format!(r#"{{"csv":{table},"columns":["stars"]}}"#));
    assert!(
        matches!(&unknown, ToolResponse::Failed { kind: FailureKind::NotFound, message } if message.contains("stars")),
        "{unknown:?}"
    );
    let broken = call(r#"{"csv":"a,b\n\"1,2\n"}"#);
    assert!(
        matches!(&broken, ToolResponse::Failed { kind: FailureKind::InvalidInput, message } if message.contains("does not parse")),
        "{broken:?}"
    );
    // Refused by the schema the tool declared, before any instance: an invalid limit, an
    // argument it does not take.
    for (arguments, why) in [
        (r#"{"csv":"a\n1\n","limit":0}"#, "minimum"),
        (r#"{"csv":"a\n1\n","sort":"a"}"#, "sort"),
    ] {
        let refused = call(arguments);
        assert!(
            matches!(&refused, ToolResponse::Failed { kind: FailureKind::InvalidInput, message } if message.contains("schema") && message.contains(why)),
            "{arguments}: {refused:?}"
        );
    }
    // A crash: the interpreter runs out of the memory this call allows (16 MiB; it starts
    // with about 13) while it turns 180,000 rows of CSV into objects. The call answers with the
    // failure, and the next call, in a fresh instance, answers as before.
    let big = serde_json::json!({ "csv": format!("a,b\n{}", "x,y\n".repeat(180_000)) });
    let crashed = runtime
        .run_blocking(
            &Call::new("2", "csv_query", big.to_string()).with_options(CallOptions {
                memory_bytes: Some(16 << 20),
                ..CallOptions::default()
            }),
        )
        .response;
    assert!(
        matches!(
            &crashed,
            ToolResponse::Failed {
                kind: FailureKind::OutOfMemory | FailureKind::Trap,
                ..
            }
        ),
        "{crashed:?}"
    );
    let again = call(&format!(r#"{{"csv":{table},"limit":1}}"#));
    assert_eq!(again, limited, "the call after the crash");
}

/// A Python tool written against `toolcell:tool@0.1.0` and rebuilt against today's `wit/`
/// builds an `Info` without `output_schema`: Python raises, and the guest can only trap. The
/// component is refused with the Python exception it wrote to stderr (escaped, bounded), as
/// `toolcell describe` shows it to the person; never to a model (the tool is not listed).
#[test]
fn a_python_tool_whose_describe_raises_is_refused_with_its_exception() {
    let bytes = {
        let _guard = crate::support::exclusive();
        crate::toolchains::python_component(
            &crate::toolchains::root().join("tests/python/old_info"),
            "old_info",
        )
    };
    let runtime = crate::support::builder()
        .builtin_tools(false)
        .component("python:old_info", bytes.clone())
        .build()
        .expect("the runtime builds");
    let [refused] = runtime.load_errors() else {
        panic!("one refusal expected: {:?}", runtime.load_errors())
    };
    assert!(
        refused.message.starts_with("describe() failed"),
        "{refused}"
    );
    assert!(
        refused.guest_stderr.contains("TypeError")
            && refused.guest_stderr.contains("output_schema"),
        "the exception is kept: {refused:?}"
    );
    assert!(
        refused.guest_stderr.len() <= toolcell::limits::STDERR_TAIL_BYTES,
        "{}",
        refused.guest_stderr.len()
    );
    assert!(runtime.registry().get("old_info").is_none());
    // What the person sees: the refusal, then the guest's lines.
    let shown = refused.to_string();
    assert!(
        shown.contains("\n  the guest wrote to stderr:\n  | ") && shown.contains("TypeError"),
        "{shown}"
    );

    // `toolcell describe` prints it, and exits 1.
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("old_info.wasm");
    std::fs::write(&file, &bytes).expect("write the component");
    let output = crate::support::toolcell_command()
        .arg("describe")
        .arg(&file)
        .output()
        .expect("run toolcell describe");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the guest wrote to stderr") && stderr.contains("output_schema"),
        "{stderr}"
    );
}
