//! [`StopToken`]: how a caller stops a call that is running, from any thread.
//!
//! The seed's executor watches a stop flag (`RoutedCall::stop`); this is that flag with a
//! wake-up attached. A running guest notices it in two ways: the epoch callback reads the flag
//! at the next tick (a guest running wasm), and the call's future is woken at once (a guest
//! waiting in a host call, where epochs do not reach).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// A flag that stops the calls it is given to. Clones share the flag; once stopped it stays
/// stopped, and a call started with a stopped token is cancelled before it instantiates.
#[derive(Debug, Clone, Default)]
pub struct StopToken {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    stopped: AtomicBool,
    wake: Notify,
}

impl StopToken {
    /// A token that has not been stopped.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stop every call holding this token.
    pub fn stop(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        self.inner.wake.notify_waiters();
    }

    /// True once [`StopToken::stop`] has been called.
    pub fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::SeqCst)
    }

    /// Resolves once the token is stopped.
    pub async fn stopped(&self) {
        loop {
            let woken = self.inner.wake.notified();
            tokio::pin!(woken);
            // Register for the wake-up before reading the flag, so a stop in between is not
            // missed.
            woken.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            woken.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let token = StopToken::new();
        let clone = token.clone();
        assert!(!clone.is_stopped());
        token.stop();
        assert!(clone.is_stopped());
    }

    #[test]
    fn stopped_resolves_for_a_stop_from_another_thread() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        let token = StopToken::new();
        let stopper = token.clone();
        let thread = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            stopper.stop();
        });
        runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), token.stopped())
                .await
                .expect("woken by the stop");
        });
        thread.join().expect("thread");
    }
}
