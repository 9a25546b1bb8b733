//! A `tools/call`'s span, joined to the caller's trace.
//!
//! Each call runs inside an INFO span `tools/call` (target `toolcell_mcp::trace`), whose child
//! is the pipeline's own `call` span and its stages (see
//! [`CALL_SPAN_TARGET`](toolcell::CALL_SPAN_TARGET)). With the `otel` feature, when the process
//! has installed an OpenTelemetry layer and a text-map propagator (`toolcell
//! --otlp-endpoint` installs the W3C trace-context one), the span's parent is the caller's:
//! the HTTP request's `traceparent` and `tracestate` headers, else the request's `_meta`
//! fields of those names (MCP's SEP-414), so a call joins the agent's own trace. A subscriber
//! that does not enable the span pays for none of this.
//!
//! What a caller sends is the caller's to choose, so it is bounded: a `traceparent` only sets
//! the span's parent (whether the call is sampled is the operator's sampler's to say, see the
//! CLI's `--otlp-sampler`); a `tracestate` longer than [`MAX_TRACESTATE_BYTES`] is dropped (the
//! propagator drops one that is not well formed), and it is never copied into an attribute.

use rmcp::model::{Extensions, RequestMetaObject};

/// The `tracing` target of the MCP server's spans.
pub const TRACE_TARGET: &str = "toolcell_mcp::trace";

/// The longest caller's `tracestate` kept (as W3C trace context, level 2, bounds what a vendor
/// must propagate: 512 characters); a longer one is dropped whole, not cut.
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// The span of one `tools/call` of the tool `name` by `owner` (the client, as tasks and
/// approvals name it), from a request with `extensions` (over HTTP, its head) and `meta`.
pub(crate) fn call_span(
    name: &str,
    owner: &str,
    extensions: &Extensions,
    meta: &RequestMetaObject,
) -> tracing::Span {
    let span = tracing::info_span!(
        target: TRACE_TARGET,
        "tools/call",
        otel.kind = "server",
        mcp.method = "tools/call",
        mcp.tool = name,
        client = owner,
    );
    #[cfg(feature = "otel")]
    if !span.is_disabled() {
        join_callers_trace(&span, extensions, meta);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (extensions, meta);
    span
}

/// The span of a request of what components offer beside tools (`prompts/get`,
/// `resources/read`, `completion/complete`): the method, the catalog key it ran as
/// (`prompt:NAME`, ...), the client; a child of the caller's trace, as a call's is.
pub(crate) fn offer_span(
    method: &'static str,
    key: &str,
    owner: &str,
    extensions: &Extensions,
    meta: &RequestMetaObject,
) -> tracing::Span {
    let span = tracing::info_span!(
        target: TRACE_TARGET,
        "offer",
        otel.kind = "server",
        mcp.method = method,
        mcp.offer = key,
        client = owner,
    );
    #[cfg(feature = "otel")]
    if !span.is_disabled() {
        join_callers_trace(&span, extensions, meta);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (extensions, meta);
    span
}

/// Make the caller's trace (from the HTTP headers, else `_meta`) the span's parent.
#[cfg(feature = "otel")]
fn join_callers_trace(span: &tracing::Span, extensions: &Extensions, meta: &RequestMetaObject) {
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    let carrier = Carrier {
        #[cfg(feature = "http")]
        headers: extensions
            .get::<::http::request::Parts>()
            .map(|parts| &parts.headers),
        meta,
    };
    let parent =
        opentelemetry::global::get_text_map_propagator(|propagator| propagator.extract(&carrier));
    if opentelemetry::trace::TraceContextExt::span(&parent)
        .span_context()
        .is_valid()
    {
        // Fails only when no OpenTelemetry layer is installed: then there is no trace to join.
        let _ = span.set_parent(parent);
    }
}

/// Where a caller's trace context is read from: the HTTP headers first, then `_meta`.
#[cfg(feature = "otel")]
struct Carrier<'a> {
    #[cfg(feature = "http")]
    headers: Option<&'a ::http::HeaderMap>,
    meta: &'a rmcp::model::RequestMetaObject,
}

#[cfg(feature = "otel")]
impl Carrier<'_> {
    /// The caller's value of `key`, as sent: the HTTP header, else the `_meta` field.
    fn get_any(&self, key: &str) -> Option<&str> {
        #[cfg(feature = "http")]
        if let Some(value) = self
            .headers
            .and_then(|headers| headers.get(key))
            .and_then(|value| value.to_str().ok())
        {
            return Some(value);
        }
        self.meta.get(key).and_then(serde_json::Value::as_str)
    }
}

#[cfg(feature = "otel")]
impl opentelemetry::propagation::Extractor for Carrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let value = self.get_any(key)?;
        (key != "tracestate" || value.len() <= MAX_TRACESTATE_BYTES).then_some(value)
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}
