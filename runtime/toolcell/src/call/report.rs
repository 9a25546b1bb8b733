//! What became of one call: the executor's per-call record, the gate's decision and grants, and
//! what the guest wrote on the side. Every executor fills one; the pipeline adds who called.

use crate::call::proto::ToolResponse;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What became of one call, with what the guest wrote on the side: the executor's per-call
/// record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallReport {
    /// The caller's id for the call.
    pub call_id: String,
    /// The tool that ran (`echo` for a `call_tool` that called `echo`); for a call the loop
    /// answered itself (`find_tool`, a refused `call_tool`), the name as called.
    pub tool: String,
    /// The loop's tool the call came through (`call_tool`), if it did.
    pub via: Option<String>,
    /// The agent that made the call.
    pub agent: String,
    /// The workspace the call worked in, if it had one.
    pub workspace: Option<std::path::PathBuf>,
    /// What the gate decided, if the call reached it.
    pub gate: GateDecision,
    /// The response the caller acts on.
    pub response: ToolResponse,
    /// The guest's stdout: diagnostics, never the result and never the host's stdout.
    pub stdout: Captured,
    /// The guest's stderr.
    pub stderr: Captured,
    /// Wall-clock time from the start of instantiation to the answer.
    pub elapsed: Duration,
    /// The capabilities the gate granted the call, and why (empty when it needed none, or was
    /// denied).
    pub granted: Vec<Granted>,
    /// The result as JSON, when the tool declared an output schema and the result fits it
    /// (what MCP serves as `structuredContent`); the response's text is the same JSON.
    pub structured: Option<serde_json::Value>,
    /// The result's parts, when it is more than one text (a `toolcell:tool@0.3.0` tool's
    /// images, audio, resources, or several texts): checked by the host, and what MCP sends
    /// as content blocks. The response's text is then [`as_text`](crate::content::as_text) of
    /// them, for a caller that only takes text. Empty for a text result, and for any
    /// outcome but a result.
    pub parts: Vec<crate::call::content::Part>,
    /// What the call's guest used, where the host measured it.
    pub cost: Cost,
    /// What the call sent its client and asked it, by shape.
    pub client: crate::call::client::ClientUse,
    /// For a prompt's `get`, a resource's `read` or a completion (not a tool's call): what the
    /// answer is, beside its [`parts`](CallReport::parts).
    pub offered: Option<crate::call::answered::Answered>,
}

/// What one call's guest used, as far as the host could see (a native tool's use is not
/// measured: both are `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Cost {
    /// Fuel consumed, when the runtime meters fuel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fuel: Option<u64>,
    /// The largest linear memory the guest held, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
}

impl CallReport {
    /// A response the host gave without running a guest: nothing captured, no time taken.
    pub fn host_answer(response: ToolResponse) -> CallReport {
        CallReport {
            call_id: String::new(),
            tool: String::new(),
            via: None,
            agent: String::new(),
            workspace: None,
            gate: GateDecision::NotReached,
            response,
            stdout: Captured::default(),
            stderr: Captured::default(),
            elapsed: Duration::ZERO,
            granted: Vec::new(),
            structured: None,
            parts: Vec::new(),
            offered: None,
            cost: Cost::default(),
            client: crate::call::client::ClientUse::default(),
        }
    }
}

/// Why a capability was granted to a call, as the audit record tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GrantedBy {
    /// The policy allows it.
    Policy,
    /// The policy gates it, and an "always" rule a person saved earlier covers it.
    SavedRule,
    /// The policy gates it, and a person approved this call.
    PersonOnce,
    /// The policy gates it, and a person approved it and calls like it from now on.
    PersonAlways,
}

/// One capability a call was granted, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Granted {
    /// The capability, as the policy names it (`filesystem.write`).
    pub capability: String,
    /// The resource (a path relative to the workspace, a variable name, `scheme://host:port`;
    /// empty for the clock).
    pub resource: String,
    /// Who or what granted it.
    pub by: GrantedBy,
}

/// What the gate decided for one call, as its report and audit record tell it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum GateDecision {
    /// The call never reached the gate: the loop answered it (`find_tool`), or its arguments
    /// were refused first.
    #[default]
    NotReached,
    /// The gate let the call run, with the grants the report lists.
    Allow,
    /// The gate refused the call: nothing ran.
    Deny,
}

impl GateDecision {
    /// Its name, as the audit record writes it: `not_reached`, `allow` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            GateDecision::NotReached => "not_reached",
            GateDecision::Allow => "allow",
            GateDecision::Deny => "deny",
        }
    }
}

/// What a guest wrote to one of its output streams, up to the capture limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Captured {
    /// The bytes kept, as text (invalid UTF-8 replaced).
    pub text: String,
    /// True when the guest wrote more than was kept.
    pub truncated: bool,
}
