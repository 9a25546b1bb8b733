//! Long calls: progress notifications, and tasks (the MCP tasks extension, SEP-2663).
//!
//! - **Progress.** A call whose request carries a `progressToken` and that is still running
//!   after [`PROGRESS_AFTER`] gets `notifications/progress`: "started", then "running for N s"
//!   every [`PROGRESS_EVERY`], then "done" just before its answer. A call that ends sooner
//!   sends none (most calls end in well under a millisecond). What a tool itself could report
//!   is not forwarded: the WIT contract gives a tool no way to report progress (its imports are
//!   WASI only, and a host import would be authority the gate would have to decide), so the
//!   host reports what it knows. Over HTTP, a request with a progress token is answered as an
//!   event stream (rmcp's), which carries the notifications before the answer.
//! - **Tasks.** A client that declares the tasks extension gets a task for a call still
//!   running after [`TASK_AFTER`]: the `tools/call` is answered at once with the task, and the
//!   call goes on under its own deadline. `tasks/get` reports it (`working`, then `completed`
//!   with the result, `cancelled` or `failed`), `tasks/cancel` stops its instance as a
//!   cancelled request does, and a finished task is kept for [`TASK_TTL`]. A task is its
//!   client's only (over HTTP, the token's tenant): another client's `tasks/get` or
//!   `tasks/cancel` is told it does not exist. At most [`MAX_TASKS_PER_CLIENT`] of one client's
//!   tasks are kept (running, or finished within [`TASK_TTL`]); a call past that bound is
//!   answered directly, as if the client had not asked for tasks.
//! - **Across replicas** (`--state`, [`crate::state`]): a task's record lives in the shared
//!   store, so `tasks/get` and `tasks/cancel` through any replica answer; a cancellation that
//!   reaches another replica is picked up by the one running the task within
//!   `state::CANCEL_POLL_EVERY`; a task whose replica stops
//!   (no heartbeat for `state::HEARTBEAT_TTL`) is answered `failed`.
//!   While the store cannot be reached, calls are answered directly rather than made tasks,
//!   `tasks/get` and `tasks/cancel` are refused (naming the store), and a task that ends meanwhile
//!   keeps its end in its replica (which answers `tasks/get` from it) until it is written.

use rmcp::model::{
    CallToolResult, DetailedTask, InputRequests, InputResponses, JsonObject,
    ProgressNotificationParam, ProgressToken, Task, TaskPayload, TaskStatus,
};
use rmcp::task_manager::TaskExit;
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How many times one task's tool may run again with new answers: a person answers a few
/// forms in one task, not hundreds; a tool that keeps asking is ended rather than run without
/// end.
pub const MAX_TASK_ROUNDS: usize = 16;

/// How long a call runs before its client, if it sent a progress token, hears about it: long
/// enough that the quick calls (nearly all) send nothing, short enough that a person watching
/// sees the call start.
pub const PROGRESS_AFTER: Duration = Duration::from_millis(200);

/// How often a running call reports after that: often enough to keep a client that resets its
/// timeout on progress waiting, rarely enough to cost nothing.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// How long a call runs inline before it becomes a task (for a client that declared the
/// tasks extension): a client that can poll should not hold a request open for a long call,
/// and a quick call should not cost it a round of polling.
pub const TASK_AFTER: Duration = Duration::from_secs(1);

/// How many of one client's tasks are kept at once, running or finished. The running ones hold
/// instance slots, which the client's fair share of the pool bounds already (a quarter of it,
/// over HTTP); a finished one holds its result, up to the result cap (64 KiB by default), for
/// [`TASK_TTL`]: so a client keeps at most 4 MiB of results behind tasks, and an agent that
/// starts a few dozen long calls in five minutes (an evaluation, a batch) is not answered
/// directly for the rest of them.
pub const MAX_TASKS_PER_CLIENT: usize = 64;

/// How long a finished task (its result) is kept for the client to fetch.
pub const TASK_TTL: Duration = Duration::from_secs(300);

/// How often a client is told to poll a task.
pub const TASK_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// A call's progress reports to the client that sent `token`.
pub(crate) struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    sent: AtomicU32,
    /// The token's values, shared with the tool's own reports (`client.rs`).
    line: std::sync::Arc<crate::client::ProgressLine>,
}

impl Progress {
    pub(crate) fn new(
        peer: Peer<RoleServer>,
        token: ProgressToken,
        line: std::sync::Arc<crate::client::ProgressLine>,
    ) -> Progress {
        Progress {
            peer,
            token,
            sent: AtomicU32::new(0),
            line,
        }
    }

    async fn send(&self, message: String) {
        let progress = self.sent.fetch_add(1, Ordering::Relaxed);
        // The tool reports its own progress: the host's reports step aside (and a value not
        // above the last sent is never sent).
        if !self.line.host_may_send(f64::from(progress)) {
            return;
        }
        let mut param = ProgressNotificationParam::new(self.token.clone(), f64::from(progress));
        param.message = Some(message);
        // A client that went away misses its progress; the call's own answer says the rest.
        if let Err(error) = self.peer.notify_progress(param).await {
            tracing::debug!(%error, "a progress notification was not sent");
        }
    }

    /// Report while the call runs: never ends (the call's end drops it).
    pub(crate) async fn tick(&self) {
        tokio::time::sleep(PROGRESS_AFTER).await;
        self.send("started".to_owned()).await;
        let mut seconds = 0u64;
        loop {
            tokio::time::sleep(PROGRESS_EVERY).await;
            seconds += PROGRESS_EVERY.as_secs().max(1);
            self.send(format!("running for {seconds} s")).await;
        }
    }

    /// [`Progress::tick`] if the client asked for progress; else wait forever (a `select!`
    /// branch that never fires).
    pub(crate) async fn tick_if_asked(progress: Option<&Progress>) {
        match progress {
            Some(progress) => progress.tick().await,
            None => std::future::pending().await,
        }
    }

    /// Report the end, if the start was reported.
    pub(crate) async fn done(&self) {
        if self.sent.load(Ordering::Relaxed) > 0 {
            self.send("done".to_owned()).await;
        }
    }
}

/// How long a running task's record lives in a shared store if no replica ends it and no one
/// asks after it: longer than any call runs (a replica that dies is noticed by its heartbeat
/// when the task is asked after; this only bounds what the store keeps of tasks no one polls).
pub const RUNNING_TASK_TTL: Duration = Duration::from_secs(24 * 3600);

/// The message of a task whose replica stopped while it ran (presumed: its real end, if it
/// comes after all, replaces it).
pub const REPLICA_STOPPED: &str = "the replica running this task stopped before it ended";

/// The message of a running task whose replica has not been heard from for a moment.
pub const REPLICA_NOT_HEARD: &str =
    "the replica running this task has not been heard from; it may still end it";

/// The operation a task runs: the call, to its answer.
pub(crate) type Running = Pin<Box<dyn Future<Output = Result<CallToolResult, TaskExit>> + Send>>;

/// How a task ended: its status, and its result or message.
struct Ended {
    status: TaskStatus,
    result: Option<JsonObject>,
    message: Option<String>,
}

/// A task's record: whose it is, where it stands, and its result once it has one.
#[derive(Debug, Clone)]
struct Record {
    owner: String,
    status: TaskStatus,
    created: String,
    updated: String,
    /// How long it is kept from `updated` (ms).
    ttl_ms: u64,
    /// The result (a `CallToolResult`), once completed.
    result: Option<JsonObject>,
    message: Option<String>,
    /// The tool's questions not answered yet, while it is `input_required`.
    input_requests: Option<InputRequests>,
    /// When a local record is forgotten (an ended task's, [`TASK_TTL`] after it ended).
    forget_at: Option<Instant>,
}

impl Record {
    fn detailed(&self, task_id: &str) -> DetailedTask {
        let mut task = Task::new(task_id, self.status, &self.created, &self.updated)
            .with_ttl_ms(self.ttl_ms)
            .with_poll_interval_ms(millis(TASK_POLL_INTERVAL));
        if let Some(message) = &self.message {
            task = task.with_status_message(message.clone());
        }
        let payload = match self.status {
            TaskStatus::Completed => TaskPayload::Completed {
                result: self.result.clone().unwrap_or_default(),
            },
            TaskStatus::Failed => {
                let mut error = JsonObject::new();
                error.insert("code".to_owned(), serde_json::json!(-32603));
                error.insert(
                    "message".to_owned(),
                    serde_json::json!(self.message.clone().unwrap_or_default()),
                );
                TaskPayload::Failed { error }
            }
            TaskStatus::Cancelled => TaskPayload::Cancelled,
            TaskStatus::InputRequired => TaskPayload::InputRequired {
                input_requests: self.input_requests.clone().unwrap_or_default(),
            },
            _ => TaskPayload::Working,
        };
        DetailedTask::new(task, payload)
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Now, as tasks' timestamps are written (RFC 3339, UTC).
fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Where task records are kept: in this process, or in the store replicas share.
enum Board {
    Local(Mutex<HashMap<String, Record>>),
    #[cfg(feature = "state")]
    Shared(Arc<crate::state::Store>),
}

/// A task that ran here and ended while the shared store could not be reached: its end is kept
/// here, written when the store is back, and answered here meanwhile, so that no result that
/// was reached is lost.
#[cfg(feature = "state")]
struct Unwritten {
    record: Record,
}

/// The tasks of one server (or, with a shared store, of every replica), each its client's.
pub struct Tasks {
    board: Board,
    /// The tasks running in this process, by id: what stops each.
    running: Mutex<HashMap<String, CancellationToken>>,
    /// The tasks of this process waiting for their client's answers, by id: where
    /// `tasks/update` puts them.
    inboxes: Mutex<HashMap<String, Arc<Inbox>>>,
    /// Ended here, not yet written to the shared store.
    #[cfg(feature = "state")]
    unwritten: Mutex<HashMap<String, Unwritten>>,
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks {
            board: Board::Local(Mutex::default()),
            running: Mutex::default(),
            inboxes: Mutex::default(),
            #[cfg(feature = "state")]
            unwritten: Mutex::default(),
        }
    }
}

/// The answers `tasks/update` brought a task waiting for its client, until it takes them.
#[derive(Default)]
struct Inbox {
    answers: Mutex<InputResponses>,
    arrived: tokio::sync::Notify,
}

/// A running task, as its operation sees it: where it says it waits for its client's answers,
/// and takes them.
pub(crate) struct TaskHandle {
    tasks: Arc<Tasks>,
    id: String,
    /// Whose task it is (the record's owner).
    owner: String,
}

impl TaskHandle {
    /// Wait for the answers to `questions` (the tool's, by key): the task is `input_required`
    /// with them until `tasks/update` has answered every one (through any replica, with a
    /// shared store), and then `working` again. The answers, by key; `None` when the task can
    /// no longer wait (its record is gone, or the store refused the questions).
    pub(crate) async fn answers(&self, questions: InputRequests) -> Option<InputResponses> {
        let records = match &self.tasks.board {
            Board::Local(records) => records,
            #[cfg(feature = "state")]
            Board::Shared(store) => {
                if let Err(unavailable) =
                    shared::ask(store, &self.id, &self.owner, &questions).await
                {
                    tracing::warn!("{unavailable}: a task's questions could not be kept");
                    return None;
                }
                // Answered through whichever replica: looked for as cancellations are.
                loop {
                    tokio::time::sleep(crate::state::CANCEL_POLL_EVERY).await;
                    match shared::take_answers(store, &self.id, &self.owner).await {
                        Ok(shared::Taken::Waiting) | Err(_) => {}
                        Ok(shared::Taken::Answers(answers)) => return Some(answers),
                        Ok(shared::Taken::Gone) => return None,
                    }
                }
            }
        };
        let inbox = Arc::new(Inbox::default());
        toolcell::sync::lock(&self.tasks.inboxes).insert(self.id.clone(), Arc::clone(&inbox));
        {
            let mut records = toolcell::sync::lock(records);
            let record = records.get_mut(&self.id)?;
            record.status = TaskStatus::InputRequired;
            record.input_requests = Some(questions);
            record.updated = now_rfc3339();
        }
        loop {
            let arrived = inbox.arrived.notified();
            let waiting = toolcell::sync::lock(records)
                .get(&self.id)
                .is_some_and(|record| record.status == TaskStatus::InputRequired);
            if !waiting {
                break;
            }
            arrived.await;
        }
        toolcell::sync::lock(&self.tasks.inboxes).remove(&self.id);
        Some(std::mem::take(&mut *toolcell::sync::lock(&inbox.answers)))
    }
}

fn not_waiting(task: &str) -> McpError {
    McpError::invalid_params(
        format!(
            "task {} is not waiting for its client's answers",
            toolcell::registry::echoed(task)
        ),
        None,
    )
}

fn unknown(task: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown task: {}", toolcell::registry::echoed(task)),
        None,
    )
}

impl Tasks {
    /// Tasks kept in `store`, shared by every replica that uses it.
    #[cfg(feature = "state")]
    pub fn shared(store: Arc<crate::state::Store>) -> Tasks {
        Tasks {
            board: Board::Shared(store),
            running: Mutex::default(),
            inboxes: Mutex::default(),
            unwritten: Mutex::default(),
        }
    }

    /// Whether `owner` may have another task: fewer than [`MAX_TASKS_PER_CLIENT`] of its tasks
    /// are kept. A hint for whether to wait for [`TASK_AFTER`] at all; [`Tasks::try_spawn`]
    /// decides. (With a shared store, only the store can tell: yes.)
    pub(crate) fn has_room(&self, owner: &str) -> bool {
        match &self.board {
            Board::Local(records) => {
                let mut records = toolcell::sync::lock(records);
                forget_ended(&mut records);
                records
                    .values()
                    .filter(|record| record.owner == owner)
                    .count()
                    < MAX_TASKS_PER_CLIENT
            }
            #[cfg(feature = "state")]
            Board::Shared(_) => true,
        }
    }

    /// Run the operation `make` builds as a task of `owner`'s, if it has room for one (checked
    /// and taken at once, so concurrent calls cannot overshoot the bound). The operation gets
    /// a future that ends when the task is cancelled (from any replica). Without room, or with
    /// a shared store out of reach, `make` is not called and `None` is returned: the caller
    /// answers its call itself.
    pub(crate) async fn try_spawn(
        self: &Arc<Self>,
        owner: &str,
        make: impl FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>, TaskHandle) -> Running,
    ) -> Option<Task> {
        let id = toolcell::digest::hex(&toolcell::digest::random::<16>().ok()?);
        let now = now_rfc3339();
        let record = Record {
            owner: owner.to_owned(),
            status: TaskStatus::Working,
            created: now.clone(),
            updated: now,
            ttl_ms: millis(TASK_TTL),
            result: None,
            message: None,
            input_requests: None,
            forget_at: None,
        };
        match &self.board {
            Board::Local(records) => {
                let mut records = toolcell::sync::lock(records);
                forget_ended(&mut records);
                if records
                    .values()
                    .filter(|record| record.owner == owner)
                    .count()
                    >= MAX_TASKS_PER_CLIENT
                {
                    return None;
                }
                records.insert(id.clone(), record.clone());
            }
            #[cfg(feature = "state")]
            Board::Shared(store) => match shared::create(store, &id, &record).await {
                Ok(true) => {}
                Ok(false) => return None,
                Err(unavailable) => {
                    tracing::warn!("{unavailable}: the call is answered without a task");
                    return None;
                }
            },
        }
        let cancel = CancellationToken::new();
        toolcell::sync::lock(&self.running).insert(id.clone(), cancel.clone());
        let cancelled = Box::pin(cancel.cancelled_owned());
        let handle = TaskHandle {
            tasks: Arc::clone(self),
            id: id.clone(),
            owner: record.owner.clone(),
        };
        let operation = make(cancelled, handle);
        let tasks = Arc::clone(self);
        let task_id = id.clone();
        let (owner, created) = (record.owner.clone(), record.created.clone());
        tokio::spawn(async move {
            let ended = operation.await;
            toolcell::sync::lock(&tasks.running).remove(&task_id);
            toolcell::sync::lock(&tasks.inboxes).remove(&task_id);
            let (status, result, message) = match ended {
                Ok(result) => (
                    TaskStatus::Completed,
                    serde_json::to_value(&result)
                        .ok()
                        .and_then(|value| value.as_object().cloned()),
                    None,
                ),
                Err(TaskExit::Cancelled) => (TaskStatus::Cancelled, None, None),
                Err(TaskExit::Error(error)) => {
                    (TaskStatus::Failed, None, Some(error.message.to_string()))
                }
            };
            let ended = Ended {
                status,
                result,
                message,
            };
            tasks.finish(&task_id, &owner, &created, ended).await;
        });
        Some(record.detailed(&id).task)
    }

    /// Record that `owner`'s task `id`, made at `created`, ended: with a shared store, written
    /// there whole (kept here, and written later, while the store cannot be reached).
    async fn finish(&self, id: &str, owner: &str, created: &str, ended: Ended) {
        let Ended {
            status,
            result,
            message,
        } = ended;
        let now = now_rfc3339();
        match &self.board {
            Board::Local(records) => {
                // The local record knows its owner and creation already.
                let _ = (owner, created);
                if let Some(record) = toolcell::sync::lock(records).get_mut(id)
                    && !record.status.is_terminal()
                {
                    record.status = status;
                    record.result = result;
                    record.message = message;
                    record.input_requests = None;
                    record.updated = now;
                    record.forget_at = Some(Instant::now() + TASK_TTL);
                }
            }
            #[cfg(feature = "state")]
            Board::Shared(store) => {
                let record = Record {
                    owner: owner.to_owned(),
                    status,
                    created: created.to_owned(),
                    updated: now,
                    ttl_ms: millis(TASK_TTL),
                    result,
                    message,
                    input_requests: None,
                    forget_at: Some(Instant::now() + TASK_TTL),
                };
                if let Err(unavailable) = shared::finish(store, id, &record).await {
                    tracing::warn!("{unavailable}: task {id}'s end is kept here until it is back");
                    toolcell::sync::lock(&self.unwritten)
                        .insert(id.to_owned(), Unwritten { record });
                }
            }
        }
    }

    /// `tasks/get` from `owner`: another client's task does not exist for it.
    pub(crate) async fn get(
        &self,
        owner: &str,
        task: &str,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        match &self.board {
            Board::Local(records) => {
                let mut records = toolcell::sync::lock(records);
                forget_ended(&mut records);
                match records.get(task) {
                    Some(record) if record.owner == owner => {
                        Ok(rmcp::model::GetTaskResult::new(record.detailed(task)))
                    }
                    _ => Err(unknown(task)),
                }
            }
            #[cfg(feature = "state")]
            Board::Shared(store) => {
                // An end reached here and not yet written answers from here.
                let unwritten = toolcell::sync::lock(&self.unwritten)
                    .get(task)
                    .map(|kept| kept.record.clone());
                let record = shared::get(store, task)
                    .await
                    .map_err(|unavailable| crate::approval::unavailable(&unavailable))?;
                match (record, unwritten) {
                    (Some(mut record), unwritten) if record.owner == owner => {
                        if let Some(ended) = unwritten {
                            record.status = ended.status;
                            record.result = ended.result;
                            record.message = ended.message;
                            record.updated = ended.updated;
                        }
                        if record.status == TaskStatus::InputRequired {
                            record.input_requests =
                                Some(shared::asked(store, task, owner).await.map_err(
                                    |unavailable| crate::approval::unavailable(&unavailable),
                                )?);
                        }
                        Ok(rmcp::model::GetTaskResult::new(record.detailed(task)))
                    }
                    _ => Err(unknown(task)),
                }
            }
        }
    }

    /// `tasks/cancel` from `owner`: stops the task's instance, wherever it runs.
    pub(crate) async fn cancel(&self, owner: &str, task: &str) -> Result<(), McpError> {
        match &self.board {
            Board::Local(records) => {
                let mine = toolcell::sync::lock(records)
                    .get(task)
                    .is_some_and(|record| record.owner == owner);
                if !mine {
                    return Err(unknown(task));
                }
            }
            #[cfg(feature = "state")]
            Board::Shared(store) => {
                let found = shared::cancel(store, owner, task)
                    .await
                    .map_err(|unavailable| crate::approval::unavailable(&unavailable))?;
                if !found {
                    return Err(unknown(task));
                }
            }
        }
        if let Some(cancel) = toolcell::sync::lock(&self.running).get(task) {
            cancel.cancel();
        }
        Ok(())
    }

    /// `tasks/update` from `owner`: answers to questions its task `task` is waiting on. An
    /// answer under a key the task is not waiting on (a question it did not ask, or one
    /// answered already) is dropped; the task stays `input_required` until all are answered.
    /// A task that is not waiting is refused (-32602).
    #[cfg_attr(not(feature = "state"), allow(irrefutable_let_patterns))]
    pub(crate) async fn update(
        &self,
        owner: &str,
        task: &str,
        responses: InputResponses,
    ) -> Result<(), McpError> {
        let records = match &self.board {
            Board::Local(records) => records,
            #[cfg(feature = "state")]
            Board::Shared(store) => {
                return match shared::update(store, owner, task, &responses).await {
                    Ok(shared::Updated::Taken) => Ok(()),
                    Ok(shared::Updated::NotWaiting) => Err(not_waiting(task)),
                    Ok(shared::Updated::Unknown) => Err(unknown(task)),
                    Err(unavailable) => Err(crate::approval::unavailable(&unavailable)),
                };
            }
        };
        let mut records = toolcell::sync::lock(records);
        forget_ended(&mut records);
        let record = match records.get_mut(task) {
            Some(record) if record.owner == owner => record,
            _ => return Err(unknown(task)),
        };
        let Some(pending) = record
            .input_requests
            .as_mut()
            .filter(|_| record.status == TaskStatus::InputRequired)
        else {
            return Err(not_waiting(task));
        };
        // An answer to a question the task is not waiting on is dropped: never kept, never
        // given to the tool (the extension acknowledges such an update all the same).
        let responses: InputResponses = responses
            .into_iter()
            .filter(|(key, _)| pending.contains_key(key))
            .collect();
        let Some(inbox) = toolcell::sync::lock(&self.inboxes).get(task).cloned() else {
            return Err(not_waiting(task));
        };
        for key in responses.keys() {
            pending.remove(key);
        }
        if pending.is_empty() {
            record.status = TaskStatus::Working;
            record.input_requests = None;
        }
        record.updated = now_rfc3339();
        drop(records);
        toolcell::sync::lock(&inbox.answers).extend(responses);
        inbox.arrived.notify_one();
        Ok(())
    }

    /// How many tasks are running in this process, all clients together.
    pub fn running(&self) -> usize {
        toolcell::sync::lock(&self.running).len()
    }

    /// With a shared store: stop the tasks running here that another replica was asked to
    /// cancel, and write the ends the store missed, every [`CANCEL_POLL_EVERY`], until `stop`
    /// completes.
    ///
    /// [`CANCEL_POLL_EVERY`]: crate::state::CANCEL_POLL_EVERY
    #[cfg(feature = "state")]
    pub(crate) async fn watch(self: Arc<Self>, stop: impl Future<Output = ()>) {
        let Board::Shared(store) = &self.board else {
            return;
        };
        let mut stop = std::pin::pin!(stop);
        let mut ticks = tokio::time::interval(crate::state::CANCEL_POLL_EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = ticks.tick() => {}
            }
            let running: Vec<String> = toolcell::sync::lock(&self.running)
                .keys()
                .cloned()
                .collect();
            if !running.is_empty()
                && let Ok(asked) = shared::cancellations(store, &running).await
            {
                let tokens = toolcell::sync::lock(&self.running);
                for id in asked {
                    if let Some(cancel) = tokens.get(&id) {
                        cancel.cancel();
                    }
                }
            }
            let unwritten: Vec<(String, Record)> = toolcell::sync::lock(&self.unwritten)
                .iter()
                .map(|(id, kept)| (id.clone(), kept.record.clone()))
                .collect();
            for (id, record) in unwritten {
                let expired = record.forget_at.is_some_and(|at| at <= Instant::now());
                if expired || shared::finish(store, &id, &record).await.is_ok() {
                    toolcell::sync::lock(&self.unwritten).remove(&id);
                }
            }
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        // The calls of tasks nobody can poll any more stop with the server.
        for cancel in toolcell::sync::lock(&self.running).values() {
            cancel.cancel();
        }
    }
}

/// Forget local records whose time to live has passed since they ended.
fn forget_ended(records: &mut HashMap<String, Record>) {
    let now = Instant::now();
    records.retain(|_, record| record.forget_at.is_none_or(|at| at > now));
}

#[cfg(feature = "state")]
mod shared {
    //! Task records in the shared store (`state/scripts.rs`).

    use super::{
        REPLICA_NOT_HEARD, REPLICA_STOPPED, RUNNING_TASK_TTL, Record, millis, now_rfc3339,
    };
    use crate::state::scripts::{
        TASK_ASK, TASK_CANCEL, TASK_CREATE, TASK_FINISH, TASK_GET, TASK_TAKE_ANSWERS, TASK_UPDATE,
    };
    use crate::state::{Store, Unavailable};
    use rmcp::model::{InputRequests, InputResponses, JsonObject, TaskStatus};

    fn record_key(id: &str) -> String {
        Store::key(&format!("task:{id}"))
    }

    fn owner_key(owner: &str) -> String {
        Store::key(&format!("tasks:{}", crate::seal::owner_digest(owner)))
    }

    fn status_name(status: TaskStatus) -> &'static str {
        match status {
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::InputRequired => "input_required",
            _ => "working",
        }
    }

    fn status_of(name: &str) -> TaskStatus {
        match name {
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            "input_required" => TaskStatus::InputRequired,
            _ => TaskStatus::Working,
        }
    }

    fn asked_key(id: &str) -> String {
        Store::key(&format!("task-asked:{id}"))
    }

    fn answers_key(id: &str) -> String {
        Store::key(&format!("task-answers:{id}"))
    }

    /// What a question's request or an answer, under `key`, of task `id` of `owner`'s is
    /// sealed to: it cannot be moved to another key, task or tenant.
    fn keyed_context(id: &str, owner: &str, kind: &str, key: &str) -> Vec<u8> {
        let mut context = context(id, owner);
        for part in [kind, key] {
            context.push(0);
            context.extend_from_slice(part.as_bytes());
        }
        context
    }

    fn seal(store: &Store, plain: &str, context: &[u8]) -> Result<String, Unavailable> {
        store
            .seal_key()
            .seal_data(plain.as_bytes(), context)
            .map_err(|error| Unavailable {
                store: store.shown().to_owned(),
                why: format!("sealing a task's question or answer: {error}"),
            })
    }

    /// Task `id` (of `owner`, running here) waits for its client's answers to `questions`.
    pub(super) async fn ask(
        store: &Store,
        id: &str,
        owner: &str,
        questions: &InputRequests,
    ) -> Result<(), Unavailable> {
        let mut sealed = Vec::with_capacity(questions.len() * 2);
        for (key, request) in questions {
            let text = serde_json::to_string(request).unwrap_or_default();
            sealed.push(key.clone());
            sealed.push(seal(store, &text, &keyed_context(id, owner, "asked", key))?);
        }
        let keys = [record_key(id), asked_key(id), answers_key(id)];
        let wait = millis(crate::rounds::ROUND_WAIT);
        let (keys, sealed) = (&keys, &sealed);
        let asked: i64 = store
            .run(|mut connection| async move {
                TASK_ASK
                    .key(&keys[0])
                    .key(&keys[1])
                    .key(&keys[2])
                    .arg(owner)
                    .arg(now_rfc3339())
                    .arg(wait)
                    .arg(sealed)
                    .invoke_async(&mut connection)
                    .await
            })
            .await?;
        if asked == 1 {
            Ok(())
        } else {
            Err(Unavailable {
                store: store.shown().to_owned(),
                why: "the task's record is not running".to_owned(),
            })
        }
    }

    /// The questions task `id` of `owner`'s waits on, as `tasks/get` shows them.
    pub(super) async fn asked(
        store: &Store,
        id: &str,
        owner: &str,
    ) -> Result<InputRequests, Unavailable> {
        let key = asked_key(id);
        let key = &key;
        let fields: Vec<(String, String)> = store
            .run(|mut connection| async move {
                redis::cmd("HGETALL")
                    .arg(key)
                    .query_async(&mut connection)
                    .await
            })
            .await?;
        Ok(fields
            .into_iter()
            .filter_map(|(name, sealed)| {
                let plain = store
                    .seal_key()
                    .open_data(&sealed, &keyed_context(id, owner, "asked", &name))?;
                Some((name, serde_json::from_slice(&plain).ok()?))
            })
            .collect())
    }

    /// What `tasks/update` did.
    pub(super) enum Updated {
        Taken,
        NotWaiting,
        Unknown,
    }

    /// `owner`'s answers to task `id`'s questions, kept for the replica running it.
    pub(super) async fn update(
        store: &Store,
        owner: &str,
        id: &str,
        responses: &InputResponses,
    ) -> Result<Updated, Unavailable> {
        let mut sealed = Vec::with_capacity(responses.len() * 2);
        for (key, answer) in responses {
            let text = serde_json::to_string(answer).unwrap_or_default();
            sealed.push(key.clone());
            sealed.push(seal(
                store,
                &text,
                &keyed_context(id, owner, "answer", key),
            )?);
        }
        let keys = [record_key(id), asked_key(id), answers_key(id)];
        let (keys, sealed) = (&keys, &sealed);
        let updated: i64 = store
            .run(|mut connection| async move {
                TASK_UPDATE
                    .key(&keys[0])
                    .key(&keys[1])
                    .key(&keys[2])
                    .arg(owner)
                    .arg(now_rfc3339())
                    .arg(sealed)
                    .invoke_async(&mut connection)
                    .await
            })
            .await?;
        Ok(match updated {
            1 => Updated::Taken,
            0 => Updated::NotWaiting,
            _ => Updated::Unknown,
        })
    }

    /// What a waiting task found when it looked for its answers.
    pub(super) enum Taken {
        /// Not all given yet.
        Waiting,
        /// Every question answered: the answers, taken.
        Answers(InputResponses),
        /// The task's record is gone (expired, or the store lost it): it waits no more.
        Gone,
    }

    /// Task `id`'s answers, once every question has one (taken once).
    pub(super) async fn take_answers(
        store: &Store,
        id: &str,
        owner: &str,
    ) -> Result<Taken, Unavailable> {
        let keys = [record_key(id), asked_key(id), answers_key(id)];
        let keys = &keys;
        let flat: Vec<String> = store
            .run(|mut connection| async move {
                TASK_TAKE_ANSWERS
                    .key(&keys[0])
                    .key(&keys[1])
                    .key(&keys[2])
                    .invoke_async(&mut connection)
                    .await
            })
            .await?;
        if flat.is_empty() {
            return Ok(Taken::Waiting);
        }
        if flat.len() == 1 {
            return Ok(Taken::Gone);
        }
        let answers = flat
            .chunks_exact(2)
            .filter_map(|pair| {
                let plain = store
                    .seal_key()
                    .open_data(&pair[1], &keyed_context(id, owner, "answer", &pair[0]))?;
                Some((pair[0].clone(), serde_json::from_slice(&plain).ok()?))
            })
            .collect();
        Ok(Taken::Answers(answers))
    }

    /// Make the record of task `id`: `false` when its owner has no room.
    pub(super) async fn create(
        store: &Store,
        id: &str,
        record: &Record,
    ) -> Result<bool, Unavailable> {
        let (record_key, owner_key) = (&record_key(id), &owner_key(&record.owner));
        let made: i64 = store
            .run(|mut connection| async move {
                TASK_CREATE
                    .key(record_key)
                    .key(owner_key)
                    .arg(&record.owner)
                    .arg(store.replica())
                    .arg(super::MAX_TASKS_PER_CLIENT)
                    .arg(millis(RUNNING_TASK_TTL))
                    .arg(&record.created)
                    .arg(id)
                    .invoke_async(&mut connection)
                    .await
            })
            .await?;
        Ok(made == 1)
    }

    /// What a task's result or message is sealed to: its id and its owner, so that neither can
    /// be moved to another task or another tenant.
    fn context(id: &str, owner: &str) -> Vec<u8> {
        let mut context = Vec::with_capacity(id.len() + owner.len() + 1);
        context.extend_from_slice(id.as_bytes());
        context.push(0);
        context.extend_from_slice(owner.as_bytes());
        context
    }

    /// Write task `id`'s end (a record already ended keeps its first end, but for a presumed
    /// failure; a record the store lost is written whole again). Its result and message are
    /// sealed under the operator's key, bound to the task and its owner.
    pub(super) async fn finish(
        store: &Store,
        id: &str,
        record: &Record,
    ) -> Result<(), Unavailable> {
        let context = context(id, &record.owner);
        let seal = |text: &str| {
            store
                .seal_key()
                .seal_data(text.as_bytes(), &context)
                .map_err(|error| Unavailable {
                    store: store.shown().to_owned(),
                    why: format!("sealing a task's end: {error}"),
                })
        };
        let result = match &record.result {
            Some(result) => seal(&serde_json::Value::Object(result.clone()).to_string())?,
            None => String::new(),
        };
        let message = match &record.message {
            Some(message) => seal(message)?,
            None => String::new(),
        };
        let (record_key, owner_key) = (&record_key(id), &owner_key(&record.owner));
        let (result, message) = (&result, &message);
        store
            .run(|mut connection| async move {
                TASK_FINISH
                    .key(record_key)
                    .key(owner_key)
                    .arg(status_name(record.status))
                    .arg(result)
                    .arg(message)
                    .arg(&record.updated)
                    .arg(record.ttl_ms)
                    .arg(id)
                    .arg(&record.owner)
                    .arg(store.replica())
                    .arg(&record.created)
                    .invoke_async::<i64>(&mut connection)
                    .await
            })
            .await
            .map(drop)
    }

    /// Task `id`'s record, if there is one (a running task whose replica is not heard from is
    /// said so, and presumed `failed` after [`TASK_PRESUMED_LOST_AFTER`]). A result that does
    /// not open under the operator's key for this task and owner is no result.
    ///
    /// [`TASK_PRESUMED_LOST_AFTER`]: crate::state::TASK_PRESUMED_LOST_AFTER
    pub(super) async fn get(store: &Store, id: &str) -> Result<Option<Record>, Unavailable> {
        let (record_key, heartbeats) = (record_key(id), Store::key("replica:"));
        let grace = millis(crate::state::TASK_PRESUMED_LOST_AFTER);
        let (record_key, heartbeats) = (&record_key, &heartbeats);
        let fields: Vec<String> = store
            .run(|mut connection| async move {
                // The owner's set is only known once the record is read: the script takes
                // the record's own owner's key from the pattern.
                let owner: Option<String> = redis::cmd("HGET")
                    .arg(record_key)
                    .arg("owner")
                    .query_async(&mut connection)
                    .await?;
                let Some(owner) = owner else {
                    return Ok(Vec::new());
                };
                TASK_GET
                    .key(record_key)
                    .key(owner_key(&owner))
                    .arg(heartbeats)
                    .arg(now_rfc3339())
                    .arg(millis(super::TASK_TTL))
                    .arg(id)
                    .arg(REPLICA_STOPPED)
                    .arg(grace)
                    .arg(REPLICA_NOT_HEARD)
                    .invoke_async(&mut connection)
                    .await
            })
            .await?;
        let [owner, status, created, updated, ttl, result, message] = fields.as_slice() else {
            return Ok(None);
        };
        let context = context(id, owner);
        let opened = |text: &str| {
            store
                .seal_key()
                .open_data(text, &context)
                .and_then(|bytes| String::from_utf8(bytes).ok())
        };
        // The store's own messages (a presumed failure, a replica not heard from) are written
        // by its scripts, in the clear; a tool's are sealed.
        let message = match message.as_str() {
            "" => None,
            REPLICA_STOPPED | REPLICA_NOT_HEARD => Some(message.clone()),
            sealed => opened(sealed),
        };
        Ok(Some(Record {
            owner: owner.clone(),
            status: status_of(status),
            created: created.clone(),
            updated: updated.clone(),
            ttl_ms: ttl.parse().unwrap_or(millis(super::TASK_TTL)),
            result: opened(result).and_then(|text| serde_json::from_str::<JsonObject>(&text).ok()),
            message,
            input_requests: None,
            forget_at: None,
        }))
    }

    /// Ask for `owner`'s task `id` to stop, wherever it runs: whether there is such a task.
    pub(super) async fn cancel(store: &Store, owner: &str, id: &str) -> Result<bool, Unavailable> {
        let (record_key, flag) = (record_key(id), Store::key(&format!("cancel:{id}")));
        let ttl = millis(RUNNING_TASK_TTL);
        let (record_key, flag) = (&record_key, &flag);
        let replica: Option<String> = store
            .run(|mut connection| async move {
                TASK_CANCEL
                    .key(record_key)
                    .key(flag)
                    .arg(owner)
                    .arg(ttl)
                    .invoke_async(&mut connection)
                    .await
            })
            .await?;
        Ok(replica.is_some())
    }

    /// Which of the tasks `ids` (running here) another replica was asked to cancel.
    pub(super) async fn cancellations(
        store: &Store,
        ids: &[String],
    ) -> Result<Vec<String>, Unavailable> {
        let keys: Vec<String> = ids
            .iter()
            .map(|id| Store::key(&format!("cancel:{id}")))
            .collect();
        let keys = &keys;
        let flags: Vec<Option<String>> = store
            .run(|mut connection| async move {
                redis::cmd("MGET")
                    .arg(keys)
                    .query_async(&mut connection)
                    .await
            })
            .await?;
        Ok(ids
            .iter()
            .zip(flags)
            .filter(|(_, flag)| flag.is_some())
            .map(|(id, _)| id.clone())
            .collect())
    }
}
