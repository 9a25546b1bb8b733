//! Where task records are kept (in this process, or in the store replicas share), and what
//! [`Tasks`] holds beside them: the tasks running here, and those waiting for answers.

use crate::tasks::record::Record;
use rmcp::ErrorData as McpError;
use rmcp::model::InputResponses;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Where task records are kept: in this process, or in the store replicas share.
pub(super) enum Board {
    Local(Mutex<HashMap<String, Record>>),
    #[cfg(feature = "state")]
    Shared(Arc<crate::state::Store>),
}

/// A task that ran here and ended while the shared store could not be reached: its end is kept
/// here, written when the store is back, and answered here meanwhile, so that no result that
/// was reached is lost.
#[cfg(feature = "state")]
pub(super) struct Unwritten {
    pub(super) record: Record,
}

/// The tasks of one server (or, with a shared store, of every replica), each its client's.
pub struct Tasks {
    pub(super) board: Board,
    /// The tasks running in this process, by id: what stops each.
    pub(super) running: Mutex<HashMap<String, CancellationToken>>,
    /// The tasks of this process waiting for their client's answers, by id: where
    /// `tasks/update` puts them.
    pub(super) inboxes: Mutex<HashMap<String, Arc<Inbox>>>,
    /// Ended here, not yet written to the shared store.
    #[cfg(feature = "state")]
    pub(super) unwritten: Mutex<HashMap<String, Unwritten>>,
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
}

/// The answers `tasks/update` brought a task waiting for its client, until it takes them.
#[derive(Default)]
pub(super) struct Inbox {
    pub(super) answers: Mutex<InputResponses>,
    pub(super) arrived: tokio::sync::Notify,
}

impl Drop for Tasks {
    fn drop(&mut self) {
        // The calls of tasks nobody can poll any more stop with the server.
        for cancel in toolcell::sync::lock(&self.running).values() {
            cancel.cancel();
        }
    }
}

pub(super) fn unknown(task: &str) -> McpError {
    McpError::invalid_params(
        format!("unknown task: {}", toolcell::registry::echoed(task)),
        None,
    )
}
