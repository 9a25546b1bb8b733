//! A call answered where it was read: over stdio, a `tools/call` that arrives while nothing
//! else is in flight runs inside the transport's own `receive`, on the task that read it, and
//! its answer goes to the output from there.
//!
//! Why: rmcp answers every request in a task of its own (`spawn_service_task`), sends the
//! answer back to its service loop over a channel, and writes it from yet another task. For a
//! call as small as an echo those hand-offs cost more CPU than the call (each wakes a parked
//! worker thread: BENCHMARKS, "Serving"), and an agent makes its calls one at a time. Here the
//! same handler runs ([`McpServer::answer_call`]: the pipeline, the gate and approvals, the
//! tool's talk with its client, tasks, progress), with the answer rmcp would write.
//!
//! What it takes, and what goes to rmcp as before:
//! - a `tools/call` of a session (the `initialize` era: its `_meta` names no protocol version),
//!   read while no other request is in flight; anything else (a second
//!   call while this one runs, so that parallel calls run in parallel; 2026-07-28 requests; any
//!   other method) is rmcp's;
//! - the call runs while `receive` is polled: rmcp's service loop polls it beside its other
//!   work and polls it again after each event, so the call's notifications, its questions to
//!   the client and their answers (which arrive through `receive`, to rmcp) flow as they do
//!   for a call of rmcp's; the call is kept in the transport, never dropped with a `receive`
//!   that rmcp drops;
//! - a `notifications/cancelled` naming it stops it, and, as rmcp does, no answer is sent.

use crate::{IncomingCall, McpServer};
use rmcp::RoleServer;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetExtensions as _, GetMeta as _, RequestId,
    ServerJsonRpcMessage,
};
use rmcp::service::Peer;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use tokio_util::sync::CancellationToken;

/// The environment variable that turns answering in place off when set to `0`: every call then
/// takes rmcp's way, for a comparison or to rule this path out when diagnosing.
pub const IN_PLACE_ENV: &str = "TOOLCELL_STDIO_IN_PLACE";

/// How long a call in place may go on once the client's input has ended before it is stopped
/// unanswered: what rmcp's service loop gives its own running requests when its input ends
/// (5 s), so that a call ends alike whichever way it took.
pub(crate) const END_OF_INPUT_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Whether calls are answered in place in this process: unless [`IN_PLACE_ENV`] is `0`.
pub(crate) fn enabled() -> bool {
    std::env::var_os(IN_PLACE_ENV).is_none_or(|value| value != "0")
}

/// What a transport needs to answer calls in place: the server, and (once the session is
/// initialized) its peer.
pub(crate) struct InPlace {
    server: McpServer,
    peer: OnceLock<Peer<RoleServer>>,
}

impl InPlace {
    pub(crate) fn new(server: McpServer) -> Arc<InPlace> {
        Arc::new(InPlace {
            server,
            peer: OnceLock::new(),
        })
    }

    /// The session is up: calls may be answered in place from now on.
    pub(crate) fn initialized(&self, peer: Peer<RoleServer>) {
        let _ = self.peer.set(peer);
    }

    /// `message` as a call to answer in place, if it is one this lane takes; else the message
    /// back, for rmcp.
    #[allow(
        clippy::result_large_err,
        reason = "the message goes back by value to rmcp: boxing it would allocate for every \
                  message that is not a call, which is most of them"
    )]
    pub(crate) fn take(
        &self,
        message: ClientJsonRpcMessage,
    ) -> Result<Running, ClientJsonRpcMessage> {
        // Only a session that began with `initialize`: a client that opened without it
        // (2026-07-28) must carry its metadata on every request, which rmcp checks.
        let Some(peer) = self.peer.get().filter(|peer| peer.peer_info().is_some()) else {
            return Err(message);
        };
        let ClientJsonRpcMessage::Request(mut request) = message else {
            return Err(message);
        };
        let takes = matches!(request.request, ClientRequest::CallToolRequest(_));
        let session_era = request.request.get_meta().protocol_version().is_none();
        if !takes || !session_era {
            return Err(ClientJsonRpcMessage::Request(request));
        }
        let id = request.id.clone();
        let ct = CancellationToken::new();
        let mut meta = rmcp::model::RequestMetaObject::new();
        std::mem::swap(&mut meta, request.request.get_meta_mut());
        let mut extensions = rmcp::model::Extensions::new();
        std::mem::swap(&mut extensions, request.request.extensions_mut());
        let ClientRequest::CallToolRequest(call) = request.request else {
            return Err(ClientJsonRpcMessage::Request(request));
        };
        let server = self.server.clone();
        let peer = peer.clone();
        let (answer_id, call_ct) = (id.clone(), ct.clone());
        let future = Box::pin(async move {
            // What the client declared, read as rmcp's `RequestContext` reads it: the
            // request's own `_meta` first, then what it said at `initialize`.
            let capabilities = meta
                .client_capabilities()
                .or_else(|| peer.peer_info().map(|info| info.capabilities.clone()));
            let declared_tasks = capabilities
                .as_ref()
                .is_some_and(rmcp::model::ClientCapabilities::supports_tasks);
            // The version the answer is shaped for, as rmcp's dispatch decides it.
            let version = meta
                .protocol_version()
                .or_else(|| peer.peer_info().map(|info| info.protocol_version.clone()));
            let response = server
                .answer_call(IncomingCall {
                    params: call.params,
                    id: &answer_id,
                    meta: &meta,
                    extensions: &extensions,
                    ct: &call_ct,
                    capabilities,
                    stateless: false,
                    peer: Some(&peer),
                })
                .await;
            // Cancelled by the client: no answer, as rmcp sends none.
            if call_ct.is_cancelled() {
                return None;
            }
            Some(crate::call_answer(
                answer_id,
                response,
                declared_tasks,
                crate::answer::Shape::for_version(version.as_ref()),
            ))
        });
        Ok(Running { id, ct, future })
    }
}

/// A call running in place.
pub(crate) struct Running {
    pub(crate) id: RequestId,
    /// Fires when the client cancels it.
    pub(crate) ct: CancellationToken,
    /// The call, to its answer (none when the client cancelled it).
    pub(crate) future: Pin<Box<dyn Future<Output = Option<ServerJsonRpcMessage>> + Send>>,
}
