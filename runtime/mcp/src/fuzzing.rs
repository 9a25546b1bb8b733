//! What the MCP fuzz target (`fuzz/fuzz_targets/mcp.rs`) calls: a session over arbitrary
//! input, and the transport's fast path compared with rmcp's parse. Not for embedders.

use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use toolcell::policy::ToolPolicy;
use toolcell::{FnTool, Policy, Runtime, ToolInfo};

// ---------------------------------------------------------------------------------------------
// mcp

/// How long one MCP session over a fuzz input may take before the check calls it a hang.
pub const MCP_DEADLINE: Duration = Duration::from_secs(20);

/// The runtime the MCP check serves (no components; a native `echo` tool, core) and the
/// executor it is served on, made once per process.
pub fn mcp_fixture() -> Result<&'static (Arc<Runtime>, tokio::runtime::Runtime), String> {
    static FIXTURE: OnceLock<Result<(Arc<Runtime>, tokio::runtime::Runtime), String>> =
        OnceLock::new();
    FIXTURE
        .get_or_init(|| {
            let echo = FnTool::new(
                ToolInfo::new(
                    "echo",
                    "Returns its text argument unchanged.",
                    json!({"type": "object", "properties": {"text": {"type": "string"}},
                           "required": ["text"]}),
                )
                .read_only(true),
                |arguments, _context| async move {
                    Ok(arguments["text"].as_str().unwrap_or_default().to_owned())
                },
            );
            let core = ToolPolicy {
                core: true,
                ..ToolPolicy::default()
            };
            let runtime = Runtime::builder()
                .builtin_tools(false)
                .cache_dir(None)
                .cache_key_file(None)
                .pool_slots(1)
                .policy(
                    Policy::empty()
                        .with_tool("echo", core)
                        .map_err(|error| error.to_string())?,
                )
                .native(echo)
                .build()
                .map_err(|error| format!("building the runtime: {error:#}"))?;
            let executor = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|error| format!("starting tokio: {error}"))?;
            Ok((Arc::new(runtime), executor))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Everything written to it, shared.
#[derive(Clone, Default)]
struct Sink(Arc<Mutex<Vec<u8>>>);

impl tokio::io::AsyncWrite for Sink {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// Whether two JSON-RPC ids are the same: equal, or the same number written two ways (rmcp
/// answers a request with id `7.0` as `7`; JSON does not tell them apart).
fn same_id(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(a), Value::Number(b)) => a == b || a.as_f64() == b.as_f64(),
        _ => a == b,
    }
}

/// The id of a line the transport's fast path takes.
fn fast_call_id(line: &str) -> Option<Value> {
    match crate::fast_call(line.as_bytes())? {
        rmcp::model::ClientJsonRpcMessage::Request(request) => Some(request.id.into_json_value()),
        _ => None,
    }
}

/// `mcp::serve_on` with `data` as the client's whole input stream. The session ends (within
/// [`MCP_DEADLINE`]) when the input does; every line the server wrote is a JSON-RPC 2.0 object,
/// nothing follows the last newline, and every response answers an id the input used. And
/// every line passes [`check_mcp_fast_path`].
pub fn check_mcp(data: &[u8]) -> Result<(), String> {
    for line in data.split(|byte| *byte == b'\n') {
        check_mcp_fast_path(line)?;
        #[cfg(feature = "http")]
        check_http_reading(line)?;
    }
    mcp_session(data).map(drop)
}

/// The HTTP front's one reading of a body (`http/reading.rs`) is what runs: whatever rmcp's
/// parse makes of the body the front hands it (the reading written out again), the front's
/// checks saw the same thing. If rmcp reads a `tools/call`, the front counted a call and named
/// the same tool (and, for `call_tool`, the same inner tool) for the scope check; if it reads
/// a cancellation, the front names the same request; and the fast path's call, when there is
/// one, is the call rmcp reads (id, tool, arguments, `_meta`). Reading the rewritten body
/// again gives the same reading.
#[cfg(feature = "http")]
pub fn check_http_reading(body: &[u8]) -> Result<(), String> {
    use crate::http::reading::Reading;
    use rmcp::model::{ClientJsonRpcMessage, ClientNotification, ClientRequest, JsonObject};
    let Ok(reading) = Reading::parse(body) else {
        return Ok(());
    };
    let rewritten = reading.to_bytes();
    match Reading::parse(&rewritten) {
        Ok(again) if again == reading => {}
        again => {
            return Err(format!(
                "the rewritten body reads differently: {reading:?} then {again:?}"
            ));
        }
    }
    let rmcp = serde_json::from_slice::<ClientJsonRpcMessage>(&rewritten).ok();
    let called = reading.tools_called();
    match &rmcp {
        Some(ClientJsonRpcMessage::Request(request)) => {
            if let ClientRequest::CallToolRequest(call) = &request.request {
                let mut runs = vec![call.params.name.to_string()];
                if call.params.name == toolcell::registry::CALL_TOOL
                    && let Some(inner) = call
                        .params
                        .arguments
                        .as_ref()
                        .and_then(|arguments| arguments.get("name"))
                        .and_then(Value::as_str)
                {
                    runs.push(inner.to_owned());
                }
                if !reading.is_call() || called != runs {
                    return Err(format!(
                        "rmcp runs {runs:?}; the front's checks saw a call: {}, of {called:?}",
                        reading.is_call()
                    ));
                }
            }
        }
        Some(ClientJsonRpcMessage::Notification(notification)) => {
            if let ClientNotification::CancelledNotification(cancelled) = &notification.notification
            {
                let named = cancelled
                    .params
                    .request_id
                    .as_ref()
                    .map(|id| id.to_string());
                if named != reading.cancelled() {
                    return Err(format!(
                        "rmcp cancels {named:?}; the front would stop {:?}",
                        reading.cancelled()
                    ));
                }
            }
        }
        _ => {}
    }
    if let Some(fast) = reading.fast_call() {
        let Some(ClientJsonRpcMessage::Request(request)) = &rmcp else {
            return Err(format!(
                "the fast path runs a call rmcp does not read: {rmcp:?}"
            ));
        };
        let ClientRequest::CallToolRequest(call) = &request.request else {
            return Err(format!(
                "the fast path runs a call rmcp reads as {request:?}"
            ));
        };
        let arguments = match &fast.arguments {
            Some(raw) => Some(
                serde_json::from_str::<JsonObject>(&raw.0)
                    .map_err(|error| format!("the fast path's arguments: {error}"))?,
            ),
            None => None,
        };
        let meta = call
            .extensions
            .get::<rmcp::model::RequestMetaObject>()
            .map(|meta| meta.0.0.clone());
        if fast.id != request.id
            || fast.name != call.params.name
            || arguments != call.params.arguments
            || fast
                .meta
                .as_ref()
                .is_some_and(|fast| meta.as_ref() != Some(fast))
        {
            return Err(format!(
                "the fast path's call differs from rmcp's: {:?} {:?} {arguments:?} {:?}; rmcp: \
                 {request:?}",
                fast.id, fast.name, fast.meta
            ));
        }
    }
    Ok(())
}

/// The transport's fast path for `tools/call` agrees with rmcp's own parse of `line`: when it
/// takes a line, rmcp's parse makes the same message of it (compared as JSON, the fast path's
/// raw arguments parsed into the map rmcp keeps). The one difference allowed: arguments the
/// pipeline refuses anyway, JSON by syntax but not what serde_json can hold (a number beyond
/// `f64`; a surrogate escape, paired or not, the fast path leaves to rmcp) or nested deeper
/// than `MAX_ARGUMENT_DEPTH` (so deep that the whole line passes serde_json's recursion limit),
/// where rmcp ignores the whole line: the fast path answers them as invalid arguments instead
/// of not at all. Over stdio no check decides on the fast path's reading (there are no scopes
/// or quotas there); over HTTP the front reads every body once (`check_http_reading`).
pub fn check_mcp_fast_path(line: &[u8]) -> Result<(), String> {
    use crate::{Parsed, RawArguments, fast_call, slow_parse};
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonObject};
    let Some(mut fast) = fast_call(line) else {
        return Ok(());
    };
    let ClientJsonRpcMessage::Request(request) = &mut fast else {
        return Err(format!(
            "the fast path made something other than a request: {fast:?}"
        ));
    };
    let ClientRequest::CallToolRequest(call) = &mut request.request else {
        return Err(format!(
            "the fast path made something other than a call: {request:?}"
        ));
    };
    let raw = call.extensions.remove::<RawArguments>();
    let arguments = match &raw {
        Some(raw) => match serde_json::from_str::<JsonObject>(&raw.0) {
            Ok(arguments)
                if toolcell::fuzzing::json_depth(&Value::Object(arguments.clone()))
                    > toolcell::limits::MAX_ARGUMENT_DEPTH
                    && !matches!(slow_parse(line), Parsed::Message(_)) =>
            {
                return Ok(());
            }
            Ok(arguments) => Some(arguments),
            Err(_) if !matches!(slow_parse(line), Parsed::Message(_)) => return Ok(()),
            Err(error) => {
                return Err(format!(
                    "rmcp parsed arguments the pipeline cannot ({error}): {raw:?}"
                ));
            }
        },
        None => None,
    };
    call.params.arguments = arguments;
    let slow = match slow_parse(line) {
        Parsed::Message(slow) => slow,
        Parsed::Ignored => return Err("the fast path took a line rmcp ignores".to_owned()),
        Parsed::InvalidRequest => {
            return Err("the fast path took a line rmcp refuses as invalid".to_owned());
        }
    };
    let (fast_json, slow_json) = (serde_json::to_value(&fast), serde_json::to_value(&*slow));
    match (fast_json, slow_json) {
        (Ok(fast_json), Ok(slow_json)) if fast_json == slow_json => Ok(()),
        (fast_json, slow_json) => Err(format!(
            "the fast path and rmcp disagree:\n fast: {fast_json:?}\n rmcp: {slow_json:?}"
        )),
    }
}

/// The session of [`check_mcp`], checked as it says: every message the server wrote, in order.
pub fn mcp_session(data: &[u8]) -> Result<Vec<Map<String, Value>>, String> {
    let (runtime, executor) = mcp_fixture()?;
    let sink = Sink::default();
    let input = std::io::Cursor::new(data.to_vec());
    let served = executor.block_on(async {
        tokio::time::timeout(
            MCP_DEADLINE,
            crate::serve_on(Arc::clone(runtime), input, sink.clone()),
        )
        .await
    });
    if served.is_err() {
        return Err(format!(
            "the session did not end within {MCP_DEADLINE:?} of its input"
        ));
    }
    let output = sink.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let output =
        String::from_utf8(output).map_err(|error| format!("output is not UTF-8: {error}"))?;
    let lines = if output.is_empty() {
        Vec::new()
    } else {
        let Some(lines) = output.strip_suffix('\n') else {
            return Err(format!("output does not end with a newline: {output:?}"));
        };
        lines.split('\n').collect()
    };
    // The ids the input used, for the responses to answer. Lines as rmcp reads them: split at
    // `\n`, a trailing `\r` and a leading UTF-8 BOM dropped (RFC 8259 §8.1 lets a parser
    // ignore a BOM; the fuzzer found that rmcp does, and answers such a line).
    let ids: Vec<Value> = String::from_utf8_lossy(data)
        .lines()
        .map(|line| line.strip_prefix('\u{feff}').unwrap_or(line))
        .filter_map(
            |line| match serde_json::from_str::<Map<String, Value>>(line) {
                Ok(message) => message.get("id").cloned(),
                // A call whose arguments serde_json cannot hold (see `check_mcp_fast_path`) is
                // still answered, as invalid arguments.
                Err(_) => fast_call_id(line.trim_end_matches('\r')),
            },
        )
        .collect();
    let mut messages = Vec::new();
    for line in lines {
        let message: Map<String, Value> = serde_json::from_str(line)
            .map_err(|error| format!("output line {line:?} is not a JSON object: {error}"))?;
        if message.get("jsonrpc") != Some(&json!("2.0")) {
            return Err(format!("output line {line:?} is not JSON-RPC 2.0"));
        }
        let is_response = message.contains_key("result") || message.contains_key("error");
        if let Some(id) = message.get("id").filter(|id| is_response && !id.is_null())
            && !ids.iter().any(|used| same_id(used, id))
        {
            return Err(format!(
                "output line {line:?} answers an id the input never used"
            ));
        }
        messages.push(message);
    }
    Ok(messages)
}
