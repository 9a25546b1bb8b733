//! A tool talking to the client that made its call (the contract's `client` interface): log
//! messages, progress, and questions for the model or the person.
//!
//! The host, not the tool, decides every step. The gate grants each feature per call from the
//! policy (`client.log`, `client.progress`, `client.sample`, ... in a tool's entry); the
//! request's client says what it offers ([`ClientLink::offers`]); what a call holds is both.
//! Each is bounded per call ([`MAX_LOGS_PER_CALL`], [`MAX_PROGRESS_PER_CALL`],
//! [`MAX_QUESTIONS_PER_CALL`], the sizes below) and counted in the call's report by shape
//! ([`ClientUse`]): how many, how large, never what was said.
//!
//! The server (`toolcell-mcp`) gives each request a [`ClientLink`] through
//! [`CallContext::with_client`](crate::CallContext::with_client): the only way out of the
//! sandbox to the client. An embedder with no client gives none, and a tool's messages go
//! nowhere while its questions are answered `unsupported`.

use serde::Serialize;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// The most log messages one call may send. A person reads them in a client's log pane; past a
/// few hundred they are noise, and each is a frame on the call's stream.
pub const MAX_LOGS_PER_CALL: u32 = 256;

/// The most bytes of one log message (and of its logger's name) that are sent; the rest is
/// cut, on a character boundary, and marked. A log line is a sentence or a small record.
pub const MAX_LOG_MESSAGE_BYTES: usize = 8 * 1024;

/// The most progress notifications one call may send: a bar redrawn 256 times moves smoothly.
pub const MAX_PROGRESS_PER_CALL: u32 = 256;

/// The most questions one call may ask, over all its rounds. Each interrupts the person or
/// spends their model's tokens.
pub const MAX_QUESTIONS_PER_CALL: u32 = 16;

/// The most rounds of questions one call may ask (each `ask` is a round; over MCP 2026-07-28
/// each is a retry the client makes).
pub const MAX_ASK_ROUNDS_PER_CALL: u32 = 8;

/// The most bytes one question may have as JSON (a sampling request with its images, a form's
/// schema); a 100 MB sampling request is refused before anything is sent.
pub const MAX_QUESTION_BYTES: usize = 1024 * 1024;

/// The most bytes of one answer, as JSON, that the host passes to a tool.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// How much a log message matters (RFC 5424's levels, as MCP names them), least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    /// Detail for debugging.
    Debug,
    /// Normal operation.
    Info,
    /// Normal but significant.
    Notice,
    /// Something may be wrong.
    Warning,
    /// Something failed.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LogLevel {
    /// The level MCP names `name` (`debug`, ..., `emergency`), if any.
    pub fn parse(name: &str) -> Option<LogLevel> {
        Some(match name {
            "debug" => LogLevel::Debug,
            "info" => LogLevel::Info,
            "notice" => LogLevel::Notice,
            "warning" => LogLevel::Warning,
            "error" => LogLevel::Error,
            "critical" => LogLevel::Critical,
            "alert" => LogLevel::Alert,
            "emergency" => LogLevel::Emergency,
            _ => return None,
        })
    }

    /// The level's MCP name.
    pub fn name(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }
}

/// What one request's client offers a tool: what it declared it can answer, and what the
/// request asked to be told.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offered {
    /// The least level of log message the client wants for this request; `None` for none
    /// (MCP 2026-07-28: a request without `logLevel` gets no log messages).
    pub log_level: Option<LogLevel>,
    /// The request carried a progress token.
    pub progress: bool,
    /// The client answers `sampling/createMessage`.
    pub sample: bool,
    /// The client shows forms (`elicitation/create`, form mode).
    pub elicit: bool,
    /// The client opens URLs (`elicitation/create`, URL mode).
    pub elicit_url: bool,
    /// The client answers `roots/list`.
    pub list_roots: bool,
}

/// One question for the client, as MCP sends it: its key (the tool's, unique in the call),
/// the method (`sampling/createMessage`, `elicitation/create`, `roots/list`) and its params,
/// checked and bounded by the host. An elicitation's message is already labelled with the
/// tool's name.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The tool's name for it.
    pub key: String,
    /// The MCP method that asks it.
    pub method: &'static str,
    /// The request's params.
    pub params: Value,
}

/// Why a client could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AskFailure {
    /// This connection carries no questions to the client (for now: the era or transport).
    #[error("{0}")]
    Unsupported(String),
    /// The client answered with an error, or not in time.
    #[error("{0}")]
    Failed(String),
    /// The questions go back to the client with the call's answer (MCP 2026-07-28's
    /// `input_required`): the call ends at this question, and the client's answers reach it
    /// when it runs again. The tool never sees this: its instance is stopped.
    #[error("the questions go back to the client with the call's answer")]
    InputRequired,
    /// The call runs again with answers to other questions than it asks now (a tool must
    /// ask the same questions given the same arguments and earlier answers).
    #[error("{0}")]
    Mismatch(String),
}

/// The future a [`ClientLink::log`] or [`ClientLink::progress`] returns: done when the
/// notification is on its way (a tool that sends many waits for its client's stream).
pub type Sent<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// The future a [`ClientLink::ask`] returns: the client's answers as JSON, in question order.
pub type Asked<'a> = Pin<Box<dyn Future<Output = Result<Vec<Value>, AskFailure>> + Send + 'a>>;

/// The way to the client that made one request. Given by the server per request; the host
/// calls it only for what the gate granted and the call's bounds allow.
pub trait ClientLink: Send + Sync {
    /// What this request's client offers.
    fn offers(&self) -> Offered;

    /// Send one log message (`notifications/message`): `message` as the message's data.
    fn log(&self, level: LogLevel, logger: Option<String>, message: String) -> Sent<'_>;

    /// Send one progress notification with this request's progress token.
    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) -> Sent<'_>;

    /// Ask the client `questions` (one round), and await its answers.
    fn ask(&self, questions: Vec<Question>) -> Asked<'_>;
}

/// What a call did with its client, by shape, for the report and the audit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClientUse {
    /// Log messages sent.
    pub logs: u32,
    /// Progress notifications sent.
    pub progress: u32,
    /// Messages and notifications dropped: not granted, below the level, not rising, or
    /// past a bound.
    pub dropped: u32,
    /// Questions asked.
    pub questions: u32,
    /// Times a person was asked whether the tool may ask (a gated kind, at its first question).
    pub approvals: u32,
    /// Bytes of questions sent, as JSON.
    pub question_bytes: u64,
    /// Bytes of answers received, as JSON.
    pub answer_bytes: u64,
}

impl ClientUse {
    /// Nothing happened.
    pub fn is_empty(&self) -> bool {
        *self == ClientUse::default()
    }
}
