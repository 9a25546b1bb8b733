//! One guest call in a fresh store, and what became of it.
//!
//! Every call, and every `describe()` at load, gets a new `Store` holding a new
//! [`CallState`]: nothing a previous call did can be seen. The store carries the call's
//! deadline twice: an epoch callback interrupts a guest running wasm, and a timer around the
//! whole call future stops a guest that waits inside a host call, where epochs do not reach.

use crate::call::content::{self, Part};
use crate::call::report::{CallReport, Cost};
use crate::wasm::bindings::{GuestPre, Info, ToolError};

use crate::call::limits::Limits;
use crate::call::proto::{FailureKind, ToolResponse};
use crate::call::stop::StopToken;
use crate::gate::grants::Grants;
use crate::tool::offer::Offers;
use crate::wasm::sandbox::CallState;
use std::time::Instant;
use tokio::sync::Semaphore;
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

/// How much of the end of a guest's stderr a failure message quotes: enough for a panic
/// message and its location, not enough to flood a model's context.
pub const STDERR_TAIL_BYTES: usize = 2 * 1024;

/// Why the epoch callback stopped a guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Interrupted {
    TimedOut,
    Cancelled,
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Interrupted::TimedOut => f.write_str("the call's deadline passed"),
            Interrupted::Cancelled => f.write_str("the call was cancelled"),
        }
    }
}

impl std::error::Error for Interrupted {}

/// A fresh store for one call holding exactly `grants`, limited by `limits`, stopped by `stop`
/// or at `deadline`.
fn new_store(
    engine: &Engine,
    grants: &Grants,
    limits: &Limits,
    stop: Option<&StopToken>,
    deadline: Instant,
) -> wasmtime::Result<Store<CallState>> {
    let mut store = Store::new(engine, CallState::new(grants, limits));
    store.limiter(|state| &mut state.limiter);
    // Fuel and epoch deadlines both start at zero: set them before anything runs. (Only an
    // engine that meters fuel has any; see the pipeline, which refuses a fuel limit on one
    // that does not. Asked of the engine: asking the store makes an error when it has none.)
    if engine.get_consume_fuel() {
        store.set_fuel(limits.fuel.unwrap_or(u64::MAX))?;
    }
    let stop = stop.cloned();
    // Each tick the callback checks the deadline and the stop flag, and otherwise yields so
    // the timer and the stop wake-up around the call can fire too.
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if stop.as_ref().is_some_and(StopToken::is_stopped) {
            return Err(Interrupted::Cancelled.into());
        }
        if Instant::now() >= deadline {
            return Err(Interrupted::TimedOut.into());
        }
        Ok(UpdateDeadline::Yield(1))
    });
    Ok(store)
}

/// Run the guest's `describe()` in a fresh, powerless instance: what it answered (or why it
/// did not), and the end of what it wrote to stderr meanwhile (at most [`STDERR_TAIL_BYTES`]).
pub(crate) async fn describe(
    engine: &Engine,
    pre: &GuestPre<CallState>,
    limits: &Limits,
) -> (Result<Info, String>, String) {
    powerless(engine, pre, limits, "describe()", |pre, store| {
        Box::pin(pre.describe(store))
    })
    .await
}

/// Read what the guest offers beside a tool (its prompts, resources, completion) in a fresh,
/// powerless instance, as [`describe`] reads a tool: nothing if it offers nothing.
pub(crate) async fn describe_offers(
    engine: &Engine,
    pre: &GuestPre<CallState>,
    limits: &Limits,
) -> (Result<Option<Offers>, String>, String) {
    if pre.offering().is_none() {
        return (Ok(None), String::new());
    }
    let (offers, stderr) = powerless(
        engine,
        pre,
        limits,
        "list-prompts/list-resources",
        |pre, store| {
            Box::pin(async move {
                match pre.offering() {
                    Some(offering) => offering.offers.describe(store).await,
                    None => Ok(Offers::default()),
                }
            })
        },
    )
    .await;
    (offers.map(Some), stderr)
}

/// A guest function that reads a store, as [`powerless`] runs it.
type Reading<R> = for<'s> fn(
    &'s GuestPre<CallState>,
    &'s mut Store<CallState>,
) -> std::pin::Pin<
    Box<dyn std::future::Future<Output = wasmtime::Result<R>> + Send + 's>,
>;

/// Run `read` in a fresh instance with no grants, within `limits`' timeout: its answer (or
/// why there is none, naming `what`), and the end of what the guest wrote to stderr.
async fn powerless<R>(
    engine: &Engine,
    pre: &GuestPre<CallState>,
    limits: &Limits,
    what: &str,
    read: Reading<R>,
) -> (Result<R, String>, String) {
    let deadline = Instant::now() + limits.timeout;
    let mut store = match new_store(engine, &Grants::default(), limits, None, deadline) {
        Ok(store) => store,
        Err(error) => {
            let why = format!("could not make an instance: {}", error_text(&error));
            return (Err(why), String::new());
        }
    };
    let answer = match tokio::time::timeout(limits.timeout, read(pre, &mut store)).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(format!("{what} failed: {}", error_text(&error))),
        Err(_) => Err(format!(
            "{what} ran past its {} ms deadline",
            limits.timeout.as_millis()
        )),
    };
    let stderr = store.data().stderr().text;
    (answer, stderr_tail(&stderr).to_owned())
}

/// What a call runs: a component's prepared instance, and what of it: its `call`, one of its
/// typed functions, or a request of its prompts, resources or completion.
pub(crate) struct Target<'a> {
    pub(crate) pre: &'a GuestPre<CallState>,
    pub(crate) what: crate::wasm::bindings::What<'a>,
}

/// Run the guest's `call(arguments)` (or the typed function's) in a fresh instance holding
/// `grants`, under `limits`, until it answers, its deadline passes, or `stop` is stopped.
///
/// The deadline runs from now and covers the wait for a free instance slot (one of `slots`'
/// permits) as well as the call. A result's class and trust are the caller's to set.
pub(crate) async fn call(
    engine: &Engine,
    target: Target<'_>,
    grants: &Grants,
    limits: &Limits,
    stop: Option<&StopToken>,
    slots: &Semaphore,
    arguments: &str,
) -> CallReport {
    let started = Instant::now();
    let deadline = started + limits.timeout;
    let limit_ms = u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX);
    let answer = |response| CallReport {
        elapsed: started.elapsed(),
        ..CallReport::host_answer(response)
    };
    if stop.is_some_and(StopToken::is_stopped) {
        return answer(ToolResponse::Cancelled);
    }
    let stopped = async {
        match stop {
            Some(stop) => stop.stopped().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(stopped);

    // Back-pressure: when every slot is taken, wait for one rather than fail. A free slot is
    // taken at once (the semaphore is fair: none is free while calls wait for one), with no
    // timer made for a wait that does not happen. Both selects here are `biased` (their
    // branches polled in order, no random draw per call): a stop seen before the call is
    // answered above, and one that comes while the call waits is seen as soon as the other
    // side is pending.
    let shutting_down = || {
        answer(ToolResponse::failed(
            FailureKind::Internal,
            "the runtime is shutting down",
        ))
    };
    let _slot = match slots.try_acquire() {
        Ok(permit) => permit,
        Err(tokio::sync::TryAcquireError::Closed) => return shutting_down(),
        Err(tokio::sync::TryAcquireError::NoPermits) => tokio::select! {
            biased;
            permit = tokio::time::timeout_at(deadline.into(), slots.acquire()) => match permit {
                Ok(Ok(permit)) => permit,
                Ok(Err(_closed)) => return shutting_down(),
                Err(_elapsed) => return answer(ToolResponse::TimedOut { limit_ms }),
            },
            () = &mut stopped => return answer(ToolResponse::Cancelled),
        },
    };
    // A stop that came while the call waited may have come with the slot (the biased select
    // takes the slot first): a stopped call never starts its guest.
    if stop.is_some_and(StopToken::is_stopped) {
        return answer(ToolResponse::Cancelled);
    }

    let mut store = match new_store(engine, grants, limits, stop, deadline) {
        Ok(store) => store,
        Err(error) => {
            return answer(ToolResponse::failed(
                FailureKind::Internal,
                format!("could not make an instance: {}", error_text(&error)),
            ));
        }
    };
    if let Some(unopened) = &store.data().unopened {
        return answer(ToolResponse::failed(
            FailureKind::Internal,
            format!("a granted directory could not be opened for the tool: {unopened}"),
        ));
    }
    let run = async { target.pre.run(&mut store, target.what, arguments).await };
    let outcome = tokio::select! {
        biased;
        outcome = tokio::time::timeout_at(deadline.into(), run) => outcome,
        () = &mut stopped => return report(ToolResponse::Cancelled, &store, limits, started),
    };
    let (response, parts, offered) = match outcome {
        Ok(Ok(Ok((parts, None)))) => {
            let (response, parts) = answered(parts);
            (response, parts, None)
        }
        // An offer's answer keeps its parts as they are (a prompt of one text is a message).
        Ok(Ok(Ok((parts, Some(offered))))) => (
            ToolResponse::text(content::as_text(&parts)),
            parts,
            Some(offered),
        ),
        Ok(Ok(Err(error))) => (from_tool_error(error), Vec::new(), None),
        Ok(Err(error)) => (
            from_guest_error(&error, store.data(), limit_ms),
            Vec::new(),
            None,
        ),
        Err(_elapsed) => (ToolResponse::TimedOut { limit_ms }, Vec::new(), None),
    };
    CallReport {
        parts,
        offered,
        ..report(response, &store, limits, started)
    }
}

/// A guest's answer as the response and the report's parts: one text (or none) is a text
/// result with no parts; anything else is its parts, read as text for the response.
fn answered(mut parts: Vec<Part>) -> (ToolResponse, Vec<Part>) {
    match parts.as_mut_slice() {
        [] => (ToolResponse::text(String::new()), Vec::new()),
        [Part::Text { text }] => (ToolResponse::text(std::mem::take(text)), Vec::new()),
        _ => (ToolResponse::text(content::as_text(&parts)), parts),
    }
}

fn report(
    response: ToolResponse,
    store: &Store<CallState>,
    limits: &Limits,
    started: Instant,
) -> CallReport {
    let fuel = if store.engine().get_consume_fuel() {
        store
            .get_fuel()
            .ok()
            .map(|left| limits.fuel.unwrap_or(u64::MAX).saturating_sub(left))
    } else {
        None
    };
    let memory = u64::try_from(store.data().limiter.peak_memory).unwrap_or(u64::MAX);
    CallReport {
        cost: Cost {
            fuel,
            memory_bytes: Some(memory),
        },
        stdout: store.data().stdout(),
        stderr: store.data().stderr(),
        client: store.data().client.used,
        elapsed: started.elapsed(),
        ..CallReport::host_answer(response)
    }
}

/// A guest's own error, as the host's typed response: the same mapping as a native tool's.
fn from_tool_error(error: ToolError) -> ToolResponse {
    use crate::tool::error::ToolError as Native;
    match error {
        ToolError::InvalidInput(message) => Native::InvalidInput(message),
        ToolError::NotFound(message) => Native::NotFound(message),
        ToolError::Denied(message) => Native::Denied(message),
        ToolError::Failed(message) => Native::Failed(message),
    }
    .into()
}

/// What stopped a guest: the deadline, a refused allocation, fuel, or a trap.
fn from_guest_error(error: &wasmtime::Error, state: &CallState, limit_ms: u64) -> ToolResponse {
    if let Some(interrupted) = error.downcast_ref::<Interrupted>() {
        return match interrupted {
            Interrupted::TimedOut => ToolResponse::TimedOut { limit_ms },
            Interrupted::Cancelled => ToolResponse::Cancelled,
        };
    }
    if error
        .downcast_ref::<crate::wasm::client::InputRequired>()
        .is_some()
    {
        return ToolResponse::failed(
            FailureKind::InputRequired,
            "the call asked its client questions that go back with this answer; it runs \
             again when they are answered",
        );
    }
    let stderr = state.stderr().text;
    let tail = stderr_tail(&stderr);
    let with_stderr = |message: String| {
        if tail.is_empty() {
            message
        } else {
            format!("{message}\nguest stderr:\n{tail}")
        }
    };
    // wasmtime stops a guest that hands the host more than its hostcall fuel allows (a
    // typed function's 100 MB result) while it is lifted.
    if format!("{error:#}").contains("too much data is being copied") {
        return ToolResponse::failed(
            FailureKind::InvalidOutput,
            format!(
                "the tool's answer is larger than the host takes from a tool ({} MiB as values)",
                crate::wasm::typed::MAX_TYPED_TRANSFER_BYTES >> 20
            ),
        );
    }
    if state.limiter.refused_memory {
        return ToolResponse::failed(
            FailureKind::OutOfMemory,
            with_stderr(format!(
                "the tool needed more memory than its limit allows ({})",
                error_text(error)
            )),
        );
    }
    let kind = match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => FailureKind::OutOfFuel,
        Some(_) => FailureKind::Trap,
        None => FailureKind::Internal,
    };
    ToolResponse::failed(
        kind,
        with_stderr(format!("the tool crashed: {}", error_text(error))),
    )
}

/// An error and its causes on one line.
fn error_text(error: &wasmtime::Error) -> String {
    format!("{error:#}")
}

/// The last [`STDERR_TAIL_BYTES`] of `stderr`, cut on a character boundary, trimmed.
fn stderr_tail(stderr: &str) -> &str {
    let start = stderr.len().saturating_sub(STDERR_TAIL_BYTES);
    let start = stderr.ceil_char_boundary(start);
    stderr[start..].trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::proto::DenyReason;

    #[test]
    fn the_stderr_tail_is_bounded_and_whole_characters() {
        assert_eq!(stderr_tail("  panicked at x\n"), "panicked at x");
        let long = "é".repeat(STDERR_TAIL_BYTES);
        let tail = stderr_tail(&long);
        assert!(tail.len() <= STDERR_TAIL_BYTES);
        assert!(tail.chars().all(|c| c == 'é'));
    }

    #[test]
    fn tool_errors_map_to_their_typed_responses() {
        let m = || "why".to_owned();
        assert_eq!(
            from_tool_error(ToolError::InvalidInput(m())),
            ToolResponse::failed(FailureKind::InvalidInput, "why")
        );
        assert_eq!(
            from_tool_error(ToolError::NotFound(m())),
            ToolResponse::failed(FailureKind::NotFound, "why")
        );
        assert_eq!(
            from_tool_error(ToolError::Failed(m())),
            ToolResponse::failed(FailureKind::Tool, "why")
        );
        assert_eq!(
            from_tool_error(ToolError::Denied(m())),
            ToolResponse::Denied {
                reason: DenyReason::Tool { message: m() }
            }
        );
    }
}
