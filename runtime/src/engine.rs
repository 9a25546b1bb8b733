//! The one wasmtime `Engine` a process uses, and how it is configured.

use anyhow::Context as _;
use wasmtime::{Config, Engine};

/// A new engine configured for toolcell:
///
/// - epoch interruption, so a deadline stops a guest that runs wasm without end;
/// - fuel metering, so a caller may bound a call's instructions deterministically (a call
///   without a fuel limit gets `u64::MAX`, which it cannot exhaust);
/// - the component model (every tool is a component);
/// - no wasm backtraces: a trap is reported by its code and the guest's stderr (where a Rust
///   panic prints its message), which is what a model can use; capturing a backtrace through a
///   hostile guest's overflowed stack would cost time on every such trap;
/// - everything else at wasmtime's defaults (Cranelift, on-demand instance allocation, a
///   512 KiB wasm stack whose overflow is a trap).
pub(crate) fn new_engine() -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.consume_fuel(true);
    config.wasm_backtrace_max_frames(None);
    config.wasm_component_model(true);
    Engine::new(&config)
        .map_err(anyhow::Error::from)
        .context("configuring the wasmtime engine")
}
