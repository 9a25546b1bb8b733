//! The host bindings generated from `wit/`. The only module that calls `bindgen!`; everything
//! else speaks the host's own types ([`ToolInfo`](crate::ToolInfo)).

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "guest",
        exports: { default: async },
    });
}

pub(crate) use generated::GuestPre;
pub(crate) use generated::exports::toolcell::tool::tool::{Info, ToolError};

use crate::info::{Capability, CapabilityKind, ResourceRef};
use generated::exports::toolcell::tool::tool as wit;

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
