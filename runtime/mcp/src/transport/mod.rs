//! The server's transport over byte streams (stdio, a socket): newline-delimited JSON-RPC.
//!
//! Past the house's 700 lines: one transport (reading lines, the outbox and its writer, the call
//! answered in place beside the read), whose parts share the same bounded state; the parse lives
//! in `parse.rs` and the in-place lane in `in_place.rs`.
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

pub(crate) mod in_place;
pub(crate) mod parse;

use parse::{Parsed, parse_line};

use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, ErrorData, RequestId, ServerJsonRpcMessage,
};
use rmcp::transport::Transport;
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
    /// Where a call read while nothing else is in flight is answered in place
    /// ([`in_place`]), if this transport answers calls so.
    lane: Option<Arc<in_place::InPlace>>,
    /// The call running in place now.
    running: Option<in_place::Running>,
}

impl<R: AsyncRead + Send + Unpin + 'static> LineTransport<R> {
    /// A transport reading requests from `input` and writing answers to `output`. Must be
    /// made inside a tokio runtime: the writer task starts here.
    pub fn new<W: AsyncWrite + Send + Unpin + 'static>(input: R, output: W) -> Self {
        let outbox = Arc::new(Outbox {
            output: tokio::sync::Mutex::new(Box::new(output)),
            ..Outbox::default()
        });
        let writer = tokio::spawn(write_out(Arc::clone(&outbox)));
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
            lane: None,
            running: None,
        }
    }

    /// Answer calls in place through `lane` ([`in_place`]).
    pub(crate) fn with_lane(mut self, lane: Arc<in_place::InPlace>) -> Self {
        self.lane = Some(lane);
        self
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

    /// Make room to read into: what is left of a partial line moved to the front.
    fn make_room(&mut self) {
        if self.start > 0 {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buffer.len() - self.end < READ_CHUNK_BYTES {
            self.buffer.resize(self.end + READ_CHUNK_BYTES, 0);
        }
    }

    /// Read more input, while the call running in place (if any) goes on beside the read:
    /// `false` at the end of the input (or when it fails). An answer of the call in place that
    /// cannot be written ends the session too. Cancel-safe: a read that is dropped has read
    /// nothing, and the call in place is kept.
    async fn fill(&mut self) -> bool {
        self.make_room();
        let (input, buffer, end) = (&mut self.input, &mut self.buffer, self.end);
        let read = async move {
            match input.read(&mut buffer[end..]).await {
                Ok(0) => None,
                Ok(read) => Some(read),
                Err(error) => {
                    tracing::error!("Error reading from stream: {error}");
                    None
                }
            }
        };
        let read = match self.running.as_mut() {
            None => read.await,
            Some(running) => {
                let ended = tokio::select! {
                    biased;
                    answer = running.future.as_mut() => Err(answer),
                    read = read => Ok(read),
                };
                match ended {
                    Ok(read) => read,
                    Err(answer) => {
                        let running = self.running.take();
                        return self.answered(running, answer);
                    }
                }
            }
        };
        match read {
            Some(read) => {
                self.end += read;
                true
            }
            None => {
                // The end of the input: the call in place may finish and be answered within
                // [`in_place::END_OF_INPUT_DRAIN`], as rmcp's own running requests may; then
                // it is stopped, and nothing answers it (the client has gone).
                if let Some(mut running) = self.running.take() {
                    let drained =
                        tokio::time::timeout(in_place::END_OF_INPUT_DRAIN, running.future.as_mut())
                            .await;
                    match drained {
                        Ok(answer) => {
                            let _ = self.answered(Some(running), answer);
                        }
                        Err(_late) => {
                            running.ct.cancel();
                            let _ = running.future.as_mut().await;
                            self.outbox.forget(&running.id);
                        }
                    }
                }
                false
            }
        }
    }

    /// The call in place ended with `answer` (none: the client cancelled it): written, or
    /// its place freed. `false` when it cannot be written.
    fn answered(
        &mut self,
        running: Option<in_place::Running>,
        answer: Option<ServerJsonRpcMessage>,
    ) -> bool {
        match answer {
            Some(answer) => self.outbox.push_now(&answer).is_ok(),
            None => {
                if let Some(running) = running {
                    self.outbox.forget(&running.id);
                }
                true
            }
        }
    }

    /// Wait for room to read another request ([`Outbox::room`]), while the call in place (if
    /// any) goes on. `false`: the session is over.
    async fn wait_for_room(&mut self) -> bool {
        loop {
            let outbox = Arc::clone(&self.outbox);
            let room = outbox.room(self.stalled_output_timeout);
            let Some(running) = self.running.as_mut() else {
                return room.await;
            };
            let ended = tokio::select! {
                biased;
                answer = running.future.as_mut() => Err(answer),
                room = room => Ok(room),
            };
            match ended {
                Ok(room) => return room,
                Err(answer) => {
                    let running = self.running.take();
                    if !self.answered(running, answer) {
                        return false;
                    }
                }
            }
        }
    }

    /// `message`, read: to be answered in place, for rmcp (returned), or nothing more to do.
    fn read_message(&mut self, message: ClientJsonRpcMessage) -> Option<ClientJsonRpcMessage> {
        // A cancellation of the call running in place stops it (rmcp does not know of it).
        if let Some(running) = &self.running
            && let ClientJsonRpcMessage::Notification(notification) = &message
            && let ClientNotification::CancelledNotification(cancelled) = &notification.notification
            && cancelled.params.request_id.as_ref() == Some(&running.id)
        {
            running.ct.cancel();
            return None;
        }
        self.outbox.track(&message);
        // A call read while nothing else is in flight is answered here; anything else is
        // rmcp's, so that calls that overlap run in parallel in its tasks.
        // (Another line read already is another request on its way: the calls overlap.)
        let more_read = self.buffer[self.start..self.end].contains(&b'\n');
        let lane = match &self.lane {
            Some(lane) if self.running.is_none() && !more_read && self.outbox.in_flight() == 1 => {
                lane
            }
            _ => return Some(message),
        };
        match lane.take(message) {
            Ok(running) => {
                self.running = Some(running);
                None
            }
            Err(message) => Some(message),
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
            if !self.wait_for_room().await {
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
                    if let Some(message) = self.read_message(*message) {
                        return Some(message);
                    }
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

/// The output answers are written to.
type Output = Box<dyn AsyncWrite + Send + Unpin>;

/// Answers waiting to be written, shared by `send` (any task) and the writer task, and the
/// requests still to be answered.
struct Outbox {
    state: Mutex<Pending>,
    /// Where answers go: written by the writer task, or, for a call answered in place, by the
    /// reader at once when no write is under way ([`Outbox::write_now`]).
    output: tokio::sync::Mutex<Output>,
    /// Something to write, or closed.
    wake_writer: Notify,
    /// A write finished (or failed), or a request was answered: the reader may have room.
    room: Notify,
}

impl Default for Outbox {
    fn default() -> Self {
        Outbox {
            state: Mutex::default(),
            output: tokio::sync::Mutex::new(Box::new(tokio::io::sink())),
            wake_writer: Notify::new(),
            room: Notify::new(),
        }
    }
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
        toolcell::sync::lock(&self.state)
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

    /// How many requests are in flight.
    fn in_flight(&self) -> usize {
        self.lock().in_flight_total
    }

    /// The request `id` will get no answer (it was cancelled): its place is free.
    fn forget(&self, id: &RequestId) {
        if self.lock().answered(id) {
            self.room.notify_waiters();
        }
    }

    /// Serialise `message` onto the end of the output and wake the writer; an answer also
    /// frees its request's place. One lock for both: this runs once per answer.
    fn push(&self, message: &ServerJsonRpcMessage) -> std::io::Result<()> {
        self.enqueue(message)?;
        self.wake_writer.notify_one();
        Ok(())
    }

    /// [`Outbox::push`], written at once from the caller's task when no write is under way
    /// and the output takes it all without waiting (a pipe with room): no wake-up of the
    /// writer task. What is not written so is left, in order, to the writer.
    fn push_now(&self, message: &ServerJsonRpcMessage) -> std::io::Result<()> {
        self.enqueue(message)?;
        if !self.write_now() {
            self.wake_writer.notify_one();
        }
        Ok(())
    }

    /// `message` serialised onto the end of the output, and, for an answer, its request's
    /// place freed (the reader woken to it): one lock for both.
    fn enqueue(&self, message: &ServerJsonRpcMessage) -> std::io::Result<()> {
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
        queued
    }

    /// Write what has gathered now, if the writer is idle and the output takes it without
    /// waiting: whether nothing is left to write.
    fn write_now(&self) -> bool {
        let Ok(mut output) = self.output.try_lock() else {
            return false;
        };
        let batch = {
            let mut pending = self.lock();
            if pending.bytes.is_empty() {
                return true;
            }
            std::mem::take(&mut pending.bytes)
        };
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let written = std::pin::Pin::new(&mut *output).poll_write(&mut context, &batch);
        let mut pending = self.lock();
        let left = match written {
            std::task::Poll::Ready(Ok(written)) => written,
            std::task::Poll::Pending => 0,
            std::task::Poll::Ready(Err(error)) => {
                tracing::error!("Error writing to stream: {error}");
                pending.failed = Some((error.kind(), error.to_string()));
                pending.bytes = Vec::new();
                drop(pending);
                self.room.notify_waiters();
                return true;
            }
        };
        if left == batch.len() {
            pending.writes += 1;
            drop(pending);
            self.room.notify_waiters();
            return true;
        }
        // Not all taken: the rest goes first, then whatever was queued meanwhile.
        let mut rest = batch[left..].to_vec();
        rest.append(&mut pending.bytes);
        pending.bytes = rest;
        false
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
async fn write_out(outbox: Arc<Outbox>) {
    let mut batch = Vec::new();
    loop {
        // Held while this batch is taken and written: an answer written in place never
        // comes between.
        let mut output = outbox.output.lock().await;
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
                drop(output);
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
    if let Err(error) = outbox.output.lock().await.shutdown().await {
        tracing::debug!("Error closing the stream: {error}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::parse::fast_call;
    use rmcp::model::{ClientRequest, RequestMetaObject};

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
