//! The current contract's generated bindings (`toolcell:tool@0.4.0`, world `guest`, from
//! `wit/`): in a module of their own so that both the tool's bindings (`bindings.rs`) and the
//! provider interfaces' (`offering.rs`, which share its `types`) build on them without
//! importing each other.

use crate::tool::info::CapabilityKind;
use generated::toolcell::tool::types::ClientFeature;

pub(crate) mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "guest",
        imports: {
            "toolcell:tool/client.log": async,
            "toolcell:tool/client.progress": async,
            "toolcell:tool/client.ask": async | trappable,
        },
        exports: { default: async },
    });
}

/// The capability kind of a way to talk to the client (a tool's `info.client-needs`, a
/// prompt's `prompt-info.client-needs`).
pub(crate) fn client_kind(feature: ClientFeature) -> CapabilityKind {
    match feature {
        ClientFeature::Log => CapabilityKind::ClientLog,
        ClientFeature::Progress => CapabilityKind::ClientProgress,
        ClientFeature::Sample => CapabilityKind::ClientSample,
        ClientFeature::Elicit => CapabilityKind::ClientElicit,
        ClientFeature::ElicitUrl => CapabilityKind::ClientElicitUrl,
        ClientFeature::ListRoots => CapabilityKind::ClientListRoots,
    }
}
