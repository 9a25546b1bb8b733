//! [`RuntimeBuilder`]: which tools a [`Runtime`] holds (built-in components, tools
//! directories, component bytes, native tools), its policy, its engine and its defaults.

use crate::call::limits::DEFAULT_RESULT_CAP;
use crate::call::registry::{Entry, Registry};
use crate::gate::{Approver, Gate};
use crate::pipeline::builtin::BUILTIN_TOOLS;
use crate::pipeline::context::{CallContext, DEFAULT_AGENT};
use crate::pipeline::native::NativeTool;
use crate::pipeline::source::ComponentSource;
use crate::pipeline::{Executable, Runtime, Tool};
use crate::policy::{Policy, ToolPolicy};
use crate::validate::{ArgumentSchema, Subject};
use crate::wasm::WasmExecutor;
use crate::wasm::cache::{CacheStats, CompileCache, default_cache_dir, default_cache_key_file};
use crate::wasm::engine::{KEEP_RESIDENT_BYTES, POOL_SLOTS};
use crate::wasm::load::LoadError;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

/// The largest component file read from a tools directory. A Python tool is about 20 MB, a
/// JavaScript one 12 MB; a file far larger is not a tool, and is not read into memory.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

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
    pulled: Vec<String>,
    source: Option<Arc<dyn ComponentSource>>,
}

/// Where a component loaded from the store came from.
struct Provenance {
    /// The manifest digest (what signatures sign).
    digest: String,
    /// The tool the policy's `source` loads under this name, if it was named there.
    named: Option<String>,
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
            pulled: Vec::new(),
            source: None,
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

    /// Protect the file at `path` from every tool's writes, in whatever workspace it lies (the
    /// command line protects its policy and audit files this way). `.git` and `.toolcell` are
    /// always protected, and so is what the policy's `[files] protected` lists.
    pub fn protect(mut self, path: impl Into<PathBuf>) -> Self {
        self.protected.push(path.into());
        self
    }

    /// Use this policy instead of [`Policy::embedded_default`].
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// Compile and describe every component, check every native tool, then build the
    /// runtime.
    ///
    /// A tool that cannot be loaded does not stop the others: it is left out and listed in
    /// [`Runtime::load_errors`]. This fails only when the host cannot run at all, or a tools
    /// directory or the default workspace cannot be opened.
    pub fn build(mut self) -> Result<Runtime, BuildError> {
        let mut sources = Vec::new();
        if self.builtin {
            for (name, bytes) in BUILTIN_TOOLS {
                sources.push((format!("builtin:{name}"), bytes.to_vec()));
            }
        }
        let mut unreadable = Vec::new();
        for dir in &self.dirs {
            let (read, refused) = read_tools_dir(dir).map_err(|source| BuildError::ToolsDir {
                dir: dir.clone(),
                source,
            })?;
            sources.extend(read);
            unreadable.extend(refused);
        }
        sources.append(&mut self.components);
        let provenance = self.pulled_sources(&mut sources, &mut unreadable);

        let fuel_metering = self
            .fuel_metering
            .unwrap_or_else(|| self.policy.sets_fuel());
        let wasm = WasmExecutor::new(self.pool_slots, fuel_metering, self.keep_resident_bytes)
            .map_err(|error| BuildError::Host(format!("{error:#}")))?;
        let workers = std::thread::available_parallelism().map_or(2, usize::from);
        let io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .thread_name("toolcell-io")
            // Its blocking pool checks arguments and compiles schemas (see validate.rs).
            .thread_stack_size(crate::validate::VALIDATION_STACK_BYTES)
            .enable_time()
            .enable_io()
            .build()
            .map_err(|error| {
                BuildError::Host(format!("starting the host's async runtime: {error}"))
            })?;

        // The keys and trust root that decide which signatures count are no tool's to write.
        self.protected.extend(self.policy.trust_files());
        let mut runtime = Runtime {
            registry: Registry::default(),
            tools: HashMap::new(),
            gate: Gate::new(
                self.approver,
                self.protected
                    .iter()
                    .fold(self.policy.files().clone(), |rules, path| {
                        rules.protecting(path)
                    }),
            ),
            wasm,
            io,
            workspaces: Default::default(),
            write_locks: Default::default(),
            default_context: CallContext::default(),
            cap: DEFAULT_RESULT_CAP,
            audit: None,
            audit_failures: AtomicU64::new(0),
            load_errors: unreadable,
            cache_stats: CacheStats::default(),
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

        let mut order = Vec::new();
        let cache = CompileCache::new(self.cache_dir, self.cache_key_file);
        let total = sources.len();
        for (index, (source, bytes)) in sources.into_iter().enumerate() {
            let entry = runtime.wasm.cache_entry(&cache, &bytes);
            if !entry.exists()
                && let Some(report) = &mut self.progress
            {
                report(Compiling {
                    index,
                    total,
                    source: &source,
                });
            }
            let loaded = runtime.block_on(runtime.wasm.load(&entry, &source, &bytes));
            let (loaded, outcome) = match loaded {
                Ok(loaded) => loaded,
                Err(error) => {
                    runtime.load_errors.push(error);
                    continue;
                }
            };
            runtime.cache_stats.record(outcome);
            let policy = self.policy.tool(&loaded.info.name);
            let from = provenance.get(&loaded.source);
            let signers = match check_provenance(
                &self.policy,
                self.source.as_deref(),
                &loaded.info.name,
                &policy,
                from,
            ) {
                Ok(signers) => signers,
                Err(message) => {
                    runtime.load_errors.push(LoadError {
                        source: loaded.source,
                        message,
                    });
                    continue;
                }
            };
            let artifact = from.map(|from| from.digest.clone());
            let digest = entry.digest().to_owned();
            if let Some(pin) = &policy.sha256
                && *pin != digest
            {
                runtime.load_errors.push(LoadError {
                    source: loaded.source,
                    message: format!(
                        "its sha256 is {digest}, but the policy pins {} to {pin}",
                        loaded.info.name
                    ),
                });
                continue;
            }
            let tool = Tool {
                info: loaded.info,
                schema: loaded.schema,
                output: loaded.output,
                policy,
                source: loaded.source,
                digest: Some(digest),
                artifact,
                signers,
                executable: Executable::Wasm(loaded.pre),
            };
            runtime.add(tool, &mut order);
        }

        for native in self.natives {
            let info = native.info();
            let source = format!("native:{}", info.name);
            let checked = info.checked().and_then(|info| {
                let schema = runtime
                    .block_on(ArgumentSchema::compile_bounded(&info.input_schema))
                    .map_err(|why| format!("tool {:?}: {why}", info.name))?;
                let output = match &info.output_schema {
                    Some(output) => Some(
                        runtime
                            .block_on(ArgumentSchema::compile_bounded_for(output, Subject::Result))
                            .map_err(|why| format!("tool {:?}: {why}", info.name))?,
                    ),
                    None => None,
                };
                Ok((info, schema, output))
            });
            match checked {
                Ok((info, schema, output)) => {
                    let tool = Tool {
                        policy: self.policy.tool(&info.name),
                        info,
                        schema,
                        output,
                        source,
                        digest: None,
                        artifact: None,
                        signers: Vec::new(),
                        executable: Executable::Native(native),
                    };
                    runtime.add(tool, &mut order);
                }
                Err(message) => runtime.load_errors.push(LoadError { source, message }),
            }
        }

        runtime.registry = Registry::new(
            order
                .iter()
                .filter_map(|name| runtime.tools.get(name))
                .map(|tool| Entry {
                    schema: tool.info.schema(),
                    core: tool.policy.core,
                })
                .collect(),
        );
        Ok(runtime)
    }
}

impl RuntimeBuilder {
    /// Read the components named by reference (to the builder and in the policy's
    /// `source`s) into `sources`; what cannot be read goes to `refused`. Returns where each
    /// came from, by source.
    fn pulled_sources(
        &mut self,
        sources: &mut Vec<Source>,
        refused: &mut Vec<LoadError>,
    ) -> HashMap<String, Provenance> {
        let mut provenance = HashMap::new();
        let named = self
            .pulled
            .iter()
            .map(|reference| (None, reference.clone()))
            .chain(
                self.policy
                    .sources()
                    .iter()
                    .map(|(tool, reference)| (Some(tool.clone()), reference.clone())),
            )
            .collect::<Vec<_>>();
        if let Some(source) = &self.source {
            // What decides which bytes a reference loads is no tool's to write, in this run or
            // the next.
            self.protected.extend(source.protected_files());
        }
        for (tool, text) in named {
            let loaded = match &self.source {
                Some(source) => source.load(&text).map_err(|error| error.0),
                None => Err("this runtime has no component source to load it from (see \
                             RuntimeBuilder::source)"
                    .to_owned()),
            };
            match loaded {
                Ok(stored) => {
                    provenance.insert(
                        stored.source.clone(),
                        Provenance {
                            digest: stored.digest,
                            named: tool,
                        },
                    );
                    sources.push((stored.source, stored.bytes));
                }
                Err(message) => refused.push(LoadError {
                    source: tool
                        .map_or_else(|| text.clone(), |tool| format!("{text} (tool {tool})")),
                    message,
                }),
            }
        }
        provenance
    }
}

/// Whether the tool `name`, loaded from where `provenance` says (a registry, or `None`
/// for anywhere else), may load under `policy`: the name the policy's `source` gave it,
/// and the signatures it requires. Its signers, as the source verified them (none when no
/// signature was required); the error names the tool.
fn check_provenance(
    policy_file: &Policy,
    source: Option<&dyn ComponentSource>,
    name: &str,
    policy: &ToolPolicy,
    provenance: Option<&Provenance>,
) -> Result<Vec<String>, String> {
    if let Some(Provenance {
        named: Some(named), ..
    }) = provenance
        && named != name
    {
        return Err(format!(
            "the policy's tools.{named}.source is a component that calls itself {name:?}"
        ));
    }
    if let Some((_, source)) = policy_file.sources().iter().find(|(tool, _)| tool == name)
        && provenance.and_then(|from| from.named.as_deref()) != Some(name)
    {
        // The policy's entry (its grants) is for the artifact it names, not for whatever
        // component calls itself the same.
        return Err(format!(
            "the policy loads {name} from {source}; a component of that name from elsewhere \
             does not get its entry"
        ));
    }
    // Each list that applies must be satisfied on its own: the tool's, and for a pulled tool
    // the registry's (a vendor's key does not stand in for the team's, nor the other way).
    let mut groups: Vec<(&str, &[crate::policy::Signer])> = Vec::new();
    if !policy.signed_by.is_empty() {
        groups.push(("its policy's signed_by", &policy.signed_by));
    }
    if provenance.is_some() && !policy_file.registry().signed_by.is_empty() {
        groups.push(("[registry] signed_by", &policy_file.registry().signed_by));
    }
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let Some(provenance) = provenance else {
        return Err(format!(
            "{name} must be signed (its policy's signed_by), and only a tool pulled from a \
             registry carries a signature"
        ));
    };
    let source = source.ok_or_else(|| format!("{name}: this runtime has no component source"))?;
    let mut signers: Vec<String> = Vec::new();
    for (list, required) in groups {
        let required: Vec<&crate::policy::Signer> = required.iter().collect();
        let named = required
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let found = source
            .check_signed(
                &provenance.digest,
                &required,
                policy_file.registry().trust_root.as_deref(),
            )
            .map_err(|why| {
                format!(
                    "{name} ({}) is refused: {why} ({list}: {named})",
                    provenance.digest
                )
            })?;
        for signer in found {
            if !signers.contains(&signer) {
                signers.push(signer);
            }
        }
    }
    Ok(signers)
}

impl Runtime {
    /// Register `tool`, unless one of its name is already there.
    fn add(&mut self, tool: Tool, order: &mut Vec<String>) {
        if let Some(first) = self.tools.get(&tool.info.name) {
            self.load_errors.push(LoadError {
                message: format!(
                    "a tool named {:?} is already loaded from {}",
                    tool.info.name, first.source
                ),
                source: tool.source,
            });
            return;
        }
        order.push(tool.info.name.clone());
        self.tools.insert(tool.info.name.clone(), tool);
    }
}

/// A component to load: where it came from, and its bytes.
type Source = (String, Vec<u8>);

/// The `*.wasm` files in `dir`, sorted by name, with their bytes; and the ones that could not
/// be read, each with why (the others load regardless).
///
/// Only regular files are read: a directory, a FIFO (opened without waiting on it), a device
/// or a dangling link named `*.wasm` is refused, and so is a link that leads out of the
/// directory. A file larger than [`MAX_COMPONENT_BYTES`] is refused before it is read.
fn read_tools_dir(dir: &Path) -> std::io::Result<(Vec<Source>, Vec<LoadError>)> {
    let entries = std::fs::read_dir(dir)?;
    let root = dir.canonicalize()?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "wasm") {
            paths.push(path);
        }
    }
    paths.sort();
    let (mut read, mut refused) = (Vec::new(), Vec::new());
    for path in paths {
        let source = path.display().to_string();
        match read_component_file(&root, &path) {
            Ok(bytes) => read.push((source, bytes)),
            Err(message) => refused.push(LoadError { source, message }),
        }
    }
    Ok((read, refused))
}

/// The bytes of the component file at `path` in the tools directory `root` (canonical), or why
/// it is not read.
fn read_component_file(root: &Path, path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let real = path
        .canonicalize()
        .map_err(|error| format!("cannot be read: {error}"))?;
    if !real.starts_with(root) {
        return Err(format!(
            "it is a link out of the tools directory (to {}); it is not followed",
            real.display()
        ));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&real)
        .map_err(|error| format!("cannot be read: {error}"))?;
    let meta = file
        .metadata()
        .map_err(|error| format!("cannot be read: {error}"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".to_owned());
    }
    if meta.len() > MAX_COMPONENT_BYTES {
        return Err(format!(
            "it is {} bytes; a component may be at most {MAX_COMPONENT_BYTES}",
            meta.len()
        ));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_COMPONENT_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot be read: {error}"))?;
    Ok(bytes)
}

/// Why a runtime could not be built at all. (A tool that cannot be loaded does not stop the
/// build: it is a [`LoadError`] in [`Runtime::load_errors`].)
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A tools directory could not be listed.
    #[error("reading the tools directory {}: {source}", dir.display())]
    ToolsDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The default workspace could not be opened.
    #[error("opening the workspace {}: {source}", dir.display())]
    Workspace {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The host cannot run at all here: the engine, its instance pool or the async runtime
    /// could not be made.
    #[error("{0}")]
    Host(String),
}

/// What [`RuntimeBuilder::on_compile`] calls.
type CompileReporter = Box<dyn FnMut(Compiling<'_>) + Send>;

/// A component about to be compiled, as [`RuntimeBuilder::on_compile`] reports it.
#[derive(Debug, Clone, Copy)]
pub struct Compiling<'a> {
    /// Its place among the components being loaded (from 0).
    pub index: usize,
    /// How many components are being loaded.
    pub total: usize,
    /// Where it came from (a file path, `builtin:echo`, a registry reference).
    pub source: &'a str,
}
