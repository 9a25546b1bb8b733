//! The two messages that cross the seam: one [`ToolRequest`] in, one [`ToolResponse`] out.
//!
//! A response is typed so a caller acts on what happened without parsing text: a result, a
//! failure of a known kind, a denial with its reason, a deadline or a cancellation. Serialized
//! (for `toolcell call --json` and the audit record) each response is one JSON object whose
//! `outcome` field names the variant.

use serde::{Deserialize, Serialize};
use std::fmt;

/// One call to one tool, as an agent loop hands it to a [`ToolPort`](crate::ToolPort).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolRequest {
    /// The caller's id for this call (a model's `tool_use.id`); echoed in records, never
    /// interpreted.
    pub id: String,
    /// The tool's name as the model spelled it.
    pub tool: String,
    /// The arguments, as JSON text. The port checks them; the caller need not.
    pub arguments: String,
}

impl ToolRequest {
    /// A request with the given id, tool name and JSON arguments.
    pub fn new(
        id: impl Into<String>,
        tool: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            tool: tool.into(),
            arguments: arguments.into(),
        }
    }
}

/// How far a result may travel. The loop, not the tool, decides what each class may reach; the
/// class of a tool's results is set by policy, never by the tool.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Class {
    /// May be shown to anyone who sees the conversation.
    #[default]
    Public,
    /// Stays with the workspace's owner: file contents, command output.
    Internal,
    /// Must not be logged or forwarded: credentials, personal data.
    Confidential,
}

/// What became of one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolResponse {
    /// The tool ran and produced text for the model.
    Result {
        /// What the model reads.
        text: String,
        /// How far the text may travel.
        class: Class,
        /// True when the text came from outside the workspace (the network): the model should
        /// treat it as data, not instructions.
        untrusted: bool,
        /// True when the text was cut to the result cap; the text then ends with
        /// [`TRUNCATION_MARKER`](crate::call::cap::TRUNCATION_MARKER).
        truncated: bool,
    },
    /// The call ran, or tried to, and failed.
    Failed {
        /// What kind of failure, for a caller that acts on it.
        kind: FailureKind,
        /// What a person or a model reads: what went wrong and, where it helps, what to change.
        message: String,
    },
    /// The call was not allowed to run, or the tool refused it.
    Denied {
        /// Why.
        reason: DenyReason,
    },
    /// The call ran past its wall-clock deadline and was stopped.
    TimedOut {
        /// The deadline it was given, in milliseconds.
        limit_ms: u64,
    },
    /// The caller cancelled the call while it ran, and it was stopped.
    Cancelled,
}

/// The kinds of [`ToolResponse::Failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// No tool has the name the call gave (the message names the nearest ones). Nothing ran,
    /// and the gate was not asked: a misspelt name is not a permission problem.
    UnknownTool,
    /// The arguments are not valid for the tool: not JSON, too large, or refused by the tool.
    InvalidInput,
    /// A resource the arguments name does not exist (the tool said so).
    NotFound,
    /// The tool reported a failure of its own.
    Tool,
    /// The tool's result does not fit the output schema it declared (or is not JSON, or is
    /// larger than the result cap, which a JSON result is never cut to): nothing of it is
    /// passed on.
    InvalidOutput,
    /// The guest trapped: it panicked, hit `unreachable`, overflowed its stack, or broke a
    /// rule of WebAssembly. The message carries the trap and the end of the guest's stderr.
    Trap,
    /// The guest needed more memory than its limit allows.
    OutOfMemory,
    /// The guest used all the fuel the call was given.
    OutOfFuel,
    /// The host could not run the call (it could not build the instance). A bug or a broken
    /// machine, never the guest's doing.
    Internal,
    /// The tool asked its client questions that travel back with the call's answer (MCP
    /// 2026-07-28's `input_required`): the call ended there, and runs again, from the start,
    /// when the client sends it with their answers. Not a failure of the tool's.
    InputRequired,
}

/// The reasons of [`ToolResponse::Denied`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DenyReason {
    /// Nothing grants this call: no policy lets this tool run here. (A tool that does not
    /// exist is [`FailureKind::UnknownTool`], not a denial.)
    NoGrant,
    /// The tool itself refused the call.
    Tool {
        /// The tool's words.
        message: String,
    },
    /// The policy gates this capability and no one could be asked (a headless run): a person
    /// must approve it, or save a rule for it.
    ApprovalRequired {
        /// The capability, as the policy names it (`filesystem.write`).
        capability: String,
        /// The resource (a path relative to the workspace, a variable name).
        resource: String,
    },
    /// A person was asked and gave no answer: they dismissed the question, the client that
    /// would have asked them went away or failed, or the call's deadline passed first.
    Unanswered {
        /// The capability.
        capability: String,
        /// The resource.
        resource: String,
    },
    /// A person was asked and said no.
    ByPerson {
        /// The capability.
        capability: String,
        /// The resource.
        resource: String,
    },
    /// The capability may not be used on this resource: the policy does not grant it, the
    /// resource lies outside what it grants, or the path tries to leave its root.
    Capability {
        /// The capability.
        capability: String,
        /// The resource, as the call named it.
        resource: String,
        /// Why, in words a model can act on.
        why: String,
    },
    /// The tool cannot work without a way of talking to its client that this request's
    /// client does not offer (over MCP: error -32021, naming what it must offer).
    ClientLacks {
        /// The feature, as the policy names it (`client.sample`).
        capability: String,
    },
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::NoGrant => f.write_str("no grant: nothing allows this call"),
            DenyReason::Tool { message } => write!(f, "the tool refused: {message}"),
            DenyReason::ApprovalRequired {
                capability,
                resource,
            } => write!(
                f,
                "{capability} on {resource:?} needs a person's approval, and none can be asked here"
            ),
            DenyReason::Unanswered {
                capability,
                resource,
            } => write!(
                f,
                "{capability} on {resource:?} needs a person's approval, and none came"
            ),
            DenyReason::ByPerson {
                capability,
                resource,
            } => write!(f, "a person denied {capability} on {resource:?}"),
            DenyReason::Capability {
                capability,
                resource,
                why,
            } => write!(f, "{capability} on {resource:?} is not allowed: {why}"),
            DenyReason::ClientLacks { capability } => write!(
                f,
                "the tool needs {capability}, which this request's client does not offer"
            ),
        }
    }
}

impl ToolResponse {
    /// The outcome's name, as the audit record and a call's span give it: `result`, `failed`,
    /// `denied`, `timed_out` or `cancelled`.
    pub fn outcome(&self) -> &'static str {
        match self {
            ToolResponse::Result { .. } => "result",
            ToolResponse::Failed { .. } => "failed",
            ToolResponse::Denied { .. } => "denied",
            ToolResponse::TimedOut { .. } => "timed_out",
            ToolResponse::Cancelled => "cancelled",
        }
    }

    /// A public, trusted, untruncated result: what a local answer or a plain tool returns.
    pub fn text(text: impl Into<String>) -> Self {
        ToolResponse::Result {
            text: text.into(),
            class: Class::Public,
            untrusted: false,
            truncated: false,
        }
    }

    /// A failure of the given kind.
    pub fn failed(kind: FailureKind, message: impl Into<String>) -> Self {
        ToolResponse::Failed {
            kind,
            message: message.into(),
        }
    }

    /// True for anything but [`ToolResponse::Result`]: what MCP calls `isError`.
    pub fn is_error(&self) -> bool {
        !matches!(self, ToolResponse::Result { .. })
    }

    /// The text a model reads for this response: the result itself, or one line that says
    /// what went wrong.
    pub fn model_text(&self) -> String {
        match self {
            ToolResponse::Result { text, .. } => text.clone(),
            ToolResponse::Failed { message, .. } => format!("Error: {message}"),
            ToolResponse::Denied { reason } => format!("Denied: {reason}"),
            ToolResponse::TimedOut { limit_ms } => {
                format!("Error: the tool ran past its {limit_ms} ms deadline and was stopped")
            }
            ToolResponse::Cancelled => "Cancelled: the call was stopped".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_serialize_with_their_outcome_named() {
        let cases = [
            (
                ToolResponse::text("hi"),
                r#"{"outcome":"result","text":"hi","class":"public","untrusted":false,"truncated":false}"#,
            ),
            (
                ToolResponse::failed(FailureKind::Trap, "boom"),
                r#"{"outcome":"failed","kind":"trap","message":"boom"}"#,
            ),
            (
                ToolResponse::Denied {
                    reason: DenyReason::NoGrant,
                },
                r#"{"outcome":"denied","reason":{"kind":"no_grant"}}"#,
            ),
            (
                ToolResponse::TimedOut { limit_ms: 100 },
                r#"{"outcome":"timed_out","limit_ms":100}"#,
            ),
            (ToolResponse::Cancelled, r#"{"outcome":"cancelled"}"#),
        ];
        for (response, json) in cases {
            assert_eq!(serde_json::to_string(&response).ok().as_deref(), Some(json));
            let back: ToolResponse = serde_json::from_str(json).expect("round trip");
            assert_eq!(back, response);
        }
    }

    #[test]
    fn only_a_result_is_not_an_error() {
        assert!(!ToolResponse::text("x").is_error());
        assert!(ToolResponse::Cancelled.is_error());
        assert!(ToolResponse::failed(FailureKind::Tool, "x").is_error());
    }
}
