//! What a tool says about itself, checked before the host believes it.
//!
//! A component's `describe()` is guest output like any other: the host refuses a name a model
//! provider would reject, a schema that is not a JSON object, or a capability whose argument
//! pointer is not a JSON pointer, so a lying tool never reaches the registry. A native tool's
//! [`ToolInfo`] is checked the same way.

use crate::call::registry::ToolSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The longest tool name: what every major model provider accepts.
pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// The most bytes a tool's description may have. A model reads every description with every
/// request; real ones are a few hundred bytes, the longest a few KB.
pub const MAX_DESCRIPTION_BYTES: usize = 16 * 1024;

/// The most capabilities a tool may declare. Each is resolved and decided on every call and
/// may hand the instance a directory (a descriptor); real tools declare one to three.
pub const MAX_CAPABILITIES: usize = 32;

/// The longest resource a capability may name (an argument pointer or a fixed path, host or
/// variable name): a path's length limit on Linux.
pub const MAX_RESOURCE_BYTES: usize = 4096;

/// The most bytes of schema text a component's `describe()` may return, read before it is
/// parsed: the schema limit ([`MAX_SCHEMA_BYTES`](crate::tool::schema::MAX_SCHEMA_BYTES)) with room
/// for pretty-printing.
pub const MAX_SCHEMA_TEXT_BYTES: usize = 4 * crate::tool::schema::MAX_SCHEMA_BYTES;

/// A kind of authority a call may need (the WIT `capability-kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CapabilityKind {
    /// Read files and list directories below a root.
    FilesystemRead,
    /// Create, change or remove files below a root.
    FilesystemWrite,
    /// Make HTTP requests to a host.
    Network,
    /// Read one environment variable.
    Env,
    /// Read the real wall clock.
    Clock,
    /// Read one `wasi:config/store` value (a tool of plain typed exports, as the operator
    /// says; the contract has no such capability).
    Config,
    /// Send the client log messages during a call (`client.log`; granted whole).
    ClientLog,
    /// Send the client progress during a call (`client.progress`; granted whole).
    ClientProgress,
    /// Ask the client's model (`client.sample`; granted whole).
    ClientSample,
    /// Ask the person to fill in a form (`client.elicit`; granted whole).
    ClientElicit,
    /// Send the person to a URL (`client.elicit_url`; granted whole).
    ClientElicitUrl,
    /// Read the client's roots (`client.list_roots`; granted whole).
    ClientListRoots,
}

impl CapabilityKind {
    /// The kind as a policy and a person name it: `filesystem.read`, `network`, ...
    pub fn name(self) -> &'static str {
        match self {
            CapabilityKind::FilesystemRead => "filesystem.read",
            CapabilityKind::FilesystemWrite => "filesystem.write",
            CapabilityKind::Network => "network",
            CapabilityKind::Env => "env",
            CapabilityKind::Clock => "clock",
            CapabilityKind::Config => "config",
            CapabilityKind::ClientLog => "client.log",
            CapabilityKind::ClientProgress => "client.progress",
            CapabilityKind::ClientSample => "client.sample",
            CapabilityKind::ClientElicit => "client.elicit",
            CapabilityKind::ClientElicitUrl => "client.elicit_url",
            CapabilityKind::ClientListRoots => "client.list_roots",
        }
    }

    /// The ways a tool talks to its client (`client.*`), each granted whole.
    pub const CLIENT: [CapabilityKind; 6] = [
        CapabilityKind::ClientLog,
        CapabilityKind::ClientProgress,
        CapabilityKind::ClientSample,
        CapabilityKind::ClientElicit,
        CapabilityKind::ClientElicitUrl,
        CapabilityKind::ClientListRoots,
    ];

    /// True for a way a tool talks to its client (`client.*`).
    pub fn is_client(self) -> bool {
        Self::CLIENT.contains(&self)
    }
}

/// Where a capability's resource comes from (the WIT `resource-ref`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResourceRef {
    /// A JSON pointer into the call's arguments.
    Argument(String),
    /// Always this resource.
    Fixed(String),
    /// No resource: granted whole.
    Whole,
}

/// One capability a tool may need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// What kind of authority.
    pub kind: CapabilityKind,
    /// Which resource it applies to.
    pub target: ResourceRef,
}

/// A tool's description of itself, as checked by the host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// The tool's name.
    pub name: String,
    /// What it does, for a model.
    pub description: String,
    /// The JSON Schema of its arguments (always a JSON object).
    pub input_schema: Value,
    /// True when a call changes nothing outside its instance.
    pub read_only: bool,
    /// True when calls may run at the same time.
    pub concurrency_safe: bool,
    /// Every capability a call may need.
    pub capabilities: Vec<Capability>,
    /// The JSON Schema of its result, if the result is a JSON object (an object schema). The
    /// host checks every result against it: a result that does not fit is a failure
    /// ([`FailureKind::InvalidOutput`](crate::FailureKind::InvalidOutput)).
    pub output_schema: Option<Value>,
    /// The client features (`client.*` kinds, each also among `capabilities`) without which
    /// the tool cannot work: a call whose client lacks one, or whose policy does not grant
    /// one, is refused before the tool runs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required_client: Vec<CapabilityKind>,
}

impl ToolInfo {
    /// A tool named `name` that does what `description` says and takes arguments that fit
    /// `input_schema`: not read-only, not concurrency-safe, needing no capability. For native
    /// tools; a component says this in its `describe()`.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: description.into(),
            input_schema,
            read_only: false,
            concurrency_safe: false,
            capabilities: Vec::new(),
            output_schema: None,
            required_client: Vec::new(),
        }
    }

    /// This tool, answering with a JSON object that fits `schema` (an object schema: `"type":
    /// "object"` at its root).
    pub fn output_schema(mut self, schema: Value) -> ToolInfo {
        self.output_schema = Some(schema);
        self
    }

    /// This description, saying whether calls change nothing outside the tool.
    pub fn read_only(mut self, read_only: bool) -> ToolInfo {
        self.read_only = read_only;
        self
    }

    /// This description, saying whether calls may run at the same time.
    pub fn concurrency_safe(mut self, safe: bool) -> ToolInfo {
        self.concurrency_safe = safe;
        self
    }

    /// This description, with one more capability a call may need: `kind` on the resource
    /// `target` names.
    pub fn capability(mut self, kind: CapabilityKind, target: ResourceRef) -> ToolInfo {
        self.capabilities.push(Capability { kind, target });
        self
    }

    /// This description, if the host can believe it: a name every model provider accepts, a
    /// description, a schema that is a JSON object, and capabilities whose argument pointers
    /// are JSON pointers. Wasm and native tools are checked alike.
    pub(crate) fn checked(self) -> Result<ToolInfo, String> {
        check_tool_name(&self.name)?;
        if self.description.trim().is_empty() {
            return Err(format!("tool {:?} has an empty description", self.name));
        }
        if self.description.len() > MAX_DESCRIPTION_BYTES {
            return Err(format!(
                "tool {:?}: its description is {} bytes; at most {MAX_DESCRIPTION_BYTES} may be",
                self.name,
                self.description.len()
            ));
        }
        if self.capabilities.len() > MAX_CAPABILITIES {
            return Err(format!(
                "tool {:?} declares {} capabilities; at most {MAX_CAPABILITIES} may be",
                self.name,
                self.capabilities.len()
            ));
        }
        if !self.input_schema.is_object() {
            return Err(format!(
                "tool {:?}: its input schema is not a JSON object",
                self.name
            ));
        }
        // MCP serves a structured result as an object, so its schema must describe one.
        if let Some(output) = &self.output_schema
            && output.get("type").and_then(Value::as_str) != Some("object")
        {
            return Err(format!(
                "tool {:?}: its output schema must be an object schema (\"type\": \"object\" \
                 at its root)",
                self.name
            ));
        }
        for capability in &self.capabilities {
            if let ResourceRef::Argument(resource) | ResourceRef::Fixed(resource) =
                &capability.target
                && resource.len() > MAX_RESOURCE_BYTES
            {
                return Err(format!(
                    "tool {:?}: capability {:?} names a resource of {} bytes; at most \
                     {MAX_RESOURCE_BYTES} may be",
                    self.name,
                    capability.kind,
                    resource.len()
                ));
            }
            if capability.kind.is_client() && capability.target != ResourceRef::Whole {
                return Err(format!(
                    "tool {:?}: {} is granted whole, never for a resource",
                    self.name,
                    capability.kind.name()
                ));
            }
            if self
                .capabilities
                .iter()
                .filter(|other| other.kind.is_client() && other.kind == capability.kind)
                .count()
                > 1
            {
                return Err(format!(
                    "tool {:?} declares {} more than once",
                    self.name,
                    capability.kind.name()
                ));
            }
            if let ResourceRef::Argument(pointer) = &capability.target
                && !pointer.starts_with('/')
            {
                return Err(format!(
                    "tool {:?}: capability {:?} names argument {pointer:?}, which is not a \
                     JSON pointer (it must start with '/')",
                    self.name, capability.kind
                ));
            }
        }
        if let Some(kind) = self.required_client.iter().find(|kind| {
            !kind.is_client()
                || !self
                    .capabilities
                    .iter()
                    .any(|capability| capability.kind == **kind)
        }) {
            return Err(format!(
                "tool {:?} requires {} without declaring it",
                self.name,
                kind.name()
            ));
        }
        Ok(self)
    }

    /// The schema a model reads.
    pub fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.input_schema.clone(),
        }
    }

    /// True when a call may reach the network: its results are then untrusted data.
    pub fn uses_network(&self) -> bool {
        self.capabilities
            .iter()
            .any(|capability| capability.kind == CapabilityKind::Network)
    }
}

/// A tool name no model provider accepts, or one of the loop's own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidToolName(String);

impl From<InvalidToolName> for String {
    fn from(error: InvalidToolName) -> String {
        error.0
    }
}

/// Check that `name` fits `^[a-zA-Z0-9_-]{1,64}$` (what every model provider accepts) and
/// is not one of the loop's own tools.
pub fn check_tool_name(name: &str) -> Result<(), InvalidToolName> {
    let fits = !name.is_empty()
        && name.len() <= MAX_TOOL_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !fits {
        return Err(InvalidToolName(format!(
            "tool name {} must be 1 to {MAX_TOOL_NAME_CHARS} characters from a-z A-Z 0-9 _ -",
            crate::call::names::echoed(name)
        )));
    }
    if name == crate::call::dispatch::FIND_TOOL || name == crate::call::dispatch::CALL_TOOL {
        return Err(InvalidToolName(format!(
            "tool name {} is reserved for the agent loop",
            crate::call::names::echoed(name)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MCP serves a structured result as an object: an output schema must describe one.
    #[test]
    fn an_output_schema_must_describe_an_object() {
        let tool = |schema| ToolInfo::new("t", "d", serde_json::json!({})).output_schema(schema);
        assert!(
            tool(serde_json::json!({ "type": "object" }))
                .checked()
                .is_ok()
        );
        for refused in [
            serde_json::json!({ "type": "array" }),
            serde_json::json!({}),
            serde_json::json!(true),
            serde_json::json!("object"),
        ] {
            let why = tool(refused.clone()).checked().expect_err("refused");
            assert!(
                why.contains("output schema must be an object schema"),
                "{refused}: {why}"
            );
        }
    }

    #[test]
    fn tool_names_that_every_provider_accepts() {
        let long = "a".repeat(MAX_TOOL_NAME_CHARS);
        let too_long = "a".repeat(MAX_TOOL_NAME_CHARS + 1);
        for ok in ["echo", "read_file", "http-fetch", "A9", long.as_str()] {
            assert_eq!(check_tool_name(ok), Ok(()), "{ok:?}");
        }
        for bad in [
            "",
            "has space",
            "dot.name",
            "slash/name",
            "émoji",
            too_long.as_str(),
            "find_tool",
            "call_tool",
        ] {
            assert!(check_tool_name(bad).is_err(), "{bad:?}");
        }
    }
}
