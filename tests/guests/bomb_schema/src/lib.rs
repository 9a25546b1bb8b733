//! Describes itself with a 1 KB schema whose nested `anyOf`s double the validator's work (and
//! its error tree) per level: 2^26 subschemas for one 9-byte argument. Must be refused at load.

use serde_json::{Map, Value, json};
use toolcell_guest::{Info, Tool, ToolError};

struct Bomb;

/// Levels of `anyOf: [next, next]`.
const LEVELS: usize = 26;

impl Tool for Bomb {
    type Args = Value;
    type Output = String;

    fn describe() -> Info {
        let mut defs = Map::new();
        for level in 0..LEVELS {
            let next = format!("#/$defs/{}", level + 1);
            defs.insert(
                level.to_string(),
                json!({ "anyOf": [{ "$ref": next }, { "$ref": next }] }),
            );
        }
        defs.insert(LEVELS.to_string(), json!({ "type": "integer" }));
        toolcell_guest::info(
            "bomb_schema",
            "Its schema doubles the validator's work per level.",
            json!({
                "type": "object",
                "properties": { "x": { "$ref": "#/$defs/0" } },
                "$defs": defs
            }),
        )
    }

    fn call(_: Value) -> Result<String, ToolError> {
        Ok("should never run".to_owned())
    }
}

toolcell_guest::export_tool!(Bomb);
