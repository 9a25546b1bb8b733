//! Long calls: progress notifications, and tasks (the MCP tasks extension, SEP-2663).
//!
//! - **Progress.** A call whose request carries a `progressToken` and that is still running
//!   after [`PROGRESS_AFTER`] gets `notifications/progress`: "started", then "running for N s"
//!   every [`PROGRESS_EVERY`], then "done" just before its answer. A call that ends sooner
//!   sends none (most calls end in well under a millisecond). What a tool itself could report
//!   is not forwarded: the WIT contract gives a tool no way to report progress (its imports are
//!   WASI only, and a host import would be authority the gate would have to decide), so the
//!   host reports what it knows. Over HTTP the server answers with one JSON body, not a
//!   stream, so there is nowhere to send a notification: progress is a stdio feature, and an
//!   HTTP client uses a task for a long call.
//! - **Tasks.** A client that declares the tasks extension gets a task for a call still
//!   running after [`TASK_AFTER`]: the `tools/call` is answered at once with the task, and the
//!   call goes on under its own deadline. `tasks/get` reports it (`working`, then `completed`
//!   with the result, `cancelled` or `failed`), `tasks/cancel` stops its instance as a
//!   cancelled request does, and a finished task is kept for [`TASK_TTL`]. A task is its
//!   client's only (over HTTP, the token's tenant): another client's `tasks/get` or
//!   `tasks/cancel` is told it does not exist. At most [`MAX_TASKS_PER_CLIENT`] of one client's
//!   tasks are kept (running, or finished within [`TASK_TTL`]); a call past that bound is
//!   answered directly, as if the client had not asked for tasks. Tasks live in the process that made them: behind a load balancer, poll
//!   the replica that answered (or pin a client to one).

use rmcp::model::{CallToolResult, ProgressNotificationParam, ProgressToken, Task};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, Peer, RoleServer};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

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

/// How many of one client's tasks are kept at once, running or finished: a running one holds an
/// instance slot and a finished one its result (up to the result cap), so a client cannot park
/// more than a quarter of the default pool, or more than a megabyte of results, behind tasks.
pub const MAX_TASKS_PER_CLIENT: usize = 16;

/// How long a finished task (its result) is kept for the client to fetch.
pub const TASK_TTL: Duration = Duration::from_secs(300);

/// How often a client is told to poll a task.
pub const TASK_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// A call's progress reports to the client that sent `token`.
pub(crate) struct Progress {
    peer: Peer<RoleServer>,
    token: ProgressToken,
    sent: AtomicU32,
}

impl Progress {
    pub(crate) fn new(peer: Peer<RoleServer>, token: ProgressToken) -> Progress {
        Progress {
            peer,
            token,
            sent: AtomicU32::new(0),
        }
    }

    async fn send(&self, message: String) {
        let progress = self.sent.fetch_add(1, Ordering::Relaxed);
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

/// The operation a task runs: the call, to its answer.
pub(crate) type Running = Pin<Box<dyn Future<Output = Result<CallToolResult, TaskExit>> + Send>>;

/// The tasks of one server, each its client's.
#[derive(Default)]
pub struct Tasks {
    manager: TaskManager,
    /// Each task's client.
    owners: Mutex<HashMap<String, String>>,
}

impl Tasks {
    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.owners
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Whether `owner` may have another task: fewer than [`MAX_TASKS_PER_CLIENT`] of its tasks
    /// are kept. A hint for whether to wait for [`TASK_AFTER`] at all; [`Tasks::try_spawn`]
    /// decides.
    pub(crate) fn has_room(&self, owner: &str) -> bool {
        let mut owners = self.owners();
        self.count(&mut owners, owner) < MAX_TASKS_PER_CLIENT
    }

    /// How many tasks `owner` has kept, after forgetting those of its the manager dropped (past
    /// their TTL). Only `owner`'s are looked up: at most [`MAX_TASKS_PER_CLIENT`] and those
    /// that expired, whatever other clients hold.
    fn count(&self, owners: &mut HashMap<String, String>, owner: &str) -> usize {
        let mine: Vec<String> = owners
            .iter()
            .filter(|(_, client)| *client == owner)
            .map(|(task, _)| task.clone())
            .collect();
        let mut kept = 0;
        for task in mine {
            if self.manager.get_task(&task).is_ok() {
                kept += 1;
            } else {
                owners.remove(&task);
            }
        }
        kept
    }

    /// Run the operation `make` builds as a task of `owner`'s, if it has room for one (checked
    /// and taken under one lock, so concurrent calls cannot overshoot the bound). The
    /// operation gets a future that ends when the client cancels the task. Without room,
    /// `make` is not called and `None` is returned: the caller keeps its call.
    pub(crate) fn try_spawn(
        &self,
        owner: &str,
        make: impl FnOnce(Pin<Box<dyn Future<Output = ()> + Send>>) -> Running,
    ) -> Option<Task> {
        let mut owners = self.owners();
        if self.count(&mut owners, owner) >= MAX_TASKS_PER_CLIENT {
            return None;
        }
        let options = TaskOptions::new()
            .with_ttl_ms(u64::try_from(TASK_TTL.as_millis()).unwrap_or(u64::MAX))
            .with_poll_interval_ms(
                u64::try_from(TASK_POLL_INTERVAL.as_millis()).unwrap_or(u64::MAX),
            );
        let task = self.manager.spawn(options, |context| {
            let cancelled = Box::pin(async move { context.cancelled().await });
            make(cancelled)
        });
        owners.insert(task.task_id.clone(), owner.to_owned());
        Some(task)
    }

    /// Whether `task` is `owner`'s; another client's task does not exist for it.
    fn check(&self, owner: &str, task: &str) -> Result<(), McpError> {
        match self.owners().get(task) {
            Some(client) if client == owner => Ok(()),
            _ => Err(McpError::invalid_params(
                format!("unknown task: {task}"),
                None,
            )),
        }
    }

    /// `tasks/get` from `owner`.
    pub(crate) fn get(
        &self,
        owner: &str,
        task: &str,
    ) -> Result<rmcp::model::GetTaskResult, McpError> {
        self.check(owner, task)?;
        Ok(rmcp::model::GetTaskResult::new(
            self.manager.get_task(task)?,
        ))
    }

    /// `tasks/cancel` from `owner`.
    pub(crate) fn cancel(&self, owner: &str, task: &str) -> Result<(), McpError> {
        self.check(owner, task)?;
        self.manager.cancel_task(task)
    }

    /// How many tasks are running, all clients together.
    pub fn running(&self) -> usize {
        self.manager.running_task_count()
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        // The calls of tasks nobody can poll any more stop with the server.
        self.manager.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task that runs until it is cancelled.
    fn park(tasks: &Tasks, owner: &str) -> Option<String> {
        tasks
            .try_spawn(owner, |cancelled| {
                Box::pin(async move {
                    cancelled.await;
                    Err(TaskExit::Cancelled)
                })
            })
            .map(|task| task.task_id)
    }

    #[test]
    fn a_task_is_its_clients_only_and_each_client_keeps_a_bounded_number() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let tasks = Tasks::default();
            let task = park(&tasks, "tenant:a").expect("room");
            assert!(tasks.get("tenant:a", &task).is_ok());
            for (what, refused) in [
                ("get", tasks.get("tenant:b", &task).err()),
                ("cancel", tasks.cancel("tenant:b", &task).err()),
            ] {
                let error = refused.unwrap_or_else(|| panic!("another client's {what}"));
                assert!(error.message.contains("unknown task"), "{what}: {error:?}");
            }
            for _ in 1..MAX_TASKS_PER_CLIENT {
                assert!(tasks.has_room("tenant:a"));
                park(&tasks, "tenant:a");
            }
            assert!(!tasks.has_room("tenant:a"), "a client's tasks are bounded");
            assert!(
                tasks.has_room("tenant:b"),
                "another client is not held back"
            );
            tasks
                .cancel("tenant:a", &task)
                .expect("its own client cancels it");
        });
    }
}
