//! Components as the ecosystem writes them (issue 50): worlds of plain exported functions,
//! built with standard toolchains (wit-bindgen, componentize-py, componentize-js) and no
//! toolcell crate or WIT, served with a Wassette `policy.yaml` beside each. A policy.yaml
//! grants exactly its paths, hosts and keys; a hostile typed component reaching past them is
//! refused; a parameter tied to a capability grants that one file; `wasi:config` answers only
//! the keys granted; the same tools answer through the command line and over MCP.

use crate::support::toolcell_command;
use crate::typed::{call, result, text, tool_names};
use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use toolcell::approval::{Approval, FixedApprover};
use toolcell::{FailureKind, Runtime, ToolResponse};

/// The message of a tool's own failure (a `result`'s `err`).
fn failure(response: ToolResponse) -> String {
    match response {
        ToolResponse::Failed {
            kind: FailureKind::Tool,
            message,
        } => message,
        other => panic!("expected the tool's failure, got {other:?}"),
    }
}

/// A workspace: `docs/a.txt`, `docs/b.txt`, `secret.txt`, an empty `out/`.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("workspace");
    std::fs::create_dir_all(dir.path().join("docs")).expect("docs");
    std::fs::create_dir_all(dir.path().join("out")).expect("out");
    for (path, text) in [
        ("docs/a.txt", "alpha"),
        ("docs/b.txt", "beta"),
        ("secret.txt", "SECRET"),
    ] {
        std::fs::write(dir.path().join(path), text).expect("write");
    }
    dir
}

/// A runtime of the components in `tools` (each `NAME.wasm`, with `NAME.policy.yaml` beside it
/// when given), over `workspace`, under `policy` (TOML), answering approvals with `answer`.
fn served(
    tools: &[(&str, &[u8], Option<&str>)],
    workspace: &Path,
    policy: &str,
    answer: Approval,
) -> (Runtime, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tools");
    for (name, bytes, yaml) in tools {
        std::fs::write(dir.path().join(format!("{name}.wasm")), bytes).expect("component");
        if let Some(yaml) = yaml {
            std::fs::write(dir.path().join(format!("{name}.policy.yaml")), yaml).expect("yaml");
        }
    }
    let runtime = crate::support::builder()
        .builtin_tools(false)
        .tools_dir(dir.path())
        .workspace(workspace)
        .policy(toolcell::Policy::from_toml(policy).expect("policy"))
        .approver(Arc::new(FixedApprover::new(answer)))
        .build()
        .expect("runtime");
    assert!(
        runtime
            .load_errors()
            .iter()
            .all(|error| error.to_string().contains("left out")),
        "{:?}",
        runtime.load_errors()
    );
    (runtime, dir)
}

const FILES_YAML: &str = r#"
$schema: "https://raw.githubusercontent.com/microsoft/policy-mcp/main/schema/policy-v1.0.schema.json"
version: "1.0"
description: "Reads the docs, writes the output"
permissions:
  storage:
    allow:
      - uri: "fs://docs/**"
        access: ["read"]
      - uri: "fs://out"
        access: ["read", "write"]
"#;

/// The operator's word for `write-file`: its `path` names the one file a call writes (toolcell
/// never grants a directory for writing), under the yaml's write root.
const WRITE_TIED: &str = r#"
[tools.write-file]
capabilities = [{ kind = "filesystem.write", argument = "/path" }]
"#;

/// A file reader of the ecosystem's convention, with its policy.yaml: it reads and lists what
/// the yaml names and nothing else; a write under the yaml's write root, tied to the call's
/// `path`, is asked of a person (a write is gated by default) and done only when they say yes.
#[test]
pub(crate) fn files_rs() {
    let ws = workspace();
    let files = [("files", crate::guests::FILES_RS, Some(FILES_YAML))];
    let (runtime, _tools) = served(&files, ws.path(), WRITE_TIED, Approval::Once);
    let names = tool_names(&runtime);
    assert_eq!(names, ["list-directory", "read-file", "write-file"]);
    // wit-bindgen writes no `package-docs`: a generated sentence, naming the parameter.
    let info = runtime.info("read-file").expect("read-file");
    assert!(info.description.contains("`path`"), "{}", info.description);
    // With the section a WIT-aware build writes (cargo component, wasm-tools component embed),
    // the world's docs are the descriptions.
    let documented = with_package_docs(
        crate::guests::FILES_RS,
        &json!({
            "worlds": { "files": {
                "docs": "Reads, lists and writes the files it is given.",
                "func_exports": {
                    "read-file": "The text of the file at `path`.",
                    "list-directory": "The names in the directory at `path`, sorted."
                }
            }}
        }),
    );
    let (described, _tools) = served(
        &[("files", &documented, Some(FILES_YAML))],
        ws.path(),
        "",
        Approval::Deny,
    );
    assert_eq!(
        described.info("read-file").expect("read-file").description,
        "The text of the file at `path`."
    );
    assert!(
        !described
            .info("write-file")
            .expect("write-file")
            .description
            .is_empty()
    );
    assert_eq!(
        text(call(&runtime, "read-file", json!({ "path": "docs/a.txt" }))),
        "alpha"
    );
    assert_eq!(
        result(call(&runtime, "list-directory", json!({ "path": "docs" }))),
        json!(["a.txt", "b.txt"])
    );
    // Outside the yaml's paths there is nothing: no preopen reaches it.
    for path in [
        "secret.txt",
        "../secret.txt",
        "/secret.txt",
        "docs/../secret.txt",
    ] {
        let refused = failure(call(&runtime, "read-file", json!({ "path": path })));
        assert!(!refused.contains("SECRET"), "{path}: {refused}");
    }
    assert!(call(&runtime, "list-directory", json!({ "path": "." })).is_error());
    // A write the yaml allows: asked, and done when the person says yes.
    let wrote = call(
        &runtime,
        "write-file",
        json!({ "path": "out/n.txt", "content": "new" }),
    );
    assert_eq!(text(wrote), "wrote 3 bytes to out/n.txt");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("out/n.txt")).expect("written"),
        "new"
    );
    // ... and when they say no, nothing is written.
    let (refusing, _tools) = served(&files, ws.path(), WRITE_TIED, Approval::Deny);
    let denied = call(
        &refusing,
        "write-file",
        json!({ "path": "out/m.txt", "content": "no" }),
    );
    assert!(matches!(denied, ToolResponse::Denied { .. }), "{denied:?}");
    assert!(!ws.path().join("out/m.txt").exists());
    // Writing outside the yaml's write root: refused before anything runs, whoever approves.
    let outside = call(
        &runtime,
        "write-file",
        json!({ "path": "docs/a.txt", "content": "overwritten" }),
    );
    assert!(
        matches!(outside, ToolResponse::Denied { .. }),
        "{outside:?}"
    );
    // Without the tie, the component's functions are given no directory to write.
    let (untied, _tools) = served(&files, ws.path(), "", Approval::Once);
    assert!(
        call(
            &untied,
            "write-file",
            json!({ "path": "out/o.txt", "content": "no" })
        )
        .is_error()
    );
    assert!(!ws.path().join("out/o.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("docs/a.txt")).expect("a"),
        "alpha"
    );
}

/// What a hostile typed component reaches for, past its policy.yaml: a second file, a file
/// outside, a listing above, another host, variables and configuration keys by name. Each is
/// refused; what the yaml names works. A parameter tied to a capability grants that one file.
#[test]
pub(crate) fn typed_snoop() {
    let ws = workspace();
    let allowed = HttpServer::start();
    let other = HttpServer::start();
    let yaml = format!(
        r#"
version: "1.0"
permissions:
  storage:
    allow:
      - uri: "fs://docs"
        access: ["read"]
  network:
    allow:
      - host: "http://{}/"
  environment:
    allow:
      - key: "CARGO_PKG_NAME"
"#,
        allowed.addr
    );
    let snoop = [("snoop", crate::guests::TYPED_SNOOP, Some(yaml.as_str()))];
    let policy = "[config]\nCARGO_PKG_NAME = \"from the policy\"\nOTHER = \"never\"\n";
    let (runtime, _tools) = served(&snoop, ws.path(), policy, Approval::Deny);
    // The yaml's directory, whole: both files in it; nothing beside it.
    assert_eq!(
        text(call(
            &runtime,
            "read-two",
            json!({ "path": "docs/a.txt", "other": "docs/b.txt" })
        )),
        "alpha|beta"
    );
    for other in [
        "secret.txt",
        "../secret.txt",
        "docs/../secret.txt",
        "/etc/passwd",
    ] {
        let refused = failure(call(
            &runtime,
            "read-two",
            json!({ "path": "docs/a.txt", "other": other }),
        ));
        assert!(!refused.contains("SECRET"), "{other}: {refused}");
    }
    assert!(call(&runtime, "list-names", json!({ "path": "." })).is_error());
    // The variable the yaml names, and no other; its value is the server's.
    assert_eq!(
        result(call(&runtime, "env", json!({ "name": "CARGO_PKG_NAME" }))),
        json!(env!("CARGO_PKG_NAME"))
    );
    for name in ["HOME", "PATH", "CARGO_MANIFEST_DIR"] {
        assert_eq!(
            result(call(&runtime, "env", json!({ "name": name }))),
            Value::Null,
            "{name}"
        );
    }
    assert_eq!(
        result(call(&runtime, "env-all", json!({}))),
        json!([["CARGO_PKG_NAME", env!("CARGO_PKG_NAME")]])
    );
    // The key the yaml names, from the policy's [config]; no other key, though the policy
    // holds one.
    assert_eq!(
        result(call(&runtime, "config", json!({ "key": "CARGO_PKG_NAME" }))),
        json!("from the policy")
    );
    assert_eq!(
        result(call(&runtime, "config", json!({ "key": "OTHER" }))),
        Value::Null
    );
    assert_eq!(
        result(call(&runtime, "config-all", json!({}))),
        json!([["CARGO_PKG_NAME", "from the policy"]])
    );
    // An operator who denies a function the environment denies it the yaml's key both ways:
    // the yaml's `config` does not undo `env = deny`.
    let denied = format!(
        "{policy}[tools.config]\nenv = {{ access = \"deny\" }}\n\
         [tools.config-all]\nenv = {{ access = \"deny\" }}\n"
    );
    let (denying, _denying_tools) = served(&snoop, ws.path(), &denied, Approval::Deny);
    assert_eq!(
        result(call(&denying, "config", json!({ "key": "CARGO_PKG_NAME" }))),
        Value::Null
    );
    assert_eq!(result(call(&denying, "config-all", json!({}))), json!([]));
    // The host the yaml names, and no other: the other is never connected to.
    assert_eq!(
        result(call(
            &runtime,
            "connect",
            json!({ "url": format!("http://{}/hello", allowed.addr) })
        )),
        json!(200)
    );
    let refused = failure(call(
        &runtime,
        "connect",
        json!({ "url": format!("http://{}/hello", other.addr) }),
    ));
    assert!(refused.to_lowercase().contains("denied"), "{refused}");
    assert_eq!(other.requests(), 0, "the other host was reached");

    // The yaml edited beside the unchanged component (its host taken away) is seen as a change,
    // and read again: the host it no longer names is denied.
    let (runtime, tools) = served(&snoop, ws.path(), "", Approval::Deny);
    let url = json!({ "url": format!("http://{}/hello", allowed.addr) });
    assert_eq!(result(call(&runtime, "connect", url.clone())), json!(200));
    let narrower = yaml.replace(&format!("      - host: \"http://{}/\"\n", allowed.addr), "");
    assert_ne!(narrower, yaml);
    std::fs::write(tools.path().join("snoop.policy.yaml"), narrower).expect("the edit");
    let reloaded = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("executor")
        .block_on(runtime.reload_if_changed())
        .expect("reload");
    assert!(reloaded.is_some(), "the edited policy.yaml was not seen");
    let before = allowed.requests();
    let refused = failure(call(&runtime, "connect", url));
    assert!(refused.to_lowercase().contains("denied"), "{refused}");
    assert_eq!(
        allowed.requests(),
        before,
        "the host was reached after its grant was removed"
    );

    // A parameter tied to the capability: `path` names the one file a call of read-two reads,
    // decided per call by the gate, not the directory.
    let tied = r#"
[tools.read-two]
filesystem.read = { access = "allow", roots = ["docs"] }
capabilities = [{ kind = "filesystem.read", argument = "/path" }]
"#;
    let (runtime, _tools) = served(&snoop, ws.path(), tied, Approval::Deny);
    let sibling = failure(call(
        &runtime,
        "read-two",
        json!({ "path": "docs/a.txt", "other": "docs/b.txt" }),
    ));
    assert!(sibling.starts_with("docs/b.txt"), "{sibling}");
    let outside = call(
        &runtime,
        "read-two",
        json!({ "path": "secret.txt", "other": "secret.txt" }),
    );
    assert!(
        matches!(outside, ToolResponse::Denied { .. }),
        "{outside:?}"
    );
    // The others of the component keep the yaml's grants.
    assert_eq!(
        result(call(&runtime, "list-names", json!({ "path": "docs" }))),
        json!(["a.txt", "b.txt"])
    );
}

/// A web fetcher of the ecosystem's convention: the host its policy.yaml names is fetched
/// with the token the operator configured for the key it names (read through `wasi:config`),
/// and no other host is reached; the token is in no audit line.
#[test]
pub(crate) fn fetch_rs() {
    let ws = workspace();
    let server = HttpServer::start();
    let other = HttpServer::start();
    let yaml = format!(
        "version: \"1.0\"\npermissions:\n  network:\n    allow:\n      - host: \"http://{}\"\n  \
         environment:\n    allow:\n      - key: \"API_TOKEN\"\n",
        server.addr
    );
    let audit = ws.path().join("audit.jsonl");
    let tools = tempfile::tempdir().expect("tools");
    std::fs::write(tools.path().join("fetch.wasm"), crate::guests::FETCH_RS).expect("wasm");
    std::fs::write(tools.path().join("fetch.policy.yaml"), &yaml).expect("yaml");
    let runtime = crate::support::builder()
        .builtin_tools(false)
        .tools_dir(tools.path())
        .workspace(ws.path())
        .policy(
            toolcell::Policy::from_toml("[config]\nAPI_TOKEN = \"s3cret-token\"\n")
                .expect("policy"),
        )
        .build()
        .expect("runtime")
        .with_audit(toolcell::audit::Audit::open(&audit).expect("audit"));
    let fetched = text(call(
        &runtime,
        "fetch",
        json!({ "url": format!("http://{}/hello", server.addr) }),
    ));
    assert_eq!(fetched, "GET /hello authorization=Bearer s3cret-token");
    let refused = failure(call(
        &runtime,
        "fetch",
        json!({ "url": format!("http://{}/hello", other.addr) }),
    ));
    assert!(refused.to_lowercase().contains("denied"), "{refused}");
    assert_eq!(other.requests(), 0);
    let lines = std::fs::read_to_string(&audit).expect("the audit");
    assert_eq!(lines.lines().count(), 2, "{lines}");
    assert!(lines.contains("API_TOKEN"), "the key is named: {lines}");
    assert!(!lines.contains("s3cret"), "the value is not: {lines}");
}

/// A Python evaluator and a JavaScript clock of the ecosystem's convention, built with
/// componentize-py and componentize-js against worlds of their own, served with a
/// `policy.yaml` of no permissions: the evaluator answers and reaches nothing, an error is the
/// tool's failure; the clock reads toolcell's fixed clock until the policy grants the real one.
#[test]
fn python_and_javascript_components_of_their_own_worlds() {
    let ecosystem = crate::toolchains::root().join("tests/ecosystem");
    let eval = crate::toolchains::python_world(&ecosystem.join("eval-py"), "evaluator");
    let clock = crate::toolchains::js_world(&ecosystem.join("time-js"), "time.js", "clock");
    let none = "version: \"1.0\"\npermissions: {}\n";
    let ws = workspace();
    let components = [
        ("eval", eval.as_slice(), Some(none)),
        ("clock", clock.as_slice(), Some(none)),
    ];
    let (runtime, _tools) = served(&components, ws.path(), "", Approval::Deny);
    assert_eq!(
        text(call(
            &runtime,
            "eval",
            json!({ "expression": "sum(range(10)) * 2" })
        )),
        "90"
    );
    for (expression, says) in [
        ("open('secret.txt').read()", "NameError"),
        ("__import__('os').environ", "NameError"),
        ("1/0", "ZeroDivisionError"),
    ] {
        let refused = failure(call(&runtime, "eval", json!({ "expression": expression })));
        assert!(refused.contains(says), "{expression}: {refused}");
    }
    let fixed = text(call(&runtime, "get-current-time", json!({})));
    assert!(fixed.starts_with("1970-01-01T00:00:00"), "{fixed}");
    let granted = "[tools.get-current-time]\nclock = { access = \"allow\" }\n";
    let (runtime, _tools) = served(&components, ws.path(), granted, Approval::Deny);
    let now = text(call(&runtime, "get-current-time", json!({})));
    let year: i32 = now[..4].parse().expect("a year");
    assert!(year >= 2025, "{now}");
}

/// The same typed tools through the command line and over MCP (stdio and HTTP): `describe`
/// shows every function served, those left out and why, and what the policy.yaml became;
/// `call` answers; an `err` is `isError` over MCP in both transports.
#[test]
fn typed_tools_answer_through_the_cli_and_over_mcp() {
    let _guard = crate::support::exclusive();
    let ws = workspace();
    let tools = tempfile::tempdir().expect("tools");
    std::fs::write(tools.path().join("files.wasm"), crate::guests::FILES_RS).expect("wasm");
    std::fs::write(tools.path().join("files.policy.yaml"), FILES_YAML).expect("yaml");
    std::fs::write(tools.path().join("probe.wasm"), crate::guests::TYPED_PROBE).expect("wasm");
    let dir = tools.path().to_str().expect("path");
    let workspace = ws.path().to_str().expect("path");

    let described = toolcell_command()
        .arg("describe")
        .arg(tools.path().join("files.wasm"))
        .output()
        .expect("describe");
    assert!(described.status.success(), "{described:?}");
    let shown: Value = serde_json::from_slice(&described.stdout).expect("JSON");
    let mut names: Vec<&str> = shown["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["list-directory", "read-file", "write-file"]);
    assert_eq!(
        shown["policy_yaml"]["rules"]["filesystem.read"]["roots"],
        json!(["docs", "out"])
    );
    assert_eq!(
        shown["policy_yaml"]["rules"]["filesystem.write"]["access"],
        json!("gated")
    );
    let probe = toolcell_command()
        .arg("describe")
        .arg(tools.path().join("probe.wasm"))
        .output()
        .expect("describe");
    let probe: Value = serde_json::from_slice(&probe.stdout).expect("JSON");
    let left_out = probe["left_out"].as_array().expect("left_out");
    assert!(
        left_out.iter().any(|left| left["function"]
            .as_str()
            .is_some_and(|f| f.contains("peek"))
            && left["why"]
                .as_str()
                .is_some_and(|why| why.contains("resource"))),
        "{probe}"
    );

    let cli = |tool: &str, arguments: Value| {
        toolcell_command()
            .args([
                "--tools",
                dir,
                "--no-builtin",
                "--workspace",
                workspace,
                "call",
                tool,
            ])
            .arg(arguments.to_string())
            .output()
            .expect("call")
    };
    let read = cli("read-file", json!({ "path": "docs/a.txt" }));
    assert_eq!(String::from_utf8_lossy(&read.stdout), "alpha\n", "{read:?}");
    let added = cli("add", json!({ "a": 2, "b": 3 }));
    assert_eq!(
        serde_json::from_slice::<Value>(&added.stdout).expect("JSON")["result"],
        json!(5)
    );
    let failed = cli("fail", json!({ "why": "as asked" }));
    assert_eq!(failed.status.code(), Some(1), "{failed:?}");
    assert!(String::from_utf8_lossy(&failed.stderr).contains("as asked"));

    // MCP over stdio.
    let mut server =
        crate::mcp::Server::start(&["--tools", dir, "--no-builtin", "--workspace", workspace]);
    server.call(1, "read-file", json!({ "path": "docs/b.txt" }));
    let answer = server.response(1);
    assert_eq!(crate::mcp::text(&answer), "beta", "{answer}");
    server.call(2, "divide", json!({ "a": 1, "b": 0 }));
    let answer = server.response(2);
    assert_eq!(answer["result"]["isError"], json!(true), "{answer}");
    assert!(crate::mcp::text(&answer).contains("by zero"), "{answer}");
    server.call(3, "add", json!({ "a": 1, "b": 2 }));
    let answer = server.response(3);
    assert_eq!(
        answer["result"]["structuredContent"],
        json!({ "result": 3 })
    );
    drop(server);

    // MCP over HTTP.
    let http =
        crate::http::Server::start(&["--tools", dir, "--no-builtin", "--workspace", workspace]);
    let answer = crate::http::call_with(
        http.addr,
        None,
        1,
        "read-file",
        json!({ "path": "docs/a.txt" }),
        &[],
    );
    assert_eq!(crate::http::call_text(&answer), ("alpha".to_owned(), false));
    let answer = crate::http::call_with(http.addr, None, 2, "fail", json!({ "why": "no" }), &[]);
    assert_eq!(
        crate::http::call_text(&answer),
        ("Error: no".to_owned(), true)
    );
}

/// `component` with a `package-docs` custom section (version 0, then `metadata` as JSON) added
/// at its end, as wit-component writes one for a WIT with docs.
fn with_package_docs(component: &[u8], metadata: &Value) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"package-docs";
    let mut payload = vec![0u8];
    payload.extend_from_slice(metadata.to_string().as_bytes());
    let mut section = Vec::new();
    leb128(name.len(), &mut section);
    section.extend_from_slice(name);
    section.extend_from_slice(&payload);
    let mut out = component.to_vec();
    out.push(0);
    leb128(section.len(), &mut out);
    out.extend_from_slice(&section);
    out
}

/// A tiny HTTP/1.1 server on loopback: answers each request with its method, path and
/// `authorization` header, and counts the requests it saw.
struct HttpServer {
    addr: SocketAddr,
    seen: Arc<std::sync::atomic::AtomicUsize>,
}

impl HttpServer {
    fn start() -> HttpServer {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().take(64) {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut first = String::new();
                let _ = reader.read_line(&mut first);
                let mut authorization = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        authorization = value.trim().to_owned();
                    }
                }
                let mut words = first.split_whitespace();
                let body = format!(
                    "{} {} authorization={authorization}",
                    words.next().unwrap_or_default(),
                    words.next().unwrap_or_default()
                );
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        HttpServer { addr, seen }
    }

    fn requests(&self) -> usize {
        self.seen.load(std::sync::atomic::Ordering::SeqCst)
    }
}
