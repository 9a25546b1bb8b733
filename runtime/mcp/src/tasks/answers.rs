//! Task rounds: a running task waiting for its client's answers (`input_required`), and
//! `tasks/update` bringing them.

use crate::tasks::board::{Board, Inbox, Tasks, unknown};
use crate::tasks::record::{forget_ended, now_rfc3339};
#[cfg(feature = "state")]
use crate::tasks::shared;
use rmcp::ErrorData as McpError;
use rmcp::model::{InputRequests, InputResponses, TaskStatus};
use std::sync::Arc;

/// How many times one task's tool may run again with new answers: a person answers a few
/// forms in one task, not hundreds; a tool that keeps asking is ended rather than run without
/// end.
pub const MAX_TASK_ROUNDS: usize = 16;

/// A running task, as its operation sees it: where it says it waits for its client's answers,
/// and takes them.
pub(crate) struct TaskHandle {
    pub(super) tasks: Arc<Tasks>,
    pub(super) id: String,
    /// Whose task it is (the record's owner).
    #[cfg_attr(
        not(feature = "state"),
        allow(
            dead_code,
            reason = "read where a task's questions wait in the shared store"
        )
    )]
    pub(super) owner: String,
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

impl Tasks {
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
}
