//! What the fuzz targets in `fuzz/` call: one `check_*` function per target, and thin wrappers
//! of the crate-internal items they reach (the gate's path resolution, argument schemas).
//!
//! Compiled only with the `fuzzing` feature. Each `check_*` takes the raw fuzz input, runs it
//! through the code under test and checks properties that must hold for every input; it
//! returns `Err` with a description when one does not. The fuzz targets panic on that `Err`
//! (a crash the fuzzer records), and `runtime/mcp/tests/fuzz_regressions.rs` replays every file
//! under `fuzz/regressions/<target>/` through the same functions, so a reproducer is checked
//! exactly as the fuzzer found it. Nothing here panics on purpose: a panic is a finding in the
//! code under test.
//!
//! Past the house's 700 lines, and in the core's `src/` although it belongs with the fuzz
//! targets: its checks reach crate-internal items (validation, dispatch, the gate's path
//! resolution) the fuzz crate cannot. Moving them out needs those items public behind the
//! `fuzzing` feature first (issue 38, left for later).

use crate::call::cap::TRUNCATION_MARKER;
use crate::call::dispatch::{CALL_TOOL, Dispatch, FIND_TOOL};
use crate::call::proto::ToolResponse;
use crate::call::registry::{Entry, Registry, ToolSchema};
use crate::gate;
use crate::gate::workspace::Workspace;
use crate::pipeline::Runtime;

use crate::policy::{Policy, ToolPolicy};
use crate::tool::info::ToolInfo;
use crate::validate::{ArgumentSchema, Checked, MAX_LISTED_VIOLATIONS};
use serde_json::{Value, json};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::call::port::ToolPort as _;
/// The depth of a JSON value (what the MCP fast path compares with rmcp's parse).
pub use crate::tool::schema::json_depth;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// Wrappers of crate-internal items.

/// A path the gate resolved inside a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// Canonical, relative to the workspace ("" for the workspace itself).
    pub path: PathBuf,
    /// The directory the gate would preopen: the path if it is a directory, else its parent.
    pub dir: PathBuf,
}

/// The gate's path resolution: resolve `requested` inside `workspace`, or say why it may not
/// be used.
pub fn resolve(workspace: &Workspace, requested: &str) -> Result<ResolvedPath, String> {
    gate::resolve(workspace, requested).map(|resolved| ResolvedPath {
        path: resolved.path,
        dir: resolved.dir,
    })
}

/// A tool's compiled argument schema.
pub struct CompiledSchema(ArgumentSchema);

/// Check and compile a tool's schema as the loader does with what a component's `describe()`
/// returned: `ToolInfo::from_guest` (the text's size, JSON, the checks every description
/// gets), then `ArgumentSchema::compile` (the schema's limits, then the compile). The error
/// says why the tool would be refused.
pub fn compile_schema_text(schema_text: &str) -> Result<CompiledSchema, String> {
    let info = ToolInfo::from_guest(crate::wasm::bindings::Info {
        name: "fuzz".to_owned(),
        description: "A fuzzed schema.".to_owned(),
        input_schema: schema_text.to_owned(),
        read_only: true,
        concurrency_safe: true,
        capabilities: Vec::new(),
        output_schema: None,
    })?;
    ArgumentSchema::compile_for(&info.input_schema, crate::validate::Subject::Arguments)
        .map(CompiledSchema)
}

/// Check and compile a parsed schema as the builder does for a native tool:
/// `ToolInfo::checked`, then `ArgumentSchema::compile`.
pub fn compile_schema(schema: &Value) -> Result<CompiledSchema, String> {
    let info = ToolInfo::new("fuzz", "A fuzzed schema.", schema.clone()).checked()?;
    ArgumentSchema::compile_for(&info.input_schema, crate::validate::Subject::Arguments)
        .map(CompiledSchema)
}

/// What checking arguments as a call does came to.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckedArguments {
    /// They fit; here they are, parsed.
    Valid(Value),
    /// They do not (or are not JSON); why.
    Invalid(String),
    /// The deadline passed first.
    TimedOut,
    /// The stop token was stopped first.
    Stopped,
}

impl CompiledSchema {
    /// Parse `arguments` and check them here, to the end; returns them parsed.
    pub fn check(&self, tool: &str, arguments: &str) -> Result<Value, String> {
        self.0.check(tool, arguments)
    }

    /// Check `arguments` as the pipeline does, as a call's first stage: here if the work is
    /// small, else on the blocking pool of `pool` (whose threads must have
    /// [`VALIDATION_STACK_BYTES`](crate::validate::VALIDATION_STACK_BYTES) of stack), until `deadline`.
    pub async fn check_as_called(
        &self,
        pool: &tokio::runtime::Handle,
        tool: &str,
        arguments: &str,
        deadline: std::time::Instant,
    ) -> CheckedArguments {
        match self
            .0
            .check_within(pool, tool, arguments, deadline, None)
            .await
        {
            Checked::Valid(value) => CheckedArguments::Valid(value),
            Checked::Invalid(why) => CheckedArguments::Invalid(why),
            Checked::TimedOut => CheckedArguments::TimedOut,
            Checked::Stopped => CheckedArguments::Stopped,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// policy

/// `Policy::from_toml` on `data` (UTF-8, lossily): it answers `Ok` or `Err` and never panics;
/// it answers the same twice; a policy it accepts says what the TOML says about each tool it
/// names (`core`, the lower-cased `sha256`, a rule for each capability named), and nothing
/// about a tool it does not name.
pub fn check_policy(data: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(data);
    let first = Policy::from_toml(&text);
    let second = Policy::from_toml(&text);
    let policy = match (first, second) {
        (Err(one), Err(two)) if one == two => {
            return if one.message().is_empty() {
                Err("an empty error".to_owned())
            } else {
                Ok(())
            };
        }
        (Ok(policy), Ok(again)) => {
            if format!("{:?}", policy.files()) != format!("{:?}", again.files())
                || policy.sets_fuel() != again.sets_fuel()
            {
                return Err("two parses of the same text differ".to_owned());
            }
            policy
        }
        (one, two) => {
            return Err(format!(
                "two parses of the same text differ: {:?} / {:?}",
                one.err(),
                two.err()
            ));
        }
    };
    let table: toml::Table = toml::from_str(&text)
        .map_err(|error| format!("the policy parsed but the TOML does not: {error}"))?;
    let tools = match table.get("tools") {
        Some(toml::Value::Table(tools)) => tools.clone(),
        Some(_) => return Err("the policy parsed with a `tools` that is no table".to_owned()),
        None => toml::Table::new(),
    };
    for (name, entry) in &tools {
        let tool = policy.tool(name);
        let core = entry
            .get("core")
            .and_then(toml::Value::as_bool)
            .unwrap_or(false);
        if tool.core != core {
            return Err(format!(
                "tools.{name}: core is {core} but parsed as {}",
                tool.core
            ));
        }
        let sha256 = entry
            .get("sha256")
            .and_then(toml::Value::as_str)
            .map(str::to_lowercase);
        if tool.sha256 != sha256 {
            return Err(format!(
                "tools.{name}: sha256 {sha256:?} parsed as {:?}",
                tool.sha256
            ));
        }
        let named = ["network", "env", "clock"]
            .iter()
            .filter(|key| entry.get(**key).is_some())
            .count()
            + entry
                .get("filesystem")
                .and_then(toml::Value::as_table)
                .map_or(0, |fs| {
                    ["read", "write"]
                        .iter()
                        .filter(|key| fs.get(**key).is_some())
                        .count()
                });
        if tool.rules.len() != named {
            return Err(format!(
                "tools.{name}: {named} capabilities named, {} rules parsed",
                tool.rules.len()
            ));
        }
    }
    let unnamed = (0..)
        .map(|n| format!("fuzz-unnamed-{n}"))
        .find(|name| !tools.contains_key(name))
        .unwrap_or_default();
    if policy.tool(&unnamed) != ToolPolicy::default() {
        return Err(format!(
            "a tool the policy does not name has {:?}",
            policy.tool(&unnamed)
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// dispatch

/// The registry the dispatch check uses: the seed's (`clock` core, `echo` not), and one more
/// tool found through `find_tool` whose name and description are not ASCII-only.
pub fn dispatch_registry() -> Registry {
    let mut entries = Registry::m2b().entries().to_vec();
    entries.push(Entry {
        schema: ToolSchema {
            name: "Zeta_tool".to_owned(),
            description: "Σίσυφος İstanbul ß: not ASCII.".to_owned(),
            parameters: json!({"type": "object"}),
        },
        core: false,
    });
    Registry::new(entries)
}

/// `dispatch` on a name and arguments split from `data`: the first byte picks the name
/// (`find_tool`, `call_tool`, `echo`, or the text up to the first NUL), the rest (UTF-8,
/// lossily) is the arguments. Checks every row of the table in `call/dispatch.rs`.
pub fn check_dispatch(data: &[u8]) -> Result<(), String> {
    let Some((&selector, rest)) = data.split_first() else {
        return Ok(());
    };
    let rest = String::from_utf8_lossy(rest);
    let (name, arguments) = match selector % 4 {
        0 => (FIND_TOOL, rest.as_ref()),
        1 => (CALL_TOOL, rest.as_ref()),
        2 => ("echo", rest.as_ref()),
        _ => rest.split_once('\0').unwrap_or((rest.as_ref(), "")),
    };
    let registry = dispatch_registry();
    let decided = crate::call::dispatch::dispatch(&registry, name, arguments);
    if name != FIND_TOOL && name != CALL_TOOL {
        let expected = Dispatch::Port {
            tool: name.to_owned(),
            arguments: arguments.to_owned(),
        };
        return if decided == expected {
            Ok(())
        } else {
            Err(format!("{name:?} was not routed unchanged: {decided:?}"))
        };
    }
    let parsed = serde_json::from_str::<Value>(arguments).ok();
    if name == FIND_TOOL {
        let Dispatch::Local(text) = decided else {
            return Err(format!("find_tool went to the port: {decided:?}"));
        };
        let query = parsed
            .as_ref()
            .and_then(|value| value.get("query")?.as_str())
            .map(str::to_lowercase)
            .unwrap_or_default();
        let expected: Vec<&ToolSchema> = registry
            .entries()
            .iter()
            .map(|entry| &entry.schema)
            .filter(|schema| {
                !query.is_empty()
                    && (schema.name.to_lowercase().contains(&query)
                        || schema.description.to_lowercase().contains(&query))
            })
            .collect();
        if expected.is_empty() {
            return if text == "No tool matches." {
                Ok(())
            } else {
                Err(format!("no match expected, got {text:?}"))
            };
        }
        let lines: Vec<&str> = text.split('\n').collect();
        let header = format!("{} tool(s) match:", expected.len());
        if lines.len() != expected.len() + 2
            || lines.first() != Some(&header.as_str())
            || lines.last() != Some(&"Call it with call_tool.")
        {
            return Err(format!(
                "find_tool answered {text:?}, expected {header:?} ..."
            ));
        }
        for (line, schema) in lines[1..=expected.len()].iter().zip(&expected) {
            let listed: ToolSchema = serde_json::from_str(line)
                .map_err(|error| format!("find_tool listed {line:?}: {error}"))?;
            if listed != **schema {
                return Err(format!("find_tool listed {listed:?}, expected {schema:?}"));
            }
        }
        return Ok(());
    }
    // call_tool: the port gets a known, non-core tool and exactly the arguments object.
    let call = parsed.as_ref().and_then(Value::as_object);
    let target = call
        .and_then(|call| call.get("name"))
        .and_then(Value::as_str)
        .and_then(|name| registry.get(name))
        .filter(|entry| !entry.core);
    let inner = call
        .and_then(|call| call.get("arguments"))
        .filter(|value| value.is_object());
    match (decided, target, inner) {
        (Dispatch::Port { tool, arguments }, Some(entry), Some(inner)) => {
            if tool != entry.schema.name {
                return Err(format!(
                    "call_tool routed to {tool:?}, not {:?}",
                    entry.schema.name
                ));
            }
            let routed: Value = serde_json::from_str(&arguments)
                .map_err(|error| format!("routed arguments {arguments:?} are not JSON: {error}"))?;
            if routed != *inner {
                return Err(format!("routed {routed} instead of {inner}"));
            }
            Ok(())
        }
        (Dispatch::Local(text), None, _) | (Dispatch::Local(text), _, None) => {
            if text.is_empty() {
                Err("call_tool refused with an empty text".to_owned())
            } else {
                Ok(())
            }
        }
        (decided, target, inner) => Err(format!(
            "call_tool decided {decided:?} for target {target:?} and arguments {inner:?}"
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// cap

/// `cap_result` and `cap_text` on `data`: the first two bytes are the cap (little-endian), the
/// rest (UTF-8, lossily) the text. Checks the documented bounds: `cap_result` keeps at most
/// `cap` bytes of the text (so at most `cap + TRUNCATION_MARKER.len()` in all), `cap_text` at
/// most `cap` bytes with the marker; a text of at most `cap` bytes is untouched; a cut text is
/// a prefix of the input, cut on a character boundary no more than 3 bytes short of the room,
/// followed by the marker (or, for `cap_text` with a cap shorter than the marker, as much of
/// the marker as fits).
pub fn check_cap(data: &[u8]) -> Result<(), String> {
    let (cap, text) = match data {
        [low, high, rest @ ..] => (usize::from(u16::from_le_bytes([*low, *high])), rest),
        _ => return Ok(()),
    };
    let text = String::from_utf8_lossy(text);
    let text = text.as_ref();
    let should_cut = text.len() > cap;
    let marker = TRUNCATION_MARKER;

    let (capped, cut) = crate::call::cap::cap_result(text, cap);
    let why = |what: &str| format!("cap_result({text:?}, {cap}) = {capped:?}: {what}");
    if cut != should_cut {
        return Err(why("cut is wrong"));
    }
    if std::str::from_utf8(capped.as_bytes()).is_err() {
        return Err(why("not UTF-8"));
    }
    if !cut && capped != text {
        return Err(why("changed a text that fits"));
    }
    if cut {
        let kept = capped
            .strip_suffix(marker)
            .ok_or_else(|| why("no marker"))?;
        if !text.starts_with(kept) || kept.len() > cap || cap - kept.len() > 3 {
            return Err(why("not the longest prefix that fits"));
        }
        if capped.len() > cap + marker.len() {
            return Err(why("longer than cap plus marker"));
        }
    }

    let (capped, cut) = crate::call::cap::cap_text(text, cap);
    let why = |what: &str| format!("cap_text({text:?}, {cap}) = {capped:?}: {what}");
    if cut != should_cut {
        return Err(why("cut is wrong"));
    }
    if capped.len() > cap {
        return Err(why("longer than the cap"));
    }
    if std::str::from_utf8(capped.as_bytes()).is_err() {
        return Err(why("not UTF-8"));
    }
    if !cut && capped != text {
        return Err(why("changed a text that fits"));
    }
    if cut {
        match cap.checked_sub(marker.len()) {
            None => {
                if capped != marker[..cap] {
                    return Err(why("not the marker's first cap bytes"));
                }
            }
            Some(room) => {
                let kept = capped
                    .strip_suffix(marker)
                    .ok_or_else(|| why("no marker"))?;
                if !text.starts_with(kept) || kept.len() > room || room - kept.len() > 3 {
                    return Err(why("not the longest prefix that fits"));
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// gate_paths

/// The workspace the path check resolves in, made once per process in the temporary
/// directory (`toolcell-fuzz-gate-<pid>`):
///
/// ```text
/// <temp>/toolcell-fuzz-gate-<pid>/
///   outside/secret.txt
///   ws/                      the workspace
///     a.txt
///     sub/b.txt
///     sub/deeper/c.txt
///     link_in  -> sub        (stays inside)
///     sub/up   -> ..         (stays inside: the workspace root)
///     link_out -> ../outside (leads out)
///     sub/upup -> ../..      (leads out)
///     dangling -> nowhere
/// ```
pub struct GateFixture {
    /// The workspace.
    pub workspace: Workspace,
    /// Its canonical root.
    pub root: PathBuf,
    /// The canonical directory outside it that `link_out` points to.
    pub outside: PathBuf,
}

impl GateFixture {
    /// Make the layout above under `base` (emptied first) and open the workspace.
    pub fn create(base: &Path) -> Result<GateFixture, String> {
        let io = |what: &str, error: std::io::Error| format!("{what}: {error}");
        if base.exists() {
            std::fs::remove_dir_all(base).map_err(|e| io("emptying the fixture", e))?;
        }
        let ws = base.join("ws");
        for dir in [ws.join("sub/deeper"), base.join("outside")] {
            std::fs::create_dir_all(&dir).map_err(|e| io("mkdir", e))?;
        }
        for (file, text) in [
            (ws.join("a.txt"), "a"),
            (ws.join("sub/b.txt"), "b"),
            (ws.join("sub/deeper/c.txt"), "c"),
            (base.join("outside/secret.txt"), "secret"),
        ] {
            std::fs::write(&file, text).map_err(|e| io("write", e))?;
        }
        for (target, at) in [
            ("sub", "link_in"),
            ("..", "sub/up"),
            ("../outside", "link_out"),
            ("../..", "sub/upup"),
            ("nowhere", "dangling"),
        ] {
            std::os::unix::fs::symlink(target, ws.join(at)).map_err(|e| io("symlink", e))?;
        }
        let workspace = Workspace::open(&ws).map_err(|e| io("opening the workspace", e))?;
        let root = workspace.root().to_path_buf();
        let outside = base
            .join("outside")
            .canonicalize()
            .map_err(|e| io("canonicalize", e))?;
        Ok(GateFixture {
            workspace,
            root,
            outside,
        })
    }

    /// The process's fixture, made on first use. A fuzzer exits without dropping it, so this
    /// first removes the fixtures of processes that are gone.
    pub fn shared() -> Result<&'static GateFixture, String> {
        static FIXTURE: OnceLock<Result<GateFixture, String>> = OnceLock::new();
        FIXTURE
            .get_or_init(|| {
                let temp = std::env::temp_dir();
                let prefix = "toolcell-fuzz-gate-";
                for entry in std::fs::read_dir(&temp).into_iter().flatten().flatten() {
                    let name = entry.file_name();
                    let Some(pid) = name.to_str().and_then(|name| name.strip_prefix(prefix)) else {
                        continue;
                    };
                    if !Path::new("/proc").join(pid).exists() {
                        // Best effort: another process may be removing it too.
                        let _ = std::fs::remove_dir_all(entry.path());
                    }
                }
                GateFixture::create(&temp.join(format!("{prefix}{}", std::process::id())))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The gate's `resolve` on `data` (UTF-8, lossily; a leading `@` stands for the workspace's
/// absolute root) in [`GateFixture::shared`]. Whenever it resolves, the path is relative and
/// made of plain names only, and it is canonical: the file system, asked itself, puts the
/// path (or, for a name that does not exist yet, its directory) at exactly that place inside
/// the workspace, never behind a symlink, never outside; the directory to preopen is the path
/// or its parent, and exists inside the workspace.
pub fn check_gate_paths(data: &[u8]) -> Result<(), String> {
    let fixture = GateFixture::shared()?;
    let text = String::from_utf8_lossy(data);
    let requested = match text.strip_prefix('@') {
        Some(rest) => format!("{}{rest}", fixture.root.display()),
        None => text.into_owned(),
    };
    check_resolved(fixture, &requested)
}

/// The check of [`check_gate_paths`] for one requested path.
pub fn check_resolved(fixture: &GateFixture, requested: &str) -> Result<(), String> {
    let Ok(resolved) = resolve(&fixture.workspace, requested) else {
        return Ok(());
    };
    let why = |what: String| format!("{requested:?} resolved to {resolved:?}: {what}");
    if !resolved
        .path
        .components()
        .all(|part| matches!(part, Component::Normal(_)))
    {
        return Err(why("not a plain relative path".to_owned()));
    }
    let root = &fixture.root;
    let full = root.join(&resolved.path);
    let dir = root.join(&resolved.dir);
    // The directory to preopen exists, is a directory, and is canonical inside the workspace.
    let real_dir = std::fs::canonicalize(&dir).map_err(|e| why(format!("its dir: {e}")))?;
    if real_dir != dir || !real_dir.starts_with(root) || !real_dir.is_dir() {
        return Err(why(format!("its dir is really {real_dir:?}")));
    }
    if resolved.dir != resolved.path && resolved.path.parent() != Some(resolved.dir.as_path()) {
        return Err(why("its dir is neither the path nor its parent".to_owned()));
    }
    match std::fs::symlink_metadata(&full) {
        Ok(_) => {
            let real = std::fs::canonicalize(&full).map_err(|e| why(format!("{e}")))?;
            if real != full {
                return Err(why(format!("not canonical: it is really {real:?}")));
            }
            if real.is_dir() != (resolved.dir == resolved.path) {
                return Err(why("a directory's dir must be itself".to_owned()));
            }
        }
        Err(_) => {
            // A name that does not exist yet: its directory is its parent.
            if resolved.path.parent() != Some(resolved.dir.as_path()) {
                return Err(why("a new name's dir is not its parent".to_owned()));
            }
        }
    }
    if !full.starts_with(root) || full.starts_with(&fixture.outside) {
        return Err(why("outside the workspace".to_owned()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// schema

/// How long one check of fuzzed arguments may take, as a call, before the check of the
/// schema target calls it a finding: far beyond what the schema limits allow for the few KB
/// of a fuzz input.
pub const SCHEMA_CHECK_DEADLINE: Duration = Duration::from_secs(10);

/// The stack of a tokio worker, where the pipeline checks small arguments inline.
const WORKER_STACK_BYTES: usize = 2 * 1024 * 1024;

/// The host's validation pool as the builder makes it: threads with
/// [`VALIDATION_STACK_BYTES`](crate::validate::VALIDATION_STACK_BYTES) of stack. Unlike the host's, its
/// idle threads never exit. LeakSanitizer's check at exit once (in a 10-minute run) reported
/// a blocking thread's allocations as leaked, most likely because that thread was starting or
/// exiting just then.
fn validation_pool() -> Result<&'static tokio::runtime::Runtime, String> {
    static POOL: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_keep_alive(Duration::from_secs(7 * 24 * 3600))
            .thread_stack_size(crate::validate::VALIDATION_STACK_BYTES)
            .enable_time()
            .build()
            .map_err(|error| format!("starting the validation pool: {error}"))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Run `work` on a new thread with `stack` bytes of stack, and wait for it.
fn on_thread<T: Send + 'static>(
    stack: usize,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(work)
        .map_err(|error| format!("spawning a thread: {error}"))?
        .join()
        .map_err(|_| "the thread panicked".to_owned())
}

/// A schema and arguments from `data`: the text (UTF-8, lossily) before the first NUL is the
/// schema's JSON text (as a component's `describe()` gives it), the rest the arguments
/// (`{}` without a NUL). If the loader would accept the schema (compiled on a thread with the
/// validation pool's stack, as the loader does), the arguments are checked as a call checks
/// them (on a tokio worker's 2 MiB stack, handing big checks to the validation pool), within
/// [`SCHEMA_CHECK_DEADLINE`], and checked again to the end on the pool: both answer alike;
/// `Valid` holds exactly the parsed arguments; arguments that are not JSON are refused as
/// such; a refusal of JSON arguments is for nesting too deep or lists between 1 and
/// [`MAX_LISTED_VIOLATIONS`] violations, each naming where.
pub fn check_schema(data: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(data);
    let (schema_text, arguments) = text.split_once('\0').unwrap_or((text.as_ref(), "{}"));
    let schema_text = schema_text.to_owned();
    let pool = validation_pool()?;
    let compiled = on_thread(crate::validate::VALIDATION_STACK_BYTES, move || {
        compile_schema_text(&schema_text)
    })?;
    let Ok(compiled) = compiled else {
        return Ok(());
    };
    let compiled = Arc::new(compiled);
    let (schema, owned) = (Arc::clone(&compiled), arguments.to_owned());
    let as_called = on_thread(WORKER_STACK_BYTES, move || {
        let deadline = std::time::Instant::now() + SCHEMA_CHECK_DEADLINE;
        pool.block_on(schema.check_as_called(pool.handle(), "fuzz", &owned, deadline))
    })?;
    let (schema, owned) = (Arc::clone(&compiled), arguments.to_owned());
    let to_the_end = on_thread(crate::validate::VALIDATION_STACK_BYTES, move || {
        schema.check("fuzz", &owned)
    })?;
    let as_called = match as_called {
        CheckedArguments::Valid(value) => Ok(value),
        CheckedArguments::Invalid(why) => Err(why),
        other => {
            return Err(format!(
                "{other:?}: checking {} bytes of arguments took over {SCHEMA_CHECK_DEADLINE:?}",
                arguments.len()
            ));
        }
    };
    if as_called != to_the_end {
        return Err(format!(
            "checked as a call: {as_called:?}; checked to the end: {to_the_end:?}"
        ));
    }
    let parsed = serde_json::from_str::<Value>(arguments);
    match (as_called, parsed) {
        (Ok(value), Ok(parsed)) if value == parsed => Ok(()),
        (Ok(value), _) => Err(format!("Ok({value}) is not the arguments {arguments:?}")),
        (Err(message), Err(_)) => {
            if message.starts_with("the arguments for fuzz are not JSON") {
                Ok(())
            } else {
                Err(format!(
                    "arguments that are not JSON refused with {message:?}"
                ))
            }
        }
        (Err(message), Ok(_)) => {
            if message.starts_with("the arguments for fuzz nest ") {
                return Ok(());
            }
            let mut lines = message.split('\n');
            if lines.next() != Some("the arguments do not fit fuzz's schema:") {
                return Err(format!("refused with {message:?}"));
            }
            // A violation's own text may hold a newline (quoted from the schema).
            let at = lines.filter(|line| line.starts_with("- at ")).count();
            if at == 0 || at > MAX_LISTED_VIOLATIONS {
                return Err(format!("{at} violations listed: {message:?}"));
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------------
// component

/// Load `data` as a component into a runtime of its own (no built-in tools, no compile cache,
/// one instance slot). Building never fails because of the component; a component that does
/// not load is exactly one [`Runtime::load_errors`] entry naming it, and none is registered; one
/// that loads is the one registered tool, and a call to it answers a typed response whose
/// text respects the result cap.
pub fn check_component(data: &[u8]) -> Result<(), String> {
    load_component(data).map(drop)
}

/// What became of a component in [`check_component`].
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentOutcome {
    /// It was refused at load, for this reason.
    Refused(String),
    /// It loaded as the tool of this name, and a call with `{"text":"hi"}` answered this.
    Answered(String, ToolResponse),
}

/// The load and call of [`check_component`], checked as it says.
pub fn load_component(data: &[u8]) -> Result<ComponentOutcome, String> {
    let runtime = Runtime::builder()
        .builtin_tools(false)
        .cache_dir(None)
        .cache_key_file(None)
        .pool_slots(1)
        .component("fuzz", data.to_vec())
        .build()
        .map_err(|error| format!("the runtime did not build: {error:#}"))?;
    let errors = runtime.load_errors();
    let registry = runtime.registry();
    match (errors, registry.entries()) {
        ([error], []) => {
            if error.source != "fuzz" || error.message.is_empty() {
                return Err(format!("load error {error:?}"));
            }
            Ok(ComponentOutcome::Refused(error.message.clone()))
        }
        ([], [entry]) => {
            let name = entry.schema.name.clone();
            let response = runtime.call(&crate::call::proto::ToolRequest::new(
                "fuzz-1",
                &name,
                r#"{"text":"hi"}"#,
            ));
            match &response {
                ToolResponse::Result {
                    text, truncated, ..
                } => {
                    if text.len() > runtime.cap_bytes() {
                        return Err(format!("{name}: a result beyond the cap: {response:?}"));
                    }
                    if *truncated && !text.ends_with(TRUNCATION_MARKER) {
                        return Err(format!("{name}: cut without the marker: {response:?}"));
                    }
                }
                ToolResponse::Failed { message, .. } if message.is_empty() => {
                    return Err(format!("{name}: a failure that says nothing"));
                }
                _ => {}
            }
            Ok(ComponentOutcome::Answered(name, response))
        }
        (errors, entries) => Err(format!(
            "{} load errors and {} tools: {errors:?}",
            errors.len(),
            entries.len()
        )),
    }
}
