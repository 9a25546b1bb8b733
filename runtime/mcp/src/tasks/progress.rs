//! Progress: a call still running after [`PROGRESS_AFTER`] reports to a client that sent a
//! progress token, every [`PROGRESS_EVERY`], until it ends.

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::{Peer, RoleServer};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How long a call runs before its client, if it sent a progress token, hears about it: long
/// enough that the quick calls (nearly all) send nothing, short enough that a person watching
/// sees the call start.
pub const PROGRESS_AFTER: Duration = Duration::from_millis(200);

/// How often a running call reports after that: often enough to keep a client that resets its
/// timeout on progress waiting, rarely enough to cost nothing.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);

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
