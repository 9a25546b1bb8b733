//! How a request the server sends its client during a call of the `initialize` era (a tool's
//! question, the host's own approval question) reaches the client, and how the answer comes
//! back: one value, a [`SessionAsk`], made once per call where the connection can carry both
//! ways.
//!
//! - Over stdio the session's peer sends the request and rmcp routes the client's answer back
//!   to it.
//! - Over HTTP (2025-11-25, a client that keeps the session id the server gave it at
//!   `initialize`) rmcp's peer writes the request on the call's own response stream, but the
//!   client's answer arrives as a `POST` of its own, which rmcp, serving each request without
//!   a session, does not route. The front does (`http::questions`): it names
//!   each request on the stream with an id no one else can make, and hands the answer posted
//!   under that id, by that client, to the call's [`AnswerRoute`], at whichever replica it
//!   arrives.

use rmcp::model::{RequestId, ServerRequest};
use rmcp::service::{Peer, PeerRequestOptions};
use rmcp::{RoleServer, ServiceError};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Why a request to the client has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AskFailed {
    /// None came (in time, or the connection went away).
    NoAnswer(String),
    /// The client answered with an error.
    Refused(String),
}

impl std::fmt::Display for AskFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskFailed::NoAnswer(why) => write!(f, "no answer: {why}"),
            AskFailed::Refused(why) => write!(f, "the client refused: {why}"),
        }
    }
}

/// An answer as the client posted it: the response's `result`, or its `error`.
pub(crate) type Posted = Result<Value, Value>;

/// What waiting for one answer on an [`AnswerRoute`] yields: the answer, or `None` if none
/// came in time.
pub(crate) type Waited<'a> = Pin<Box<dyn Future<Output = Option<Posted>> + Send + 'a>>;

/// The way back for the answers to one HTTP request's questions, kept by the front.
pub(crate) trait AnswerRoute: Send + Sync {
    /// Make ready the name the next question sent on this route goes out under (with a shared
    /// store, noted there, so that an answer posted to another replica is taken for it).
    fn prepare(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;

    /// The answer to the request this route's stream carried as `id` (the id rmcp gave it),
    /// waited for at most `timeout`.
    fn wait<'a>(&'a self, id: &'a RequestId, timeout: Duration) -> Waited<'a>;
}

/// How one call asks its client in the `initialize` era: the call's peer, and over HTTP the
/// route its answers come back by.
#[derive(Clone)]
pub(crate) struct SessionAsk {
    peer: Peer<RoleServer>,
    route: Option<Arc<dyn AnswerRoute>>,
}

impl std::fmt::Debug for SessionAsk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionAsk")
            .field("over_http", &self.route.is_some())
            .finish_non_exhaustive()
    }
}

impl SessionAsk {
    /// Through a stdio session's peer, which routes the answer itself.
    pub(crate) fn session(peer: Peer<RoleServer>) -> SessionAsk {
        SessionAsk { peer, route: None }
    }

    /// Through an HTTP request's peer, the answer coming back by `route`.
    pub(crate) fn routed(peer: Peer<RoleServer>, route: Arc<dyn AnswerRoute>) -> SessionAsk {
        SessionAsk {
            peer,
            route: Some(route),
        }
    }

    /// Send `request` to the client and wait at most `timeout` for its answer (the call's
    /// deadline bounds the wait as well): the answer's `result`, as JSON. A request not
    /// answered in time is cancelled (`notifications/cancelled`), so the client stops asking.
    pub(crate) async fn ask(
        &self,
        request: ServerRequest,
        timeout: Duration,
    ) -> Result<Value, AskFailed> {
        let Some(route) = &self.route else {
            let handle = self
                .peer
                .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
                .await
                .map_err(|error| AskFailed::NoAnswer(error.to_string()))?;
            return match handle.await_response().await {
                Ok(answer) => serde_json::to_value(answer)
                    .map_err(|error| AskFailed::NoAnswer(format!("the answer: {error}"))),
                Err(ServiceError::McpError(error)) => Err(AskFailed::Refused(error.message.into())),
                Err(error) => Err(AskFailed::NoAnswer(error.to_string())),
            };
        };
        // rmcp waits for an answer its transport never brings: the route brings it.
        route.prepare().await;
        let handle = self
            .peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|error| AskFailed::NoAnswer(error.to_string()))?;
        let id = handle.id.clone();
        match route.wait(&id, timeout).await {
            Some(Ok(result)) => Ok(result),
            Some(Err(error)) => Err(AskFailed::Refused(
                error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("an error")
                    .chars()
                    .take(MAX_REFUSAL_CHARS)
                    .collect(),
            )),
            None => {
                let _ = handle
                    .cancel(Some("no answer within the call's time".to_owned()))
                    .await;
                Err(AskFailed::NoAnswer(format!(
                    "none within {} ms",
                    timeout.as_millis()
                )))
            }
        }
    }
}

/// The most of a client's error message a tool is told: enough to say why, never a way for a
/// client to hand a tool megabytes.
pub(crate) const MAX_REFUSAL_CHARS: usize = 500;
