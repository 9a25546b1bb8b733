//! The HTTP fast path: a stateless `tools/call` answered by the front itself.
//!
//! rmcp answers a stateless request by building a whole service for it (a task, channels, a
//! cancellation token, `serve_directly_with_ct`) after parsing the body as an untagged enum;
//! for a call as small as echo that is about half of the server's CPU. A request this module
//! accepts skips all of that and still runs exactly what rmcp's handler runs:
//! [`McpServer::answer_call`] (the pipeline, metrics, quota charging, the trace span, tasks,
//! approval rounds), with the arguments kept as text ([`crate::RawArguments`]), and answers
//! with the bytes rmcp would write: the same `JsonRpcMessage` serialised by the same serde
//! code, with the same status and `Content-Type`.
//!
//! It takes only what rmcp would accept and answer at once with one JSON-RPC message, decided
//! from the request before anything runs: a `POST` whose `Accept` allows both
//! `application/json` and `text/event-stream`, whose `Content-Type` is `application/json`,
//! whose body, as the front read it (`http/reading.rs`: the one reading every check decided
//! on), is one `tools/call` of the usual shape (no `task`, arguments an object; a retry's
//! `requestState` and `inputResponses` taken as they are), whose `_meta` names protocol `2026-07-28` and
//! carries the client's capabilities but no progress token, with exactly one
//! `MCP-Protocol-Version: 2026-07-28`, one `Mcp-Method: tools/call` and one plain `Mcp-Name`
//! equal to the tool's name. Everything else (batches, other methods, the `initialize` era,
//! a header rmcp would refuse, a progress token that would turn the answer into an event
//! stream) goes to rmcp unchanged, and so does every
//! request when `TOOLCELL_HTTP_FAST_PATH=0` ([`FAST_PATH_ENV`]; for tests and diagnosis).
//!
//! A call alone (no other fast-path call in flight) runs on the connection's own task, where its request was read: no task spawned,
//! no worker woken. If the front's future is dropped (the client closed the connection)
//! before the answer is ready, the request's token fires and the call's
//! [`toolcell::StopToken`] with it, and the call is finished in a task of its own: it still
//! ends, is counted and charged.

use super::reading::Reading;
use crate::http::front::BoxResponse;
use crate::transport::parse::FastCallParts;
use crate::{IncomingCall, McpServer};
use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode, header};
use rmcp::ServerHandler as _;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ErrorCode, Extensions, ProtocolVersion,
    RequestMetaObject, ServerJsonRpcMessage,
};
use rmcp::transport::common::http_header::{
    BASE64_HEADER_PREFIX, EVENT_STREAM_MIME_TYPE, HEADER_MCP_METHOD, HEADER_MCP_NAME,
    HEADER_MCP_PROTOCOL_VERSION, JSON_MIME_TYPE,
};
use tokio_util::sync::CancellationToken;

/// The environment variable that turns the fast path off when set to `0`: every request then
/// takes rmcp's path, for a differential test or to rule the fast path out when diagnosing.
pub const FAST_PATH_ENV: &str = "TOOLCELL_HTTP_FAST_PATH";

/// Whether the fast path is on for this process: unless [`FAST_PATH_ENV`] is `0`.
pub(super) fn enabled() -> bool {
    std::env::var_os(FAST_PATH_ENV).is_none_or(|value| value != "0")
}

/// The only protocol the fast path answers: the stateless one, where every request stands
/// alone and rmcp answers it directly, with no session.
const STATELESS: ProtocolVersion = ProtocolVersion::V_2026_07_28;

/// A request the fast path will answer: its call, read from the body, and the client's
/// capabilities, read from `_meta`.
pub(super) struct Accepted {
    call: FastCallParts,
    meta: RequestMetaObject,
    capabilities: ClientCapabilities,
}

/// The call the front read (`reading`), if the fast path may answer the request (`head` is its
/// method and headers): only when rmcp would accept it and answer with one JSON-RPC message
/// (see the module's docs). `None`: leave it to rmcp.
pub(super) fn accept(
    head: &http::request::Parts,
    reading: &Reading,
    server: &McpServer,
) -> Option<Accepted> {
    if head.method != Method::POST
        || !accepts_json_and_event_stream(&head.headers)
        || !is_json(&head.headers)
        || sole(&head.headers, HEADER_MCP_PROTOCOL_VERSION) != Some(STATELESS.as_str())
        || sole(&head.headers, HEADER_MCP_METHOD) != Some("tools/call")
    {
        return None;
    }
    let mut call = reading.fast_call()?;
    // rmcp decodes a Base64-wrapped `Mcp-Name`; the fast path takes the plain form only.
    let name = sole(&head.headers, HEADER_MCP_NAME)?;
    if name != call.name || name.starts_with(BASE64_HEADER_PREFIX) {
        return None;
    }
    let meta = RequestMetaObject::from(call.meta.take()?);
    // A progress token or a log level asks for notifications before the answer: rmcp streams
    // those (SSE).
    if meta.contains_key("progressToken")
        || meta.contains_key("io.modelcontextprotocol/logLevel")
        || meta
            .protocol_version()
            .is_none_or(|version| version != STATELESS)
    {
        return None;
    }
    let capabilities = meta.client_capabilities()?;
    // rmcp refuses a version its server does not support; and it checks `Mcp-Param-*` headers
    // against a tool schema's `x-mcp-header` annotations, which the fast path does not.
    if !server.supported_protocol_versions().contains(&STATELESS)
        || server.mirrors_headers(&call.name)
    {
        return None;
    }
    Some(Accepted {
        call,
        meta,
        capabilities,
    })
}

/// Answer `accepted` (a request whose head is `head`, checked and admitted by the front) as
/// rmcp would: the call runs through [`McpServer::answer_call`], on the connection's own task
/// when it is the only call the fast path is answering, else in a task of its own; either way
/// a client that goes away stops it, and it still ends, is counted and charged.
pub(super) async fn answer(
    server: &McpServer,
    accepted: Accepted,
    head: http::request::Parts,
    alone: &std::sync::atomic::AtomicUsize,
) -> BoxResponse {
    let Accepted {
        call,
        meta,
        capabilities,
    } = accepted;
    let FastCallParts {
        id,
        name,
        arguments,
        meta: _,
        request_state,
        input_responses,
    } = call;
    let ct = CancellationToken::new();
    let server = server.clone();
    let declared_tasks = capabilities.supports_tasks();
    let call_ct = ct.clone();
    let call = async move {
        let ct = call_ct;
        let mut extensions = Extensions::new();
        extensions.insert(head);
        if let Some(arguments) = arguments {
            extensions.insert(arguments);
        }
        let response = server
            .answer_call(IncomingCall {
                params: {
                    let mut params = CallToolRequestParams::new(name);
                    params.request_state = request_state;
                    params.input_responses = input_responses;
                    params
                },
                id: &id,
                meta: &meta,
                extensions: &extensions,
                ct: &ct,
                capabilities: Some(capabilities),
                stateless: true,
                peer: None,
            })
            .await;
        (id, response)
    };
    // The only call the fast path is answering: run here, on the connection's own task (no
    // task spawned, no worker woken); if this future is dropped first (the connection
    // closed), the call is stopped and finished in a task of its own, so that it still ends,
    // is counted and charged. Calls that overlap each run in a task of their own, which the
    // idle worker takes: under load that keeps both cores busy (run in place they answered a
    // fifth fewer calls a second).
    let _counted = Counted::enter(alone);
    let joined = if alone.load(std::sync::atomic::Ordering::Relaxed) == 1 {
        // A handler that panicked answers as rmcp answers one: a 500 with its words.
        futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(FinishOnDrop::new(
            ct.clone(),
            call,
        )))
        .await
        .map_err(drop)
    } else {
        let disconnected = ct.clone().drop_guard();
        let joined = tokio::spawn(call).await.map_err(drop);
        disconnected.disarm();
        joined
    };
    let Ok((id, response)) = joined else {
        return internal_error(
            "Encounter an error when empty response: no response message received from handler"
                .to_owned(),
        );
    };
    // The fast path takes only 2026-07-28 requests.
    let message = crate::call_answer(id, response, declared_tasks, crate::answer::Shape::Current);
    let status = status_of(&message);
    match serde_json::to_vec(&message) {
        Ok(body) => {
            let mut response = body_response(status, body);
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(JSON_MIME_TYPE),
            );
            response
        }
        Err(error) => internal_error(format!(
            "Encounter an error when serialize json response: {error}"
        )),
    }
}

/// One of the fast path's calls in flight, counted while it lives.
struct Counted<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Counted<'a> {
    fn enter(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Counted(count)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A call's future, run where it is awaited; dropped before it ends, it is stopped (`ct`) and
/// finished in a task of its own.
struct FinishOnDrop<F: std::future::Future + Send + 'static> {
    future: Option<std::pin::Pin<Box<F>>>,
    ct: CancellationToken,
}

impl<F: std::future::Future + Send + 'static> FinishOnDrop<F> {
    fn new(ct: CancellationToken, future: F) -> Self {
        FinishOnDrop {
            future: Some(Box::pin(future)),
            ct,
        }
    }
}

impl<F: std::future::Future + Send + 'static> std::future::Future for FinishOnDrop<F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        // Taken out for the poll and put back only when it returns: a poll that panics drops
        // the future here (the caller's `catch_unwind` answers for it), and `Drop` has nothing
        // left to finish (a future that panicked must never be polled again).
        let Some(mut future) = self.future.take() else {
            return std::task::Poll::Pending;
        };
        match future.as_mut().poll(cx) {
            std::task::Poll::Ready(output) => std::task::Poll::Ready(output),
            std::task::Poll::Pending => {
                self.future = Some(future);
                std::task::Poll::Pending
            }
        }
    }
}

impl<F: std::future::Future + Send + 'static> Drop for FinishOnDrop<F> {
    fn drop(&mut self) {
        if let Some(future) = self.future.take() {
            self.ct.cancel();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move {
                    let _ = future.await;
                });
            }
        }
    }
}

fn body_response(status: StatusCode, body: impl Into<Bytes>) -> BoxResponse {
    let mut response = http::Response::new(http_body_util::BodyExt::boxed(
        http_body_util::Full::new(body.into()),
    ));
    *response.status_mut() = status;
    response
}

/// rmcp's `500` when its handler gives no answer: its words, and no `Content-Type`.
#[cold]
fn internal_error(message: String) -> BoxResponse {
    body_response(StatusCode::INTERNAL_SERVER_ERROR, message)
}

/// The HTTP status rmcp gives a stateless request's one answer (`jsonrpc_http_status` in
/// rmcp's Streamable HTTP server; the request's `_meta` is well formed here, so an invalid
/// params error is an answer in band).
fn status_of(message: &ServerJsonRpcMessage) -> StatusCode {
    let ServerJsonRpcMessage::Error(error) = message else {
        return StatusCode::OK;
    };
    match error.error.code {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        // toolcell's own: the shared store could not be reached for what the call needed.
        code if i64::from(code.0) == crate::approval::STATE_UNAVAILABLE => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::OK,
    }
}

/// The one value of header `name`, if there is exactly one and it is visible ASCII.
fn sole<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut values = headers.get_all(name).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    value.to_str().ok()
}

/// Whether `Content-Type` is `application/json` (parameters aside), as rmcp checks it.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            let essence = value.split_once(';').map_or(value, |(essence, _)| essence);
            essence.trim().eq_ignore_ascii_case(JSON_MIME_TYPE)
        })
}

/// Whether `Accept` allows both `application/json` and `text/event-stream`, read as rmcp
/// reads it: every `Accept` header, entries split at commas outside quotes, a media range
/// left out only by an explicit zero weight (`q=0`, `q=0.000`). A wildcard is not enough,
/// for rmcp as here.
fn accepts_json_and_event_stream(headers: &HeaderMap) -> bool {
    let (mut json, mut event_stream) = (false, false);
    for essence in accepted_media_types(headers) {
        json |= essence.eq_ignore_ascii_case(JSON_MIME_TYPE);
        event_stream |= essence.eq_ignore_ascii_case(EVENT_STREAM_MIME_TYPE);
    }
    json && event_stream
}

fn accepted_media_types(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| split_unquoted(value, ','))
        .filter_map(|entry| {
            let mut parts = split_unquoted(entry, ';');
            let essence = parts.next()?.trim();
            parts
                .all(|parameter| {
                    let Some((name, value)) = parameter.split_once('=') else {
                        return true;
                    };
                    !name.trim().eq_ignore_ascii_case("q") || weight_is_not_zero(value.trim())
                })
                .then_some(essence)
        })
}

/// `value` split at `delimiter` where it is not inside a quoted string.
fn split_unquoted(value: &str, delimiter: char) -> impl Iterator<Item = &str> {
    let mut quoted = false;
    let mut escaped = false;
    value.split(move |character| {
        if escaped {
            escaped = false;
        } else if quoted && character == '\\' {
            escaped = true;
        } else if character == '"' {
            quoted = !quoted;
        } else if !quoted && character == delimiter {
            return true;
        }
        false
    })
}

/// Whether a `q` weight keeps its media range: anything but an explicit zero (a malformed
/// weight is ignored, RFC 9110 section 12.4.2, as rmcp does).
fn weight_is_not_zero(weight: &str) -> bool {
    let (whole, fraction) = weight.split_once('.').unwrap_or((weight, ""));
    if fraction.len() > 3 || !fraction.bytes().all(|digit| digit.is_ascii_digit()) {
        return true;
    }
    whole != "0" || fraction.bytes().any(|digit| digit != b'0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(accept: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in accept {
            headers.append(
                header::ACCEPT,
                header::HeaderValue::from_str(value).expect("a header value"),
            );
        }
        headers
    }

    #[test]
    fn accept_is_read_as_rmcp_reads_it() {
        for (accept, both) in [
            (&["application/json, text/event-stream"][..], true),
            (&["application/json", "text/event-stream"], true),
            (&["Application/JSON;q=0.5, text/event-stream;q=1"], true),
            (&["application/json;q=0.9x, text/event-stream"], true),
            (&["application/json;q=0, text/event-stream"], false),
            (&["application/json;q=0.000, text/event-stream"], false),
            (&["application/json"], false),
            (&["*/*"], false),
            (&["application/*, text/event-stream"], false),
            (&[r#"application/json;x="a,text/event-stream""#], false),
            (&[], false),
        ] {
            assert_eq!(
                accepts_json_and_event_stream(&headers(accept)),
                both,
                "{accept:?}"
            );
        }
    }

    #[test]
    fn a_header_given_twice_is_not_taken() {
        let mut headers = HeaderMap::new();
        headers.append(
            HEADER_MCP_METHOD,
            header::HeaderValue::from_static("tools/call"),
        );
        assert_eq!(sole(&headers, HEADER_MCP_METHOD), Some("tools/call"));
        headers.append(
            HEADER_MCP_METHOD,
            header::HeaderValue::from_static("tools/call"),
        );
        assert_eq!(sole(&headers, HEADER_MCP_METHOD), None);
    }

    #[test]
    fn statuses_are_rmcps() {
        let error = |code: ErrorCode| -> ServerJsonRpcMessage {
            rmcp::model::JsonRpcMessage::error(rmcp::ErrorData::new(code, "x", None), None)
        };
        assert_eq!(status_of(&error(ErrorCode::INVALID_PARAMS)), StatusCode::OK);
        assert_eq!(status_of(&error(ErrorCode::INTERNAL_ERROR)), StatusCode::OK);
        assert_eq!(
            status_of(&error(ErrorCode::METHOD_NOT_FOUND)),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            status_of(&error(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY)),
            StatusCode::BAD_REQUEST
        );
    }
}
