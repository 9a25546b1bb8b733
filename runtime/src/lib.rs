//! toolcell runs untrusted agent tools as WebAssembly components, each call in a fresh
//! instance that holds no authority but what that call was granted.
//!
//! The seam an agent loop calls is [`ToolPort`]: one [`ToolRequest`] in, one typed
//! [`ToolResponse`] out. [`WasmToolPort`] is the real port; [`FakeTools`] an in-process stand-in.
//! Before the port, [`dispatch`] answers the loop's own `find_tool` and `call_tool` against a
//! [`Registry`]; after it, [`cap_result`] bounds what reaches the model. [`Runtime`] strings the
//! three together, and every front end (the CLI, an embedding loop) enters there.
//!
//! Where to look:
//!
//! | concept | file |
//! |---|---|
//! | request / response types | `proto.rs` |
//! | registry and schemas | `registry.rs` |
//! | `find_tool` / `call_tool` dispatch | `dispatch.rs` |
//! | the result cap | `cap.rs` |
//! | the `ToolPort` seam and `FakeTools` | `port.rs` |
//! | the pipeline facade | `pipeline.rs` |
//! | the audit record | `audit.rs` |
//! | the wasm port | `wasm_port.rs` |
//! | loading a component | `load.rs` |
//! | the compiled-component cache | `cache.rs` |
//! | what a tool says about itself | `info.rs` |
//! | one call in a fresh store | `instance.rs` |
//! | the WASI context: no ambient authority | `sandbox.rs` |
//! | limits and their defaults | `limits.rs` |
//! | per-tool policy (the TOML file) | `policy.rs` |
//! | the access gate, path containment | `gate.rs` |
//! | the deadline ticker | `epoch.rs` |
//! | stopping a running call | `stop.rs` |
//! | argument validation | `validate.rs` |
//! | generated bindings | `bindings.rs` |
//! | the network allowlist (`wasi:http`) | `net.rs` |
//! | the MCP server | `mcp.rs` |
//! | the command line | `cli.rs` |
//! | `toolcell bench`: one tool's cost per call | `bench.rs` |

pub mod audit;
pub mod bench;
mod bindings;
mod builtin;
mod cache;
mod cap;
pub mod cli;
mod dispatch;
mod engine;
mod epoch;
pub mod gate;
mod info;
mod instance;
pub mod limits;
mod load;
pub mod mcp;
pub mod net;
mod pipeline;
mod policy;
mod port;
mod proto;
mod registry;
pub mod sandbox;
mod stop;
mod validate;
mod wasm_port;

pub use audit::{Audit, AuditRecord};
pub use builtin::builtin_components;
pub use cache::{CACHE_DIR_ENV, CacheOutcome, CacheStats, default_cache_dir};
pub use cap::{TRUNCATION_MARKER, cap_result};
pub use dispatch::{CALL_TOOL, Dispatch, FIND_TOOL, dispatch};
pub use engine::{KEEP_RESIDENT_BYTES, POOL_MAX_MEMORY_BYTES, POOL_SLOTS};
pub use epoch::{EPOCH_LINGER, EPOCH_TICK};
pub use gate::{Approval, ApprovalRequest, Approver, FixedApprover, Granted, GrantedBy, Workspace};
pub use info::{
    Capability, CapabilityKind, MAX_TOOL_NAME_CHARS, ResourceRef, ToolInfo, check_tool_name,
};
pub use instance::{CallReport, STDERR_TAIL_BYTES};
pub use limits::{CallOptions, Limits};
pub use load::LoadError;
pub use pipeline::Runtime;
pub use policy::{Access, DEFAULT_POLICY, Policy, Rule, ToolPolicy};
pub use port::{FakeTools, ToolPort};
pub use proto::{Class, DenyReason, FailureKind, ToolRequest, ToolResponse};
pub use registry::{
    Entry, Registry, ToolSchema, call_tool_schema, clock_schema, echo_schema, find_tool_schema,
};
pub use sandbox::{Captured, FIXED_WALL_CLOCK, Grants, Preopen};
pub use stop::StopToken;
pub use validate::MAX_LISTED_VIOLATIONS;
pub use wasm_port::{WasmToolPort, WasmToolPortBuilder};
