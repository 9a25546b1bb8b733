//! The limits one call runs under, and what each protects against.
//!
//! Each default is a named constant. [`Limits`] carries a call's values; a caller may change
//! any of them for one call.

use crate::call::stop::StopToken;
use std::time::Duration;

/// How long one call may run, wall clock, from the start of instantiation to the result.
/// Protects the caller from a guest that loops or waits forever; long enough for a tool that
/// reads a few files or greps a repository.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How much linear memory one instance may have. Protects the host from a guest that allocates
/// without end; ample for tools that handle text (a Rust guest starts with about 1 MiB).
pub const DEFAULT_MEMORY_BYTES: usize = 64 * 1024 * 1024;

/// How many core instances one component instantiation may create. A Rust wasm32-wasip2
/// component creates about 3, a JavaScript one 4 (componentize-js) or 8 (componentize-qjs), a
/// Python one 14 (componentize-py links the interpreter, libc and each native extension module
/// as modules of their own), so this leaves a Python tool room for 50 native extension modules
/// (numpy alone has about 20). The
/// bound stops a component that instantiates without end; each slot of it costs the pool
/// address space only (BENCHMARKS.md, "Tools in Python and JavaScript").
pub const MAX_INSTANCES: usize = 64;

/// How many tables one instance may have (a Rust component has 2).
pub const MAX_TABLES: usize = 16;

/// How many linear memories one instance may have (a Rust component has 1).
pub const MAX_MEMORIES: usize = 4;

/// How many elements a table may grow to. Protects the host from a guest that grows a table
/// without end; Rust guests use a few hundred.
pub const MAX_TABLE_ELEMENTS: usize = 100_000;

/// The most bytes of JSON arguments a call may carry. Checked before anything is
/// instantiated: a model that emits megabytes of arguments has gone wrong, and the guest would
/// have to copy them into its memory.
pub const MAX_ARGUMENT_BYTES: usize = 1024 * 1024;

/// The default result cap, in bytes: what a model's context should take from one call.
pub const DEFAULT_RESULT_CAP: usize = 64 * 1024;

/// How long a component's `describe()` may run at load. Describing is a constant answer; a
/// component that takes longer is refused rather than allowed to stall the host's start.
pub const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(1);

/// The limits of one call.
///
/// `Limits::default()` is: a [`DEFAULT_TIMEOUT`] deadline, [`DEFAULT_MEMORY_BYTES`] of memory,
/// and no fuel limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The wall-clock deadline of the call.
    pub timeout: Duration,
    /// The most linear memory the instance may have, in bytes.
    pub memory_bytes: usize,
    /// If set, the call may execute at most this many units of fuel (roughly, wasm
    /// instructions): a deterministic bound on CPU, the same on every machine.
    pub fuel: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: DEFAULT_TIMEOUT,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            fuel: None,
        }
    }
}

impl Limits {
    /// These limits with every override in `options` applied.
    pub fn overridden_by(mut self, options: &CallOptions) -> Limits {
        if let Some(timeout) = options.timeout {
            self.timeout = timeout;
        }
        if let Some(memory_bytes) = options.memory_bytes {
            self.memory_bytes = memory_bytes;
        }
        if options.fuel.is_some() {
            self.fuel = options.fuel;
        }
        self
    }
}

/// What one caller asks of one call beyond its request: limits that override the tool's own
/// (from policy), and a token to stop it. `CallOptions::default()` changes nothing.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Override the wall-clock deadline.
    pub timeout: Option<Duration>,
    /// Override the memory limit, in bytes.
    pub memory_bytes: Option<usize>,
    /// Set a fuel limit: a deterministic bound on the instructions the call may execute.
    pub fuel: Option<u64>,
    /// Stop the call when this token is stopped.
    pub stop: Option<StopToken>,
}

/// The resource limiter of one call's store. It enforces [`Limits`] like wasmtime's
/// `StoreLimits`, and also remembers that it refused memory, so an allocation failure the
/// guest turns into a trap can be reported as out of memory.
pub(crate) struct CallLimiter {
    memory_bytes: usize,
    pub(crate) refused_memory: bool,
    /// The largest linear memory the guest was allowed, in bytes: its cost in memory.
    pub(crate) peak_memory: usize,
}

impl CallLimiter {
    pub(crate) fn new(limits: &Limits) -> Self {
        CallLimiter {
            memory_bytes: limits.memory_bytes,
            refused_memory: false,
            peak_memory: 0,
        }
    }
}

impl wasmtime::ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.memory_bytes;
        self.refused_memory |= !allowed;
        if allowed {
            self.peak_memory = self.peak_memory.max(desired);
        }
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn memories(&self) -> usize {
        MAX_MEMORIES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_override_only_what_they_set() {
        let tool = Limits {
            timeout: Duration::from_secs(2),
            memory_bytes: 1 << 20,
            fuel: Some(7),
        };
        assert_eq!(tool.overridden_by(&CallOptions::default()), tool);
        let options = CallOptions {
            timeout: Some(Duration::from_millis(100)),
            fuel: Some(9),
            ..CallOptions::default()
        };
        assert_eq!(
            tool.overridden_by(&options),
            Limits {
                timeout: Duration::from_millis(100),
                memory_bytes: 1 << 20,
                fuel: Some(9),
            }
        );
    }
}
