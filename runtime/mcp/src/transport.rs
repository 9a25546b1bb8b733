//! The server's transport over byte streams (stdio, a socket): newline-delimited JSON-RPC.
//!
//! It behaves as rmcp's own `AsyncRwTransport` does on the wire (lines split at `\n`, a
//! trailing `\r` and a leading UTF-8 byte order mark dropped, blank lines skipped, unparsable
//! lines ignored, well-formed JSON of the wrong shape answered with an `Invalid request` error,
//! non-MCP notifications ignored, an oversized line dropped), and differs in what it costs:
//!
//! - **A `tools/call` is parsed once, into exactly what it needs.** rmcp reads every message as
//!   an untagged enum: serde buffers the message and tries each request type in turn (a call
//!   is the fourteenth), and the arguments become a map the server would serialise again. A
//!   line of the usual shape (no fields beyond `jsonrpc`, `id`, `method`, and `name`,
//!   `arguments`, `_meta` in `params`) is read here straight from the input buffer into the
//!   request rmcp expects, with the arguments kept as their raw text ([`RawArguments`], in the
//!   request's extensions) for the pipeline's one parse. Anything else takes rmcp's own parse,
//!   so the fast path changes no answer (the `mcp_fast_path` fuzz target and
//!   `fuzzing::check_mcp_fast_path` compare the two).
//! - **Writes are batched, off the reader's path.** `send` serialises a message straight into
//!   one shared output buffer and returns; a writer task writes whatever has gathered with one
//!   `write` and wakes again. Under load many answers leave in one system call.
//! - **Bounded both ways.** A line longer than [`MAX_LINE_BYTES`] is dropped without being
//!   kept; while more than [`OUTPUT_HIGH_WATER`] bytes of answers wait for a client that does
//!   not read them, no further request is read.
//!
//! Reads and writes go through whatever `AsyncRead` / `AsyncWrite` it is given: for stdio,
//! rmcp's `stdio_pipes()`, which polls pipes from the runtime's reactor (no blocking-pool
//! thread per read or write) and falls back to tokio's stdio for a terminal or a file.

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, CallToolRequestParams, ClientJsonRpcMessage,
    ClientNotification, ClientRequest, ErrorData, JsonObject, JsonRpcRequest, JsonRpcVersion2_0,
    RequestId, RequestMetaObject, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The longest line (one JSON-RPC message) read. rmcp's own limit, so a message accepted over
/// its transports is accepted here; far above what one call may carry
/// ([`toolcell::limits::MAX_ARGUMENT_BYTES`]), and a peer that never sends a newline cannot
/// grow the buffer past it.
pub const MAX_LINE_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How much is read at once: a pipe's default capacity, so one read drains a full pipe.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// While more answer bytes than this wait for the client to read them, no further request is
/// read: a client that writes without reading cannot make the server hold unbounded output.
pub const OUTPUT_HIGH_WATER: usize = 8 * 1024 * 1024;

/// How many requests may be read and not yet answered. Past it no further request is read
/// until one is answered (or cancelled): each waits as a task of rmcp's, so a client that
/// floods requests faster than tools answer them cannot make the server hold them all. Four
/// times the instance pool's slots keeps every slot busy with requests queued behind them.
pub const MAX_IN_FLIGHT_REQUESTS: usize = 4 * toolcell::limits::POOL_SLOTS as usize;

/// How long answers may sit unwritten, past [`OUTPUT_HIGH_WATER`] or behind a full set of
/// requests, with the client reading none of them, before the session ends: a client that has
/// stopped reading (or has gone, leaving its end of the pipe open) is not coming back for them.
pub const STALLED_OUTPUT_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest arguments (as raw text) the fast path takes. Written out again, JSON grows by at
/// most 4.5 times (a float such as `9e15` becomes `9000000000000000.0`) and may shrink without
/// bound (whitespace, escapes): arguments up to this long fit
/// [`toolcell::limits::MAX_ARGUMENT_BYTES`] however they are measured, so the size limit gives
/// the same answer on both parse paths. Longer ones take rmcp's parse.
pub const FAST_PATH_MAX_ARGUMENT_BYTES: usize = toolcell::limits::MAX_ARGUMENT_BYTES / 5;

/// The output buffer's capacity kept between writes; a burst above it is given back.
const OUTPUT_RETAINED_BYTES: usize = 256 * 1024;

/// How long closing the transport waits for the client to read answers already written
/// before it gives up on them (a client that stopped reading must not keep the server alive).
pub const CLOSE_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);

/// The raw JSON text of a fast-path call's arguments (an object), in the request's extensions
/// in place of `params.arguments`: the pipeline parses it once, and nothing serialises it
/// again on the way in.
#[derive(Debug, Clone)]
pub struct RawArguments(pub Arc<str>);

/// Newline-delimited JSON-RPC over a reader and a writer, for [`rmcp`]'s server loop.
pub struct LineTransport<R> {
    input: R,
    /// Bytes read and not yet consumed are `buffer[start..end]`.
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    /// How far past `start` no newline has been seen (so a long line is scanned once).
    scanned: usize,
    /// Dropping the rest of a line that grew past [`MAX_LINE_BYTES`], up to its newline.
    discarding: bool,
    outbox: Arc<Outbox>,
    writer: Option<JoinHandle<()>>,
    stalled_output_timeout: Duration,
}

impl<R: AsyncRead + Send + Unpin + 'static> LineTransport<R> {
    /// A transport reading requests from `input` and writing answers to `output`. Must be
    /// made inside a tokio runtime: the writer task starts here.
    pub fn new<W: AsyncWrite + Send + Unpin + 'static>(input: R, output: W) -> Self {
        let outbox = Arc::new(Outbox::default());
        let writer = tokio::spawn(write_out(Arc::clone(&outbox), output));
        LineTransport {
            input,
            buffer: Vec::new(),
            start: 0,
            end: 0,
            scanned: 0,
            discarding: false,
            outbox,
            writer: Some(writer),
            stalled_output_timeout: STALLED_OUTPUT_TIMEOUT,
        }
    }

    /// How long answers may sit unread before the session ends (default
    /// [`STALLED_OUTPUT_TIMEOUT`]).
    pub fn with_stalled_output_timeout(mut self, timeout: Duration) -> Self {
        self.stalled_output_timeout = timeout;
        self
    }

    /// The next whole line's bounds in the buffer, if one is there; drops what belongs to an
    /// oversized line.
    fn next_line(&mut self) -> Option<(usize, usize)> {
        loop {
            let unread = &self.buffer[self.start + self.scanned..self.end];
            match unread.iter().position(|byte| *byte == b'\n') {
                Some(at) => {
                    let newline = self.start + self.scanned + at;
                    let line = (self.start, newline);
                    self.start = newline + 1;
                    self.scanned = 0;
                    if self.discarding {
                        // The tail of a line already dropped ends here.
                        self.discarding = false;
                        continue;
                    }
                    // rmcp's rule: a line whose length with its newline exceeds the limit.
                    if line.1 - line.0 + 1 > MAX_LINE_BYTES {
                        tracing::error!(
                            max_line_length = MAX_LINE_BYTES,
                            "Incoming message exceeded the maximum line length, discarding it"
                        );
                        continue;
                    }
                    return Some(line);
                }
                None => {
                    self.scanned = self.end - self.start;
                    if self.discarding || self.scanned >= MAX_LINE_BYTES {
                        if !self.discarding {
                            tracing::error!(
                                max_line_length = MAX_LINE_BYTES,
                                "Incoming message exceeded the maximum line length, discarding it"
                            );
                        }
                        self.discarding = true;
                        self.start = 0;
                        self.end = 0;
                        self.scanned = 0;
                    }
                    return None;
                }
            }
        }
    }

    /// Read more input; `false` at the end of it (or when it fails).
    async fn fill(&mut self) -> bool {
        // Move what is left of a partial line to the front, and make room to read into.
        if self.start > 0 {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buffer.len() - self.end < READ_CHUNK_BYTES {
            self.buffer.resize(self.end + READ_CHUNK_BYTES, 0);
        }
        // Cancel-safe: a read that is dropped has read nothing.
        match self.input.read(&mut self.buffer[self.end..]).await {
            Ok(0) => false,
            Ok(read) => {
                self.end += read;
                true
            }
            Err(error) => {
                tracing::error!("Error reading from stream: {error}");
                false
            }
        }
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> Transport<RoleServer> for LineTransport<R> {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        std::future::ready(self.outbox.push(&item))
    }

    // `receive` is polled inside the service loop's `select!` and dropped whenever another
    // branch is ready first: every await below is cancel-safe, and a partial line stays in
    // the buffer for the next call.
    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            // Answers that cannot be written end the session: no tool runs for a client
            // that can no longer hear it.
            if !self.outbox.room(self.stalled_output_timeout).await {
                return None;
            }
            let Some((from, to)) = self.next_line() else {
                if !self.fill().await {
                    // The end of the input; an unterminated last line is not a message.
                    return None;
                }
                continue;
            };
            match parse_line(&self.buffer[from..to]) {
                Parsed::Message(message) => {
                    self.outbox.track(&message);
                    return Some(*message);
                }
                Parsed::Ignored => {}
                Parsed::InvalidRequest => {
                    let answer = ServerJsonRpcMessage::error(
                        ErrorData::invalid_request("Invalid request", None),
                        None,
                    );
                    if self.outbox.push(&answer).is_err() {
                        return None;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.outbox.lock().closed = true;
        self.outbox.wake_writer.notify_one();
        if let Some(mut writer) = self.writer.take()
            && tokio::time::timeout(CLOSE_FLUSH_TIMEOUT, &mut writer)
                .await
                .is_err()
        {
            tracing::warn!("the client did not read the last answers; they are dropped");
            writer.abort();
        }
        Ok(())
    }
}

impl<R> Drop for LineTransport<R> {
    fn drop(&mut self) {
        // Not closed (the service loop ended some other way): let the writer finish what it
        // has and stop.
        self.outbox.lock().closed = true;
        self.outbox.wake_writer.notify_one();
    }
}

/// Answers waiting to be written, shared by `send` (any task) and the writer task, and the
/// requests still to be answered.
#[derive(Default)]
struct Outbox {
    state: Mutex<Pending>,
    /// Something to write, or closed.
    wake_writer: Notify,
    /// A write finished (or failed), or a request was answered: the reader may have room.
    room: Notify,
}

#[derive(Default)]
struct Pending {
    /// Requests read and not yet answered or cancelled, by id (a client may reuse one).
    in_flight: HashMap<RequestId, usize>,
    in_flight_total: usize,
    /// Writes completed so far: how the reader tells a stalled client from a slow one.
    writes: u64,
    /// Serialised answers, each ending in `\n`, not yet handed to the writer.
    bytes: Vec<u8>,
    /// Bytes handed to the writer and not yet written.
    writing: usize,
    closed: bool,
    /// Why writing stopped, once it has: every later send fails with it.
    failed: Option<(std::io::ErrorKind, String)>,
}

impl Pending {
    /// One request with this id needs no further answer; `true` if that freed a place.
    fn answered(&mut self, id: &RequestId) -> bool {
        let Some(count) = self.in_flight.get_mut(id) else {
            return false;
        };
        *count -= 1;
        if *count == 0 {
            self.in_flight.remove(id);
        }
        self.in_flight_total -= 1;
        true
    }

    /// Append `message` and its newline to the output, unless writing has ended.
    fn queue(&mut self, message: &ServerJsonRpcMessage) -> std::io::Result<()> {
        if let Some((kind, why)) = &self.failed {
            return Err(std::io::Error::new(*kind, why.clone()));
        }
        if self.closed {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "Transport is closed",
            ));
        }
        let before = self.bytes.len();
        if let Err(error) = serde_json::to_writer(&mut self.bytes, message) {
            // Never half a message on the wire.
            self.bytes.truncate(before);
            return Err(error.into());
        }
        self.bytes.push(b'\n');
        Ok(())
    }
}

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // Nothing panics while holding the lock; a poisoned one still holds whole messages.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Count a request read (to be answered), or a cancellation (its request will not be).
    fn track(&self, message: &ClientJsonRpcMessage) {
        match message {
            ClientJsonRpcMessage::Request(request) => {
                let mut pending = self.lock();
                *pending.in_flight.entry(request.id.clone()).or_default() += 1;
                pending.in_flight_total += 1;
            }
            ClientJsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                    && self.lock().answered(id)
                {
                    self.room.notify_waiters();
                }
            }
            _ => {}
        }
    }

    /// Serialise `message` onto the end of the output and wake the writer; an answer also
    /// frees its request's place. One lock for both: this runs once per answer.
    fn push(&self, message: &ServerJsonRpcMessage) -> std::io::Result<()> {
        let answers = match message {
            ServerJsonRpcMessage::Response(response) => Some(&response.id),
            ServerJsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        let (freed, queued) = {
            let mut pending = self.lock();
            let freed = answers.is_some_and(|id| pending.answered(id));
            (freed, pending.queue(message))
        };
        if freed {
            self.room.notify_waiters();
        }
        if queued.is_ok() {
            self.wake_writer.notify_one();
        }
        queued
    }

    /// Wait until there is room to read another request: output below [`OUTPUT_HIGH_WATER`]
    /// and fewer than [`MAX_IN_FLIGHT_REQUESTS`] unanswered. `false` when writing has failed,
    /// or the client has left answers unread for [`STALLED_OUTPUT_TIMEOUT`]: the session is
    /// over. Cancel-safe.
    async fn room(&self, stall_timeout: Duration) -> bool {
        let mut stalled_since: Option<(tokio::time::Instant, u64)> = None;
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            // Registered before the check, so a change in between is not missed.
            room.as_mut().enable();
            let unwritten = {
                let pending = self.lock();
                if pending.failed.is_some() {
                    return false;
                }
                let unwritten = pending.bytes.len() + pending.writing;
                if unwritten <= OUTPUT_HIGH_WATER
                    && pending.in_flight_total < MAX_IN_FLIGHT_REQUESTS
                {
                    return true;
                }
                (unwritten > 0).then_some(pending.writes)
            };
            // Waiting on tools that have not answered yet is not a stall; waiting on a client
            // that reads nothing is, once it has lasted.
            let Some(writes) = unwritten else {
                stalled_since = None;
                room.await;
                continue;
            };
            let since = match stalled_since {
                Some((since, seen)) if seen == writes => since,
                _ => {
                    let now = tokio::time::Instant::now();
                    stalled_since = Some((now, writes));
                    now
                }
            };
            if tokio::time::timeout_at(since + stall_timeout, room)
                .await
                .is_err()
                && self.lock().writes == writes
            {
                tracing::error!(
                    "the client has read no answer for {} ms; ending the session",
                    stall_timeout.as_millis()
                );
                return false;
            }
        }
    }
}

/// What the writer does next.
enum Next {
    Write,
    Close,
    Wait,
}

/// The writer task: write whatever has gathered, in one go, until closed and drained.
async fn write_out<W: AsyncWrite + Unpin>(outbox: Arc<Outbox>, mut output: W) {
    let mut batch = Vec::new();
    loop {
        let next = {
            let mut pending = outbox.lock();
            if !pending.bytes.is_empty() {
                std::mem::swap(&mut pending.bytes, &mut batch);
                pending.writing = batch.len();
                Next::Write
            } else if pending.closed {
                Next::Close
            } else {
                Next::Wait
            }
        };
        match next {
            Next::Write => {}
            Next::Close => break,
            Next::Wait => {
                // `notify_one` keeps a permit when no one waits: no wake-up is lost.
                outbox.wake_writer.notified().await;
                continue;
            }
        }
        let written = async {
            output.write_all(&batch).await?;
            output.flush().await
        }
        .await;
        batch.clear();
        if batch.capacity() > OUTPUT_RETAINED_BYTES {
            batch.shrink_to(OUTPUT_RETAINED_BYTES);
        }
        let failed = {
            let mut pending = outbox.lock();
            pending.writing = 0;
            pending.writes += 1;
            if let Err(error) = &written {
                tracing::error!("Error writing to stream: {error}");
                pending.failed = Some((error.kind(), error.to_string()));
                pending.bytes = Vec::new();
            }
            pending.failed.is_some()
        };
        outbox.room.notify_waiters();
        if failed {
            return;
        }
    }
    if let Err(error) = output.shutdown().await {
        tracing::debug!("Error closing the stream: {error}");
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn message(line: &str) -> ClientJsonRpcMessage {
        match parse_line(line.as_bytes()) {
            Parsed::Message(message) => *message,
            Parsed::Ignored => panic!("ignored: {line}"),
            Parsed::InvalidRequest => panic!("invalid: {line}"),
        }
    }

    #[test]
    fn a_call_of_the_usual_shape_takes_the_fast_path_and_keeps_its_arguments_raw() {
        let line = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi", "n": 1.50},"_meta":{"progressToken":3}}}"#;
        let fast = fast_call(line.as_bytes()).expect("the fast path");
        let ClientJsonRpcMessage::Request(request) = &fast else {
            panic!("not a request: {fast:?}")
        };
        assert_eq!(request.id, RequestId::Number(7));
        let ClientRequest::CallToolRequest(call) = &request.request else {
            panic!("not a call: {request:?}")
        };
        assert_eq!(call.params.name, "echo");
        assert_eq!(call.params.arguments, None);
        let raw = call
            .extensions
            .get::<RawArguments>()
            .expect("raw arguments");
        // Byte for byte as sent: nothing parsed it into a map and wrote it out again.
        assert_eq!(&*raw.0, r#"{"text":"hi", "n": 1.50}"#);
        let meta = call.extensions.get::<RequestMetaObject>().expect("meta");
        assert_eq!(meta.0.0.get("progressToken"), Some(&serde_json::json!(3)));
    }

    #[test]
    fn anything_else_is_left_to_rmcp() {
        for line in [
            // Another method, another version, an extra field, arguments not an object,
            // a duplicate field, a field the fast path does not know.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"x":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"echo"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","requestState":"s"}}"#,
            // The shapes a serde-derived struct reads that are not MCP messages (issue 40):
            // a message or its params as an array, in field order.
            r#"["2.0",7,"tools/call",{"name":"echo","arguments":{"text":"x"}}]"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["echo",{"text":"x"}]}"#,
            r#"["2.0",7,"tools/call",["echo",{"text":"x"}]]"#,
            // Arguments serde_json may refuse (a lone surrogate) or read (a pair): rmcp's.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\ud800"}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\uD83E\uDD80"}}}"#,
        ] {
            assert!(
                fast_call(line.as_bytes()).is_none(),
                "took the fast path: {line}"
            );
        }
        // An escaped backslash before a `u` is not an escape of a surrogate.
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"\\ud800"}}}"#;
        assert!(fast_call(line.as_bytes()).is_some(), "{line}");
    }

    #[test]
    fn a_message_or_its_params_as_an_array_is_an_invalid_request_on_either_path() {
        for line in [
            r#"["2.0",7,"tools/call",{"name":"echo","arguments":{"text":"x"}}]"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":["echo",{"text":"x"}]}"#,
            r#"["2.0",7,"tools/call",["echo",{"text":"x"}]]"#,
            r#"["2.0",7,"tools/list"]"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[]}"#,
        ] {
            assert!(
                matches!(parse_line(line.as_bytes()), Parsed::InvalidRequest),
                "not refused as invalid: {line}"
            );
        }
    }

    #[test]
    fn lines_are_read_as_rmcp_reads_them() {
        // A BOM and a carriage return are dropped.
        let bom = "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r";
        assert!(matches!(message(bom), ClientJsonRpcMessage::Request(_)));
        // A notification MCP does not define, which rmcp cannot parse, is dropped too.
        let unknown = r#"{"jsonrpc":"2.0","method":"notifications/unknown","params":5}"#;
        for ignored in ["", "\r", "not json", unknown] {
            assert!(
                matches!(parse_line(ignored.as_bytes()), Parsed::Ignored),
                "not ignored: {ignored:?}"
            );
        }
        for invalid in [
            r#"{"jsonrpc":"2.0","id":1}"#,
            "[1,2]",
            r#"{"id":1,"method":5}"#,
        ] {
            assert!(
                matches!(parse_line(invalid.as_bytes()), Parsed::InvalidRequest),
                "not answered as invalid: {invalid:?}"
            );
        }
    }

    /// An output the client does not read (`Stuck`: every write waits forever) or has closed
    /// (`Closed`: every write fails as a broken pipe).
    enum Dead {
        Stuck,
        Closed,
    }
    use Dead::{Closed, Stuck};

    impl Dead {
        fn poll<T>(&self, closed: T) -> std::task::Poll<std::io::Result<T>> {
            match self {
                Stuck => std::task::Poll::Pending,
                Closed => std::task::Poll::Ready(Ok(closed)),
            }
        }
    }

    impl AsyncWrite for Dead {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            _: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.poll(())
                .map(|_| Err(std::io::ErrorKind::BrokenPipe.into()))
        }
        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            self.poll(())
                .map(|_| Err(std::io::ErrorKind::BrokenPipe.into()))
        }
        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            self.poll(())
        }
    }

    /// Whether `receive` returns a message at its first poll.
    fn receives_at_once<R: AsyncRead + Send + Unpin + 'static>(
        transport: &mut LineTransport<R>,
    ) -> bool {
        let receive = std::pin::pin!(transport.receive());
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        matches!(receive.poll(&mut context), std::task::Poll::Ready(Some(_)))
    }

    /// While the client leaves more than the high-water mark of answers unread, no further
    /// request is read, though one is waiting; below the mark, it is.
    #[tokio::test]
    async fn a_client_that_does_not_read_is_not_read_from() {
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n".repeat(2);
        let answer =
            ServerJsonRpcMessage::error(ErrorData::internal_error("x".repeat(1024), None), None);
        let mut stuck = LineTransport::new(std::io::Cursor::new(ping.clone()), Stuck);
        let mut reading = LineTransport::new(std::io::Cursor::new(ping), tokio::io::sink());
        // One answer is well below the mark: the next request is read.
        stuck.send(answer.clone()).await.expect("queued");
        assert!(receives_at_once(&mut stuck));
        let unwritten = |transport: &LineTransport<_>| {
            let pending = transport.outbox.lock();
            pending.bytes.len() + pending.writing
        };
        while unwritten(&stuck) <= OUTPUT_HIGH_WATER {
            stuck.send(answer.clone()).await.expect("queued");
        }
        assert!(
            !receives_at_once(&mut stuck),
            "read on past the high-water mark"
        );
        // The same with a client that reads: the writer drains, and the request is read.
        reading.send(answer).await.expect("queued");
        assert!(receives_at_once(&mut reading));
    }

    /// Once an answer cannot be written, the session ends: no further request is read (no
    /// tool runs for a client that cannot hear it), and later answers fail to send.
    #[tokio::test]
    async fn a_failed_output_ends_the_session() {
        let pings = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n".repeat(2);
        let mut transport = LineTransport::new(std::io::Cursor::new(pings), Closed);
        assert!(
            transport.receive().await.is_some(),
            "the first request is read"
        );
        let answer = ServerJsonRpcMessage::error(ErrorData::internal_error("x", None), None);
        transport.send(answer.clone()).await.expect("queued");
        // Let the writer try, and fail.
        let writer = transport.writer.take().expect("the writer");
        writer.await.expect("the writer ends");
        assert!(
            transport.receive().await.is_none(),
            "read on after the output failed"
        );
        assert!(transport.send(answer).await.is_err());
    }

    /// Requests read and not yet answered are bounded: past the bound the next is not read
    /// until one is answered, or cancelled.
    #[tokio::test]
    async fn unanswered_requests_are_bounded() {
        let mut input = Vec::new();
        for id in 0..=MAX_IN_FLIGHT_REQUESTS {
            input.extend(
                format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n").bytes(),
            );
        }
        input.extend(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}\n");
        input.extend(b"{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}\n");
        let mut transport = LineTransport::new(std::io::Cursor::new(input), tokio::io::sink());
        for _ in 0..MAX_IN_FLIGHT_REQUESTS {
            assert!(receives_at_once(&mut transport));
        }
        assert!(!receives_at_once(&mut transport), "read past the bound");
        // An answer frees a place: the next request is read, and the bound holds again.
        let answer = |id: i64| {
            ServerJsonRpcMessage::response(
                rmcp::model::ServerResult::empty(()),
                RequestId::Number(id),
            )
        };
        transport.send(answer(0)).await.expect("answered");
        // An answer to a request never made frees nothing.
        transport.send(answer(999_999)).await.expect("answered");
        assert!(receives_at_once(&mut transport));
        assert!(!receives_at_once(&mut transport), "read past the bound");
        // So does a cancellation (the cancelled request gets no answer).
        transport.send(answer(2)).await.expect("answered");
        assert!(receives_at_once(&mut transport), "the cancellation is read");
        assert!(receives_at_once(&mut transport), "the request after it");
    }

    /// A client that leaves answers unread ends its session once they have been stuck for the
    /// stall timeout (here shortened), rather than keeping the server forever.
    #[tokio::test]
    async fn a_client_that_reads_nothing_for_long_ends_the_session() {
        let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n".to_vec();
        let mut stuck = LineTransport::new(std::io::Cursor::new(ping), Stuck)
            .with_stalled_output_timeout(Duration::from_millis(50));
        let answer = ServerJsonRpcMessage::error(
            ErrorData::internal_error("x".repeat(64 * 1024), None),
            None,
        );
        while {
            let pending = stuck.outbox.lock();
            pending.bytes.len() + pending.writing <= OUTPUT_HIGH_WATER
        } {
            stuck.send(answer.clone()).await.expect("queued");
        }
        // A guard against a hang, not a measurement: the session must end, not wait.
        let received = tokio::time::timeout(Duration::from_secs(20), stuck.receive()).await;
        assert!(matches!(received, Ok(None)), "the session did not end");
    }

    /// rmcp's line rule at the newline too: a line whose length with its newline is over the
    /// limit is dropped, one at the limit is read.
    #[tokio::test]
    async fn the_line_limit_counts_the_newline() {
        let line = |length: usize| {
            let head = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"";
            let mut line = head.to_vec();
            line.resize(length - 2, b' ');
            line.extend(b"}\n");
            line
        };
        let mut input = line(MAX_LINE_BYTES + 1);
        input.extend(line(MAX_LINE_BYTES));
        let mut transport = LineTransport::new(std::io::Cursor::new(input), tokio::io::sink());
        let received = transport.receive().await.expect("the line at the limit");
        assert!(matches!(received, ClientJsonRpcMessage::Request(_)));
        assert!(
            transport.receive().await.is_none(),
            "only one line was read"
        );
    }

    /// Drive a transport over an in-memory pipe: lines split across reads, an oversized line
    /// dropped without ending the session, answers batched and in order.
    #[tokio::test]
    async fn partial_and_oversized_lines() {
        let (mut client, server) = tokio::io::duplex(1024);
        let (read, write) = tokio::io::split(server);
        let mut transport = LineTransport::new(read, write);
        let ping = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        let feeder = tokio::spawn(async move {
            client.write_all(&ping[..10]).await?;
            client.flush().await?;
            tokio::task::yield_now().await;
            client.write_all(&ping[10..]).await?;
            client.write_all(b"\n").await?;
            // A line over the limit, in pieces, then a good one.
            let chunk = vec![b' '; 1024 * 1024];
            for _ in 0..=MAX_LINE_BYTES / chunk.len() {
                client.write_all(&chunk).await?;
            }
            client.write_all(b"\n").await?;
            client.write_all(ping).await?;
            client.write_all(b"\n").await?;
            drop(client);
            std::io::Result::Ok(())
        });
        for _ in 0..2 {
            let received = transport.receive().await.expect("a message");
            assert!(matches!(received, ClientJsonRpcMessage::Request(_)));
        }
        assert!(transport.receive().await.is_none(), "the input ended");
        feeder.await.expect("the feeder").expect("written");
        assert!(
            transport.buffer.len() <= MAX_LINE_BYTES + 2 * READ_CHUNK_BYTES,
            "the buffer grew to {} bytes",
            transport.buffer.len()
        );
    }
}
