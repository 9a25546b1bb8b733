//! A call that goes on as a task (the MCP tasks extension, SEP-2663): what runs once its
//! request has been answered with the task, to the task's end.
//!
//! - **Its end.** What the tool answered, an error of its own included, is the task's result
//!   (`completed`, `isError` where the tool failed). A call whose instance the host had to end
//!   (a trap, out of memory or fuel, past its deadline, a host failure) has no result the tool
//!   gave: the task is `failed`, with the host's error, as the extension asks of a failure
//!   that is not the tool's answer. A cancelled task's instance is stopped, and it ends
//!   `cancelled`.
//! - **Its questions** (MCP 2026-07-28). A tool that asks its client what the task has no
//!   answer for ends that run there, as a call does; the task does not end, it waits
//!   `input_required` with the questions (`inputRequests` on `tasks/get`) until `tasks/update`
//!   has answered them all, and then runs the tool again, in a fresh instance, from the start,
//!   with every answer so far ([`crate::rounds::QuestionRound`]: a tool that asks under a key
//!   something else than was answered is told `mismatch`). At most [`crate::tasks::MAX_TASK_ROUNDS`] such
//!   runs, and each wait at most [`crate::rounds::ROUND_WAIT`]. With a shared store the
//!   questions and the answers are kept there (sealed), so `tasks/get` and `tasks/update`
//!   through any replica see and answer them; the replica running the task looks for the
//!   answers every `state::CANCEL_POLL_EVERY`.

use crate::client::RequestClient;
use crate::rounds::QuestionRound;
use crate::tasks::{MAX_TASK_ROUNDS, Running, TaskHandle};
use rmcp::ErrorData as McpError;
use rmcp::model::{InputRequest, InputRequests};
use rmcp::task_manager::TaskExit;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use toolcell::{CallOptions, CallReport, FailureKind, Runtime, StopToken, ToolResponse};

/// One run of the call, to its report.
pub(crate) type Run = Pin<Box<dyn Future<Output = CallReport> + Send>>;

/// What a task needs to run its call again with new answers: the call as it was first made.
pub(crate) struct Resume {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) arguments: String,
    /// The call's context, before its client was added.
    pub(crate) context: toolcell::CallContext,
    /// The request's client, as the first run had it.
    pub(crate) client: Arc<RequestClient>,
    pub(crate) options: CallOptions,
    pub(crate) span: tracing::Span,
}

impl Resume {
    /// The call, run afresh with `round`'s answers.
    fn run(&self, round: Arc<QuestionRound>) -> Run {
        let context = self
            .context
            .clone()
            .with_client(Arc::new(self.client.with_round(round)));
        let call = toolcell::Call::new(self.id.clone(), &self.name, self.arguments.clone())
            .in_context(context)
            .with_options(self.options.clone());
        let runtime = Arc::clone(&self.runtime);
        Box::pin(tracing::Instrument::instrument(
            async move { runtime.run(&call).await },
            self.span.clone(),
        ))
    }
}

/// What the task runs: `call` (already started, its questions kept in `round`), stopped by
/// `stop` when `cancelled` completes, run again through `resume` while its tool asks what
/// `tasks/update` then answers; `ended` is told its last report; `result` makes the task's
/// result of it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn operation(
    mut call: Run,
    stop: StopToken,
    mut cancelled: Pin<Box<dyn Future<Output = ()> + Send>>,
    handle: TaskHandle,
    round: Option<Arc<QuestionRound>>,
    resume: Option<Resume>,
    ended: impl FnOnce(CallReport) -> Pin<Box<dyn Future<Output = CallReport> + Send>> + Send + 'static,
    result: impl FnOnce(CallReport) -> rmcp::model::CallToolResult + Send + 'static,
) -> Running {
    Box::pin(async move {
        let mut report = run_until_cancelled(&mut call, &stop, &mut cancelled).await;
        let mut round = round;
        let mut rounds = 0;
        while let (Some(resume), Some(current)) = (&resume, &round)
            && asked(&report)
            && let Some((said, unanswered)) = current.take_unanswered()
        {
            rounds += 1;
            if rounds > MAX_TASK_ROUNDS {
                return Err(failed(format!(
                    "the tool asked its client in more than {MAX_TASK_ROUNDS} rounds"
                )));
            }
            let pending: Vec<(String, String)> = unanswered
                .iter()
                .map(|question| {
                    let digest =
                        crate::seal::said_digest(&question.key, question.method, &question.params);
                    (question.key.clone(), digest)
                })
                .collect();
            let questions = input_requests(unanswered)?;
            let answers = tokio::select! {
                answers = handle.answers(questions) => answers,
                () = &mut cancelled => return Err(TaskExit::Cancelled),
                () = tokio::time::sleep(crate::rounds::ROUND_WAIT) => {
                    return Err(failed(format!(
                        "the client did not answer the tool's questions within {} s",
                        crate::rounds::ROUND_WAIT.as_secs()
                    )));
                }
            };
            let Some(answers) = answers else {
                return Err(failed(
                    "the tool asked its client, and the task could not wait for the answers \
                     (its record is gone, or the shared store refused its questions)"
                        .to_owned(),
                ));
            };
            let next = QuestionRound::resumed(said, pending, answers);
            round = Some(Arc::clone(&next));
            call = resume.run(next);
            report = run_until_cancelled(&mut call, &stop, &mut cancelled).await;
        }
        let report = ended(report).await;
        match &report.response {
            ToolResponse::Cancelled => Err(TaskExit::Cancelled),
            ToolResponse::Failed { kind, message } if ended_by_host(*kind) => {
                Err(failed(message.clone()))
            }
            ToolResponse::TimedOut { limit_ms } => Err(failed(format!(
                "the call ran past its deadline of {limit_ms} ms and was stopped"
            ))),
            _ => Ok(result(report)),
        }
    })
}

/// The call's report, its instance stopped if the task is cancelled first.
async fn run_until_cancelled(
    call: &mut Run,
    stop: &StopToken,
    cancelled: &mut Pin<Box<dyn Future<Output = ()> + Send>>,
) -> CallReport {
    tokio::select! {
        report = &mut *call => report,
        () = cancelled => {
            stop.stop();
            call.await
        }
    }
}

/// Whether the call ended at a question it had no answer for.
fn asked(report: &CallReport) -> bool {
    matches!(
        report.response,
        ToolResponse::Failed {
            kind: FailureKind::InputRequired,
            ..
        }
    )
}

/// Whether a failure is the host ending the instance (no answer of the tool's): the task is
/// `failed`, not `completed` with an error.
fn ended_by_host(kind: FailureKind) -> bool {
    matches!(
        kind,
        FailureKind::Trap
            | FailureKind::OutOfMemory
            | FailureKind::OutOfFuel
            | FailureKind::Internal
    )
}

fn failed(message: String) -> TaskExit {
    TaskExit::Error(McpError::internal_error(message, None))
}

/// The questions as the task's `inputRequests`.
fn input_requests(questions: Vec<toolcell::client::Question>) -> Result<InputRequests, TaskExit> {
    let mut requests = InputRequests::new();
    for question in questions {
        let request = serde_json::json!({ "method": question.method, "params": question.params });
        let request = serde_json::from_value::<InputRequest>(request).map_err(|error| {
            failed(format!(
                "the tool's question {:?} cannot be carried: {error}",
                question.key
            ))
        })?;
        requests.insert(question.key, request);
    }
    Ok(requests)
}
