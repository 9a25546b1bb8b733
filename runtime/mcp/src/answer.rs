//! Answering a `tools/call`: the one way rmcp's handler ([`ServerHandler::call_tool`]), the
//! HTTP fast path (`http::fast`) and a stdio call answered in place (`transport::in_place`) run
//! a call. [`McpServer::answer_call`] names the decisions in their order:
//!
//! 1. **admit** it: a tool that runs only as a task is refused to a client that takes none;
//!    what the client declared is read once (its request, its `initialize`, or the session id
//!    the front opened); an unknown name is a protocol error;
//! 2. **start** it: its arguments as the pipeline is handed them, how it talks to its client
//!    (decided once for the gate and the tool: [`McpServer::talk`]), its trace span, its entry
//!    with the front, the run itself;
//! 3. **wait** for it: its report, its client's cancellation (the instance stopped), or the
//!    moment it becomes a task (handed to [`crate::tasks`] and answered with the task);
//! 4. **finish** it: progress closed, the front's accounting, and the answer: the result, or
//!    in the stateless era what the client must declare or answer instead
//!    ([`McpServer::instead_of_result`]).
//!
//! [`ServerHandler::call_tool`]: rmcp::ServerHandler::call_tool

use crate::front::{self, FromFront};
use crate::{IncomingCall, McpServer, STDIO_CLIENT, as_task, client, talk, tasks, trace};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, Extensions, RequestId,
    RequestMetaObject,
};
use serde_json::Value;
use std::sync::Arc;
use toolcell::policy::{TaskPolicy, TaskSupport};
use toolcell::registry::{CALL_TOOL, FIND_TOOL};
use toolcell::{Call, CallOptions, CallReport, StopToken};

/// What admitting a call decided, for the rest of its way.
struct Admitted {
    /// What the front end handed with the request (over HTTP: the client, the tenant's
    /// context, its session, what the call holds until it ends); nothing over stdio.
    front: Option<Arc<dyn FromFront>>,
    /// Whether the client takes tasks, as rmcp knows it (rmcp is what answers with the task).
    takes_tasks: bool,
    /// Whether the call may, must or must not become a task, and when.
    task_policy: TaskPolicy,
    /// What the client declared.
    capabilities: Option<ClientCapabilities>,
}

/// A call on its way: what waiting for it and finishing it need.
struct Started {
    /// How it talks to its client.
    talk: talk::Talk,
    /// Who asked: an answer to an approval, and a task, are this client's only.
    owner: String,
    /// Stops its instance.
    stop: StopToken,
    /// The run, to its report.
    run: as_task::Run,
    /// What a task needs to run it again with its client's answers (2026-07-28).
    resume: Option<as_task::Resume>,
    /// The arguments, kept only where a question can be asked (what it is sealed with).
    asked_arguments: Option<String>,
    /// When it started, for the front's accounting.
    started: std::time::Instant,
    /// Its entry with the front (over HTTP, among the running calls that shutdown and a
    /// cancellation stop): held until it ends, as a task too.
    entered: Option<Box<dyn Send + Sync>>,
    /// Its progress reports, when the client asked for them.
    progress: Option<tasks::Progress>,
}

/// How waiting for a call ended.
#[allow(
    clippy::large_enum_variant,
    reason = "lives for one match, on the stack: boxing the report would cost every call an allocation"
)]
enum Waited {
    /// With its report.
    Report(CallReport),
    /// It became a task: the answer is the task.
    Task(CallToolResponse),
}

/// The parts of a request besides its parameters, as the transports hand them: read, never
/// taken, on the call's way.
#[derive(Clone, Copy)]
struct Via<'a> {
    /// The JSON-RPC id: how the call is named in the audit, to a cancellation, and in tasks.
    id: &'a RequestId,
    meta: &'a RequestMetaObject,
    extensions: &'a Extensions,
    /// Fires when the request is cancelled (or its client goes away).
    ct: &'a tokio_util::sync::CancellationToken,
    /// Whether the request is of the stateless era (no `initialize`).
    stateless: bool,
    /// The client at the other end, in a session.
    peer: Option<&'a rmcp::service::Peer<rmcp::RoleServer>>,
}

impl McpServer {
    /// Answer a `tools/call`: the one way both rmcp's handler ([`rmcp::ServerHandler::call_tool`])
    /// and the HTTP fast path (`http::fast`) run a call, count it in the metrics, charge its
    /// quotas, trace it, stop it when its request is cancelled, make it a task or ask its
    /// client's person, and shape its answer; its decisions in the order the module names.
    pub(crate) async fn answer_call(
        &self,
        call: IncomingCall<'_>,
    ) -> Result<CallToolResponse, McpError> {
        let mut request = call.params;
        let via = Via {
            id: call.id,
            meta: call.meta,
            extensions: call.extensions,
            ct: call.ct,
            stateless: call.stateless,
            peer: call.peer,
        };
        let admitted = self.admit(&request, via, call.capabilities)?;
        let arguments = arguments_of(&mut request, via.extensions);
        let mut started = self.start(&request, via, &admitted, arguments).await?;
        let name = request.name.as_ref();
        let report = match self.wait(&mut started, &admitted, via).await? {
            Waited::Report(report) => report,
            Waited::Task(task) => return Ok(task),
        };
        self.finish(name, started, &admitted, report).await
    }

    /// Admit the call, or refuse it before anything runs: a tool that runs only as a task
    /// refused to a client that takes none (an unknown tool has the default policy, and is
    /// refused below); what the client declared read once; an unknown name a protocol error,
    /// naming the nearest tools.
    fn admit(
        &self,
        request: &CallToolRequestParams,
        via: Via<'_>,
        capabilities: Option<ClientCapabilities>,
    ) -> Result<Admitted, McpError> {
        let front = front::from_front(via.extensions).cloned();
        // Whether the call may become a task is read from what rmcp knows the client declared,
        // since rmcp is what answers with the task: over HTTP in the initialize era it knows
        // nothing of the session, and refuses a task (a client told -32021 while its call
        // went on as a task no one could see).
        let takes_tasks = capabilities
            .as_ref()
            .is_some_and(ClientCapabilities::supports_tasks);
        let name = request.name.as_ref();
        let task_policy = self.runtime.task_policy(name);
        if task_policy.support == TaskSupport::Required
            && !takes_tasks
            && let Some(error) = client::missing_capability("tasks", capabilities.as_ref())
        {
            return Err(error);
        }
        // What the client declared: in its request (2026-07-28) or at `initialize` (a stdio
        // session's; over HTTP, where rmcp serves each request alone and knows nothing of it,
        // what the request's session id carries).
        let capabilities = match front.as_ref().filter(|_| !via.stateless) {
            Some(front) => front.session_capabilities().or(capabilities),
            None => capabilities,
        };
        if name != FIND_TOOL && name != CALL_TOOL && self.runtime.registry().get(name).is_none() {
            // A protocol error, as MCP asks for an unknown tool, naming the nearest tools.
            return Err(McpError::invalid_params(
                self.runtime.registry().unknown_tool(name),
                None,
            ));
        }
        Ok(Admitted {
            front,
            takes_tasks,
            task_policy,
            capabilities,
        })
    }

    /// Start the admitted call: how it talks to its client (asks the person, carries the
    /// tool's questions, by era and transport: decided once, for the gate and the tool alike),
    /// its span, its entry with the front, and its run (boxed: the pipeline's future is large,
    /// and rmcp moves this one into a task of its own per request; owned, so that a long call
    /// can go on as a task after its request is answered).
    async fn start(
        &self,
        request: &CallToolRequestParams,
        via: Via<'_>,
        admitted: &Admitted,
        arguments: std::borrow::Cow<'_, str>,
    ) -> Result<Started, McpError> {
        let name = request.name.as_ref();
        let front = admitted.front.as_ref();
        let id = via.id.to_string();
        let stop = StopToken::new();
        let options = CallOptions {
            stop: Some(stop.clone()),
            ..CallOptions::default()
        };
        // Over HTTP with tokens, the tenant the token names (its agent and workspace); else
        // the runtime's default context.
        let base = front
            .and_then(|front| front.context())
            .unwrap_or_else(|| self.runtime.default_context());
        let owner = front.map_or(STDIO_CLIENT, |front| front.client());
        let talk = self
            .talk(talk::Asking {
                name,
                arguments: &arguments,
                owner,
                base: base.clone(),
                capabilities: admitted.capabilities.as_ref(),
                stateless: via.stateless,
                front,
                peer: via.peer,
                meta: via.meta,
                request_state: request.request_state.as_deref(),
                input_responses: request.input_responses.as_ref(),
                session_level: self.session_level.get(),
            })
            .await?;
        let span = trace::call_span(name, owner, via.extensions, via.meta);
        let resume = talk.questions.as_ref().map(|_| as_task::Resume {
            runtime: Arc::clone(&self.runtime),
            id: id.clone(),
            name: name.to_owned(),
            arguments: arguments.to_string(),
            context: talk.context.clone(),
            client: Arc::clone(&talk.link),
            options: options.clone(),
            span: span.clone(),
        });
        let link = Arc::clone(&talk.link);
        let context = talk.context.clone().with_client(link);
        let asked_arguments =
            (talk.round.is_some() || talk.questions.is_some()).then(|| arguments.to_string());
        let started = std::time::Instant::now();
        let entered = front.map(|front| front.enter(&id, stop.clone()));
        let call = Call::new(id, name, arguments.into_owned())
            .in_context(context)
            .with_options(options);
        let runtime = Arc::clone(&self.runtime);
        let run: as_task::Run = Box::pin(tracing::Instrument::instrument(
            async move { runtime.run(&call).await },
            span,
        ));
        let progress = via.peer.and_then(|peer| {
            via.meta.get_progress_token().map(|token| {
                tasks::Progress::new(peer.clone(), token, Arc::clone(&talk.progress_line))
            })
        });
        Ok(Started {
            talk,
            owner: owner.to_owned(),
            stop,
            run,
            resume,
            asked_arguments,
            started,
            entered,
            progress,
        })
    }

    /// Wait for the call: its report; or its client gave up (its instance stopped, and its
    /// report taken: rmcp sends nothing for a cancelled request); or it became a task (at
    /// once when the policy says so, else after the policy's wait), answered with the task.
    async fn wait(
        &self,
        started: &mut Started,
        admitted: &Admitted,
        via: Via<'_>,
    ) -> Result<Waited, McpError> {
        let may_become_task = admitted.takes_tasks
            && admitted.task_policy.support != TaskSupport::Forbidden
            && self.tasks.has_room(&started.owner);
        let task_after = admitted.task_policy.after.unwrap_or(tasks::TASK_AFTER);
        // Lives for one match, on the stack: boxing the report would cost every call an
        // allocation.
        #[allow(clippy::large_enum_variant)]
        enum Next {
            Answered(CallReport),
            Cancelled,
            Task,
        }
        let next = if may_become_task && task_after.is_zero() {
            // A task from the start: its questions wait in it.
            Next::Task
        } else {
            let ticking = tasks::Progress::tick_if_asked(started.progress.as_ref());
            let to_task = async {
                if may_become_task {
                    tokio::time::sleep(task_after).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                report = &mut started.run => Next::Answered(report),
                () = via.ct.cancelled() => Next::Cancelled,
                () = to_task => Next::Task,
                // Progress reports go on until the call ends: this branch never completes.
                () = ticking => Next::Cancelled,
            }
        };
        Ok(match next {
            Next::Answered(report) => Waited::Report(report),
            Next::Cancelled => {
                started.stop.stop();
                Waited::Report((&mut started.run).await)
            }
            Next::Task => self.become_task(started, admitted, via).await?,
        })
    }

    /// The call becomes a task, if its client has room for one (`make` is called then, at
    /// once): the run, its stop and its entry with the front move into it, and the answer is
    /// the task. Else it is answered here, as for a client without tasks.
    async fn become_task(
        &self,
        started: &mut Started,
        admitted: &Admitted,
        via: Via<'_>,
    ) -> Result<Waited, McpError> {
        let server = self.clone();
        let placeholder: as_task::Run = Box::pin(std::future::pending());
        let run = std::mem::replace(&mut started.run, placeholder);
        let mut parked = Some((run, started.stop.clone(), started.entered.take()));
        let (round, resume) = (started.talk.questions.clone(), started.resume.take());
        let begun = started.started;
        let task = self
            .tasks
            .try_spawn(&started.owner, |cancelled, handle| {
                let Some((run, stop, entered)) = parked.take() else {
                    return Box::pin(async { Err(rmcp::task_manager::TaskExit::Cancelled) });
                };
                let front = admitted.front.clone();
                let runtime = Arc::clone(&server.runtime);
                let ended = move |report: CallReport| -> as_task::Run {
                    Box::pin(async move {
                        let _entered = entered;
                        if let Some(front) = &front {
                            front.ended(&runtime, &report, begun).await;
                        }
                        report
                    })
                };
                as_task::operation(
                    run,
                    stop,
                    cancelled,
                    handle,
                    round,
                    resume,
                    ended,
                    move |report| server.result(report),
                )
            })
            .await;
        if let Some(task) = task {
            return Ok(Waited::Task(CallToolResponse::Task(
                rmcp::model::CreateTaskResult::new(task),
            )));
        }
        let Some((mut run, stop, entered)) = parked else {
            return Err(McpError::internal_error("the call was lost", None));
        };
        started.entered = entered;
        let ticking = tasks::Progress::tick_if_asked(started.progress.as_ref());
        let report = tokio::select! {
            report = &mut run => report,
            () = via.ct.cancelled() => {
                stop.stop();
                run.await
            }
            () = ticking => run.await,
        };
        Ok(Waited::Report(report))
    }

    /// Finish the call: its progress closed, the front's accounting (its quotas charged, its
    /// metrics), and its answer: in the stateless era, what the client must declare or the
    /// questions it must answer instead of the result; else the result.
    async fn finish(
        &self,
        name: &str,
        started: Started,
        admitted: &Admitted,
        report: CallReport,
    ) -> Result<CallToolResponse, McpError> {
        if let Some(progress) = &started.progress {
            progress.done().await;
        }
        if let Some(front) = &admitted.front {
            front.ended(&self.runtime, &report, started.started).await;
        }
        if let Some(instead) = self
            .instead_of_result(
                &started.talk,
                &started.owner,
                name,
                started.asked_arguments.as_deref().unwrap_or("{}"),
                admitted.capabilities.as_ref(),
                &report,
            )
            .await
        {
            return instead.map(Into::into);
        }
        Ok(self.result(report).into())
    }
}

/// The call's arguments as the pipeline is handed them: the text they came in (the fast path
/// kept it, parsed once, by the pipeline), or for a call rmcp parsed, its map written out.
fn arguments_of<'a>(
    request: &mut CallToolRequestParams,
    extensions: &'a Extensions,
) -> std::borrow::Cow<'a, str> {
    match extensions.get::<crate::RawArguments>() {
        Some(raw) => raw.0.as_ref().into(),
        None => Value::Object(request.arguments.take().unwrap_or_default())
            .to_string()
            .into(),
    }
}

/// How an answer is shaped for the protocol version its request was made in, as rmcp's
/// `ServerHandler` dispatch shapes every result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// 2026-07-28 and later: caching hints filled in where a result may carry them.
    Current,
    /// Earlier: no `resultType`, no non-object tool output, and no `input_required` result.
    Legacy,
}

impl Shape {
    /// The shape for a request of `version` (none known: the legacy shape, as rmcp decides).
    pub(crate) fn for_version(version: Option<&rmcp::model::ProtocolVersion>) -> Shape {
        // ISO dates compare as strings in the order of time.
        if version.is_some_and(|version| {
            version.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str()
        }) {
            Shape::Current
        } else {
            Shape::Legacy
        }
    }
}

/// The JSON-RPC message that answers call `id` with `response`, as rmcp's `ServerHandler`
/// dispatch writes it, for the paths that answer a call without it (the HTTP fast path, a
/// call answered in place over stdio): what that dispatch adds to the handler's answer
/// included: no task for a client that did not declare the tasks extension (SEP-2663), and
/// the result shaped for the request's protocol version ([`Shape`]).
pub(crate) fn call_answer(
    id: RequestId,
    response: Result<CallToolResponse, McpError>,
    declared_tasks: bool,
    shape: Shape,
) -> rmcp::model::ServerJsonRpcMessage {
    let response = match response {
        Ok(CallToolResponse::Task(_)) if !declared_tasks => {
            Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ))
        }
        other => other,
    };
    let result = response
        .map(rmcp::model::ServerResult::from)
        .and_then(|mut result| {
            match shape {
                Shape::Current => result.fill_missing_cache_hints(),
                Shape::Legacy => {
                    if matches!(result, rmcp::model::ServerResult::InputRequiredResult(_)) {
                        return Err(McpError::invalid_request(
                            "InputRequiredResult requires negotiated protocol version 2026-07-28 \
                         or newer",
                            None,
                        ));
                    }
                    result.strip_result_type_for_legacy_peer();
                    result.strip_non_object_output_for_legacy_peer();
                }
            }
            Ok(result)
        });
    match result {
        Ok(result) => rmcp::model::JsonRpcMessage::response(result, id),
        Err(error) => rmcp::model::JsonRpcMessage::error(error, Some(id)),
    }
}
