//! The properties toolcell's fuzz targets check: one `check_<target>(data) -> Result<(), String>`
//! per target in `fuzz/fuzz_targets/`.
//!
//! Each takes the raw fuzz input, runs it through the code under test and checks what must hold
//! for every input; it returns `Err` with a description when something does not. A fuzz target
//! panics on that `Err` (a crash the fuzzer records), and this crate's `regressions` test
//! replays every file under `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/` through the
//! same function, so a reproducer is checked exactly as the fuzzer found it, in the workspace's
//! own test command. Nothing here panics on purpose: a panic is a finding in the code under
//! test.
//!
//! The checks use toolcell's public API, and `toolcell::fuzzing` (the `fuzzing` feature) for the
//! few crate-internal items they reach. The `mcp` check stays in `toolcell_mcp::fuzzing`: it
//! compares the transport's private parsers (the `tools/call` fast path, the HTTP front's one
//! reading of a body) with rmcp's, item by item.

mod cap;
mod component;
mod dispatch;
mod gate_paths;
mod policy;
mod schema;

pub use cap::check_cap;
pub use component::{ComponentOutcome, check_component, load_component};
pub use dispatch::{check_dispatch, dispatch_registry};
pub use gate_paths::{GateFixture, check_gate_paths, check_resolved};
pub use policy::check_policy;
pub use schema::{SCHEMA_CHECK_DEADLINE, check_schema};
pub use toolcell_mcp::fuzzing::{check_mcp, mcp_session};

/// A fuzz target's check.
pub type Check = fn(&[u8]) -> Result<(), String>;

/// Every fuzz target and its check: `fuzz/fuzz_targets/<target>.rs` calls
/// `toolcell_fuzz_checks::check_<target>` (the `regressions` test holds that).
pub const TARGETS: &[(&str, Check)] = &[
    ("policy", check_policy),
    ("dispatch", check_dispatch),
    ("cap", check_cap),
    ("gate_paths", check_gate_paths),
    ("schema", check_schema),
    ("mcp", check_mcp),
    ("component", check_component),
];
