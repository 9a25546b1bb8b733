//! The wasm executor: one engine for the whole process, each decided call run in a fresh
//! instance of its tool's component, holding exactly the grants the pipeline hands it.
//!
//! It compiles and describes components at load, and runs calls; it never decides anything
//! about a call. It does not read the policy and does not validate arguments: the pipeline
//! (`pipeline/mod.rs`) has done both before a call reaches it. What it adds is the sandbox: the
//! WASI context built from the grants (`wasm/sandbox.rs`), toolcell's own file system rules in the
//! linker (`wasm/guest_fs.rs`), the store's limits, the deadline and the stop token (`wasm/instance.rs`),
//! and a slot in the instance pool.

pub(crate) mod bindings;
pub(crate) mod cache;
pub(crate) mod client;
mod config;
mod contract;
pub(crate) mod engine;
pub(crate) mod epoch;
pub(crate) mod files;
mod guest_fs;
mod guest_write;
pub(crate) mod index;
pub(crate) mod instance;
pub(crate) mod lazy;
pub(crate) mod load;
pub(crate) mod net;
pub(crate) mod offering;
pub(crate) mod sandbox;
pub(crate) mod typed;

use crate::wasm::bindings::GuestPre;
use crate::wasm::cache::{CacheEntry, CacheOutcome, CompileCache};
use crate::wasm::epoch::EpochTicker;
use crate::wasm::lazy::{CodeMemory, LazyCode};
use std::sync::Arc;

use crate::call::limits::Limits;
use crate::call::report::CallReport;
use crate::call::stop::StopToken;
use crate::gate::grants::Grants;
use crate::wasm::load::{LoadError, Loaded};
use crate::wasm::sandbox::CallState;
use anyhow::Context as _;
use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::Linker;

/// The process's wasm engine, its linker, its instance pool and its deadline ticker.
pub(crate) struct WasmExecutor {
    engine: Engine,
    linker: Linker<CallState>,
    ticker: EpochTicker,
    /// One permit per pool slot: a call holds one while its instance lives.
    slots: Semaphore,
    pool_slots: usize,
    /// Whether the engine meters fuel.
    fuel_metering: bool,
    /// The tools' compiled code, loaded when first called, under a memory budget.
    code: CodeMemory,
}

impl WasmExecutor {
    /// An engine with `pool_slots` instance slots, fuel metered or not, `keep_resident` bytes
    /// kept mapped per slot, with WASI and `wasi:http` linked, holding at most `code_budget`
    /// bytes of the tools' compiled code at once.
    pub(crate) fn new(
        pool_slots: u32,
        fuel_metering: bool,
        keep_resident: usize,
        code_budget: usize,
    ) -> anyhow::Result<WasmExecutor> {
        let engine = engine::new_engine(pool_slots, fuel_metering, keep_resident)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(anyhow::Error::from)
            .context("linking WASI into the host")?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(anyhow::Error::from)
            .context("linking wasi:http into the host")?;
        crate::wasm::guest_fs::link(&mut linker)
            .context("linking the file system rules (no links made, deny-listed names hidden)")?;
        crate::wasm::config::link(&mut linker).context("linking wasi:config/store")?;
        crate::wasm::sandbox::link(&mut linker)
            .map_err(anyhow::Error::from)
            .context("linking toolcell:tool/client")?;
        let ticker = EpochTicker::start(engine.clone()).context("starting the epoch ticker")?;
        Ok(WasmExecutor {
            engine,
            linker,
            ticker,
            slots: Semaphore::new(pool_slots as usize),
            pool_slots: pool_slots as usize,
            fuel_metering,
            code: CodeMemory::new(code_budget),
        })
    }

    /// The tools' compiled code.
    pub(crate) fn code(&self) -> &CodeMemory {
        &self.code
    }

    /// `code`'s linked code: resident, or loaded now (see [`lazy`]).
    pub(crate) async fn prepare(
        &self,
        code: &Arc<LazyCode>,
    ) -> Result<GuestPre<CallState>, String> {
        self.code.prepare(&self.engine, &self.linker, code).await
    }

    /// The engine every component is compiled for.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Whether a call may be given a fuel limit.
    pub(crate) fn meters_fuel(&self) -> bool {
        self.fuel_metering
    }

    /// How many instance slots there are.
    pub(crate) fn pool_slots(&self) -> usize {
        self.pool_slots
    }

    /// How many calls hold an instance slot right now.
    pub(crate) fn calls_in_flight(&self) -> usize {
        self.pool_slots
            .saturating_sub(self.slots.available_permits())
    }

    /// Where `bytes` compiled for this engine are (or would be) cached.
    pub(crate) fn cache_entry(&self, cache: &CompileCache, bytes: &[u8]) -> CacheEntry {
        cache.entry(&self.engine, bytes)
    }

    /// Compile (or read from its cache `entry`) and describe one component.
    pub(crate) async fn load(
        &self,
        entry: &CacheEntry,
        source: &str,
        bytes: &[u8],
    ) -> Result<(Loaded, CacheOutcome), LoadError> {
        let _running = self.ticker.running();
        load::load(&self.engine, &self.linker, entry, source, bytes).await
    }

    /// Run one decided call: a fresh instance of `pre` holding exactly `grants`, under
    /// `limits`, stopped by `stop`, running `what` of it (its `call`, a typed function, a
    /// request of its offers).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run(
        &self,
        pre: &GuestPre<CallState>,
        what: crate::wasm::bindings::What<'_>,
        grants: &Grants,
        limits: &Limits,
        stop: Option<&StopToken>,
        arguments: &str,
    ) -> CallReport {
        let _running = self.ticker.running();
        instance::call(
            &self.engine,
            instance::Target { pre, what },
            grants,
            limits,
            stop,
            &self.slots,
            arguments,
        )
        .await
    }
}
