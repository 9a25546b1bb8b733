//! Exports toolcell's contract interface (`toolcell:tool/tool@0.4.0`) with a `describe` true to
//! it and a `call` of another type: `func(arguments: u32) -> u32`, not `func(arguments: string)
//! -> result<list<part>, tool-error>`. Written from the contract by hand (`wit/tool.wit`), only
//! `call` changed, and only what `describe` needs of the `types` interface kept: a host that
//! trusted the interface's name and read `call` as the contract's would misread the guest's
//! memory. It must be refused, never run.

wit_bindgen::generate!({
    inline: "
        package toolcell:tool@0.4.0;

        interface types {
            enum capability-kind { filesystem-read, filesystem-write, network, env, clock }
            variant resource-ref { argument(string), fixed(string), whole }
            record capability { kind: capability-kind, target: resource-ref }
            enum client-feature { log, progress, sample, elicit, elicit-url, list-roots }
            record client-need { feature: client-feature, required: bool }
        }

        interface tool {
            use types.{capability, client-need};
            record info {
                name: string,
                description: string,
                input-schema: string,
                read-only: bool,
                concurrency-safe: bool,
                capabilities: list<capability>,
                output-schema: option<string>,
                client-needs: list<client-need>,
            }
            describe: func() -> info;
            call: func(arguments: u32) -> u32;
        }

        world guest {
            export tool;
        }
    ",
});

use exports::toolcell::tool::tool::{Guest, Info};

struct WrongCall;

impl Guest for WrongCall {
    fn describe() -> Info {
        Info {
            name: "wrong_call".to_owned(),
            description: "Its call takes and answers a number, not the contract's types."
                .to_owned(),
            input_schema: r#"{"type":"object"}"#.to_owned(),
            read_only: true,
            concurrency_safe: true,
            capabilities: Vec::new(),
            output_schema: None,
            client_needs: Vec::new(),
        }
    }

    fn call(arguments: u32) -> u32 {
        arguments.wrapping_add(1)
    }
}

export!(WrongCall);
