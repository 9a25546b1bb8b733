//! A tool built against the contract's third version, `toolcell:tool@0.3.0` (the types inside
//! the `tool` interface, no client needs): the host must keep loading and running it, its
//! parts passed on as a 0.4.0 tool's are.

wit_bindgen::generate!({ path: "../../../runtime/toolcell/wit-0.3.0", world: "guest" });

use exports::toolcell::tool::tool::{Guest, Info, Part, ResourceLink, ToolError};

struct V3;

impl Guest for V3 {
    fn describe() -> Info {
        Info {
            name: "contract_v3".into(),
            description: "Names its text and links to it; built against toolcell:tool@0.3.0."
                .into(),
            input_schema:
                r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#
                    .into(),
            read_only: true,
            concurrency_safe: true,
            capabilities: Vec::new(),
            output_schema: None,
        }
    }

    fn call(arguments: String) -> Result<Vec<Part>, ToolError> {
        let text = arguments
            .split("\"text\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .ok_or_else(|| ToolError::InvalidInput("no text".into()))?;
        Ok(vec![
            Part::Text(format!("text: {text}")),
            Part::ResourceLink(ResourceLink {
                uri: format!("memo://{text}"),
                name: text.into(),
                description: None,
                mime_type: None,
            }),
        ])
    }
}

export!(V3);
