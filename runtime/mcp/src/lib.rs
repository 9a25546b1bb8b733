//! `toolcell serve`: the same pipeline, served to any MCP client over stdio, or over
//! Streamable HTTP to many clients and tenants ([`http`]).
//!
//! Built on `rmcp`, which speaks both eras of the protocol: the `initialize` handshake
//! (2025-11-25 and earlier) and the stateless 2026-07-28 protocol (`server/discover`,
//! per-request `_meta`). What is ours:
//!
//! - `tools/list` is the registry's core schemas (core tools, then `find_tool`, then
//!   `call_tool`), in that fixed order, annotated from each tool's flags;
//! - `tools/call` enters [`Runtime::run`] in the runtime's default context (over HTTP with
//!   tokens, the tenant's: [`http::auth`]), like every other front end; wasm and native tools alike. A tool's
//!   failure, a denial, a deadline or arguments that break the schema is a result with
//!   `isError: true` and a readable text; a name that is neither a tool nor one of the loop's
//!   own is a JSON-RPC error (-32602, invalid params);
//! - `notifications/cancelled` stops the running instance through its [`StopToken`](toolcell::StopToken), and rmcp
//!   sends no response for the cancelled request;
//! - nothing but protocol messages is written to stdout: guest output is captured, and logs go
//!   to stderr;
//! - the transport is ours ([`LineTransport`]): a `tools/call` parsed once with its arguments
//!   left as text for the pipeline ([`RawArguments`]), answers batched into few writes.

mod answer;
pub mod approval;
mod as_task;
mod asking;
mod client;
mod content;
mod front;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "http")]
pub mod http;
mod listeners;
mod listing;
mod offers;
mod rounds;
pub mod seal;
#[cfg(feature = "state")]
pub mod state;
/// Without the `state` feature there is no shared store: what would need one never does.
#[cfg(not(feature = "state"))]
pub mod state {
    /// The shared store could not be reached (never, without one).
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[error("the shared store at {store} is unreachable ({why})")]
    pub struct Unavailable {
        /// The store.
        pub store: String,
        /// What failed.
        pub why: String,
    }
}
mod stdio;
mod talk;
pub mod tasks;
pub mod trace;
mod transport;

pub(crate) use answer::call_answer;
#[cfg(feature = "http")]
pub use http::ConfigError;
pub use listeners::{MAX_LISTENERS, MAX_LISTENERS_PER_CLIENT};
pub use listing::RELOAD_POLL_INTERVAL;
pub use stdio::{serve, serve_on};
#[cfg(feature = "fuzzing")]
pub(crate) use transport::parse::{Parsed, fast_call, slow_parse};
pub use transport::{
    CLOSE_FLUSH_TIMEOUT, FAST_PATH_MAX_ARGUMENT_BYTES, LineTransport, MAX_IN_FLIGHT_REQUESTS,
    MAX_LINE_BYTES, OUTPUT_HIGH_WATER, READ_CHUNK_BYTES, RawArguments, STALLED_OUTPUT_TIMEOUT,
};

use listeners::Listening;
use listing::{ToolList, mcp_tool, tool_list};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::model::{ClientCapabilities, Extensions, RequestId, RequestMetaObject};
use rmcp::service::{Peer, RequestContext};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use std::sync::Arc;
use std::time::Duration;
use toolcell::{CallContext, CallReport, Runtime};

/// How long calls in flight may run on after SIGTERM, by default, before they are stopped
/// (`toolcell serve --http --grace-secs`).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The longest a tool's question to its client (2025-11-25: a request on the call's stream)
/// waits for an answer, whatever else bounds it: a person filling in a form takes minutes,
/// and the call's deadline (which also bounds the wait) normally ends it first.
pub const QUESTION_WAIT: Duration = Duration::from_secs(600);

/// How long the server waits, once stdin has closed, for calls still running to stop.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// The MCP face of a [`Runtime`].
#[derive(Clone)]
pub struct McpServer {
    runtime: Arc<Runtime>,
    /// The tool list as served now: made again when the runtime's tools change.
    tools: Arc<std::sync::RwLock<Arc<ToolList>>>,
    /// The questions asked of stateless-era clients: sealed into tokens, spent when answered.
    approvals: Arc<approval::Approvals>,
    /// The calls that became tasks.
    tasks: Arc<tasks::Tasks>,
    /// How many times the tool list was made again: each change wakes the clients listening
    /// (`subscriptions/listen`, 2026-07-28) to be told the tools changed.
    tools_changed: Arc<tokio::sync::watch::Sender<u64>>,
    /// The clients listening now (`subscriptions/listen`), and on how many streams each.
    listeners: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
    /// The level a stdio session's client set with `logging/setLevel` (over HTTP none is
    /// kept: one client's level must not be another's).
    session_level: client::SessionLevel,
}

impl McpServer {
    /// A server for `runtime`; the tool list is built here, and again by
    /// [`McpServer::refresh_tools`].
    pub fn new(runtime: Arc<Runtime>) -> Self {
        let tools = tool_list(&runtime);
        McpServer {
            runtime,
            tools: Arc::new(std::sync::RwLock::new(tools)),
            approvals: Arc::new(approval::Approvals::local()),
            tasks: Arc::default(),
            tools_changed: Arc::new(tokio::sync::watch::Sender::new(0)),
            listeners: Arc::default(),
            session_level: client::SessionLevel::default(),
        }
    }

    /// This server, its approvals and tasks kept in the shared `store`, so that every replica
    /// using it opens every replica's approval tokens and answers for every replica's tasks.
    #[cfg(feature = "state")]
    pub fn with_store(mut self, store: Arc<state::Store>) -> Self {
        self.approvals = Arc::new(approval::Approvals::shared(Arc::clone(&store)));
        self.tasks = Arc::new(tasks::Tasks::shared(store));
        self
    }

    /// This server's tasks (for what watches them).
    #[cfg(feature = "state")]
    pub(crate) fn tasks(&self) -> &Arc<tasks::Tasks> {
        &self.tasks
    }

    /// A call's answer as MCP sends it: the text the model reads (within the cap), or the
    /// result's parts as content blocks (images, audio, resources: checked and within the cap
    /// already); and for a tool that declared an output schema the result it was checked as,
    /// beside them.
    fn result(&self, report: CallReport) -> CallToolResult {
        let response = report.response;
        let content = if report.parts.is_empty() || response.is_error() {
            vec![ContentBlock::text(self.runtime.model_text(&response))]
        } else {
            report.parts.iter().map(content::block).collect()
        };
        if response.is_error() {
            CallToolResult::error(content)
        } else {
            let mut result = CallToolResult::success(content);
            result.structured_content = report.structured;
            result
        }
    }

    /// The context a call from this client runs in: `base`, asking the client itself when the
    /// policy gates something and the client can be asked ([`approval`]). For a stateless-era
    /// call, also the approver that notes the question to send back, with the answers the
    /// call carries (its `requestState`, opened and spent by the caller: `carried`); in a
    /// session, the client is asked through `asker` (a stdio session's, or an HTTP client's
    /// that kept its session id: see [`McpServer::answer_call`]).
    async fn approver_for(
        &self,
        base: &CallContext,
        capabilities: Option<&rmcp::model::ClientCapabilities>,
        stateless: bool,
        asker: Option<&asking::SessionAsk>,
        carried: Option<&seal::Sealed>,
        responses: Option<&rmcp::model::InputResponses>,
    ) -> Result<(CallContext, Option<Arc<approval::RoundApprover>>), McpError> {
        let base = base.clone();
        if !approval::can_elicit(capabilities) {
            return Ok((base, None));
        }
        if stateless {
            let answered = carried
                .map(|sealed| approval::Approvals::answers(sealed, responses))
                .unwrap_or_default();
            let round = approval::RoundApprover::new(answered);
            let with =
                base.with_approver(Arc::clone(&round) as Arc<dyn toolcell::approval::Approver>);
            return Ok((with, Some(round)));
        }
        let Some(asker) = asker else {
            return Ok((base, None));
        };
        let approver = approval::SessionApprover::new(asker.clone());
        Ok((base.with_approver(Arc::new(approver)), None))
    }
}

/// A `tools/call` as [`McpServer::answer_call`] reads it, whichever way it came in: from
/// rmcp's handler (its request and context), or from the HTTP fast path, which has no peer.
pub(crate) struct IncomingCall<'a> {
    pub(crate) params: CallToolRequestParams,
    /// The JSON-RPC id: how the call is named in the audit, to a cancellation, and in tasks.
    pub(crate) id: &'a RequestId,
    pub(crate) meta: &'a RequestMetaObject,
    /// [`RawArguments`], and over HTTP the request's head (its client, tenant, quota
    /// admission and trace headers in its extensions).
    pub(crate) extensions: &'a Extensions,
    /// Fires when the request is cancelled (or its client goes away): the call is stopped.
    pub(crate) ct: &'a tokio_util::sync::CancellationToken,
    pub(crate) capabilities: Option<ClientCapabilities>,
    /// Whether the request is of the stateless era (no `initialize`).
    pub(crate) stateless: bool,
    /// The client at the other end, to send progress to and ask through in a session; `None`
    /// on the HTTP fast path, which takes no request that asks for progress and none of the
    /// `initialize` era.
    pub(crate) peer: Option<&'a Peer<RoleServer>>,
}

/// The client of a stdio session (there is one).
const STDIO_CLIENT: &str = "stdio";

/// Who sent a request: over HTTP the client key the front gave it (the token's tenant, or the
/// peer address without tokens); else the one client of the session.
fn owner(context: &RequestContext<RoleServer>) -> &str {
    owner_of(&context.extensions)
}

/// [`owner`], from a request's extensions.
fn owner_of(extensions: &Extensions) -> &str {
    front::from_front(extensions).map_or(STDIO_CLIENT, |front| front.client())
}

impl ServerHandler for McpServer {
    #[allow(deprecated)] // logging: see `client.rs`
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .enable_logging()
            .build();
        // Prompts, resources and completion only where a component offers them.
        let offered = self.runtime.offered_kinds();
        if offered.prompts {
            capabilities.prompts = Some(rmcp::model::PromptsCapability::default());
        }
        if offered.resources {
            let mut resources = rmcp::model::ResourcesCapability::default();
            resources.subscribe = Some(true);
            capabilities.resources = Some(resources);
        }
        if offered.completion {
            capabilities.completions = Some(JsonObject::new());
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("toolcell", env!("CARGO_PKG_VERSION")))
    }

    /// A 2026-07-28 client may listen for the tool list's changes (the only list toolcell
    /// says changes); every other kind of notification it asks for is left out of the filter.
    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        let mut accepted = rmcp::model::SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    /// Tell the listening client each time the tool list is made again (the tools directory
    /// changed: [`McpServer::watch_tools`]), until it stops listening.
    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let client = owner(context.request_context()).to_owned();
        let Some(_place) = Listening::enter(&self.listeners, client) else {
            return Err(McpError::invalid_request(
                format!(
                    "too many streams listen now (at most {MAX_LISTENERS_PER_CLIENT} a client, \
                     {MAX_LISTENERS} in all); close one first"
                ),
                None,
            ));
        };
        let mut changes = self.tools_changed.subscribe();
        changes.mark_unchanged();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    if let Err(error) = context.sink().notify_tool_list_changed().await {
                        tracing::debug!(%error, "a listening client was not told the tools changed");
                        return Ok(());
                    }
                }
            }
        }
    }

    /// A 2025-11-25 client's least level of log messages: kept for a stdio session (its one
    /// client), and over HTTP for the session id the request carries (a request without one
    /// is answered and nothing is kept: the next request may be another client's).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let level = client::level_of(request.level);
        match front::from_front(&context.extensions) {
            None => self.session_level.set(level),
            Some(front) => front
                .set_session_level(level)
                .await
                .map_err(|why| McpError::invalid_request(why, None))?,
        }
        Ok(())
    }

    /// The tool `name` as MCP describes it, listed or not: what rmcp checks a 2026-07-28
    /// request's `Mcp-Param-*` headers against (the parameters marked `x-mcp-header`), and
    /// what the HTTP fast path leaves to rmcp (`McpServer::mirrors_headers`).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        let listed = self
            .tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .listed
            .iter()
            .find(|tool| tool.name == name)
            .cloned();
        listed.or_else(|| {
            self.runtime
                .registry()
                .get(name)
                .map(|entry| mcp_tool(&self.runtime, entry.schema.clone()))
        })
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult {
            tools: self
                .tools
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .listed
                .clone(),
            ..ListToolsResult::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let stateless = context
            .protocol_version()
            .is_some_and(|version| !version.has_initialize());
        self.answer_call(IncomingCall {
            params: request,
            id: &context.id,
            meta: &context.meta,
            extensions: &context.extensions,
            ct: &context.ct,
            capabilities: context.client_capabilities(),
            stateless,
            peer: Some(&context.peer),
        })
        .await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, McpError> {
        Ok(self.prompt_list())
    }

    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, McpError> {
        self.prompt(request, &context).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourcesResult, McpError> {
        Ok(self.resource_list())
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, McpError> {
        Ok(self.template_list())
    }

    async fn read_resource(
        &self,
        request: rmcp::model::ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ReadResourceResponse, McpError> {
        Ok(self.read(request, &context).await?.into())
    }

    async fn complete(
        &self,
        request: rmcp::model::CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        self.completion(request, &context).await
    }

    /// A subscription to a resource that is served is accepted; none is ever notified, since
    /// a component's resource is read afresh each time and changes only with the component
    /// (`offers.rs`).
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if self.serves_uri(&request.uri) {
            Ok(())
        } else {
            Err(McpError::invalid_params(
                "Resource not found",
                Some(serde_json::json!({ "uri": request.uri })),
            ))
        }
    }

    async fn unsubscribe(
        &self,
        _request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        Ok(())
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        self.tasks.get(owner(&context), &request.task_id).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel(owner(&context), &request.task_id).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks
            .update(owner(&context), &request.task_id, request.input_responses)
            .await
    }
}
