//! Describes itself with a schema inside every limit that still checks each item of `xs`
//! against 4,000 subschemas: arguments of a few hundred KB take the validator about a minute.
//! The call must end at its deadline (or its stop) all the same.

use serde_json::{Value, json};
use toolcell_guest::{Info, Tool, ToolError};

struct Slow;

impl Tool for Slow {
    type Args = Value;
    type Output = String;

    fn describe() -> Info {
        let branches: Vec<Value> = (0..2000)
            .map(|i| json!({ "not": { "const": i } }))
            .collect();
        toolcell_guest::info(
            "slow_schema",
            "Its schema is slow to check against long arrays.",
            json!({
                "type": "object",
                "properties": { "xs": { "type": "array", "items": { "allOf": branches } } }
            }),
        )
    }

    fn call(arguments: Value) -> Result<String, ToolError> {
        let items = arguments["xs"].as_array().map_or(0, Vec::len);
        Ok(format!("checked {items} items"))
    }
}

toolcell_guest::export_tool!(Slow);
