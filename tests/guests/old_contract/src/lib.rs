//! A tool built against the contract's first version, `toolcell:tool@0.1.0` (no
//! `output-schema`): the host must keep loading and running it.

wit_bindgen::generate!({ path: "../../../runtime/toolcell/wit-0.1.0", world: "guest" });

use exports::toolcell::tool::tool::{Guest, Info, ToolError};

struct Old;

impl Guest for Old {
    fn describe() -> Info {
        Info {
            name: "old_contract".into(),
            description: "Answers with its text, reversed; built against toolcell:tool@0.1.0."
                .into(),
            input_schema:
                r#"{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}"#
                    .into(),
            read_only: true,
            concurrency_safe: true,
            capabilities: Vec::new(),
        }
    }

    fn call(arguments: String) -> Result<String, ToolError> {
        let text = arguments
            .split("\"text\":\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .ok_or_else(|| ToolError::InvalidInput("no text".into()))?;
        if text == "fail" {
            return Err(ToolError::NotFound("asked to fail".into()));
        }
        Ok(text.chars().rev().collect())
    }
}

export!(Old);
