//! toolcell runs agent tools (untrusted WebAssembly components, and the host's own Rust tools)
//! behind one pipeline that decides every call, and gives each wasm call a fresh instance that
//! holds no authority but what that call was granted.
//!
//! The seam an agent loop calls is [`ToolPort`]: one [`ToolRequest`] in, one typed
//! [`ToolResponse`] out; [`FakeTools`] is an in-process stand-in. Before a port, [`dispatch`]
//! answers the loop's own `find_tool` and `call_tool` against a [`Registry`]; after it,
//! [`cap_result`] bounds what reaches the model (seed 000, unchanged).
//!
//! [`Runtime`] is the real port: the pipeline. Every call, whatever front end it enters by (the
//! CLI, the MCP server, an embedding loop) and whatever executes it, goes through its stages in
//! one place: dispatch, argument validation, the access gate, execution with the grants and
//! limits, the cap, the audit record. Executors only execute: the wasm executor builds a WASI
//! context from the grants; a [`NativeTool`] gets them as handles in its [`ToolContext`]. Each
//! [`Call`] carries its [`CallContext`] (agent, workspace, working directory), so one runtime
//! and one engine serve many agents and workspaces at once.
//!
//! ```no_run
//! use toolcell::{Call, FnTool, Runtime, ToolInfo};
//! use serde_json::json;
//!
//! let runtime = Runtime::builder()
//!     .native(FnTool::new(
//!         ToolInfo::new("shout", "Returns its text in capitals.",
//!             json!({"type": "object", "properties": {"text": {"type": "string"}}})),
//!         |arguments, _context| async move {
//!             Ok(arguments["text"].as_str().unwrap_or_default().to_uppercase())
//!         },
//!     ))
//!     .build()?;
//! let context = runtime.context("agent-1", ".")?;
//! for name in ["echo", "shout"] {
//!     let call = Call::new("1", name, r#"{"text":"hi"}"#).in_context(context.clone());
//!     println!("{:?}", runtime.run_blocking(&call).response);
//! }
//! # anyhow::Ok(())
//! ```
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
//! | the pipeline: every stage of a call | `pipeline.rs` |
//! | building a runtime: which tools, which engine | `builder.rs` |
//! | a call and its context (agent, workspace, cwd) | `context.rs` |
//! | a workspace and its saved rules | `workspace.rs` |
//! | the audit record | `audit.rs` |
//! | native tools: trait, context, closure helper | `native.rs` |
//! | the wasm executor | `wasm.rs` |
//! | loading a component | `load.rs` |
//! | the compiled-component cache | `cache.rs` |
//! | what a tool says about itself | `info.rs` |
//! | one call in a fresh store | `instance.rs` |
//! | the WASI context: no ambient authority | `sandbox.rs` |
//! | a guest's file system calls: no links made, deny-listed names hidden | `guest_fs.rs` |
//! | limits and their defaults | `limits.rs` |
//! | per-tool policy (the TOML file) | `policy.rs` |
//! | the access gate, path containment | `gate.rs` |
//! | protected paths, the read deny-list | `files.rs` |
//! | exact file grants (staging directories) | `staging.rs` |
//! | the deadline ticker | `epoch.rs` |
//! | stopping a running call | `stop.rs` |
//! | argument validation, under the call's deadline | `validate.rs` |
//! | what a tool's schema may ask of the host | `schema.rs` |
//! | generated bindings | `bindings.rs` |
//! | the network allowlist (`wasi:http`) | `net.rs` |
//! | the MCP server | `mcp/mod.rs` |
//! | its transport: JSON-RPC lines over byte streams | `mcp/transport.rs` |
//! | the command line | `cli.rs` |
//! | `toolcell bench`: one tool's cost per call | `bench.rs` |
//! | `toolcell new`: a tool project in Rust, Python or JavaScript | `scaffold.rs` |

pub mod audit;
pub mod bench;
mod bindings;
mod builder;
mod builtin;
mod cache;
mod cap;
pub mod cli;
mod context;
mod dispatch;
mod engine;
mod epoch;
pub mod files;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod gate;
mod guest_fs;
mod info;
mod instance;
pub mod limits;
mod load;
pub mod mcp;
pub mod native;
pub mod net;
pub mod oci;
mod pipeline;
mod policy;
mod port;
mod proto;
mod registry;
pub mod sandbox;
pub mod scaffold;
pub mod schema;
mod staging;
mod stop;
mod validate;
mod wasm;
mod workspace;

pub use audit::{Audit, AuditRecord};
pub use builder::{MAX_COMPONENT_BYTES, RuntimeBuilder};
pub use builtin::builtin_components;
pub use cache::{
    CACHE_DIR_ENV, CACHE_KEY_ENV, CacheOutcome, CacheStats, MAX_CACHE_ENTRY_BYTES,
    default_cache_dir, default_cache_key_file,
};
pub use cap::{TRUNCATION_MARKER, cap_result, cap_text};
pub use context::{Call, CallContext, DEFAULT_AGENT};
pub use dispatch::{CALL_TOOL, Dispatch, FIND_TOOL, dispatch};
pub use engine::{KEEP_RESIDENT_BYTES, POOL_MAX_MEMORY_BYTES, POOL_SLOTS, engines_created};
pub use epoch::{EPOCH_LINGER, EPOCH_TICK};
pub use gate::{
    Approval, ApprovalRequest, Approver, FixedApprover, GateDecision, Granted, GrantedBy,
};
pub use info::{
    Capability, CapabilityKind, MAX_CAPABILITIES, MAX_DESCRIPTION_BYTES, MAX_RESOURCE_BYTES,
    MAX_SCHEMA_TEXT_BYTES, MAX_TOOL_NAME_CHARS, ResourceRef, ToolInfo, check_tool_name,
};
pub use instance::{CallReport, STDERR_TAIL_BYTES};
pub use limits::{CallOptions, Limits};
pub use load::LoadError;
pub use native::{FnTool, GrantedPath, NativeTool, ToolContext, ToolError};
pub use pipeline::Runtime;
pub use policy::{
    Access, DEFAULT_POLICY, Identity, Policy, RegistryRules, Rule, Signer, ToolPolicy,
};
pub use port::{FakeTools, ToolPort};
pub use proto::{Class, DenyReason, FailureKind, ToolRequest, ToolResponse};
pub use registry::{
    Entry, Registry, ToolSchema, call_tool_schema, clock_schema, echo_schema, find_tool_schema,
};
pub use sandbox::{Captured, FIXED_WALL_CLOCK, Grants, Preopen};
pub use stop::StopToken;
pub use validate::{
    INLINE_MAX_NESTING, INLINE_VALIDATION_WORK, MAX_LISTED_VIOLATIONS, MAX_VIOLATION_CHARS,
    SCHEMA_COMPILE_TIMEOUT, VALIDATION_STACK_BYTES, WATCH_EVERY,
};
pub use workspace::{PERMISSIONS_FILE, Workspace};
