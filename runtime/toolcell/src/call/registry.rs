//! What tools exist: their schemas, and which of them are core.
//!
//! The model's `tools` array is fixed for an epoch and holds only the core tools plus
//! [`FIND_TOOL`] and [`CALL_TOOL`]; every other tool is found
//! through `find_tool` and called through `call_tool` (the agent loop's tool seam).

use crate::call::names;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The name of the loop's tool search.
pub const FIND_TOOL: &str = "find_tool";
/// The name of the loop's indirect call.
pub const CALL_TOOL: &str = "call_tool";

/// A tool as a model sees it: its name, what it does, and the JSON Schema of its arguments.
///
/// It is written into a session's baseline, so it is our format: unknown fields are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSchema {
    /// The name the model calls the tool by.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// The JSON Schema of the arguments object.
    pub parameters: Value,
}

/// One tool in a [`Registry`].
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The tool's schema.
    pub schema: ToolSchema,
    /// True when the tool is in the model's `tools` array; false when it is found through
    /// `find_tool` and called through `call_tool`.
    pub core: bool,
}

/// The tools an agent loop knows of, in a fixed order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Registry {
    entries: Vec<Entry>,
}

impl Registry {
    /// A registry of these entries, in this order. If two share a name, the first is the one
    /// [`Registry::get`] finds.
    pub fn new(entries: Vec<Entry>) -> Registry {
        Registry { entries }
    }

    /// The seed's registry: `clock` (core) and `echo` (not core).
    pub fn m2b() -> Registry {
        Registry::new(vec![
            Entry {
                schema: clock_schema(),
                core: true,
            },
            Entry {
                schema: echo_schema(),
                core: false,
            },
        ])
    }

    /// The model's `tools` array: the core entries in registry order, then `find_tool`, then
    /// `call_tool`.
    pub fn core_schemas(&self) -> Vec<ToolSchema> {
        self.entries
            .iter()
            .filter(|entry| entry.core)
            .map(|entry| entry.schema.clone())
            .chain([find_tool_schema(), call_tool_schema()])
            .collect()
    }

    /// The entry named `name`, if there is one.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.schema.name == name)
    }

    /// The schemas whose name or description contains `query`, ignoring case, in registry
    /// order. An empty query matches nothing.
    pub fn find(&self, query: &str) -> Vec<&ToolSchema> {
        if query.is_empty() {
            return Vec::new();
        }
        let query = query.to_lowercase();
        self.entries
            .iter()
            .map(|entry| &entry.schema)
            .filter(|schema| {
                schema.name.to_lowercase().contains(&query)
                    || schema.description.to_lowercase().contains(&query)
            })
            .collect()
    }

    /// Every entry, in registry order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The names nearest to `name`, a name no entry has: at most three, nearest first.
    pub fn nearest(&self, name: &str) -> Vec<&str> {
        names::nearest(
            name,
            self.entries.iter().map(|entry| entry.schema.name.as_str()),
        )
    }

    /// What a caller reads for a tool that does not exist: `no tool named "reed_file"; did you
    /// mean read_file?` (the name escaped and cut, at most a few suggestions).
    pub fn unknown_tool(&self, name: &str) -> String {
        format!(
            "no tool named {}{}",
            names::echoed(name),
            names::did_you_mean(&self.nearest(name))
        )
    }
}

/// `clock`: the current date and time.
pub fn clock_schema() -> ToolSchema {
    ToolSchema {
        name: "clock".to_owned(),
        description: "The current date and time, as RFC 3339 in UTC.".to_owned(),
        parameters: json!({ "type": "object", "properties": {} }),
    }
}

/// `echo`: returns its text argument.
pub fn echo_schema() -> ToolSchema {
    ToolSchema {
        name: "echo".to_owned(),
        description: "Returns its text argument unchanged.".to_owned(),
        parameters: json!({
            "type": "object",
            "properties": { "text": { "type": "string", "description": "The text to return." } },
            "required": ["text"]
        }),
    }
}

/// `find_tool`: the loop's own search over the registry.
pub fn find_tool_schema() -> ToolSchema {
    ToolSchema {
        name: FIND_TOOL.to_owned(),
        description:
            "Search for more tools by keyword. Returns the schemas of the tools that match."
                .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "A keyword to look for in tool names and descriptions."
                }
            },
            "required": ["query"]
        }),
    }
}

/// `call_tool`: the loop's way to call a tool that is not in the `tools` array.
pub fn call_tool_schema() -> ToolSchema {
    ToolSchema {
        name: CALL_TOOL.to_owned(),
        description: "Call a tool that find_tool returned. Pass its name and an arguments \
                      object that fits its schema."
            .to_owned(),
        parameters: json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "description": "The tool's name." },
                "arguments": { "type": "object", "description": "The tool's arguments." }
            },
            "required": ["name", "arguments"]
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_schemas_are_core_entries_then_find_tool_then_call_tool() {
        let names: Vec<String> = Registry::m2b()
            .core_schemas()
            .into_iter()
            .map(|schema| schema.name)
            .collect();
        assert_eq!(names, ["clock", "find_tool", "call_tool"]);
    }

    #[test]
    fn an_empty_registry_still_offers_find_tool_and_call_tool() {
        assert_eq!(Registry::default().core_schemas().len(), 2);
    }

    #[test]
    fn find_matches_name_or_description_ignoring_case() {
        let registry = Registry::m2b();
        let names = |query: &str| -> Vec<String> {
            registry
                .find(query)
                .into_iter()
                .map(|schema| schema.name.clone())
                .collect()
        };
        assert_eq!(names("ECHO"), ["echo"]);
        assert_eq!(names("rfc 3339"), ["clock"]);
        assert_eq!(names("RE"), ["clock", "echo"]);
        assert!(names("").is_empty());
        assert!(names("nothing like it").is_empty());
    }

    #[test]
    fn get_finds_the_first_entry_of_a_name() {
        let registry = Registry::m2b();
        assert_eq!(registry.get("clock").map(|entry| entry.core), Some(true));
        assert_eq!(registry.get("echo").map(|entry| entry.core), Some(false));
        assert!(registry.get("find_tool").is_none());
    }

    #[test]
    fn a_schema_refuses_unknown_fields() {
        let json = r#"{"name":"x","description":"y","parameters":{},"extra":1}"#;
        assert!(serde_json::from_str::<ToolSchema>(json).is_err());
        let json = r#"{"name":"x","description":"y","parameters":{}}"#;
        assert!(serde_json::from_str::<ToolSchema>(json).is_ok());
    }
}
