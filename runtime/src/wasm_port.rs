//! [`WasmToolPort`]: the real port. Every call runs in a fresh instance of the tool's
//! component, holding only what the policy grants that tool.

use crate::builtin::BUILTIN_TOOLS;
use crate::cache::{CacheStats, CompileCache, default_cache_dir, sha256_hex};
use crate::engine::{KEEP_RESIDENT_BYTES, POOL_SLOTS};
use crate::epoch::EpochTicker;
use crate::gate::{Approver, Gate, Workspace};
use crate::info::ToolInfo;
use crate::instance::{self, CallReport};
use crate::limits::{CallOptions, MAX_ARGUMENT_BYTES};
use crate::load::{self, LoadError, LoadedTool};
use crate::policy::{Policy, ToolPolicy};
use crate::sandbox::Grants;
use crate::{
    DenyReason, Entry, FailureKind, Registry, ToolPort, ToolRequest, ToolResponse, engine,
};
use anyhow::Context as _;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::Semaphore;
use wasmtime::Engine;
use wasmtime::component::Linker;

/// Builds a [`WasmToolPort`].
///
/// By default it loads the built-in tools (embedded in this crate), no tools directory, and
/// [`Policy::embedded_default`], with [`POOL_SLOTS`] instance slots, compiled components cached
/// in [`default_cache_dir`], [`KEEP_RESIDENT_BYTES`] of memory kept resident per slot, no
/// progress bar, no workspace (so no filesystem grant can be given), no approver (so a gated
/// capability is denied as `approval_required`), and fuel metered only if the policy sets a
/// fuel limit.
#[derive(Debug)]
pub struct WasmToolPortBuilder {
    builtin: bool,
    dirs: Vec<PathBuf>,
    components: Vec<(String, Vec<u8>)>,
    policy: Policy,
    pool_slots: u32,
    fuel_metering: Option<bool>,
    keep_resident_bytes: usize,
    cache_dir: Option<PathBuf>,
    progress: bool,
    workspace: Option<PathBuf>,
    approver: Option<Arc<dyn Approver>>,
}

impl WasmToolPortBuilder {
    /// Whether to load the tools that ship inside toolcell (default: yes).
    pub fn builtin_tools(mut self, load: bool) -> Self {
        self.builtin = load;
        self
    }

    /// Also load every `*.wasm` file in `dir`, in file-name order.
    pub fn tools_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dirs.push(dir.into());
        self
    }

    /// Also load this component; `source` names it in errors.
    pub fn component(mut self, source: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        self.components.push((source.into(), bytes.into()));
        self
    }

    /// How many calls may hold an instance at once (default [`POOL_SLOTS`]); more wait for a
    /// slot. At least 1.
    pub fn pool_slots(mut self, slots: u32) -> Self {
        self.pool_slots = slots.max(1);
        self
    }

    /// Whether the port meters fuel, so that a call may be given a fuel limit
    /// ([`CallOptions::fuel`], a policy's `limits.fuel`, `toolcell call --fuel`).
    ///
    /// Metering is compiled into the guests' code and costs every call some speed (4 to 6 %
    /// on compute-heavy work in `just bench`), so it is off unless asked for. By default it is
    /// on exactly when the policy sets a fuel limit for some tool. A call that asks for fuel
    /// on a port without metering is refused (`failed: internal`), never run unmetered.
    pub fn fuel_metering(mut self, on: bool) -> Self {
        self.fuel_metering = Some(on);
        self
    }

    /// How much of each instance slot's linear memory stays mapped between calls (default
    /// [`KEEP_RESIDENT_BYTES`], at most [`POOL_MAX_MEMORY_BYTES`](crate::POOL_MAX_MEMORY_BYTES)).
    ///
    /// Memory a call touches beyond this is given back to the system after the call, and the
    /// next call that needs it faults it in again: on a tool that works through tens of MiB,
    /// that is a large share of its time (a 20 MB job in `just bench`: about 50 ms, and about
    /// 42 ms with 64 MiB kept resident). More kept resident is faster for such tools, at the
    /// price of the host holding up to this much per slot that big calls have used (with
    /// [`POOL_SLOTS`] slots and 64 MiB, up to 4 GiB). Kept or not, a call's memory is reset
    /// before the next call sees it.
    pub fn keep_resident_bytes(mut self, bytes: usize) -> Self {
        self.keep_resident_bytes = bytes;
        self
    }

    /// Cache compiled components in `dir` (default: [`default_cache_dir`]), or not at all
    /// with `None`.
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Resolve every path a tool names inside `dir` (default: none, so file system
    /// capabilities are denied).
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// Ask `approver` about gated capabilities (default: no one, so they are denied with
    /// `ApprovalRequired`).
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Show a progress bar on stderr while compiling components, if stderr is a terminal
    /// (default: no).
    pub fn progress(mut self, show: bool) -> Self {
        self.progress = show;
        self
    }

    /// Use this policy instead of [`Policy::embedded_default`].
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Compile and describe every component, then build the port.
    ///
    /// A component that cannot be loaded does not stop the others: it is left out and listed
    /// in [`WasmToolPort::load_errors`]. This fails only when the host cannot run at all, or
    /// a tools directory cannot be read.
    pub fn build(self) -> anyhow::Result<WasmToolPort> {
        let mut sources = Vec::new();
        if self.builtin {
            for (name, bytes) in BUILTIN_TOOLS {
                sources.push((format!("builtin:{name}"), bytes.to_vec()));
            }
        }
        for dir in &self.dirs {
            sources.extend(read_tools_dir(dir)?);
        }
        sources.extend(self.components);

        let workspace = match &self.workspace {
            Some(dir) => Some(
                Workspace::open(dir)
                    .with_context(|| format!("opening the workspace {}", dir.display()))?,
            ),
            None => None,
        };
        let fuel_metering = self
            .fuel_metering
            .unwrap_or_else(|| self.policy.sets_fuel());
        let engine = engine::new_engine(self.pool_slots, fuel_metering, self.keep_resident_bytes)?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)
            .map_err(anyhow::Error::from)
            .context("linking WASI into the host")?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
            .map_err(anyhow::Error::from)
            .context("linking wasi:http into the host")?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("toolcell-io")
            .enable_time()
            .enable_io()
            .build()
            .context("starting the host's async runtime")?;
        let ticker = EpochTicker::start(engine.clone()).context("starting the epoch ticker")?;

        let mut port = WasmToolPort {
            engine,
            tools: Vec::new(),
            by_name: HashMap::new(),
            registry: Registry::default(),
            load_errors: Vec::new(),
            runtime,
            ticker,
            slots: Semaphore::new(self.pool_slots as usize),
            pool_slots: self.pool_slots as usize,
            fuel_metering,
            cache_stats: CacheStats::default(),
            gate: Gate::new(workspace, self.approver),
        };
        let cache = CompileCache::new(self.cache_dir);
        let mut progress = Progress::new(self.progress, sources.len());
        for (index, (source, bytes)) in sources.into_iter().enumerate() {
            let entry = cache.entry(&port.engine, &bytes);
            if !entry.exists() {
                progress.compiling(index, &source);
            }
            let loaded = port.block_on(async {
                let _running = port.ticker.running();
                load::load(&port.engine, &linker, &entry, &source, &bytes).await
            });
            match loaded {
                Ok((loaded, outcome)) => {
                    port.cache_stats.record(outcome);
                    // Hash the component only when the policy pins it.
                    let pin = self.policy.tool(&loaded.info.name).sha256;
                    match pin.map(|pin| (sha256_hex(&bytes), pin)) {
                        Some((digest, pin)) if pin != digest => {
                            port.load_errors.push(LoadError {
                                source: loaded.source,
                                message: format!(
                                    "its sha256 is {digest}, but the policy pins {} to {pin}",
                                    loaded.info.name
                                ),
                            });
                        }
                        _ => port.add(loaded, &self.policy),
                    }
                }
                Err(error) => port.load_errors.push(error),
            }
        }
        progress.finish();
        port.registry = Registry::new(
            port.tools
                .iter()
                .map(|tool| Entry {
                    schema: tool.loaded.info.schema(),
                    core: tool.policy.core,
                })
                .collect(),
        );
        Ok(port)
    }
}

/// The `*.wasm` files in `dir`, sorted by name, with their bytes.
fn read_tools_dir(dir: &Path) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading the tools directory {}", dir.display()))?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("reading the tools directory {}", dir.display()))?
            .path();
        if path.extension().is_some_and(|ext| ext == "wasm") {
            paths.push(path);
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let bytes =
                std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            Ok((path.display().to_string(), bytes))
        })
        .collect()
}

/// A progress bar over the components being loaded, shown on a terminal once the first one
/// needs compiling (a warm cache shows nothing).
struct Progress {
    enabled: bool,
    total: usize,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(requested: bool, total: usize) -> Self {
        use std::io::IsTerminal as _;
        Progress {
            enabled: requested && std::io::stderr().is_terminal(),
            total,
            bar: None,
        }
    }

    fn compiling(&mut self, index: usize, source: &str) {
        if !self.enabled {
            return;
        }
        let total = self.total as u64;
        let bar = self.bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new(total);
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("compiling {pos}/{len} {bar:30} {msg}")
            {
                bar.set_style(style);
            }
            bar
        });
        bar.set_position(index as u64);
        bar.set_message(source.to_owned());
    }

    fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// One loaded tool and its policy, resolved once at load.
struct Tool {
    loaded: LoadedTool,
    policy: ToolPolicy,
}

/// The real [`ToolPort`]: each call instantiates the tool's component afresh, with a WASI
/// context holding exactly the tool's grants (see [`crate::sandbox`]), under [`Limits`](crate::Limits).
///
/// Components are compiled and described once, when the port is built. Calls may come from
/// any number of threads at once.
///
/// ```no_run
/// use toolcell::{ToolPort, ToolRequest, ToolResponse, WasmToolPort};
///
/// let port = WasmToolPort::builder().build()?;
/// let response = port.call(&ToolRequest::new("1", "echo", r#"{"text":"hi"}"#));
/// assert!(matches!(response, ToolResponse::Result { text, .. } if text == "hi"));
/// # anyhow::Ok(())
/// ```
pub struct WasmToolPort {
    engine: Engine,
    tools: Vec<Tool>,
    by_name: HashMap<String, usize>,
    registry: Registry,
    load_errors: Vec<LoadError>,
    runtime: tokio::runtime::Runtime,
    ticker: EpochTicker,
    /// One permit per pool slot: a call holds one while its instance lives.
    slots: Semaphore,
    pool_slots: usize,
    /// Whether the engine meters fuel (see [`WasmToolPortBuilder::fuel_metering`]).
    fuel_metering: bool,
    cache_stats: CacheStats,
    gate: Gate,
}

impl std::fmt::Debug for WasmToolPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmToolPort")
            .field("tools", &self.by_name.keys().collect::<Vec<_>>())
            .field("load_errors", &self.load_errors)
            .finish_non_exhaustive()
    }
}

impl WasmToolPort {
    /// A builder with the defaults: built-in tools, the embedded default policy.
    pub fn builder() -> WasmToolPortBuilder {
        WasmToolPortBuilder {
            builtin: true,
            dirs: Vec::new(),
            components: Vec::new(),
            policy: Policy::embedded_default(),
            pool_slots: POOL_SLOTS,
            fuel_metering: None,
            keep_resident_bytes: KEEP_RESIDENT_BYTES,
            cache_dir: default_cache_dir(),
            progress: false,
            workspace: None,
            approver: None,
        }
    }

    /// The registry of the loaded tools, in load order, with `core` from the policy.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// How the components were obtained: from the cache, or compiled.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache_stats
    }

    /// How many calls hold an instance slot right now.
    pub fn calls_in_flight(&self) -> usize {
        self.pool_slots
            .saturating_sub(self.slots.available_permits())
    }

    /// The components that could not be loaded, and why.
    pub fn load_errors(&self) -> &[LoadError] {
        &self.load_errors
    }

    /// What the tool named `name` says about itself.
    pub fn info(&self, name: &str) -> Option<&ToolInfo> {
        self.tool(name).map(|tool| &tool.loaded.info)
    }

    /// Where the tool named `name` was loaded from.
    pub fn source(&self, name: &str) -> Option<&str> {
        self.tool(name).map(|tool| tool.loaded.source.as_str())
    }

    /// Run one call from async code, under the tool's limits.
    pub async fn call_async(&self, request: &ToolRequest) -> ToolResponse {
        self.call_report(request, &CallOptions::default())
            .await
            .response
    }

    /// Run one call from async code with per-call options, and report what the guest wrote
    /// beside its response. Every other way of calling the port comes here.
    pub async fn call_report(&self, request: &ToolRequest, options: &CallOptions) -> CallReport {
        let Some(tool) = self.tool(&request.tool) else {
            return CallReport::host_answer(ToolResponse::Denied {
                reason: DenyReason::NoGrant,
            });
        };
        if request.arguments.len() > MAX_ARGUMENT_BYTES {
            return CallReport::host_answer(ToolResponse::failed(
                FailureKind::InvalidInput,
                format!(
                    "the arguments are {} bytes; a call may carry at most {MAX_ARGUMENT_BYTES}",
                    request.arguments.len()
                ),
            ));
        }
        let limits = tool.policy.limits.overridden_by(options);
        if limits.fuel.is_some() && !self.fuel_metering {
            return CallReport::host_answer(ToolResponse::failed(
                FailureKind::Internal,
                "the call asks for a fuel limit, but this port does not meter fuel \
                 (build it with WasmToolPortBuilder::fuel_metering(true))",
            ));
        }
        let mut arguments = match tool.loaded.schema.check(&request.tool, &request.arguments) {
            Ok(arguments) => arguments,
            Err(why) => {
                return CallReport::host_answer(ToolResponse::failed(
                    FailureKind::InvalidInput,
                    why,
                ));
            }
        };
        let (grants, granted) = if tool.loaded.info.capabilities.is_empty() {
            (Grants::default(), Vec::new())
        } else {
            match self.gate.decide(
                &request.tool,
                &tool.loaded.info,
                &tool.policy,
                &mut arguments,
            ) {
                Ok(decided) => decided,
                Err(reason) => return CallReport::host_answer(ToolResponse::Denied { reason }),
            }
        };
        // The gate may have rewritten paths to the canonical ones it checked.
        let rewritten;
        let arguments_text = if grants.preopens.is_empty() {
            request.arguments.as_str()
        } else {
            rewritten = arguments.to_string();
            rewritten.as_str()
        };
        let _running = self.ticker.running();
        let mut report = instance::call(
            &self.engine,
            &tool.loaded.pre,
            &grants,
            &limits,
            options.stop.as_ref(),
            &self.slots,
            arguments_text,
        )
        .await;
        report.granted = granted;
        if let ToolResponse::Result {
            class, untrusted, ..
        } = &mut report.response
        {
            *class = tool.policy.class;
            // Text from the network is data, not instructions.
            *untrusted = tool
                .loaded
                .info
                .capabilities
                .iter()
                .any(|capability| capability.kind == crate::CapabilityKind::Network);
        }
        report
    }

    /// [`WasmToolPort::call_report`], blocking this thread until the call ends.
    pub fn call_report_blocking(&self, request: &ToolRequest, options: &CallOptions) -> CallReport {
        self.block_on(self.call_report(request, options))
    }

    fn tool(&self, name: &str) -> Option<&Tool> {
        self.by_name
            .get(name)
            .and_then(|&index| self.tools.get(index))
    }

    fn add(&mut self, loaded: LoadedTool, policy: &Policy) {
        let name = loaded.info.name.clone();
        if let Some(first) = self.tool(&name) {
            self.load_errors.push(LoadError {
                source: loaded.source,
                message: format!(
                    "a tool named {name:?} is already loaded from {}",
                    first.loaded.source
                ),
            });
            return;
        }
        self.by_name.insert(name.clone(), self.tools.len());
        self.tools.push(Tool {
            policy: policy.tool(&name),
            loaded,
        });
    }

    /// Drive `future` to completion on the port's runtime from synchronous code. From inside
    /// another tokio runtime (where blocking that runtime's thread would panic) the future runs
    /// on a scoped thread instead; async callers should use the `*_async` methods.
    pub(crate) fn block_on<F: Future + Send>(&self, future: F) -> F::Output
    where
        F::Output: Send,
    {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.runtime.block_on(future);
        }
        std::thread::scope(|scope| {
            let handle = self.runtime.handle();
            match scope.spawn(move || handle.block_on(future)).join() {
                Ok(output) => output,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}

impl ToolPort for WasmToolPort {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        self.call_with(request, &CallOptions::default())
    }

    fn call_with(&self, request: &ToolRequest, options: &CallOptions) -> ToolResponse {
        self.call_report_blocking(request, options).response
    }

    fn call_with_report(&self, request: &ToolRequest, options: &CallOptions) -> CallReport {
        self.call_report_blocking(request, options)
    }
}
