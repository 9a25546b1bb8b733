//! The current contract's generated bindings (`toolcell:tool@0.4.0`, world `guest`, from
//! `wit/`): in a module of their own so that both the tool's bindings (`bindings.rs`) and the
//! provider interfaces' (`offering.rs`, which share its `types`) build on them without
//! importing each other.

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
