//! What a front end hands the shared call handler ([`McpServer::answer_call`]) with a request:
//! one value, a [`FromFront`], in the request's extensions. The handler names nothing of the
//! front that made it: over stdio there is none (one client, the runtime's default context,
//! nothing to count); over HTTP ([`crate::http`]) the front gives the client it counted the
//! request under, the tenant's context, and what a call holds from the front until it ends
//! (its place in the client's share, its quota admission, its entry among the running calls
//! that shutdown and `notifications/cancelled` stop), told when the call ends; and for a
//! client of the `initialize` era that kept its session id, what it declared then, its log
//! level and the route its answers to the call's questions come back by.
//!
//! [`McpServer::answer_call`]: crate::McpServer

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use toolcell::{CallContext, CallReport, Runtime, StopToken};

/// What a front end hands the call handler with one request, in its extensions as an
/// `Arc<dyn FromFront>`: who sent it, the context its call runs in, and the front's side of
/// that call (entered when it starts, told when it ends).
pub(crate) trait FromFront: Send + Sync {
    /// Who sent the request (a tenant, or a peer address): an approval's answer, a task and a
    /// cancellation are this client's only.
    fn client(&self) -> &str;

    /// The context the request's call runs in (a tenant's agent and workspace); `None`: the
    /// runtime's default context.
    fn context(&self) -> Option<&CallContext>;

    /// The call the client named `request` starts, and `stop` stops it: what is returned is
    /// held until the call ends (as a task too), and forgets the call when dropped.
    fn enter(&self, request: &str, stop: StopToken) -> Box<dyn Send + Sync>;

    /// What the client declared at `initialize`, where the front remembers it (over HTTP, the
    /// session id the request carries); `None`: nothing known.
    fn session_capabilities(&self) -> Option<rmcp::model::ClientCapabilities> {
        None
    }

    /// The least level of log messages the request's session set (`logging/setLevel`);
    /// `None`: none set, or no session.
    fn session_level(&self) -> Option<toolcell::client::LogLevel> {
        None
    }

    /// Keep `level` as the least level of log messages for the request's session, if it has
    /// one; why not, when it cannot be kept (the client has too many sessions' levels kept).
    fn set_session_level(
        &self,
        level: toolcell::client::LogLevel,
    ) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send + '_>> {
        let _ = level;
        Box::pin(async { Ok(()) })
    }

    /// The way back for the answers to questions sent on this request's stream, where the
    /// front routes them (an HTTP request of a client with a session id).
    fn answers(&self) -> Option<Arc<dyn crate::asking::AnswerRoute>> {
        None
    }

    /// The call ended with `report`, having started at `started`: charge what admitted it with
    /// what it used, and count it, before its answer leaves.
    fn ended<'a>(
        &'a self,
        runtime: &'a Runtime,
        report: &'a CallReport,
        started: Instant,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
}

/// The [`FromFront`] a request's extensions carry, in the HTTP request's head that rmcp (or the
/// fast path) passes on; `None` over stdio.
pub(crate) fn from_front(extensions: &rmcp::model::Extensions) -> Option<&Arc<dyn FromFront>> {
    extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Arc<dyn FromFront>>())
}
