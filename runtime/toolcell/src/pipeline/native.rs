//! Native tools: the host's own Rust tools, beside the wasm ones, behind the same pipeline.
//!
//! An embedder implements [`NativeTool`] (or wraps a closure in [`FnTool`]) and registers it
//! with [`RuntimeBuilder::native`](crate::RuntimeBuilder::native). From then on it is a tool
//! like any other: in the same [`Registry`](crate::call::registry::Registry), core or found through
//! `find_tool` as the policy says, and every call to it goes through the one pipeline. Its
//! arguments are checked against its schema, the gate decides its declared capabilities, and
//! only then is [`NativeTool::call`] run, with the deadline and the stop token enforced around
//! it, a panic turned into a typed failure, its text capped and its call audited.
//!
//! **A native tool is trusted code in the host's process.** The pipeline hands it its grants as
//! handles (a cap-std [`Dir`] for each granted path, the allowed hosts, the granted variables,
//! the clock), so a tool that reaches the world only through its [`ToolContext`] has no more
//! reach than a wasm tool given the same grants. Nothing stops one that ignores its context
//! and calls `std::fs` directly: the grants bound a native tool only as far as it uses them.
//! Put code you did not write in a component, where the sandbox bounds it whatever it does.

use crate::call::proto::{FailureKind, ToolResponse};
use crate::call::report::CallReport;
use crate::call::stop::StopToken;
use crate::gate::grants::{FIXED_WALL_CLOCK, Grants};
use crate::policy::HostPattern;
use crate::tool::error::ToolError;
use crate::tool::info::ToolInfo;
use cap_std::fs::Dir;
use serde_json::Value;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

/// A boxed future, as [`NativeTool::call`] returns it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A tool written in Rust and run in the host's process.
///
/// ```
/// use toolcell::{NativeTool, ToolContext, ToolError, ToolInfo, native::BoxFuture};
/// use serde_json::{Value, json};
///
/// struct Shout;
///
/// impl NativeTool for Shout {
///     fn info(&self) -> ToolInfo {
///         ToolInfo::new(
///             "shout",
///             "Returns its text in capitals.",
///             json!({"type": "object", "properties": {"text": {"type": "string"}},
///                    "required": ["text"]}),
///         )
///         .read_only(true)
///     }
///
///     fn call(&self, arguments: Value, _context: ToolContext) -> BoxFuture<'_, Result<String, ToolError>> {
///         Box::pin(async move {
///             // The pipeline checked the arguments against the schema before this runs.
///             let text = arguments["text"].as_str().unwrap_or_default();
///             Ok(text.to_uppercase())
///         })
///     }
/// }
/// ```
pub trait NativeTool: Send + Sync + 'static {
    /// What the tool says about itself: its name, description, argument schema, flags and the
    /// capabilities its calls may need. Read once, when the runtime is built, and checked as a
    /// component's `describe()` is.
    fn info(&self) -> ToolInfo;

    /// Run one call. `arguments` fit the tool's schema, and any path a capability names in
    /// them has been rewritten to the canonical path the gate checked (relative to the
    /// workspace); `context` holds exactly what the gate granted.
    ///
    /// The future is polled on the caller's task. The pipeline stops waiting at the deadline
    /// or a stop, and drops the future then; a tool that blocks its thread cannot be stopped
    /// that way (and holds up its caller's thread meanwhile), so do blocking work with
    /// `tokio::task::spawn_blocking` and watch [`ToolContext::stop`].
    fn call(
        &self,
        arguments: Value,
        context: ToolContext,
    ) -> BoxFuture<'_, Result<String, ToolError>>;
}

/// What a native call is given: who is calling, where, until when, and the grants as handles.
#[derive(Debug)]
pub struct ToolContext {
    pub(crate) call_id: String,
    pub(crate) agent: String,
    pub(crate) workspace: Option<PathBuf>,
    pub(crate) cwd: PathBuf,
    pub(crate) deadline: Instant,
    pub(crate) stop: StopToken,
    pub(crate) grants: Grants,
}

/// A granted path as a handle: the directory the gate opened, the path inside it, and whether
/// the grant allows writing.
#[derive(Debug, Clone, Copy)]
pub struct GrantedPath<'a> {
    /// The granted directory, opened by the gate inside the workspace. cap-std refuses to
    /// leave it (no `..` out, no absolute paths, no symlinks that lead out).
    pub dir: &'a Dir,
    /// The path asked about, relative to `dir` (`.` for `dir` itself).
    pub path: &'a Path,
    /// True for a `filesystem.write` grant. A read grant's `Dir` is not made read-only by the
    /// kernel: a native tool keeps to it by using it only to read.
    pub writable: bool,
}

impl ToolContext {
    /// The caller's id for this call.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The agent making the call.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The canonical path of the call's workspace, for messages and records. Open files
    /// through [`ToolContext::granted`], never through this path.
    pub fn workspace(&self) -> Option<&Path> {
        self.workspace.as_deref()
    }

    /// The call's working directory, relative to the workspace (empty for its root).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// When the pipeline stops waiting for this call.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The call's stop token: stopped when the caller cancels the call.
    pub fn stop(&self) -> &StopToken {
        &self.stop
    }

    /// The grant that covers `path` (a path as it stands in the arguments the tool received,
    /// which the gate rewrote to be relative to the workspace), or `None` when the call was
    /// granted no directory holding it.
    pub fn granted<'a>(&'a self, path: &'a str) -> Option<GrantedPath<'a>> {
        let path = Path::new(path);
        self.grants
            .preopens
            .iter()
            .filter_map(|preopen| {
                let inside = if preopen.guest == "." {
                    path
                } else {
                    path.strip_prefix(&preopen.guest).ok()?
                };
                Some((preopen, inside))
            })
            // The narrowest grant that holds the path.
            .max_by_key(|(preopen, _)| preopen.guest.len())
            .map(|(preopen, inside)| GrantedPath {
                dir: &preopen.dir,
                path: if inside.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    inside
                },
                writable: preopen.writable,
            })
    }

    /// The hosts the call's requests may reach (empty: none).
    pub fn hosts(&self) -> &[HostPattern] {
        &self.grants.network
    }

    /// A granted environment variable's value.
    pub fn env(&self, name: &str) -> Option<&str> {
        self.grants
            .env
            .iter()
            .find(|(var, _)| var == name)
            .map(|(_, value)| value.as_str())
    }

    /// The wall clock as the call may read it: the real time if the call was granted the
    /// clock, [`FIXED_WALL_CLOCK`] after the Unix epoch otherwise (as a wasm tool sees it).
    pub fn wall_clock(&self) -> SystemTime {
        if self.grants.clock {
            SystemTime::now()
        } else {
            SystemTime::UNIX_EPOCH + FIXED_WALL_CLOCK
        }
    }
}

/// A native tool made of a closure: for small tools that need no type of their own.
///
/// ```
/// use toolcell::{FnTool, ToolInfo};
/// use serde_json::json;
///
/// let add = FnTool::new(
///     ToolInfo::new("add", "Adds two integers.", json!({
///         "type": "object",
///         "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
///         "required": ["a", "b"]
///     })).read_only(true),
///     |arguments, _context| async move {
///         let a = arguments["a"].as_i64().unwrap_or_default();
///         let b = arguments["b"].as_i64().unwrap_or_default();
///         Ok(a.saturating_add(b).to_string())
///     },
/// );
/// ```
pub struct FnTool<F> {
    info: ToolInfo,
    function: F,
}

impl<F, Fut> FnTool<F>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, ToolError>> + Send + 'static,
{
    /// A tool that says `info` about itself and answers each call with `function`.
    pub fn new(info: ToolInfo, function: F) -> Self {
        FnTool { info, function }
    }
}

impl<F> std::fmt::Debug for FnTool<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool").field("info", &self.info).finish()
    }
}

impl<F, Fut> NativeTool for FnTool<F>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, ToolError>> + Send + 'static,
{
    fn info(&self) -> ToolInfo {
        self.info.clone()
    }

    fn call(
        &self,
        arguments: Value,
        context: ToolContext,
    ) -> BoxFuture<'_, Result<String, ToolError>> {
        Box::pin((self.function)(arguments, context))
    }
}

/// Run one decided call of a native tool, until it answers, `timeout` passes (from now: the
/// context's deadline is set here) or its stop token is stopped. A panic in the tool is a
/// [`FailureKind::Trap`]; the host keeps serving.
///
/// The tool's future is polled right here, in the caller's task: no hand-off to another thread
/// (which cost more than a whole wasm call). At the deadline or a stop it is dropped, which
/// ends it at its next `.await`.
pub(crate) async fn run(
    tool: &Arc<dyn NativeTool>,
    arguments: Value,
    mut context: ToolContext,
    timeout: Duration,
) -> CallReport {
    let started = Instant::now();
    let answer = |response| CallReport {
        elapsed: started.elapsed(),
        ..CallReport::host_answer(response)
    };
    let deadline = started + timeout;
    context.deadline = deadline;
    let limit_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let stop = context.stop.clone();
    if stop.is_stopped() {
        return answer(ToolResponse::Cancelled);
    }
    let called = catch_unwind(AssertUnwindSafe(|| tool.call(arguments, context)));
    let outcome = match called {
        Ok(mut future) => {
            // Each poll is guarded: a panic inside the tool ends this call, not the host.
            let guarded = std::future::poll_fn(|cx| {
                match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                    Ok(Poll::Ready(result)) => Poll::Ready(Ok(result)),
                    Ok(Poll::Pending) => Poll::Pending,
                    Err(panic) => Poll::Ready(Err(panic)),
                }
            });
            tokio::select! {
                outcome = guarded => outcome,
                () = tokio::time::sleep_until(deadline.into()) => {
                    return answer(ToolResponse::TimedOut { limit_ms });
                }
                () = stop.stopped() => return answer(ToolResponse::Cancelled),
            }
        }
        Err(panic) => Err(panic),
    };
    answer(match outcome {
        Ok(Ok(text)) => ToolResponse::text(text),
        Ok(Err(error)) => error.into(),
        Err(panic) => ToolResponse::failed(
            FailureKind::Trap,
            format!("the tool panicked: {}", panic_text(panic)),
        ),
    })
}

/// What a panic said, if it said it in text.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => payload
            .downcast_ref::<&str>()
            .map_or_else(|| "(no message)".to_owned(), |text| (*text).to_owned()),
    }
}
