//! [`Runtime`]: the one pipeline every call goes through, whatever front end it enters by and
//! whatever executes the tool.
//!
//! For each call, in this order and in this one place:
//!
//! 1. **dispatch** (the agent loop's dispatch table): `find_tool` and a refused `call_tool` are answered here;
//!    `call_tool` is unwrapped to the tool it names;
//! 2. **validate**: the arguments' size, then the tool's JSON Schema;
//! 3. **gate**: each capability the tool declares, resolved from the arguments in the call's
//!    workspace and working directory, decided by the policy, a saved rule or a person;
//! 4. **execute** the decided call, with its grants, limits, deadline and stop token: in a fresh
//!    wasm instance, or as a native tool's future;
//! 5. **cap** the text the model reads;
//! 6. **audit**: one record naming the call, the tool that ran, the agent and the workspace.
//!
//! Executors receive a call that has been decided and decide nothing themselves. The CLI, the
//! MCP server and an embedding agent loop all enter here; so does a loop that holds the runtime
//! as its [`ToolPort`].

pub(crate) mod builder;
pub(crate) mod builtin;
pub(crate) mod catalog;
pub(crate) mod context;
pub(crate) mod loader;
pub(crate) mod native;
pub(crate) mod offers;
pub(crate) mod source;
mod stages;

use crate::audit::Audit;
use crate::call::limits::CallOptions;
use crate::call::port::ToolPort;
use crate::call::proto::{ToolRequest, ToolResponse};
use crate::call::registry::Registry;
use crate::call::report::CallReport;
use crate::gate::Gate;
use crate::gate::workspace::Workspace;
use crate::pipeline::catalog::{Catalog, Loader};
use crate::pipeline::context::{Call, CallContext};
use crate::policy::PolicyError;
use crate::tool::info::ToolInfo;
use crate::wasm::WasmExecutor;
use crate::wasm::cache::CacheStats;
use crate::wasm::load::LoadError;
use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// The `tracing` target of a call's spans: `call` (with the tool, its digest, the agent, the
/// deadline, the gate's decision, the outcome, the fuel and memory used where known, and the
/// microseconds its quick stages took: `dispatch_us`, `validate_us`, `cap_us`, `audit_us`)
/// and the stages that may take long as its children: `gate` (it may wait for a person) and
/// `execute`. A stage that does
/// not happen (a call refused before the gate, a runtime without an audit) has no span and no
/// field. The quick stages are fields, not spans, because an exported span costs more than
/// they do (BENCHMARKS.md, "Traces"). They are INFO spans: a subscriber that does not enable
/// them pays almost nothing (no field is recorded), and an OpenTelemetry layer makes them a
/// trace (`toolcell --otlp-endpoint`).
pub const CALL_SPAN_TARGET: &str = "toolcell::call";

/// The runtime's own tokio runtime (its workers drive calls made from synchronous code, its
/// blocking pool checks arguments), which may be dropped anywhere: a tokio runtime dropped
/// inside async code panics, so there it is shut down in the background instead (its
/// workers end on their own), and a [`Runtime`] can be dropped in a `#[tokio::main]` too.
pub(crate) struct Io {
    handle: tokio::runtime::Handle,
    owned: Option<tokio::runtime::Runtime>,
}

impl Io {
    pub(crate) fn new(runtime: tokio::runtime::Runtime) -> Io {
        Io {
            handle: runtime.handle().clone(),
            owned: Some(runtime),
        }
    }

    /// A handle to spawn on, or to block on from a thread outside any runtime.
    pub(crate) fn handle(&self) -> &tokio::runtime::Handle {
        &self.handle
    }
}

impl Drop for Io {
    fn drop(&mut self) {
        if let Some(runtime) = self.owned.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            runtime.shutdown_background();
        }
    }
}

/// Record how long a quick stage took (from `since` to now), in microseconds, as `field` of the
/// call's `span` (a field, not a span of its own: see [`CALL_SPAN_TARGET`]); nothing, not even
/// a clock read, when the span is off.
fn record_micros(span: &tracing::Span, field: &'static str, since: std::time::Instant) {
    if !span.is_disabled() {
        let took = since.elapsed().as_micros();
        span.record(field, u64::try_from(took).unwrap_or(u64::MAX));
    }
}

/// Where a name is looked up: among the tools (a call), or among what components offer
/// beside tools (a prompt's `get`, a read, a completion). A name is only ever found where it
/// was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Namespace {
    Tools,
    Offers,
}

/// A path a call writes: its workspace's root, and the path in it.
pub(crate) type WriteKey = (PathBuf, String);

/// The pipeline: a registry of wasm and native tools, the gate, the executors, the result cap
/// and the audit record. Build one with [`Runtime::builder`]; share it between threads (it is
/// `Send + Sync`) and call it with any number of [`CallContext`]s at once. It owns a tokio
/// runtime of its own (for calls made from synchronous code); dropping it is safe anywhere,
/// inside async code too (that runtime is then shut down in the background).
///
/// ```no_run
/// use toolcell::{Call, Runtime, ToolResponse};
///
/// let runtime = Runtime::builder().build()?;
/// let context = runtime.context("agent-1", "/srv/work/repo-a")?;
/// let report = runtime.run_blocking(
///     &Call::new("1", "read_file", r#"{"path":"README.md"}"#).in_context(context),
/// );
/// if let ToolResponse::Result { text, .. } = &report.response {
///     println!("{text}");
/// }
/// # anyhow::Ok(())
/// ```
pub struct Runtime {
    /// The tools now: swapped whole by [`Runtime::reload`].
    pub(crate) catalog: std::sync::RwLock<Arc<Catalog>>,
    /// What finds and loads the components, kept for [`Runtime::reload`].
    pub(crate) loader: tokio::sync::Mutex<Loader>,
    pub(crate) gate: Gate,
    pub(crate) wasm: WasmExecutor,
    /// Drives calls made from synchronous code.
    pub(crate) io: Io,
    pub(crate) workspaces: Mutex<HashMap<PathBuf, Weak<Workspace>>>,
    /// One lock per (workspace, path) a call of a tool that is not concurrency-safe holds a
    /// write grant on, while it runs.
    pub(crate) write_locks: Mutex<HashMap<WriteKey, Arc<tokio::sync::Mutex<()>>>>,
    pub(crate) default_context: CallContext,
    pub(crate) cap: usize,
    pub(crate) audit: Option<Audit>,
    pub(crate) audit_failures: AtomicU64,
    pub(crate) load_errors: Vec<LoadError>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("tools", &self.catalog().tools.keys().collect::<Vec<_>>())
            .field("load_errors", &self.load_errors)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// This pipeline, appending a record of every call to `audit`.
    pub fn with_audit(mut self, audit: Audit) -> Self {
        self.audit = Some(audit.registering(self.own_files().clone()));
        self
    }

    /// This pipeline with results capped at `cap` bytes (default
    /// [`DEFAULT_RESULT_CAP`](crate::call::limits::DEFAULT_RESULT_CAP)).
    pub fn with_cap(mut self, cap: usize) -> Self {
        self.cap = cap;
        self
    }

    /// How many calls' audit records could not be written (each is also logged as an error).
    pub fn audit_failures(&self) -> u64 {
        self.audit_failures.load(Ordering::Relaxed)
    }

    /// The registry of every tool, wasm and native, in load order, with `core` from the
    /// policy: as it stands now (a [`reload`](Runtime::reload) makes a new one).
    pub fn registry(&self) -> Arc<Registry> {
        Arc::clone(&self.catalog().registry)
    }

    /// The tools as they stand now.
    pub(crate) fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// What the tool named `name` says about itself.
    pub fn info(&self, name: &str) -> Option<ToolInfo> {
        self.catalog().tools.get(name).map(|tool| tool.info.clone())
    }

    /// The limits a call of the tool named `name` runs under in `context` (its policy's, the
    /// context's own policy first, as the call itself decides them): what a front end reserves
    /// of a daily budget when it admits the call (its deadline, and its fuel where one is set).
    /// `find_tool` and `call_tool` are the host's own and take no time of their own; an unknown
    /// tool, the default limits.
    pub fn limits_of(&self, context: &CallContext, name: &str) -> crate::call::limits::Limits {
        match context.policy() {
            Some(policy) => policy
                .entry(name)
                .map_or_else(Default::default, |entry| entry.limits),
            None => self
                .catalog()
                .any(name)
                .map_or_else(Default::default, |tool| tool.policy.limits),
        }
    }

    /// Whether and when a call of the tool named `name` becomes a task, where a front end
    /// offers tasks (its policy's `task`, the runtime's own policy's); the default for an
    /// unknown tool and for `find_tool`/`call_tool`.
    pub fn task_policy(&self, name: &str) -> crate::policy::TaskPolicy {
        self.catalog()
            .any(name)
            .map_or_else(Default::default, |tool| tool.policy.task)
    }

    /// For a tool served from a component of plain typed exports: the function it calls, as
    /// WIT names it (`fetch`, `probe:typed/shapes@0.1.0#identity`); `None` for any other tool.
    pub fn exported_function(&self, name: &str) -> Option<String> {
        let catalog = self.catalog();
        match &catalog.tools.get(name)?.executable {
            crate::pipeline::catalog::Executable::Typed(_, function) => {
                Some(match function.path.split_last() {
                    Some((last, [])) => last.clone(),
                    Some((last, instances)) => format!("{}#{last}", instances.join("/")),
                    None => String::new(),
                })
            }
            _ => None,
        }
    }

    /// Where the tool named `name` came from: a file path, `builtin:<name>` or
    /// `native:<name>`.
    pub fn source(&self, name: &str) -> Option<String> {
        self.catalog()
            .tools
            .get(name)
            .map(|tool| tool.source.clone())
    }

    /// The sha256 of the component the tool named `name` runs (lowercase hex); `None` for a
    /// native tool or no such tool.
    pub fn digest(&self, name: &str) -> Option<String> {
        self.catalog()
            .tools
            .get(name)
            .and_then(|tool| tool.digest.clone())
    }

    /// How many bytes of the tools' compiled code are in memory now (see
    /// [`RuntimeBuilder::code_memory_budget`](crate::RuntimeBuilder::code_memory_budget)).
    pub fn resident_code_bytes(&self) -> usize {
        self.wasm.code().resident_bytes()
    }

    /// The tools that could not be loaded or registered, and why.
    pub fn load_errors(&self) -> &[LoadError] {
        &self.load_errors
    }

    /// How the components were obtained so far: described from the cache's index, their code
    /// read from the cache, or compiled. A tool's code is counted when it is loaded: at start
    /// for a tool described then, at its first call for one known from the index.
    pub fn cache_stats(&self) -> CacheStats {
        self.wasm.code().stats()
    }

    /// How many calls hold a wasm instance slot right now.
    pub fn calls_in_flight(&self) -> usize {
        self.wasm.calls_in_flight()
    }

    /// How many calls may hold a wasm instance slot at once
    /// ([`RuntimeBuilder::pool_slots`](crate::RuntimeBuilder::pool_slots)); more wait for one.
    pub fn pool_slots(&self) -> usize {
        self.wasm.pool_slots()
    }

    /// Whether this runtime meters fuel ([`RuntimeBuilder::fuel_metering`](crate::RuntimeBuilder::fuel_metering)):
    /// only then does a [`CallReport`]'s `cost.fuel` say how much a call used, and may a fuel
    /// limit or budget be set.
    pub fn meters_fuel(&self) -> bool {
        self.wasm.meters_fuel()
    }

    /// Whether `policy` can decide calls of this runtime (see [`CallContext::with_policy`]):
    /// a policy that sets a fuel limit needs a runtime that meters fuel, and one that says where
    /// tools come from or who must have signed them, or what a tool's calls need
    /// (`capabilities`, `policy_yaml`), is refused (that is decided at load, by the runtime's
    /// own policy; per call it would be silently ignored).
    pub fn check_policy(&self, policy: &crate::Policy) -> Result<(), PolicyError> {
        if policy.sets_fuel() && !self.wasm.meters_fuel() {
            return Err(PolicyError::new(
                "it sets a fuel limit, but this runtime does not meter fuel (set one \
                        in the runtime's own policy, or build it with \
                        RuntimeBuilder::fuel_metering(true))",
            ));
        }
        if policy.decides_provenance() {
            // Which tools load, from where and signed by whom, is decided once at load, by the
            // runtime's own policy; a context's policy could not narrow it per call.
            return Err(PolicyError::new(
                "it says where tools come from or who must sign them (source, signed_by, \
                 [registry]): that is decided once, when tools load, by the server's own \
                 policy",
            ));
        }
        if policy.decides_needs() {
            // A typed tool's capabilities are made when it loads, from the runtime's own
            // policy and its policy.yaml: a context's `capabilities` would be silently ignored,
            // and a tenant who tied a read to `/path` would get the whole directory instead.
            return Err(PolicyError::new(
                "it says what a tool's calls need (capabilities, policy_yaml): that is read \
                 once, when tools load, from the server's own policy",
            ));
        }
        Ok(())
    }

    /// Protect the file or directory at `path` (absolute, or relative to the current
    /// directory) from every tool's reads and writes, whatever policy a call runs under: as
    /// [`RuntimeBuilder::protect`](crate::RuntimeBuilder::protect), for a file the host writes
    /// or names after the runtime is built. A file the host *reads* for itself is better read
    /// through [`Runtime::own_files`]'s [`read`](crate::hostfs::OwnFiles::read), which
    /// registers the very file it opens.
    pub fn protect(&self, path: &Path) {
        self.gate.own_files().register(path);
    }

    /// The registry of the host's own files (`hostfs`): every file a front end reads for itself
    /// (tokens, keys, password and CA files, tenant policies) is read through it, and no tool
    /// reads or writes what it holds. Clones share the registry.
    pub fn own_files(&self) -> &crate::hostfs::OwnFiles {
        self.gate.own_files()
    }

    /// The context calls get when they name none: the builder's workspace and agent.
    pub fn default_context(&self) -> &CallContext {
        &self.default_context
    }

    /// The workspace at `path`, opened once and shared by every context that names it while
    /// any is alive, so its saved rules are one set.
    pub fn workspace(&self, path: impl AsRef<Path>) -> std::io::Result<Arc<Workspace>> {
        let canonical = path.as_ref().canonicalize()?;
        let mut open = crate::sync::lock(&self.workspaces);
        if let Some(workspace) = open.get(&canonical).and_then(Weak::upgrade) {
            return Ok(workspace);
        }
        let workspace = Arc::new(Workspace::open(&canonical)?);
        open.retain(|_, workspace| workspace.strong_count() > 0);
        open.insert(canonical, Arc::downgrade(&workspace));
        Ok(workspace)
    }

    /// A context for calls by `agent` in the workspace at `workspace`.
    pub fn context(
        &self,
        agent: impl Into<String>,
        workspace: impl AsRef<Path>,
    ) -> std::io::Result<CallContext> {
        Ok(CallContext::new(agent, Some(self.workspace(workspace)?)))
    }

    /// Run one call through the whole pipeline (see the module docs) and report what became of
    /// it. Never panics, always answers.
    pub async fn run(&self, call: &Call) -> CallReport {
        let Call {
            id,
            name,
            arguments,
            context,
            options,
        } = call;
        self.run_in(id, (name, Namespace::Tools), arguments, context, options)
            .await
    }

    /// [`Runtime::run`] from synchronous code, blocking this thread until the call ends.
    pub fn run_blocking(&self, call: &Call) -> CallReport {
        self.block_on(self.run(call))
    }

    /// Drive `future` to completion on the runtime's own executor from synchronous code. From
    /// inside another tokio runtime (where blocking that runtime's thread would panic) the
    /// future runs on a scoped thread instead; async callers should use [`Runtime::run`].
    pub(crate) fn block_on<F: Future + Send>(&self, future: F) -> F::Output
    where
        F::Output: Send,
    {
        if tokio::runtime::Handle::try_current().is_err() {
            return self.io.handle().block_on(future);
        }
        std::thread::scope(|scope| {
            let handle = self.io.handle();
            match scope.spawn(move || handle.block_on(future)).join() {
                Ok(output) => output,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        })
    }
}

/// The runtime is the real port behind the agent loop's tool seam: a loop that holds it as its
/// `ToolPort` gets the whole pipeline for every call, in the default context.
impl ToolPort for Runtime {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        self.call_with(request, &CallOptions::default())
    }

    fn call_with(&self, request: &ToolRequest, options: &CallOptions) -> ToolResponse {
        self.call_with_report(request, options).response
    }

    fn call_with_report(&self, request: &ToolRequest, options: &CallOptions) -> CallReport {
        self.block_on(self.run_in(
            &request.id,
            (&request.tool, Namespace::Tools),
            &request.arguments,
            &self.default_context,
            options,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::proto::Class;
    use crate::call::proto::FailureKind;
    use crate::call::report::GateDecision;
    use crate::pipeline::native::FnTool;
    use std::sync::atomic::AtomicUsize;

    /// A runtime built, called and dropped inside async code (where dropping a tokio runtime
    /// panics) is shut down in the background; dropped outside, as before.
    #[test]
    fn a_runtime_can_be_dropped_inside_async_code() {
        let build = || {
            Runtime::builder()
                .builtin_tools(false)
                .cache_dir(None)
                .pool_slots(1)
                .build()
                .expect("runtime")
        };
        let outer = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the outer runtime");
        let answered = outer.block_on(async {
            let runtime = build();
            let report = runtime
                .run(&Call::new("1", "find_tool", r#"{"query":"x"}"#))
                .await;
            drop(runtime);
            report.response
        });
        assert!(
            matches!(answered, ToolResponse::Result { .. }),
            "{answered:?}"
        );
        drop(build());
    }

    #[test]
    fn the_pipeline_dispatches_then_caps_and_records_the_tool_that_ran() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&runs);
        let echo = FnTool::new(
            ToolInfo::new(
                "echo",
                "Returns its text argument unchanged.",
                serde_json::json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            ),
            move |arguments, _| {
                counter.fetch_add(1, Ordering::SeqCst);
                async move { Ok(arguments["text"].as_str().unwrap_or_default().to_owned()) }
            },
        );
        let runtime = Runtime::builder()
            .builtin_tools(false)
            .cache_dir(None)
            .pool_slots(1)
            .native(echo)
            .build()
            .expect("runtime")
            .with_cap(crate::call::cap::TRUNCATION_MARKER.len() + 3);
        let report = runtime.run_blocking(&Call::new(
            "1",
            "call_tool",
            r#"{"name":"echo","arguments":{"text":"hello, world!!!!"}}"#,
        ));
        assert_eq!(
            report.response,
            ToolResponse::Result {
                text: "hel\n[truncated]".to_owned(),
                class: Class::Public,
                untrusted: false,
                truncated: true,
            }
        );
        assert_eq!(
            (report.tool.as_str(), report.via.as_deref(), report.gate),
            ("echo", Some("call_tool"), GateDecision::Allow)
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        // Answered by dispatch: the tool never runs, and the gate is never reached.
        let report = runtime.run_blocking(&Call::new("2", "find_tool", r#"{"query":"zzz"}"#));
        assert_eq!(
            report.response,
            ToolResponse::Result {
                text: "No \n[truncated]".to_owned(),
                class: Class::Public,
                untrusted: false,
                truncated: true,
            }
        );
        assert_eq!(report.gate, GateDecision::NotReached);
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        // An unknown tool is a failure of its own kind, naming the nearest tools; the gate
        // is not asked (a typo is not a permission problem), and nothing runs.
        // (This runtime's cap is a few bytes: the words are checked uncut below.)
        let report = runtime.run_blocking(&Call::new("3", "ecoh", "{}"));
        assert!(
            matches!(
                (&report.response, report.gate),
                (
                    ToolResponse::Failed {
                        kind: FailureKind::UnknownTool,
                        ..
                    },
                    GateDecision::NotReached
                )
            ),
            "{report:?}"
        );
        assert_eq!(
            runtime.registry().unknown_tool("ecoh"),
            r#"no tool named "ecoh"; did you mean echo?"#
        );
        assert_eq!(
            runtime.registry().unknown_tool("rm"),
            r#"no tool named "rm""#
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }
}
