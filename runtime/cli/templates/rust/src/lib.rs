//! `{{name}}`: a toolcell tool in Rust, built against `wit/tool.wit`.
//!
//! toolcell checks the arguments against `SCHEMA` before `call` runs, gives each call a fresh
//! instance, and grants nothing this tool does not declare in `capabilities`.

wit_bindgen::generate!({ path: "wit", world: "guest" });

use exports::toolcell::tool::tool::{Guest, Info};
use toolcell::tool::types::{Part, ToolError};

/// The arguments, as a JSON Schema: what the model is told, and what toolcell enforces.
const SCHEMA: &str = r#"{
    "type": "object",
    "properties": { "name": { "type": "string", "description": "Who to greet." } },
    "required": ["name"],
    "additionalProperties": false
}"#;

struct Tool;

impl Guest for Tool {
    fn describe() -> Info {
        Info {
            name: "{{name}}".into(),
            description: "Greets someone by name.".into(),
            input_schema: SCHEMA.into(),
            read_only: true,
            concurrency_safe: true,
            capabilities: Vec::new(),
            // A JSON Schema (object) for a JSON result, checked by toolcell on every call;
            // None for a plain-text result.
            output_schema: None,
            // The ways a call may talk to its client (log, progress, sample, elicit, ...);
            // see the `client` interface in `wit/tool.wit`.
            client_needs: Vec::new(),
        }
    }

    /// The result's parts, or a `ToolError` the model reads: `InvalidInput`, `NotFound`,
    /// `Denied` or `Failed`. A panic is a crash: toolcell reports it as a trap (and shows
    /// what the tool wrote to stderr).
    ///
    /// A part is text, an image or audio (`Part::Image(Media { mime_type, data })`), a
    /// resource carried whole (`Part::Resource(EmbeddedResource { .. })`) or a link to one
    /// (`Part::ResourceLink(..)`); see `wit/tool.wit`.
    fn call(arguments: String) -> Result<Vec<Part>, ToolError> {
        let arguments: serde_json::Value = serde_json::from_str(&arguments)
            .map_err(|error| ToolError::InvalidInput(error.to_string()))?;
        let name = arguments["name"].as_str().unwrap_or_default().trim();
        if name.is_empty() {
            return Err(ToolError::InvalidInput("the name is blank".into()));
        }
        Ok(vec![Part::Text(format!("Hello, {name}!"))])
    }
}

export!(Tool);
