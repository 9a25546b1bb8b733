//! Traces: a small OTLP/HTTP receiver on loopback (a collector in miniature: it accepts
//! `POST /v1/traces`, decodes the protobuf with `opentelemetry-proto`, answers 200) receives
//! what `toolcell serve --otlp-endpoint` sends, over HTTP (the caller's `traceparent` header)
//! and over stdio (`_meta.traceparent`). The spans must form the tree the pipeline promises
//! (`tools/call` → `call` → its stages) inside the caller's trace. Both servers are stopped
//! before the spans are read: what is still queued must be sent as the process exits.

use crate::support::exclusive;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use prost::Message as _;
use serde_json::json;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};

/// One received span, as the tests look at it.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace_id: String,
    span_id: String,
    parent: String,
    /// The span's W3C `tracestate`, as exported.
    trace_state: String,
    attributes: Vec<(String, String)>,
}

impl Span {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.as_str())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The receiver: every span any request brought, and the paths and content types it was sent
/// with.
struct Receiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<Span>>>,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let spans = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (kept, seen) = (Arc::clone(&spans), Arc::clone(&requests));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (kept, seen) = (Arc::clone(&kept), Arc::clone(&seen));
                std::thread::spawn(move || serve(stream, &kept, &seen));
            }
        });
        Receiver {
            addr,
            spans,
            requests,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().expect("spans").clone()
    }
}

/// Answer the requests on one connection (kept alive as the exporter likes).
fn serve(stream: std::net::TcpStream, spans: &Mutex<Vec<Span>>, requests: &Mutex<Vec<String>>) {
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0usize;
        let mut content_type = String::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                match name.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "content-type" => value.trim().clone_into(&mut content_type),
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        requests
            .lock()
            .expect("requests")
            .push(format!("{} {content_type}", request_line.trim_end()));
        let decoded = ExportTraceServiceRequest::decode(body.as_slice());
        let status = match decoded {
            Ok(export) => {
                let mut kept = spans.lock().expect("spans");
                for resource in export.resource_spans {
                    for scope in resource.scope_spans {
                        for span in scope.spans {
                            kept.push(Span {
                                name: span.name,
                                trace_id: hex(&span.trace_id),
                                span_id: hex(&span.span_id),
                                parent: hex(&span.parent_span_id),
                                trace_state: span.trace_state,
                                attributes: span
                                    .attributes
                                    .into_iter()
                                    .map(|pair| {
                                        let value = match pair.value.and_then(|v| v.value) {
                                            Some(Any::StringValue(text)) => text,
                                            Some(Any::IntValue(n)) => n.to_string(),
                                            Some(Any::BoolValue(b)) => b.to_string(),
                                            Some(Any::DoubleValue(d)) => d.to_string(),
                                            other => format!("{other:?}"),
                                        };
                                        (pair.key, value)
                                    })
                                    .collect(),
                            });
                        }
                    }
                }
                "200 OK"
            }
            Err(_) => "400 Bad Request",
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n"
        );
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// The caller's trace: a W3C `traceparent` with a trace id and span id of the test's own.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn traceparent() -> String {
    format!("00-{TRACE_ID}-{CALLER_SPAN}-01")
}

/// The `tools/call` span of the caller's trace, its `call` child, and the call's stages, with
/// the shape checked: every span of the call in the caller's trace, each stage a child of the
/// call, the call a child of `tools/call`, and that one a child of the caller's span.
fn the_call_in_the_callers_trace(spans: &[Span], tool: &str) -> (Span, Vec<String>) {
    let server = spans
        .iter()
        .find(|span| span.name == "tools/call" && span.trace_id == TRACE_ID)
        .unwrap_or_else(|| panic!("no tools/call span in the caller's trace: {spans:#?}"));
    assert_eq!(
        server.parent, CALLER_SPAN,
        "the caller's span is its parent"
    );
    assert_eq!(server.attribute("mcp.tool"), Some(tool), "{server:?}");
    let call = spans
        .iter()
        .find(|span| span.name == "call" && span.parent == server.span_id)
        .unwrap_or_else(|| panic!("no call span under tools/call: {spans:#?}"))
        .clone();
    assert_eq!(call.trace_id, TRACE_ID);
    let mut stages: Vec<String> = spans
        .iter()
        .filter(|span| span.parent == call.span_id)
        .inspect(|stage| assert_eq!(stage.trace_id, TRACE_ID, "{stage:?}"))
        .map(|stage| stage.name.clone())
        .collect();
    stages.sort();
    (call, stages)
}

#[test]
fn an_http_call_joins_the_callers_trace_with_its_stages() {
    let _guard = exclusive();
    let receiver = Receiver::start();
    let workspace = tempfile::tempdir().expect("tempdir");
    std::fs::write(workspace.path().join("a.txt"), "hello").expect("write");
    let audit = workspace.path().join("audit.jsonl");
    let endpoint = receiver.endpoint();
    let server = crate::http::Server::start(&[
        "--otlp-endpoint",
        &endpoint,
        "--workspace",
        &workspace.path().to_string_lossy(),
        "--audit",
        &audit.to_string_lossy(),
    ]);
    let parent = traceparent();
    let answer = crate::http::call_with(
        server.addr,
        None,
        7,
        "read_file",
        json!({ "path": "a.txt" }),
        &[("traceparent", parent.as_str())],
    );
    let (text, failed) = crate::http::call_text(&answer);
    assert!(text.starts_with("hello") && !failed, "{text}");
    // A call without a trace context starts a trace of its own.
    let answer = crate::http::call_with(server.addr, None, 8, "echo", json!({ "text": "x" }), &[]);
    assert_eq!(crate::http::call_text(&answer).0, "x");
    // Stopped before anything is read: the spans still queued go out as it exits.
    let exited = std::process::Command::new("kill")
        .args(["-TERM", &server.child_id().to_string()])
        .status()
        .expect("kill");
    assert!(exited.success());
    let stderr = server.wait();
    let spans = receiver.spans();
    assert!(
        receiver
            .requests
            .lock()
            .expect("requests")
            .iter()
            .all(|request| request == "POST /v1/traces HTTP/1.1 application/x-protobuf"),
        "OTLP/HTTP with protobuf: {:?}",
        receiver.requests.lock().expect("requests")
    );
    let (call, stages) = the_call_in_the_callers_trace(&spans, "read_file");
    assert_eq!(stages, ["execute", "gate"], "{stderr}");
    // The quick stages are the call's fields, in microseconds.
    for quick in ["dispatch_us", "validate_us", "cap_us", "audit_us"] {
        assert!(
            call.attribute(quick)
                .is_some_and(|micros| micros.parse::<u64>().is_ok()),
            "{quick}: {call:?}"
        );
    }
    assert_eq!(call.attribute("tool"), Some("read_file"));
    assert_eq!(call.attribute("outcome"), Some("result"));
    assert_eq!(call.attribute("gate"), Some("allow"));
    assert!(
        call.attribute("tool.digest")
            .is_some_and(|digest| digest.len() == 64),
        "{call:?}"
    );
    assert_eq!(call.attribute("deadline_ms"), Some("5000"), "{call:?}");
    assert!(
        call.attribute("memory_bytes")
            .and_then(|bytes| bytes.parse::<u64>().ok())
            .is_some_and(|bytes| bytes > 0),
        "{call:?}"
    );
    let other = spans
        .iter()
        .find(|span| span.name == "tools/call" && span.attribute("mcp.tool") == Some("echo"))
        .unwrap_or_else(|| panic!("echo's span: {spans:#?}"));
    assert_ne!(other.trace_id, TRACE_ID, "a trace of its own");
    assert!(other.parent.is_empty(), "a root span: {other:?}");
}

#[test]
fn a_stdio_call_joins_the_trace_its_meta_names() {
    let _guard = exclusive();
    let receiver = Receiver::start();
    let endpoint = receiver.endpoint();
    let mut server = crate::mcp::Server::start(&["--otlp-endpoint", &endpoint]);
    server.send(json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "echo", "arguments": { "text": "traced" },
            "_meta": { "traceparent": traceparent() }
        }
    }));
    let response = server.response(1);
    assert_eq!(response["result"]["content"][0]["text"], "traced");
    let (_, clean, _, stderr) = server.close();
    assert!(clean, "{stderr}");
    let spans = receiver.spans();
    let (call, stages) = the_call_in_the_callers_trace(&spans, "echo");
    // echo declares no capability: no gate; no --audit: no audit.
    assert_eq!(stages, ["execute"], "{stderr}");
    assert!(call.attribute("dispatch_us").is_some(), "{call:?}");
    assert_eq!(call.attribute("audit_us"), None, "{call:?}");
    assert_eq!(call.attribute("outcome"), Some("result"));
    assert_eq!(call.attribute("agent"), Some("cli"));
}

#[test]
fn a_collector_that_is_not_there_holds_up_neither_the_calls_nor_the_exit() {
    let _guard = exclusive();
    // A port nothing listens on (bound, then closed).
    let closed = TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let endpoint = format!("http://{closed}");
    let mut server = crate::mcp::Server::start(&["--otlp-endpoint", &endpoint]);
    for id in 1..=3 {
        server.call(id, "echo", json!({ "text": id.to_string() }));
        assert_eq!(
            server.response(id)["result"]["content"][0]["text"],
            id.to_string()
        );
    }
    let (_, clean, _, _) = server.close();
    assert!(
        clean,
        "the server exits cleanly though its traces could not be sent"
    );
}

/// Sampling is the operator's (issue 40): with the default sampler a caller's not-sampled flag
/// (`-00`) does not keep its call out of the traces (it still joins the caller's trace); only
/// an operator who chose a parent-based sampler lets callers decide. A caller's `tracestate` is
/// kept only within `MAX_TRACESTATE_BYTES`, and in no attribute.
#[test]
fn a_caller_cannot_hide_its_calls_from_the_operators_traces() {
    let _guard = exclusive();
    let unsampled = format!("00-{TRACE_ID}-{CALLER_SPAN}-00");
    let sampled = traceparent();
    // Well formed (20 members, each within W3C's limits), but longer than the bound.
    let long_state: String = (0..20)
        .map(|n| format!("vendor{n:02}=value-{}", "x".repeat(20)))
        .collect::<Vec<_>>()
        .join(",");
    assert!(long_state.len() > toolcell_mcp::trace::MAX_TRACESTATE_BYTES);
    let run = |args: &[&str]| {
        let receiver = Receiver::start();
        let endpoint = receiver.endpoint();
        let mut all = vec!["--otlp-endpoint", endpoint.as_str()];
        all.extend_from_slice(args);
        let server = crate::http::Server::start(&all);
        for (id, text, parent, state) in [
            (1, "hidden?", unsampled.as_str(), "caller=abc"),
            (2, "long", sampled.as_str(), long_state.as_str()),
        ] {
            let answer = crate::http::call_with(
                server.addr,
                None,
                id,
                "echo",
                json!({ "text": text }),
                &[("traceparent", parent), ("tracestate", state)],
            );
            assert_eq!(crate::http::call_text(&answer).0, text);
        }
        let stopped = std::process::Command::new("kill")
            .args(["-TERM", &server.child_id().to_string()])
            .status()
            .expect("kill");
        assert!(stopped.success());
        server.wait();
        receiver.spans()
    };
    // The `tools/call` spans in the caller's trace.
    let calls = |spans: &[Span]| -> Vec<Span> {
        spans
            .iter()
            .filter(|span| span.name == "tools/call" && span.trace_id == TRACE_ID)
            .cloned()
            .collect()
    };
    let spans = run(&[]);
    let joined = calls(&spans);
    assert_eq!(
        joined.len(),
        2,
        "both calls exported in the caller's trace: {spans:#?}"
    );
    let hidden = joined
        .iter()
        .find(|span| span.parent == CALLER_SPAN && span.trace_state == "caller=abc")
        .unwrap_or_else(|| panic!("the -00 call was not exported: {spans:#?}"));
    assert!(
        spans
            .iter()
            .flat_map(|span| &span.attributes)
            .all(|(_, value)| !value.contains("caller=abc") && !value.contains("vendor00")),
        "a tracestate in an attribute: {hidden:?}"
    );
    assert!(
        joined.iter().any(|span| span.trace_state.is_empty()),
        "the long tracestate was kept: {joined:#?}"
    );
    // The operator's choice: a parent-based sampler lets the caller's flag decide.
    let spans = run(&["--otlp-sampler", "parentbased_always_on"]);
    let joined = calls(&spans);
    assert_eq!(joined.len(), 1, "only the sampled call: {spans:#?}");
    assert!(joined[0].trace_state.is_empty(), "{joined:#?}");
}
