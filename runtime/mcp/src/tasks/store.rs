//! The task store: a call made a task, its end recorded, and `tasks/get` and `tasks/cancel`
//! answered, in this process or through the shared store.

use crate::tasks::answers::TaskHandle;
#[cfg(feature = "state")]
use crate::tasks::board::Unwritten;
use crate::tasks::board::{Board, Tasks, unknown};
use crate::tasks::record::{
    Ended, MAX_TASKS_PER_CLIENT, Record, TASK_TTL, forget_ended, millis, now_rfc3339,
};
#[cfg(feature = "state")]
use crate::tasks::shared;
use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, Task, TaskStatus};
use rmcp::task_manager::TaskExit;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// The operation a task runs: the call, to its answer.
pub(crate) type Running = Pin<Box<dyn Future<Output = Result<CallToolResult, TaskExit>> + Send>>;

impl Tasks {
    /// Whether `owner` may have another task: fewer than [`MAX_TASKS_PER_CLIENT`] of its tasks
    /// are kept. A hint for whether to wait for [`TASK_AFTER`](crate::tasks::TASK_AFTER) at
    /// all; [`Tasks::try_spawn`] decides. (With a shared store, only the store can tell: yes.)
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
