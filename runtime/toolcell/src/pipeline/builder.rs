//! [`RuntimeBuilder`]: which tools a [`Runtime`] holds (built-in components, tools
//! directories, component bytes, native tools), its policy, its engine and its defaults.

use crate::call::limits::DEFAULT_RESULT_CAP;
use crate::gate::{Approver, Gate};
use crate::pipeline::Runtime;
use crate::pipeline::catalog::{CompileReporter, Compiling, Executable, Loader, Schemas, Tool};
use crate::pipeline::context::{CallContext, DEFAULT_AGENT};
use crate::pipeline::loader::{BuildError, Loaded, catalog};
use crate::pipeline::native::NativeTool;
use crate::pipeline::source::ComponentSource;
use crate::policy::Policy;
use crate::wasm::WasmExecutor;
use crate::wasm::cache::{CompileCache, default_cache_dir, default_cache_key_file};
use crate::wasm::engine::{KEEP_RESIDENT_BYTES, POOL_SLOTS};
use crate::wasm::lazy::DEFAULT_CODE_MEMORY_BUDGET;
use crate::wasm::load::LoadError;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// Builds a [`Runtime`].
///
/// By default it loads the built-in tools (embedded in this crate), no tools directory and no
/// native tool, with [`Policy::embedded_default`], [`POOL_SLOTS`] instance slots, compiled
/// components cached in [`default_cache_dir`] and authenticated with the key in
/// [`default_cache_key_file`], [`KEEP_RESIDENT_BYTES`] of memory kept resident
/// per slot, no compile progress reported, a default context with agent [`DEFAULT_AGENT`](crate::limits::DEFAULT_AGENT) and no workspace
/// (so a call that names no context can be granted no file system), no approver (so a gated
/// capability is denied as `approval_required`), results capped at [`DEFAULT_RESULT_CAP`]
/// bytes, no audit record, and fuel metered only if the policy sets a fuel limit.
pub struct RuntimeBuilder {
    builtin: bool,
    dirs: Vec<PathBuf>,
    components: Vec<(String, Vec<u8>)>,
    natives: Vec<Arc<dyn NativeTool>>,
    policy: Policy,
    pool_slots: u32,
    fuel_metering: Option<bool>,
    keep_resident_bytes: usize,
    cache_dir: Option<PathBuf>,
    cache_key_file: Option<PathBuf>,
    progress: Option<CompileReporter>,
    workspace: Option<PathBuf>,
    agent: String,
    approver: Option<Arc<dyn Approver>>,
    protected: Vec<PathBuf>,
    own_files: crate::hostfs::OwnFiles,
    policy_yamls: Vec<(String, PathBuf)>,
    pulled: Vec<String>,
    source: Option<Arc<dyn ComponentSource>>,
    code_memory_budget: usize,
    load_code_at_start: bool,
}

impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("builtin", &self.builtin)
            .field("dirs", &self.dirs)
            .field("natives", &self.natives.len())
            .field("workspace", &self.workspace)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// A builder with the defaults listed on [`RuntimeBuilder`].
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder {
            builtin: true,
            dirs: Vec::new(),
            components: Vec::new(),
            natives: Vec::new(),
            policy: Policy::embedded_default(),
            pool_slots: POOL_SLOTS,
            fuel_metering: None,
            keep_resident_bytes: KEEP_RESIDENT_BYTES,
            cache_dir: default_cache_dir(),
            cache_key_file: default_cache_key_file(),
            progress: None,
            workspace: None,
            agent: DEFAULT_AGENT.to_owned(),
            approver: None,
            protected: Vec::new(),
            own_files: crate::hostfs::OwnFiles::new(),
            policy_yamls: Vec::new(),
            pulled: Vec::new(),
            source: None,
            code_memory_budget: DEFAULT_CODE_MEMORY_BUDGET,
            load_code_at_start: false,
        }
    }
}

impl RuntimeBuilder {
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

    /// Also load the component `reference` names (for `toolcell-oci`:
    /// `oci://REGISTRY/REPOSITORY:TAG` or `@sha256:…`), through the builder's
    /// [`source`](RuntimeBuilder::source), without the network.
    pub fn pulled(mut self, reference: impl Into<String>) -> Self {
        self.pulled.push(reference.into());
        self
    }

    /// Where components named by reference come from (the builder's
    /// [`pulled`](RuntimeBuilder::pulled) and the policy's `source`s), and who signed them:
    /// `toolcell_oci::OciSource` for tools pulled from registries. Without one, such a tool
    /// is a load error, and so is any tool the policy requires to be signed.
    pub fn source(mut self, source: Arc<dyn ComponentSource>) -> Self {
        self.source = Some(source);
        self
    }

    /// Also load this component; `source` names it in errors.
    pub fn component(mut self, source: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        self.components.push((source.into(), bytes.into()));
        self
    }

    /// The Wassette `policy.yaml` of the component loaded as `source` (by
    /// [`component`](RuntimeBuilder::component), or a file of a tools directory by its path),
    /// read when it loads: for a component of plain typed exports, the grants its functions'
    /// calls may have ([`crate::policy::yaml`]). A file in a tools directory finds its own
    /// beside it without this (`STEM.policy.yaml`, or `policy.yaml` when it is alone there).
    pub fn policy_yaml(mut self, source: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        self.policy_yamls.push((source.into(), path.into()));
        self
    }

    /// Also register this native tool, after the components. It goes through the same
    /// pipeline as they do: see [`NativeTool`].
    pub fn native(mut self, tool: impl NativeTool) -> Self {
        self.natives.push(Arc::new(tool));
        self
    }

    /// How many calls may hold a wasm instance at once (default [`POOL_SLOTS`]); more wait for
    /// a slot. At least 1.
    pub fn pool_slots(mut self, slots: u32) -> Self {
        self.pool_slots = slots.max(1);
        self
    }

    /// Whether the engine meters fuel, so that a call may be given a fuel limit
    /// ([`CallOptions::fuel`](crate::CallOptions::fuel), a policy's `limits.fuel`, `toolcell
    /// call --fuel`).
    ///
    /// Metering is compiled into the guests' code and costs every call some speed (4 to 6 %
    /// on compute-heavy work in `just bench`), so it is off unless asked for. By default it is
    /// on exactly when the policy sets a fuel limit for some tool. A call that asks for fuel
    /// on a runtime without metering is refused (`failed: internal`), never run unmetered.
    pub fn fuel_metering(mut self, on: bool) -> Self {
        self.fuel_metering = Some(on);
        self
    }

    /// How much of each instance slot's linear memory stays mapped between calls (default
    /// [`KEEP_RESIDENT_BYTES`], at most [`POOL_MAX_MEMORY_BYTES`](crate::limits::POOL_MAX_MEMORY_BYTES)).
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

    /// The workspace of the default context: where the paths of a call that names no context
    /// resolve (default: none, so such calls are granted no file system). Calls in other
    /// workspaces name theirs in their [`CallContext`].
    pub fn workspace(mut self, dir: impl Into<PathBuf>) -> Self {
        self.workspace = Some(dir.into());
        self
    }

    /// The agent of the default context (default [`DEFAULT_AGENT`](crate::limits::DEFAULT_AGENT)).
    pub fn agent(mut self, agent: impl Into<String>) -> Self {
        self.agent = agent.into();
        self
    }

    /// Ask `approver` about gated capabilities (default: no one, so they are denied with
    /// `ApprovalRequired`). A call whose context brings its own approver
    /// ([`CallContext::with_approver`](crate::CallContext::with_approver)) asks that one instead.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Authenticate cache entries with the key in `file` (default: [`default_cache_key_file`];
    /// created, 0600, if missing), or cache nothing with `None`. Keep it outside the cache
    /// directory: whoever can read it can forge entries. See the `cache` module.
    pub fn cache_key_file(mut self, file: Option<PathBuf>) -> Self {
        self.cache_key_file = file;
        self
    }

    /// Call `report` before each component that must be compiled (one the cache does not
    /// hold): a front end shows progress with it (the CLI's bar). A warm cache calls it never.
    pub fn on_compile(mut self, report: impl FnMut(Compiling<'_>) + Send + 'static) -> Self {
        self.progress = Some(Box::new(report));
        self
    }

    /// Protect the file at `path` (or everything under it, for a directory) from every tool's
    /// writes, in whatever workspace it lies (the command line protects its policy and audit
    /// files this way; every tools directory is protected so). `.git` and `.toolcell` are
    /// always protected, and so is what the policy's `[files] protected` lists.
    pub fn protect(mut self, path: impl Into<PathBuf>) -> Self {
        self.protected.push(path.into());
        self
    }

    /// Keep the host's own files in `own` (default: a registry of its own), the registry a
    /// front end already read its files through before building the runtime (the command
    /// line's policy file, [`Policy::from_own_file`]). What the builder protects is added to
    /// it; [`Runtime::own_files`] is this registry.
    pub fn own_files(mut self, own: crate::hostfs::OwnFiles) -> Self {
        self.own_files = own;
        self
    }

    /// Use this policy instead of [`Policy::embedded_default`].
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The most memory the tools' compiled code may hold at once (default
    /// [`DEFAULT_CODE_MEMORY_BUDGET`](crate::limits::DEFAULT_CODE_MEMORY_BUDGET)): past it,
    /// the code of the tools called least recently is dropped, and read again from the cache
    /// on their next call. Without a cache, every component's code stays.
    pub fn code_memory_budget(mut self, bytes: usize) -> Self {
        self.code_memory_budget = bytes;
        self
    }

    /// Load every tool's code at start (default: no, each tool's on its first call, when the
    /// cache knows the tool). A server that wants every first call as fast as the later ones
    /// pays for it here, in time and memory.
    pub fn load_code_at_start(mut self, load: bool) -> Self {
        self.load_code_at_start = load;
        self
    }

    /// Find every component and check every native tool, then build the runtime.
    ///
    /// A component the cache's index knows (a built-in tool, or a file unchanged since it was
    /// last described) is not read: its description comes from the index and its code is
    /// loaded on its first call. Any other is compiled (or read compiled from the cache) and
    /// described now, once. A tool that cannot be loaded does not stop the others: it is left
    /// out and listed in [`Runtime::load_errors`]. This fails only when the host cannot run at
    /// all, or a tools directory or the default workspace cannot be opened.
    pub fn build(self) -> Result<Runtime, BuildError> {
        let fuel_metering = self
            .fuel_metering
            .unwrap_or_else(|| self.policy.sets_fuel());
        let wasm = WasmExecutor::new(
            self.pool_slots,
            fuel_metering,
            self.keep_resident_bytes,
            self.code_memory_budget,
        )
        .map_err(|error| BuildError::Engine {
            source: error.into(),
        })?;
        let workers = std::thread::available_parallelism().map_or(2, usize::from);
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("toolcell-io")
            // Its blocking pool checks arguments and compiles schemas (see validate.rs).
            .thread_stack_size(crate::validate::VALIDATION_STACK_BYTES)
            .enable_time()
            .enable_io()
            .build()
            .map_err(|source| BuildError::AsyncRuntime { source })?;

        let mut protected = self.protected;
        // A file written into a tools directory is a tool: at the next start, and under
        // `serve` within a second. No tool may write one.
        protected.extend(self.dirs.iter().cloned());
        // Nor may one write the compile cache or its key (whatever the policy's deny_read).
        protected.extend(self.cache_dir.iter().cloned());
        protected.extend(self.cache_key_file.iter().cloned());
        // The keys and trust root that decide which signatures count are no tool's to write.
        protected.extend(self.policy.trust_files());
        if let Some(source) = &self.source {
            // What decides which bytes a reference loads is no tool's to write, in this run or
            // the next.
            protected.extend(source.protected_files());
        }
        let mut loader = Loader {
            builtin: self.builtin,
            dirs: self.dirs,
            components: self
                .components
                .into_iter()
                .map(|(source, bytes)| (source, bytes.into()))
                .collect(),
            pulled: self.pulled,
            source: self.source,
            policy: self.policy,
            cache: CompileCache::new(self.cache_dir, self.cache_key_file),
            progress: self.progress,
            natives: Vec::new(),
            load_code_at_start: self.load_code_at_start,
            seen: 0,
            own: self.own_files.clone(),
            policy_yamls: self.policy_yamls,
        };
        let mut runtime = Runtime {
            catalog: Default::default(),
            loader: tokio::sync::Mutex::new(Loader::empty()),
            gate: Gate::new(self.approver, loader.policy.files().clone(), {
                for path in &protected {
                    self.own_files.register(path);
                }
                self.own_files
            }),
            wasm,
            io: super::Io::new(io),
            workspaces: Default::default(),
            write_locks: Default::default(),
            default_context: CallContext::default(),
            cap: DEFAULT_RESULT_CAP,
            audit: None,
            audit_failures: AtomicU64::new(0),
            load_errors: Vec::new(),
        };
        if let Some(dir) = &self.workspace {
            let workspace = runtime
                .workspace(dir)
                .map_err(|source| BuildError::Workspace {
                    dir: dir.clone(),
                    source,
                })?;
            runtime.default_context = CallContext::new(self.agent, Some(workspace));
        } else {
            runtime.default_context = CallContext::new(self.agent, None);
        }

        let Loaded { tools, mut errors } = runtime.block_on(loader.load(&runtime.wasm, None))?;
        for native in self.natives {
            let info = native.info();
            let source = format!("native:{}", info.name);
            let checked = info.checked().and_then(|info| {
                let schemas = runtime.block_on(Schemas::compile(&info))?;
                Ok((info, schemas))
            });
            match checked {
                Ok((info, schemas)) => loader.natives.push(Arc::new(Tool {
                    policy: loader.policy.tool(&info.name),
                    info,
                    schemas: tokio::sync::OnceCell::new_with(Some(schemas)),
                    source,
                    digest: None,
                    artifact: None,
                    signers: Vec::new(),
                    executable: Executable::Native(native),
                })),
                Err(message) => errors.push(LoadError::new(source, message)),
            }
        }
        let catalog = catalog(tools, &loader.natives, &mut errors, None);
        runtime.catalog = std::sync::RwLock::new(Arc::new(catalog));
        runtime.load_errors = errors;
        runtime.loader = tokio::sync::Mutex::new(loader);
        Ok(runtime)
    }
}
