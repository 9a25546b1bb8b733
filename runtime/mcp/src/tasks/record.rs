//! A task's record (whose it is, where it stands, its result) as `tasks/get` shows it, the
//! bounds on how many are kept and for how long, and the messages of a task whose replica
//! stopped.

use rmcp::model::{DetailedTask, InputRequests, JsonObject, Task, TaskPayload, TaskStatus};
use std::collections::HashMap;
use std::time::{Duration, Instant};

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

/// How a task ended: its status, and its result or message.
pub(super) struct Ended {
    pub(super) status: TaskStatus,
    pub(super) result: Option<JsonObject>,
    pub(super) message: Option<String>,
}

/// A task's record: whose it is, where it stands, and its result once it has one.
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub(super) owner: String,
    pub(super) status: TaskStatus,
    pub(super) created: String,
    pub(super) updated: String,
    /// How long it is kept from `updated` (ms).
    pub(super) ttl_ms: u64,
    /// The result (a `CallToolResult`), once completed.
    pub(super) result: Option<JsonObject>,
    pub(super) message: Option<String>,
    /// The tool's questions not answered yet, while it is `input_required`.
    pub(super) input_requests: Option<InputRequests>,
    /// When a local record is forgotten (an ended task's, [`TASK_TTL`] after it ended).
    pub(super) forget_at: Option<Instant>,
}

impl Record {
    pub(super) fn detailed(&self, task_id: &str) -> DetailedTask {
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

pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Now, as tasks' timestamps are written (RFC 3339, UTC).
pub(super) fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Forget local records whose time to live has passed since they ended.
pub(super) fn forget_ended(records: &mut HashMap<String, Record>) {
    let now = Instant::now();
    records.retain(|_, record| record.forget_at.is_none_or(|at| at > now));
}
