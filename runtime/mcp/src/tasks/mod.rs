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

mod answers;
mod board;
mod progress;
mod record;
#[cfg(feature = "state")]
mod shared;
mod store;

pub use answers::MAX_TASK_ROUNDS;
pub(crate) use answers::TaskHandle;
pub use board::Tasks;
pub(crate) use progress::Progress;
pub use progress::{PROGRESS_AFTER, PROGRESS_EVERY};
pub use record::{
    MAX_TASKS_PER_CLIENT, REPLICA_NOT_HEARD, REPLICA_STOPPED, RUNNING_TASK_TTL, TASK_AFTER,
    TASK_POLL_INTERVAL, TASK_TTL,
};
pub(crate) use store::Running;
