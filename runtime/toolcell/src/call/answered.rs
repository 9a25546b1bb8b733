//! What an answer to a request of a component's offers is (a prompt's messages and their
//! roles, a read's contents, a completion's values), as a [`CallReport`](crate::CallReport)
//! carries it beside its parts.

use serde::{Deserialize, Serialize};

/// A role in a prompt's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
}

/// The shape of an answer that is not a tool's result: a prompt's messages are the report's
/// parts, one each, with their roles here; a completion's values are here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Answered {
    /// A prompt: the report's parts are its messages, `roles[i]` the role of part `i`.
    Prompt {
        /// The prompt's description, as `get` gave it.
        description: Option<String>,
        /// Each message's role.
        roles: Vec<Role>,
    },
    /// A resource read: the report's parts are its contents, each an embedded resource.
    Contents,
    /// A completion.
    Completion {
        /// The values, at most [`MAX_COMPLETION_VALUES`](crate::offers::MAX_COMPLETION_VALUES).
        values: Vec<String>,
        /// How many there are in all, if known.
        total: Option<u32>,
        /// Whether there are more than these.
        has_more: bool,
    },
}
