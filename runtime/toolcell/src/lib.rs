//! toolcell runs agent tools (untrusted WebAssembly components, and the host's own Rust tools)
//! behind one pipeline that decides every call, and gives each wasm call a fresh instance that
//! holds no authority but what that call was granted.
//!
//! This crate is the core an agent loop embeds. It has no registry client, no MCP server, no
//! HTTP server and no command line: those are `toolcell-oci` (plugged in through
//! [`source::ComponentSource`]), `toolcell-mcp` and `toolcell-cli`.
//!
//! # Embedding
//!
//! A [`Runtime`] holds the tools (the built-in components, a tools directory, components given
//! as bytes, native Rust tools), a [`Policy`] and one wasm engine. Each [`Call`] carries its
//! [`CallContext`] (agent, workspace, working directory), so one runtime serves many agents
//! and workspaces. There is one way to run a call in each style: [`Runtime::run`] (async),
//! [`Runtime::run_blocking`], and the agent loop's tool seam, [`ToolPort`], which [`Runtime`] implements
//! for a loop that speaks [`ToolRequest`] / [`ToolResponse`] in the runtime's default context.
//!
//! ```no_run
//! use serde_json::json;
//! use std::sync::Arc;
//! use std::time::Duration;
//! use toolcell::approval::{Approval, ApprovalRequest, Approver};
//! use toolcell::limits::Limits;
//! use toolcell::policy::{Access, Rule, ToolPolicy};
//! use toolcell::{Call, CallOptions, CapabilityKind, FnTool, Policy, Runtime, ToolInfo};
//! use toolcell::{ToolPort as _, ToolRequest, ToolResponse};
//!
//! /// Says yes to every gated call (a real loop asks its user).
//! #[derive(Debug)]
//! struct Yes;
//! impl Approver for Yes {
//!     fn approve(&self, _request: &ApprovalRequest) -> Approval {
//!         Approval::Once
//!     }
//! }
//!
//! # fn main() -> anyhow::Result<()> {
//! // The embedded default policy, extended in code: `shout` is in the model's tool list and
//! // runs for at most 200 ms; `write_file` may write `notes/` once a person approves.
//! let policy = Policy::embedded_default()
//!     .with_tool(
//!         "shout",
//!         ToolPolicy::default().core(true).limits(Limits {
//!             timeout: Duration::from_millis(200),
//!             ..Limits::default()
//!         }),
//!     )?
//!     .with_tool(
//!         "write_file",
//!         ToolPolicy::default().rule_for(
//!             CapabilityKind::FilesystemWrite,
//!             Rule::new(Access::Gated).roots(["notes"]),
//!         ),
//!     )?;
//!
//! let runtime = Runtime::builder()
//!     .policy(policy)
//!     .approver(Arc::new(Yes))
//!     .native(FnTool::new(
//!         ToolInfo::new("shout", "Returns its text in capitals.",
//!             json!({"type": "object", "properties": {"text": {"type": "string"}}})),
//!         |arguments, _context| async move {
//!             Ok(arguments["text"].as_str().unwrap_or_default().to_uppercase())
//!         },
//!     ))
//!     .build()?;
//! for failed in runtime.load_errors() {
//!     eprintln!("not loaded: {failed}");
//! }
//!
//! // Two agents, two workspaces, one runtime.
//! let alice = runtime.context("alice", "/srv/alice")?;
//! let bob = runtime.context("bob", "/srv/bob")?.with_cwd("src")?;
//! for (context, name) in [(&alice, "echo"), (&bob, "shout")] {
//!     let call = Call::new("1", name, r#"{"text":"hi"}"#)
//!         .in_context(context.clone())
//!         .with_options(CallOptions { timeout: Some(Duration::from_secs(5)), ..Default::default() });
//!     let report = runtime.run_blocking(&call); // or `runtime.run(&call).await`
//!     match &report.response {
//!         ToolResponse::Result { text, .. } => println!("{}: {text}", report.tool),
//!         other => println!("{}: {}", report.tool, other.model_text()),
//!     }
//! }
//!
//! // The agent loop's tool seam, in the runtime's default context.
//! let response = runtime.call(&ToolRequest::new("2", "echo", r#"{"text":"hi"}"#));
//! assert!(matches!(response, ToolResponse::Result { .. }));
//! # Ok(())
//! # }
//! ```
//!
//! # Where to look
//!
//! The source tree is the map: one folder per stage of a call, each depending only on the
//! stages above it in this list (a test, `the_stages_import_no_stage_below_them`, checks it).
//!
//! | folder | stage |
//! |---|---|
//! | `call/` | the vocabulary: request, response, report, the seam, registry, dispatch, cap, limits, stop |
//! | `tool/` | what a tool says about itself, and its error vocabulary |
//! | `audit/` | the audit record and its hash chain: the writer (group commit), the files, the checker |
//! | `policy/` | the policy file, file rules, network host patterns |
//! | `validate/` | argument validation under the call's deadline |
//! | `gate/` | the access gate: the approval vocabulary, path resolution, the decision, grants, exact file grants (staging), workspaces and saved rules |
//! | `wasm/` | the wasm executor: engine, cache, loading, the sandbox, one call in a fresh store |
//! | `pipeline/` | the runtime: builder, every stage of a call, native tools, component sources |
//!
//! `digest.rs` (random names, sha256 hex) is a leaf any stage may use.

pub mod audit;
mod call;
pub mod digest;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod gate;
pub mod hostfs;
mod pipeline;
/// For toolcell's own crates (one way to take a lock), not an embedder's API.
#[doc(hidden)]
pub mod sync;
mod tool;
mod validate;
mod wasm;

pub use call::fake::FakeTools;
pub use call::limits::CallOptions;
pub use call::port::ToolPort;
pub use call::proto::{Class, DenyReason, FailureKind, ToolRequest, ToolResponse};
pub use call::report::CallReport;
pub use call::stop::StopToken;
pub use gate::workspace::Workspace;
pub use pipeline::builder::RuntimeBuilder;
pub use pipeline::builtin::builtin_components;
pub use pipeline::context::{Call, CallContext, CwdError};
pub use pipeline::loader::{BuildError, Reloaded};
pub use pipeline::native::{FnTool, NativeTool, ToolContext};
pub use pipeline::{CALL_SPAN_TARGET, Runtime};
pub use policy::{Policy, PolicyError};
pub use tool::error::ToolError;
pub use tool::info::{Capability, CapabilityKind, ResourceRef, ToolInfo};
pub use wasm::engine::engines_created;
pub use wasm::load::LoadError;

pub mod policy;

/// Results beyond text: the parts a tool may return, and the host's rules for them.
pub mod content {
    pub use crate::call::content::{
        AUDIO_TYPES, Contents, IMAGE_TYPES, MAX_LINK_TEXT_BYTES, MAX_PARTS, MAX_URI_BYTES, Media,
        Part, RESOURCE_TYPES, as_text, base64_len, check, sniff,
    };
}

/// What became of a call, beside the [`CallReport`] itself: the gate's decision and grants,
/// captured output, the cost.
pub mod report {
    pub use crate::call::report::{Captured, Cost, GateDecision, Granted, GrantedBy};
}

/// The access gate's questions to a person: an [`Approver`](approval::Approver) answers what a
/// gated call asks.
pub mod approval {
    pub use crate::gate::workspace::PERMISSIONS_FILE;
    pub use crate::gate::{
        Approval, ApprovalRequest, Approver, FixedApprover, shown_on_a_terminal, shown_to_a_person,
    };
}

/// A tool talking to the client that made its call: the link a server gives each request
/// ([`CallContext::with_client`]), and the bounds on what a call may send and ask.
pub mod client {
    pub use crate::call::client::{
        AskFailure, Asked, ClientLink, ClientUse, LogLevel, MAX_ANSWER_BYTES,
        MAX_ASK_ROUNDS_PER_CALL, MAX_LOG_MESSAGE_BYTES, MAX_LOGS_PER_CALL, MAX_PROGRESS_PER_CALL,
        MAX_QUESTION_BYTES, MAX_QUESTIONS_PER_CALL, Offered, Question, Sent,
    };
}

/// What components offer beside tools: prompts, resources and URI templates, and completion
/// (`toolcell:tool@0.4.0`'s `prompts`, `resources` and `completion` interfaces), and the
/// bounds the host holds them to. Listed by [`Runtime::prompts`], [`Runtime::resources`] and
/// [`Runtime::resource_templates`]; each request runs through [`Runtime::offer`].
pub mod offers {
    pub use crate::pipeline::offers::{OfferRequest, OfferedKinds};
    pub use crate::tool::offer::{
        Answered, ClientNeed, MAX_ARGUMENT_VALUE_BYTES, MAX_COMPLETION_VALUE_BYTES,
        MAX_COMPLETION_VALUES, MAX_OFFER_NAME_CHARS, MAX_OFFER_TITLE_BYTES, MAX_OFFERS_BYTES,
        MAX_PROMPT_ARGUMENTS, MAX_PROMPTS, MAX_RESOURCES, MAX_TEMPLATE_VARIABLES, MAX_TEMPLATES,
        Offers, PromptArgument, PromptInfo, Reference, ResourceInfo, Role, Template, TemplateInfo,
    };
}

/// What a native tool is handed beside its [`ToolContext`] (the trait, [`NativeTool`], the
/// closure helper, [`FnTool`], and [`ToolError`] are at the crate's root).
pub mod native {
    pub use crate::gate::grants::{ClientGrant, Grants, Preopen};
    pub use crate::pipeline::native::{BoxFuture, GrantedPath};
}

/// The tool seam's pieces for a loop that dispatches itself: the registry, `find_tool` /
/// `call_tool`, the result cap, tool names.
pub mod registry {
    pub use crate::call::cap::{TRUNCATION_MARKER, cap_result, cap_text};
    pub use crate::call::dispatch::{CALL_TOOL, Dispatch, FIND_TOOL, dispatch};
    pub use crate::call::names::echoed;
    pub use crate::call::registry::{
        Entry, Registry, ToolSchema, call_tool_schema, clock_schema, echo_schema, find_tool_schema,
    };
    pub use crate::tool::info::{InvalidToolName, check_tool_name};
}

/// Where components named by reference come from (a registry, through `toolcell-oci`).
pub mod source {
    pub use crate::pipeline::catalog::Compiling;
    pub use crate::pipeline::source::{ComponentSource, SourceError, SourcedComponent};
}

/// The compiled-component cache: where it lives, how it is keyed, what a build found there.
pub mod cache {
    pub use crate::wasm::cache::{
        CACHE_DIR_ENV, CACHE_KEY_ENV, CacheOutcome, CacheStats, default_cache_dir,
        default_cache_key_file,
    };
}

/// Every limit and default of a call, a tool's metadata, the engine and the host, as named
/// constants (each documented with its reason), and per-call [`Limits`](limits::Limits).
pub mod limits {
    pub use crate::call::limits::{
        DEFAULT_MEMORY_BYTES, DEFAULT_RESULT_CAP, DEFAULT_TIMEOUT, DESCRIBE_TIMEOUT, Limits,
        MAX_ARGUMENT_BYTES, MAX_INSTANCES, MAX_MEMORIES, MAX_TABLE_ELEMENTS, MAX_TABLES,
    };
    pub use crate::gate::grants::FIXED_WALL_CLOCK;
    pub use crate::pipeline::context::DEFAULT_AGENT;
    pub use crate::tool::info::{
        MAX_CAPABILITIES, MAX_DESCRIPTION_BYTES, MAX_RESOURCE_BYTES, MAX_SCHEMA_TEXT_BYTES,
        MAX_TOOL_NAME_CHARS,
    };
    pub use crate::tool::schema::{
        MAX_ARGUMENT_DEPTH, MAX_PATTERN_BYTES, MAX_SCHEMA_BYTES, MAX_SCHEMA_DEPTH,
        MAX_SCHEMA_PATTERNS, MAX_SCHEMA_REFS, MAX_VALIDATION_NESTING, MAX_VALUE_VISITS,
        REGEX_SIZE_LIMIT,
    };
    pub use crate::validate::{MAX_LISTED_VIOLATIONS, MAX_VIOLATION_CHARS, SCHEMA_COMPILE_TIMEOUT};
    pub use crate::wasm::cache::MAX_CACHE_ENTRY_BYTES;
    pub use crate::wasm::engine::{
        KEEP_RESIDENT_BYTES, POOL_MAX_MEMORY_BYTES, POOL_SLOTS, STACK_KEEP_RESIDENT_BYTES,
    };
    pub use crate::wasm::files::MAX_COMPONENT_BYTES;
    pub use crate::wasm::index::MAX_INDEX_BYTES;
    pub use crate::wasm::instance::STDERR_TAIL_BYTES;
    pub use crate::wasm::lazy::DEFAULT_CODE_MEMORY_BUDGET;
    pub use crate::wasm::net::{CONNECT_TIMEOUT, FIRST_BYTE_TIMEOUT};
    pub use crate::wasm::sandbox::STDIO_CAPTURE_BYTES;
}
