//! A fixture of the MCP conformance suite (`@modelcontextprotocol/conformance`): the scenario
//! `json-schema-2020-12` finds it in `tools/list` and checks that its input schema is served as
//! written (`$schema`, `$defs` with an `$anchor`, `additionalProperties`, and since the suite's
//! 0.2 line the composition and conditional keywords: `allOf` holding an `anyOf`, `if` /
//! `then` / `else`).
//! Its name and behaviour are the suite's (`tests/conformance/`); see `tests/src/conformance.rs`.

use toolcell_guest::{Info, Tool, ToolError};

struct Fixture;

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "json_schema_2020_12_tool",
            "A tool whose input schema uses JSON Schema 2020-12 keywords.",
            serde_json::json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "address",
                        "type": "object",
                        "properties": {
                            "street": { "type": "string" },
                            "city": { "type": "string" }
                        }
                    }
                },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" }
                },
                "additionalProperties": false,
                "allOf": [
                    { "anyOf": [ { "required": ["name"] }, { "required": ["address"] } ] }
                ],
                "if": { "properties": { "name": { "const": "admin" } }, "required": ["name"] },
                "then": { "required": ["address"] },
                "else": { "required": [] }
            }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(args: serde_json::Value) -> Result<String, ToolError> {
        Ok(format!("JSON Schema 2020-12 tool called with: {args}"))
    }
}

toolcell_guest::export_tool!(Fixture);
