//! Tools written in Python (`guest-tools/python/`), built with componentize-py against the same
//! WIT as the Rust ones and called through the same pipeline, error paths included.
//!
//! componentize-py (pinned, from PyPI) lives in a virtual environment under `target/`, made on
//! first use like the MCP client's (`.ci/run` makes it up front). Each tool is built once per
//! change of its source or of the WIT, into `target/py-guests/`.

use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use toolcell::{Call, FailureKind, ToolResponse};

/// The componentize-py the tools are built with (its output depends on the version).
const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The componentize-py executable, installed into `target/py-guests-venv` if it is not there.
fn componentize_py() -> PathBuf {
    let venv = crate::support::python_venv("py-guests-venv", COMPONENTIZE_PY, |venv| {
        Command::new(venv.join("bin/componentize-py"))
            .arg("--version")
            .output()
            .is_ok_and(|out| {
                out.status.success() && out.stdout.starts_with(b"componentize-py 0.25.1")
            })
    });
    venv.join("bin/componentize-py")
}

/// The component built from `guest-tools/python/<name>/app.py`, rebuilt when it or the WIT
/// changed.
pub(crate) fn python_tool(name: &str) -> Vec<u8> {
    // One build at a time: componentize-py is CPU-heavy, and two tests may want the same tool.
    static BUILDING: Mutex<()> = Mutex::new(());
    let _building = BUILDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let source = root().join("guest-tools/python").join(name);
    let mut digest = Sha256::new();
    for file in [source.join("app.py"), root().join("wit/tool.wit")] {
        digest.update(std::fs::read(&file).expect("the tool's source"));
    }
    let hash: String = digest.finalize()[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let out_dir = root().join("target/py-guests");
    let out = out_dir.join(format!("{name}-{hash}.wasm"));
    if !out.is_file() {
        std::fs::create_dir_all(&out_dir).expect("target/py-guests");
        let partial = out.with_extension("partial");
        let built = Command::new(componentize_py())
            .arg("-d")
            .arg(root().join("wit"))
            .args(["-w", "guest", "componentize", "-p"])
            .arg(&source)
            .args(["app", "-o"])
            .arg(&partial)
            // Keep the source tree clean of bytecode caches.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .status()
            .expect("run componentize-py");
        assert!(built.success(), "componentize-py failed for {name}");
        std::fs::rename(&partial, &out).expect("the built tool");
    }
    std::fs::read(&out).expect("the built tool")
}

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
}
