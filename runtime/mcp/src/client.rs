//! The way from a tool to the client of its request ([`toolcell::client::ClientLink`]): log
//! messages and progress as notifications on the request's stream, questions as requests to
//! the client, where the connection carries them.
//!
//! What the client offers is read once per request, here ([`RequestClient::new`]), and both
//! the core's gate (a tool that requires what is not offered is refused) and the tool's
//! `features()` read that one value.
//!
//! Which way each goes, by era and transport:
//! - log messages: over MCP 2026-07-28 only for a request whose `_meta` names a `logLevel`, at
//!   or above it; in a 2025-11-25 session (stdio, or an HTTP client that kept its session id)
//!   at or above the level `logging/setLevel` set; otherwise at `info` and above;
//! - progress: for a request that carries a progress token, on its stream;
//! - questions (`sampling/createMessage`, `elicitation/create`, `roots/list`): in a 2025-11-25
//!   session, as requests to the client on the call's stream, awaited within the call's
//!   deadline ([`crate::asking`]: over HTTP the front routes the posted answer back); over
//!   2026-07-28 (stdio and HTTP), as `input_required` rounds ([`crate::rounds`]). A 2025-11-25
//!   HTTP client without a session id has declared nothing the server can remember: it offers
//!   none, and a tool that asks is told `unsupported`.
// Logging, sampling and roots are deprecated by SEP-2577, and still part of both revisions
// toolcell serves (2025-11-25 and 2026-07-28): a tool may use them.
#![allow(deprecated)]

use rmcp::RoleServer;
use rmcp::model::{
    ClientCapabilities, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ProgressToken, RequestMetaObject, ServerRequest,
};
use rmcp::service::Peer;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use toolcell::client::{AskFailure, Asked, ClientLink, LogLevel, Offered, Question, Sent};

/// The level a session's client set with `logging/setLevel` (stdio: one session a server).
#[derive(Debug, Clone, Default)]
pub(crate) struct SessionLevel(Arc<Mutex<Option<LogLevel>>>);

impl SessionLevel {
    /// The level set, if one was.
    pub(crate) fn get(&self) -> Option<LogLevel> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Set it.
    pub(crate) fn set(&self, level: LogLevel) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(level);
    }
}

/// The level log messages go at when the client set none (2025-11-25): `info` and above; a
/// client that wants `debug` asks for it.
pub(crate) const DEFAULT_LOG_LEVEL: LogLevel = LogLevel::Info;

/// The values sent on one request's progress token, by the host's own reports and the tool's:
/// MCP requires them to rise, and the host's reports stop once the tool reports.
#[derive(Debug, Default)]
pub(crate) struct ProgressLine(Mutex<LineState>);

#[derive(Debug, Default)]
struct LineState {
    last: Option<f64>,
    tool_reports: bool,
}

impl ProgressLine {
    /// Whether the host may send `value` now (the tool has not taken over, and it rises); if
    /// so, it is the last value sent.
    pub(crate) fn host_may_send(&self, value: f64) -> bool {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if state.tool_reports || state.last.is_some_and(|last| value <= last) {
            return false;
        }
        state.last = Some(value);
        true
    }

    /// Whether the tool may send `value` now (it rises); if so, it is the last value sent, and
    /// the tool reports from now on.
    fn tool_may_send(&self, value: f64) -> bool {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if state.last.is_some_and(|last| value <= last) {
            return false;
        }
        state.last = Some(value);
        state.tool_reports = true;
        true
    }
}

/// One request's client, as a tool may reach it.
pub(crate) struct RequestClient {
    peer: Option<Peer<RoleServer>>,
    token: Option<ProgressToken>,
    progress: Arc<ProgressLine>,
    offered: Offered,
    /// How a question reaches the client and its answer comes back, in the `initialize` era
    /// (a stdio session, or an HTTP client that kept its session id).
    asker: Option<crate::asking::SessionAsk>,
    /// Over MCP 2026-07-28: the questions go back with the call's answer, and come back
    /// answered in its retry ([`crate::rounds`]).
    round: Option<Arc<crate::rounds::QuestionRound>>,
}

/// How a request reaches its client: what [`RequestClient::new`] reads.
pub(crate) struct Reach<'a> {
    /// The request's peer, if the transport has one to send notifications through.
    pub(crate) peer: Option<&'a Peer<RoleServer>>,
    /// The request's `_meta`.
    pub(crate) meta: &'a RequestMetaObject,
    /// The client's capabilities (the session's, or the request's `_meta`'s).
    pub(crate) capabilities: Option<&'a ClientCapabilities>,
    /// Whether the request is of the stateless era (2026-07-28).
    pub(crate) stateless: bool,
    /// How questions are carried in the `initialize` era, where they can be (a stdio session;
    /// over HTTP, a client that kept the session id it was given).
    pub(crate) asker: Option<crate::asking::SessionAsk>,
    /// The level a session's client set.
    pub(crate) session_level: Option<LogLevel>,
    /// A stateless-era request's round of questions (its answers, and where the questions it
    /// has no answer for are kept).
    pub(crate) round: Option<Arc<crate::rounds::QuestionRound>>,
}

impl RequestClient {
    /// What the request in `reach` offers a tool; its progress goes through `progress`.
    pub(crate) fn new(reach: Reach<'_>, progress: Arc<ProgressLine>) -> RequestClient {
        let token = reach.meta.get_progress_token();
        let has_peer = reach.peer.is_some();
        let log_level = if !has_peer {
            None
        } else if reach.stateless {
            reach.meta.log_level().map(level_of)
        } else {
            Some(reach.session_level.unwrap_or(DEFAULT_LOG_LEVEL))
        };
        // In a session, asked over it; in the stateless era, in rounds.
        let asker = reach.asker.filter(|_| !reach.stateless);
        let asks = asker.is_some() || reach.round.is_some();
        let capabilities = reach.capabilities;
        let elicitation = capabilities.and_then(|c| c.elicitation.as_ref());
        let offered = Offered {
            log_level,
            progress: has_peer && token.is_some(),
            sample: asks && capabilities.is_some_and(|c| c.sampling.is_some()),
            elicit: asks && crate::approval::can_elicit(capabilities),
            elicit_url: asks && elicitation.is_some_and(|e| e.url.is_some()),
            list_roots: asks && capabilities.is_some_and(|c| c.roots.is_some()),
        };
        RequestClient {
            peer: reach.peer.cloned(),
            token,
            progress,
            offered,
            asker,
            round: reach.round,
        }
    }
}

impl RequestClient {
    /// The same client, for a call of a task that runs again with `round`'s answers (the
    /// questions its earlier run asked, answered through `tasks/update`).
    pub(crate) fn with_round(&self, round: Arc<crate::rounds::QuestionRound>) -> RequestClient {
        RequestClient {
            peer: self.peer.clone(),
            token: self.token.clone(),
            progress: Arc::clone(&self.progress),
            offered: self.offered,
            asker: None,
            round: Some(round),
        }
    }
}

/// rmcp's level for one of the core's.
fn mcp_level(level: LogLevel) -> LoggingLevel {
    match level {
        LogLevel::Debug => LoggingLevel::Debug,
        LogLevel::Info => LoggingLevel::Info,
        LogLevel::Notice => LoggingLevel::Notice,
        LogLevel::Warning => LoggingLevel::Warning,
        LogLevel::Error => LoggingLevel::Error,
        LogLevel::Critical => LoggingLevel::Critical,
        LogLevel::Alert => LoggingLevel::Alert,
        LogLevel::Emergency => LoggingLevel::Emergency,
    }
}

/// The core's level for one of rmcp's.
pub(crate) fn level_of(level: LoggingLevel) -> LogLevel {
    match level {
        LoggingLevel::Debug => LogLevel::Debug,
        LoggingLevel::Info => LogLevel::Info,
        LoggingLevel::Notice => LogLevel::Notice,
        LoggingLevel::Warning => LogLevel::Warning,
        LoggingLevel::Error => LogLevel::Error,
        LoggingLevel::Critical => LogLevel::Critical,
        LoggingLevel::Alert => LogLevel::Alert,
        LoggingLevel::Emergency => LogLevel::Emergency,
    }
}

impl ClientLink for RequestClient {
    fn offers(&self) -> Offered {
        self.offered
    }

    fn log(&self, level: LogLevel, logger: Option<String>, message: String) -> Sent<'_> {
        Box::pin(async move {
            let Some(peer) = &self.peer else { return };
            let mut param =
                LoggingMessageNotificationParam::new(mcp_level(level), Value::String(message));
            param.logger = logger;
            #[allow(deprecated)]
            if let Err(error) = peer.notify_logging_message(param).await {
                tracing::debug!(%error, "a tool's log message was not sent");
            }
        })
    }

    fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) -> Sent<'_> {
        Box::pin(async move {
            let (Some(peer), Some(token)) = (&self.peer, &self.token) else {
                return;
            };
            if !self.progress.tool_may_send(progress) {
                return;
            }
            let mut param = ProgressNotificationParam::new(token.clone(), progress);
            param.total = total;
            param.message = message;
            if let Err(error) = peer.notify_progress(param).await {
                tracing::debug!(%error, "a tool's progress was not sent");
            }
        })
    }

    fn ask(&self, questions: Vec<Question>) -> Asked<'_> {
        Box::pin(async move {
            if let Some(round) = &self.round {
                return round.answer(questions);
            }
            let Some(asker) = &self.asker else {
                return Err(AskFailure::Unsupported(
                    "this connection carries no questions to the client".to_owned(),
                ));
            };
            let mut answers = Vec::with_capacity(questions.len());
            for question in questions {
                let request: ServerRequest = serde_json::from_value(json!({
                    "method": question.method,
                    "params": question.params,
                }))
                .map_err(|error| {
                    AskFailure::Failed(format!("question {:?}: {error}", question.key))
                })?;
                let answer = asker
                    .ask(request, crate::QUESTION_WAIT)
                    .await
                    .map_err(|error| {
                        AskFailure::Failed(format!(
                            "the client did not answer {:?}: {error}",
                            question.key
                        ))
                    })?;
                answers.push(answer);
            }
            Ok(answers)
        })
    }
}

/// MCP 2026-07-28's error for a tool that requires `capability` (`client.sample`, ...) of a
/// client that did not declare it: -32021, with the client capabilities it must declare. `None`
/// when declaring would not help (the client declared it and the connection cannot carry it
/// yet, or it is log messages or progress, which a request asks for with `_meta`): the call's
/// answer then says why, as any denial.
pub(crate) fn missing_capability(
    capability: &str,
    declared: Option<&ClientCapabilities>,
) -> Option<rmcp::ErrorData> {
    let elicitation = declared.and_then(|c| c.elicitation.as_ref());
    let (required, has) = match capability {
        "client.sample" => (
            json!({ "sampling": {} }),
            declared.is_some_and(|c| c.sampling.is_some()),
        ),
        "client.elicit" => (
            json!({ "elicitation": { "form": {} } }),
            crate::approval::can_elicit(declared),
        ),
        "client.elicit_url" => (
            json!({ "elicitation": { "url": {} } }),
            elicitation.is_some_and(|e| e.url.is_some()),
        ),
        "client.list_roots" => (
            json!({ "roots": {} }),
            declared.is_some_and(|c| c.roots.is_some()),
        ),
        // A tool whose policy says its calls run only as tasks.
        "tasks" => (
            json!({ "extensions": { (rmcp::model::TASKS_EXTENSION_ID): {} } }),
            declared.is_some_and(ClientCapabilities::supports_tasks),
        ),
        _ => return None,
    };
    (!has).then(|| {
        rmcp::ErrorData::new(
            rmcp::model::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
            format!("the tool requires {capability}, which this request's client does not offer"),
            Some(json!({ "requiredCapabilities": required })),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host's reports and the tool's share one rising line: once the tool reports, the
    /// host's stop; neither may send a value not above the last.
    #[test]
    fn progress_on_one_token_only_rises() {
        let line = ProgressLine::default();
        assert!(line.host_may_send(0.0));
        assert!(line.host_may_send(1.0));
        assert!(!line.tool_may_send(1.0), "not above the host's last");
        assert!(line.tool_may_send(50.0));
        assert!(!line.host_may_send(51.0), "the tool took over");
        assert!(!line.tool_may_send(10.0), "it never falls");
        assert!(line.tool_may_send(100.0));
    }

    /// -32021 only where declaring the capability would help.
    #[test]
    fn the_missing_capability_error_names_only_what_a_client_can_declare() {
        let none = ClientCapabilities::default();
        let error = missing_capability("client.sample", Some(&none)).expect("an error");
        assert_eq!(
            error.data,
            Some(json!({ "requiredCapabilities": { "sampling": {} } }))
        );
        let sampling: ClientCapabilities =
            serde_json::from_value(json!({ "sampling": {} })).expect("capabilities");
        assert!(missing_capability("client.sample", Some(&sampling)).is_none());
        assert!(missing_capability("client.log", Some(&none)).is_none());
        assert!(missing_capability("client.progress", None).is_none());
    }
}
