//! The epoch ticker: the clock that lets a deadline interrupt a guest running pure wasm.
//!
//! With epoch interruption on, compiled guest code checks the engine's epoch at loop headers
//! and function entries. A thread advances the epoch every [`EPOCH_TICK`] while calls run,
//! keeps ticking for [`EPOCH_LINGER`] after the last one ends, and then sleeps until the next
//! call, so an idle host costs nothing and a busy one does not wake the thread on every call.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use wasmtime::Engine;

/// How often the epoch advances while a call runs. It bounds how late a deadline or a stop
/// flag is noticed in pure wasm; each tick costs a running guest one callback.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// How long the ticker keeps ticking after the last call ends before it sleeps. Calls that
/// come closer together than this never pay for waking it.
pub const EPOCH_LINGER: Duration = Duration::from_millis(100);

struct State {
    running: usize,
    shutdown: bool,
    /// True while the thread waits for a call (and must be woken for one).
    parked: bool,
    /// When the last call ended.
    idle_since: Instant,
}

impl Default for State {
    fn default() -> Self {
        State {
            running: 0,
            shutdown: false,
            parked: false,
            idle_since: Instant::now(),
        }
    }
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// Advances an engine's epoch while calls run. Dropping it stops the thread.
pub(crate) struct EpochTicker {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Held while one call runs; the ticker ticks while any is held.
pub(crate) struct Running {
    shared: Arc<Shared>,
}

impl EpochTicker {
    pub(crate) fn start(engine: Engine) -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let thread = std::thread::Builder::new()
            .name("toolcell-epoch".to_owned())
            .spawn({
                let shared = Arc::clone(&shared);
                move || tick(&engine, &shared)
            })?;
        Ok(EpochTicker {
            shared,
            thread: Some(thread),
        })
    }

    /// Mark one call as running until the guard is dropped.
    pub(crate) fn running(&self) -> Running {
        let mut state = crate::sync::lock(&self.shared.state);
        state.running += 1;
        if state.parked {
            self.shared.wake.notify_one();
        }
        Running {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut state = crate::sync::lock(&self.shared.state);
        state.running = state.running.saturating_sub(1);
        if state.running == 0 {
            state.idle_since = Instant::now();
        }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        crate::sync::lock(&self.shared.state).shutdown = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            // The thread only sleeps and ticks; if it panicked there is nothing to recover.
            let _ = thread.join();
        }
    }
}

fn tick(engine: &Engine, shared: &Shared) {
    loop {
        {
            let mut state = crate::sync::lock(&shared.state);
            if state.running == 0 && state.idle_since.elapsed() >= EPOCH_LINGER {
                state.parked = true;
                while state.running == 0 && !state.shutdown {
                    state = shared.wake.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                state.parked = false;
            }
            if state.shutdown {
                return;
            }
        }
        std::thread::sleep(EPOCH_TICK);
        engine.increment_epoch();
    }
}
