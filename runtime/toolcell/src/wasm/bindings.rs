//! The host bindings generated from `wit/`. The only module that calls `bindgen!`; everything
//! else speaks the host's own types ([`ToolInfo`](crate::ToolInfo)).

mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "guest",
        exports: { default: async },
    });
}

pub(crate) use generated::GuestPre;
pub(crate) use generated::exports::toolcell::tool::tool::{Info, ToolError};

use crate::tool::info::{Capability, CapabilityKind, MAX_SCHEMA_TEXT_BYTES, ResourceRef, ToolInfo};
use generated::exports::toolcell::tool::tool as wit;
use serde_json::Value;

impl From<wit::CapabilityKind> for CapabilityKind {
    fn from(kind: wit::CapabilityKind) -> Self {
        match kind {
            wit::CapabilityKind::FilesystemRead => CapabilityKind::FilesystemRead,
            wit::CapabilityKind::FilesystemWrite => CapabilityKind::FilesystemWrite,
            wit::CapabilityKind::Network => CapabilityKind::Network,
            wit::CapabilityKind::Env => CapabilityKind::Env,
            wit::CapabilityKind::Clock => CapabilityKind::Clock,
        }
    }
}

impl From<wit::Capability> for Capability {
    fn from(capability: wit::Capability) -> Self {
        Capability {
            kind: capability.kind.into(),
            target: match capability.target {
                wit::ResourceRef::Argument(pointer) => ResourceRef::Argument(pointer),
                wit::ResourceRef::Fixed(resource) => ResourceRef::Fixed(resource),
                wit::ResourceRef::Whole => ResourceRef::Whole,
            },
        }
    }
}

impl ToolInfo {
    /// Check what a guest's `describe()` returned. The error says what is wrong with it.
    pub(crate) fn from_guest(info: Info) -> Result<ToolInfo, String> {
        if info.input_schema.len() > MAX_SCHEMA_TEXT_BYTES {
            return Err(format!(
                "tool {:?}: its input schema is {} bytes of text; at most {MAX_SCHEMA_TEXT_BYTES} \
                 are read",
                info.name,
                info.input_schema.len()
            ));
        }
        let input_schema = match serde_json::from_str::<Value>(&info.input_schema) {
            Ok(schema) => schema,
            Err(error) => {
                return Err(format!(
                    "tool {:?}: its input schema is not JSON: {error}",
                    info.name
                ));
            }
        };
        ToolInfo {
            name: info.name,
            description: info.description,
            input_schema,
            read_only: info.read_only,
            concurrency_safe: info.concurrency_safe,
            capabilities: info
                .capabilities
                .into_iter()
                .map(Capability::from)
                .collect(),
        }
        .checked()
    }
}
