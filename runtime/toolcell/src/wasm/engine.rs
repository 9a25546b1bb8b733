//! The one wasmtime `Engine` a process uses, and how it is configured.
//!
//! Instances come from a pool sized from what our guests use (a Rust wasm32-wasip2 component
//! instantiates about 3 core instances, 2 tables and 1 memory), so a call reuses a slot whose
//! memory is already mapped instead of mapping and unmapping its own: that `mmap`/`munmap`
//! work, and the page faults and TLB flushes that follow it, were most of a call's cost.

use crate::call::limits::{MAX_INSTANCES, MAX_MEMORIES, MAX_TABLE_ELEMENTS, MAX_TABLES};
use anyhow::Context as _;
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Engines made so far in this process.
static ENGINES_CREATED: AtomicU64 = AtomicU64::new(0);

/// How many wasm engines this process has made: one per [`Runtime`](crate::Runtime), however
/// many agents and workspaces it serves. Each engine brings its own instance pool (address
/// space reserved for every slot), so an embedder can check here that it shares one.
pub fn engines_created() -> u64 {
    ENGINES_CREATED.load(Ordering::Relaxed)
}

/// How many calls may hold an instance at once. A call that finds every slot taken waits for
/// one (see the wasm executor), rather than failing. Far above what two cores run at once, it
/// leaves room for calls that wait in host calls; each slot reserves address space, not memory.
pub const POOL_SLOTS: u32 = 64;

/// The most linear memory any one instance can be given, whatever a call asks for: the size of
/// a pool slot. The per-call limit (`Limits::memory_bytes`) applies within it.
pub const POOL_MAX_MEMORY_BYTES: usize = 1 << 30;

/// How much of a slot's linear memory stays mapped between calls, by default. A Rust guest
/// touches about 1 MiB; keeping that resident (and resetting only its dirty pages) is faster
/// than decommitting and faulting it back in. Larger use is returned to the system after each
/// call, so a burst of big calls does not leave the host holding their memory.
/// `RuntimeBuilder::keep_resident_bytes` trades memory for speed where tools are big.
pub const KEEP_RESIDENT_BYTES: usize = 2 << 20;

/// How much of each async stack stays mapped between calls, for the same reason.
pub const STACK_KEEP_RESIDENT_BYTES: usize = 128 << 10;

/// A new engine configured for toolcell:
///
/// - epoch interruption, so a deadline stops a guest that runs wasm without end;
/// - fuel metering when `fuel` is set, so a caller may bound a call's instructions
///   deterministically (a call without a fuel limit gets `u64::MAX`, which it cannot
///   exhaust); metering is compiled into every guest's code and slows compute-heavy calls, so
///   it is off unless some call may need it;
/// - the component model (every tool is a component);
/// - the pooling instance allocator with `slots` slots (default [`POOL_SLOTS`]), copy-on-write
///   memory images, `keep_resident` bytes of linear memory (default [`KEEP_RESIDENT_BYTES`],
///   at most [`POOL_MAX_MEMORY_BYTES`]) kept mapped per slot, and (on Linux 6.7 and later)
///   only the pages a call dirtied reset after it;
/// - no wasm backtraces: a trap is reported by its code and the guest's stderr (where a Rust
///   panic prints its message), which is what a model can use; capturing a backtrace through a
///   hostile guest's overflowed stack would cost time on every such trap;
/// - everything else at wasmtime's defaults (Cranelift, a 512 KiB wasm stack whose overflow is
///   a trap).
pub(crate) fn new_engine(slots: u32, fuel: bool, keep_resident: usize) -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config.epoch_interruption(true);
    config.consume_fuel(fuel);
    config.wasm_backtrace_max_frames(None);
    config.wasm_component_model(true);
    config.memory_init_cow(true);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool(
        slots,
        keep_resident,
    )));
    let engine = Engine::new(&config)
        .map_err(anyhow::Error::from)
        .context("configuring the wasmtime engine")?;
    ENGINES_CREATED.fetch_add(1, Ordering::Relaxed);
    Ok(engine)
}

/// The pool's settings. The `micro` bench's `wasmtime_alone_echo` (the floor under an echo)
/// configures its own engine the same way, from the same constants: a setting changed here is
/// changed there too.
fn pool(slots: u32, keep_resident: usize) -> PoolingAllocationConfig {
    let per_call = |count: usize| u32::try_from(count).unwrap_or(u32::MAX);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(slots)
        .total_core_instances(slots.saturating_mul(per_call(MAX_INSTANCES)))
        .total_memories(slots.saturating_mul(per_call(MAX_MEMORIES)))
        .total_tables(slots.saturating_mul(per_call(MAX_TABLES)))
        .total_stacks(slots)
        .max_core_instances_per_component(per_call(MAX_INSTANCES))
        .max_memories_per_component(per_call(MAX_MEMORIES))
        .max_tables_per_component(per_call(MAX_TABLES))
        .max_memory_size(POOL_MAX_MEMORY_BYTES)
        .table_elements(MAX_TABLE_ELEMENTS)
        .linear_memory_keep_resident(keep_resident.min(POOL_MAX_MEMORY_BYTES))
        .table_keep_resident(KEEP_RESIDENT_BYTES)
        .async_stack_keep_resident(STACK_KEEP_RESIDENT_BYTES)
        // Reset only the pages a call dirtied (Linux 6.7+), not the whole resident region.
        .pagemap_scan(Enabled::Auto);
    pool
}
