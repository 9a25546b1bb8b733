//! The one wasmtime `Engine` a process uses, and how it is configured.

use anyhow::Context as _;
use wasmtime::{Config, Engine};

/// A new engine configured for toolcell:
///
/// - epoch interruption, so a deadline stops a guest that runs wasm without end;
/// - the component model (every tool is a component);
/// - everything else at wasmtime's defaults (Cranelift, on-demand instance allocation, a
///   512 KiB wasm stack whose overflow is a trap).
pub(crate) fn new_engine() -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.wasm_component_model(true);
    Engine::new(&config)
        .map_err(anyhow::Error::from)
        .context("configuring the wasmtime engine")
}
