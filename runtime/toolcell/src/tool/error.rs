//! A tool's own failure ([`ToolError`], the native tool trait's vocabulary): what a native tool returns and
//! what a wasm tool's `tool-error` becomes, mapped to one typed response.

use crate::call::proto::{DenyReason, FailureKind, ToolResponse};

/// A tool's own failure: the same vocabulary as the WIT's `tool-error`, so a native tool's
/// failure reads exactly like a wasm tool's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments are not valid for this tool (beyond what the schema says).
    InvalidInput(String),
    /// A resource the arguments name does not exist.
    NotFound(String),
    /// The tool refuses this call.
    Denied(String),
    /// Anything else that went wrong.
    Failed(String),
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::InvalidInput(why) => write!(f, "invalid input: {why}"),
            ToolError::NotFound(why) => write!(f, "not found: {why}"),
            ToolError::Denied(why) => write!(f, "denied: {why}"),
            ToolError::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<ToolError> for ToolResponse {
    fn from(error: ToolError) -> ToolResponse {
        match error {
            ToolError::InvalidInput(message) => {
                ToolResponse::failed(FailureKind::InvalidInput, message)
            }
            ToolError::NotFound(message) => ToolResponse::failed(FailureKind::NotFound, message),
            ToolError::Denied(message) => ToolResponse::Denied {
                reason: DenyReason::Tool { message },
            },
            ToolError::Failed(message) => ToolResponse::failed(FailureKind::Tool, message),
        }
    }
}
