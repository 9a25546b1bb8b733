//! One line read once: what it is ([`Parsed`]), by the fast path for a `tools/call` of the
//! usual shape (its arguments kept as the text they came in), or as rmcp's transport would
//! read it; with the checks both paths share (a JSON object, no lone surrogate escape, MCP's
//! own methods and notifications only).

use crate::transport::{FAST_PATH_MAX_ARGUMENT_BYTES, RawArguments};
use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, CallToolRequestParams, ClientJsonRpcMessage,
    ClientRequest, JsonObject, JsonRpcRequest, JsonRpcVersion2_0, RequestId, RequestMetaObject,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::sync::Arc;

/// What one line is.
pub(crate) enum Parsed {
    Message(Box<ClientJsonRpcMessage>),
    /// Nothing to answer: blank, not JSON, or a notification that is not MCP's.
    Ignored,
    /// Well-formed JSON that is not a message: answered with `Invalid request`.
    InvalidRequest,
}

/// Read one line (without its `\n`) as rmcp's transport would, taking the fast path for a
/// `tools/call` of the usual shape.
pub(crate) fn parse_line(line: &[u8]) -> Parsed {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(UTF8_BOM).unwrap_or(line);
    if line.is_empty() {
        return Parsed::Ignored;
    }
    if let Some(message) = fast_call(line) {
        return Parsed::Message(Box::new(message));
    }
    slow_parse(line)
}

/// The UTF-8 byte order mark, which RFC 8259 §8.1 lets a parser ignore (rmcp does).
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// A `tools/call` request, exactly the fields the fast path takes: any other field (a task,
/// input responses, request state, something new) makes the line take rmcp's parse. Read only
/// from a JSON object ([`Object`]): serde's derived structs also read an array, in field order,
/// which no MCP message is.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastCall<'a> {
    #[expect(
        dead_code,
        reason = "checked by deserialising: only \"2.0\" is accepted"
    )]
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[expect(
        dead_code,
        reason = "checked by deserialising: only \"tools/call\" is accepted"
    )]
    method: CallToolRequestMethod,
    #[serde(borrow)]
    params: Object<FastParams<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FastParams<'a> {
    name: String,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", default)]
    meta: Option<JsonObject>,
}

/// `T` read only from a JSON object: an array (which a derived struct would read in field
/// order) is an error, so the line goes to rmcp's parse, which refuses it.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visitor<T> {
            type Value = Object<T>;
            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<Self::Value, A::Error> {
                T::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Object)
            }
        }
        deserializer.deserialize_map(Visitor(std::marker::PhantomData))
    }
}

/// Whether JSON text holds a `\u` escape of a UTF-16 surrogate (`\uD800` to `\uDFFF`): paired,
/// it is a character serde_json reads; alone, it is text serde_json refuses, though a
/// [`RawValue`] keeps it. The fast path leaves both to rmcp's parse, which decides.
fn has_surrogate_escape(text: &str) -> bool {
    let mut rest = text;
    while let Some(at) = rest.find('\\') {
        let escape = &rest[at + 1..];
        if let Some(hex) = escape.strip_prefix('u').and_then(|hex| hex.get(..4))
            && u16::from_str_radix(hex, 16).is_ok_and(|unit| (0xD800..=0xDFFF).contains(&unit))
        {
            return true;
        }
        // Past the escaped character (`\\` included), which starts no escape of its own.
        rest = escape.get(1..).unwrap_or_default();
    }
    false
}

/// A `tools/call` of the usual shape, in the pieces the fast path read: the request rmcp's
/// parse would make of the same text, with the arguments left as text.
pub(crate) struct FastCallParts {
    pub(crate) id: RequestId,
    pub(crate) name: String,
    /// The arguments as they came (an object), or `None` when absent or `null`.
    pub(crate) arguments: Option<RawArguments>,
    pub(crate) meta: Option<JsonObject>,
    /// A retry's sealed question (`requestState`) and its answers (`inputResponses`): only the
    /// HTTP front's reading takes them (stdio's fast path leaves such a retry to rmcp).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) request_state: Option<String>,
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) input_responses: Option<rmcp::model::InputResponses>,
}

/// The fast path's parse of `text` (one JSON-RPC message), or `None` to let rmcp parse it:
/// anything but a `tools/call` of the usual shape (a JSON object, with object `params`),
/// arguments that are not an object, arguments longer than [`FAST_PATH_MAX_ARGUMENT_BYTES`],
/// or arguments holding a surrogate escape.
pub(crate) fn fast_call_parts(text: &[u8]) -> Option<FastCallParts> {
    let Object(call): Object<FastCall<'_>> = serde_json::from_slice(text).ok()?;
    let Object(params) = call.params;
    let arguments = match params.arguments {
        // rmcp takes the arguments as an object (or null); anything else is its error to give.
        Some(raw) if !raw.get().starts_with('{') => return None,
        // Long arguments are measured as rmcp's path measures them (written out again).
        Some(raw) if raw.get().len() > FAST_PATH_MAX_ARGUMENT_BYTES => return None,
        // Text serde_json may refuse (a lone surrogate): rmcp's parse decides.
        Some(raw) if has_surrogate_escape(raw.get()) => return None,
        raw => raw,
    };
    Some(FastCallParts {
        id: call.id,
        name: params.name,
        arguments: arguments.map(|raw| RawArguments(Arc::from(raw.get()))),
        meta: params.meta,
        request_state: None,
        input_responses: None,
    })
}

/// The fast path: the request rmcp's parse would make of `line`, or `None` to let it parse.
/// The arguments stay raw text in [`RawArguments`] (`params.arguments` is left empty).
pub(crate) fn fast_call(line: &[u8]) -> Option<ClientJsonRpcMessage> {
    let parts = fast_call_parts(line)?;
    let mut request = CallToolRequest::new(CallToolRequestParams::new(parts.name));
    if let Some(meta) = parts.meta {
        request.extensions.insert(RequestMetaObject::from(meta));
    }
    if let Some(raw) = parts.arguments {
        request.extensions.insert(raw);
    }
    Some(ClientJsonRpcMessage::Request(JsonRpcRequest::new(
        parts.id,
        ClientRequest::CallToolRequest(request),
    )))
}

/// rmcp's own parse of a line (`try_parse_with_compatibility` and what its transport does with
/// the outcome).
pub(crate) fn slow_parse(line: &[u8]) -> Parsed {
    let error = match serde_json::from_slice::<ClientJsonRpcMessage>(line) {
        // A message is a JSON object whose `params`, if any, is one too, whatever a derived
        // struct would also read: the same rule as the HTTP front's.
        Ok(_) if !is_object_message(line) => return Parsed::InvalidRequest,
        Ok(message) => return Parsed::Message(Box::new(message)),
        Err(error) => error,
    };
    if std::str::from_utf8(line).is_ok()
        && let Ok(value) = serde_json::from_slice::<serde_json::Value>(line)
        && let Some(method) = value.get("method").and_then(serde_json::Value::as_str)
        && ignored_notification(&value, method)
    {
        tracing::trace!("Ignoring non-MCP notification '{method}' for compatibility");
        return Parsed::Ignored;
    }
    match error.classify() {
        // Not JSON: there is no id to answer, and answering could start an error storm with a
        // peer that echoes. The other MCP SDKs ignore such input too.
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            tracing::debug!("Ignoring unparsable incoming message: {error}");
            Parsed::Ignored
        }
        serde_json::error::Category::Data | serde_json::error::Category::Io => {
            tracing::debug!("Protocol error on incoming message: {error}");
            Parsed::InvalidRequest
        }
    }
}

/// Whether `line`, which rmcp's parse accepted, is a JSON object whose `params` (if any) is an
/// object too.
fn is_object_message(line: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Shape<'a> {
        #[serde(borrow, default)]
        params: Option<&'a RawValue>,
    }
    match serde_json::from_slice::<Object<Shape<'_>>>(line) {
        Ok(Object(shape)) => shape
            .params
            .is_none_or(|params| params.get().starts_with('{')),
        Err(_) => false,
    }
}

/// Whether rmcp ignores a message it could not parse: a notification (no `id`) whose method
/// is not MCP's, or any `notifications/…` method MCP does not define.
fn ignored_notification(message: &serde_json::Value, method: &str) -> bool {
    let notification = message.get("id").is_none();
    (notification && !is_standard_method(method))
        || (method.starts_with("notifications/") && !is_standard_notification(method))
}

/// The methods of the MCP specification (2026-07-28), requests and notifications, as rmcp
/// lists them.
fn is_standard_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "resources/templates/list"
            | "subscriptions/listen"
            | "tools/call"
            | "tools/list"
            | "completion/complete"
            | "elicitation/create"
            | "logging/setLevel"
            | "roots/list"
            | "sampling/createMessage"
    ) || is_standard_notification(method)
}

fn is_standard_notification(method: &str) -> bool {
    matches!(
        method,
        "notifications/cancelled"
            | "notifications/initialized"
            | "notifications/message"
            | "notifications/progress"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/roots/list_changed"
            | "notifications/subscriptions/acknowledged"
            | "notifications/tools/list_changed"
    )
}
