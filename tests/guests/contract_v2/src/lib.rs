//! A tool built against the contract's second version, `toolcell:tool@0.2.0` (a result is one
//! string; an output schema may describe it): the host must keep loading and running it, its
//! string read as one text part and checked against its schema.

wit_bindgen::generate!({ path: "../../../runtime/toolcell/wit-0.2.0", world: "guest" });

use exports::toolcell::tool::tool::{Guest, Info, ToolError};

struct V2;

impl Guest for V2 {
    fn describe() -> Info {
        Info {
            name: "contract_v2".into(),
            description: "Counts the characters of its text; built against toolcell:tool@0.2.0."
                .into(),
            input_schema:
                r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#
                    .into(),
            read_only: true,
            concurrency_safe: true,
            capabilities: Vec::new(),
            output_schema: Some(
                r#"{"type":"object","properties":{"chars":{"type":"integer"}},"required":["chars"]}"#
                    .into(),
            ),
        }
    }

    fn call(arguments: String) -> Result<String, ToolError> {
        let text = arguments
            .split("\"text\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .ok_or_else(|| ToolError::InvalidInput("no text".into()))?;
        if text == "lie" {
            return Ok("not JSON".into());
        }
        Ok(format!("{{\"chars\":{}}}", text.chars().count()))
    }
}

export!(V2);
