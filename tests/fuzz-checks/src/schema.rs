//! `schema`: a tool's schema as the loader checks it, and arguments as a call checks them.

use serde_json::Value;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use toolcell::fuzzing::{CheckedArguments, VALIDATION_STACK_BYTES, compile_schema_text};
use toolcell::limits::{MAX_ARGUMENT_DEPTH, MAX_LISTED_VIOLATIONS};

/// How long one check of fuzzed arguments may take, as a call, before the check of the
/// schema target calls it a finding: far beyond what the schema limits allow for the few KB
/// of a fuzz input.
pub const SCHEMA_CHECK_DEADLINE: Duration = Duration::from_secs(10);

/// The stack of a tokio worker, where the pipeline checks small arguments inline.
const WORKER_STACK_BYTES: usize = 2 * 1024 * 1024;

/// The host's validation pool as the builder makes it: threads with
/// [`VALIDATION_STACK_BYTES`](VALIDATION_STACK_BYTES) of stack. Unlike the host's, its
/// idle threads never exit. LeakSanitizer's check at exit once (in a 10-minute run) reported
/// a blocking thread's allocations as leaked, most likely because that thread was starting or
/// exiting just then.
fn validation_pool() -> Result<&'static tokio::runtime::Runtime, String> {
    static POOL: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_keep_alive(Duration::from_secs(7 * 24 * 3600))
            .thread_stack_size(VALIDATION_STACK_BYTES)
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
    let compiled = on_thread(VALIDATION_STACK_BYTES, move || {
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
    let to_the_end = on_thread(VALIDATION_STACK_BYTES, move || schema.check("fuzz", &owned))?;
    // A call's verdict comes from the validator's yes-or-no walk and its error from the walk
    // that names violations: the two must agree on every value that gets that far.
    if let Ok(parsed) = serde_json::from_str::<Value>(arguments)
        && toolcell::fuzzing::json_depth(&parsed) <= MAX_ARGUMENT_DEPTH
    {
        let schema = Arc::clone(&compiled);
        if !on_thread(VALIDATION_STACK_BYTES, move || schema.walks_agree(&parsed))? {
            return Err(format!(
                "the validator's two walks disagree on {arguments:?}"
            ));
        }
    }
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
