//! The host bindings generated from `wit/`. The only module that calls `bindgen!`; everything
//! else speaks the host's own types ([`ToolInfo`](crate::ToolInfo)).

mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "guest",
        exports: { default: async },
    });
}

/// The contract as it was in 0.1.0 (no `output-schema`): components built against it still
/// load, and read as if they declared no output schema.
mod v0_1 {
    wasmtime::component::bindgen!({
        path: "wit-0.1.0",
        world: "guest",
        exports: { default: async },
    });
}

pub(crate) use generated::exports::toolcell::tool::tool::{Info, ToolError};

use crate::tool::info::{Capability, CapabilityKind, MAX_SCHEMA_TEXT_BYTES, ResourceRef, ToolInfo};
use generated::exports::toolcell::tool::tool as wit;
use serde_json::Value;
use wasmtime::component::InstancePre;
use wasmtime::{AsContextMut, Result};

/// A component ready to instantiate, by the version of the contract it exports.
pub(crate) enum GuestPre<T: 'static> {
    /// `toolcell:tool@0.2.0`, the current contract.
    Current(generated::GuestPre<T>),
    /// `toolcell:tool@0.1.0`.
    V0_1(v0_1::GuestPre<T>),
}

impl<T: 'static> Clone for GuestPre<T> {
    fn clone(&self) -> Self {
        match self {
            GuestPre::Current(pre) => GuestPre::Current(pre.clone()),
            GuestPre::V0_1(pre) => GuestPre::V0_1(pre.clone()),
        }
    }
}

impl<T: Send + 'static> GuestPre<T> {
    /// The component behind `instance_pre`, if it exports either version of the contract
    /// (the current one is tried first). The error is the current version's.
    pub(crate) fn new(instance_pre: InstancePre<T>) -> Result<GuestPre<T>> {
        match generated::GuestPre::new(instance_pre.clone()) {
            Ok(pre) => Ok(GuestPre::Current(pre)),
            Err(current) => match v0_1::GuestPre::new(instance_pre) {
                Ok(pre) => Ok(GuestPre::V0_1(pre)),
                Err(_) => Err(current),
            },
        }
    }

    /// Instantiate it in `store` and call `describe()`.
    pub(crate) async fn describe(&self, mut store: impl AsContextMut<Data = T>) -> Result<Info> {
        match self {
            GuestPre::Current(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                guest.toolcell_tool_tool().call_describe(&mut store).await
            }
            GuestPre::V0_1(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                let info = guest.toolcell_tool_tool().call_describe(&mut store).await?;
                Ok(Info {
                    name: info.name,
                    description: info.description,
                    input_schema: info.input_schema,
                    read_only: info.read_only,
                    concurrency_safe: info.concurrency_safe,
                    capabilities: info
                        .capabilities
                        .into_iter()
                        .map(|capability| wit::Capability {
                            kind: match capability.kind {
                                v0_1::exports::toolcell::tool::tool::CapabilityKind::FilesystemRead => {
                                    wit::CapabilityKind::FilesystemRead
                                }
                                v0_1::exports::toolcell::tool::tool::CapabilityKind::FilesystemWrite => {
                                    wit::CapabilityKind::FilesystemWrite
                                }
                                v0_1::exports::toolcell::tool::tool::CapabilityKind::Network => {
                                    wit::CapabilityKind::Network
                                }
                                v0_1::exports::toolcell::tool::tool::CapabilityKind::Env => {
                                    wit::CapabilityKind::Env
                                }
                                v0_1::exports::toolcell::tool::tool::CapabilityKind::Clock => {
                                    wit::CapabilityKind::Clock
                                }
                            },
                            target: match capability.target {
                                v0_1::exports::toolcell::tool::tool::ResourceRef::Argument(p) => {
                                    wit::ResourceRef::Argument(p)
                                }
                                v0_1::exports::toolcell::tool::tool::ResourceRef::Fixed(r) => {
                                    wit::ResourceRef::Fixed(r)
                                }
                                v0_1::exports::toolcell::tool::tool::ResourceRef::Whole => {
                                    wit::ResourceRef::Whole
                                }
                            },
                        })
                        .collect(),
                    output_schema: None,
                })
            }
        }
    }

    /// Instantiate it in `store` and run `call(arguments)`.
    pub(crate) async fn call(
        &self,
        mut store: impl AsContextMut<Data = T>,
        arguments: &str,
    ) -> Result<std::result::Result<String, ToolError>> {
        match self {
            GuestPre::Current(pre) => {
                let guest = pre.instantiate_async(&mut store).await?;
                guest
                    .toolcell_tool_tool()
                    .call_call(&mut store, arguments)
                    .await
            }
            GuestPre::V0_1(pre) => {
                use v0_1::exports::toolcell::tool::tool::ToolError as Old;
                let guest = pre.instantiate_async(&mut store).await?;
                let answer = guest
                    .toolcell_tool_tool()
                    .call_call(&mut store, arguments)
                    .await?;
                Ok(answer.map_err(|error| match error {
                    Old::InvalidInput(message) => ToolError::InvalidInput(message),
                    Old::NotFound(message) => ToolError::NotFound(message),
                    Old::Denied(message) => ToolError::Denied(message),
                    Old::Failed(message) => ToolError::Failed(message),
                }))
            }
        }
    }
}

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
        let output_schema = match &info.output_schema {
            None => None,
            Some(text) if text.len() > MAX_SCHEMA_TEXT_BYTES => {
                return Err(format!(
                    "tool {:?}: its output schema is {} bytes of text; at most \
                     {MAX_SCHEMA_TEXT_BYTES} are read",
                    info.name,
                    text.len()
                ));
            }
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(schema) => Some(schema),
                Err(error) => {
                    return Err(format!(
                        "tool {:?}: its output schema is not JSON: {error}",
                        info.name
                    ));
                }
            },
        };
        ToolInfo {
            name: info.name,
            description: info.description,
            input_schema,
            output_schema,
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
