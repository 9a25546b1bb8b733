//! What each tool is allowed: whether it is core, what its calls are granted, the class of its
//! results.
//!
//! No entry means no authority: a tool the policy does not name can still be called, with
//! nothing granted. [`Policy::embedded_default`] is what the `toolcell` binary uses.

use crate::sandbox::Grants;
use crate::{Class, Limits};
use std::collections::HashMap;

/// The policy of one tool. `ToolPolicy::default()` is: not core, nothing granted, public
/// results, the default [`Limits`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    /// True when the tool goes in the model's `tools` array.
    pub core: bool,
    /// What every call of the tool is granted.
    pub grants: Grants,
    /// The class of the tool's results.
    pub class: Class,
    /// The limits every call of the tool runs under (a caller may override them per call).
    pub limits: Limits,
}

/// The policy of every tool, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    tools: HashMap<String, ToolPolicy>,
}

impl Policy {
    /// A policy that grants nothing to anyone and makes no tool core.
    pub fn empty() -> Policy {
        Policy::default()
    }

    /// The policy the `toolcell` binary ships with: `clock` is core and may read the real
    /// clock; every other tool runs with nothing granted.
    pub fn embedded_default() -> Policy {
        Policy::empty().with_tool(
            "clock",
            ToolPolicy {
                core: true,
                grants: Grants { clock: true },
                ..ToolPolicy::default()
            },
        )
    }

    /// This policy with `tool`'s entry set to `policy`.
    pub fn with_tool(mut self, tool: &str, policy: ToolPolicy) -> Policy {
        self.tools.insert(tool.to_owned(), policy);
        self
    }

    /// The policy of `tool`: its entry, or the default (nothing) if it has none.
    pub fn tool(&self, tool: &str) -> ToolPolicy {
        self.tools.get(tool).cloned().unwrap_or_default()
    }
}
