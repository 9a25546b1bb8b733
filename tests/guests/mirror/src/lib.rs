//! Answers with its arguments exactly as the host handed them over, byte for byte: what the
//! guest's own parser would read. (It skips `toolcell-guest`'s parse to see the raw text.)

use toolcell_guest::bindings::exports::toolcell::tool::tool::Guest;
use toolcell_guest::{Info, Part, ToolError};

struct Mirror;

impl Guest for Mirror {
    fn describe() -> Info {
        toolcell_guest::info(
            "mirror",
            "Answers with its arguments as it received them.",
            serde_json::json!({
                "type": "object",
                "properties": { "text": { "type": "string", "maxLength": 4 } }
            }),
        )
    }

    fn call(arguments: String) -> Result<Vec<Part>, ToolError> {
        Ok(vec![Part::Text(arguments)])
    }
}

toolcell_guest::bindings::export!(Mirror with_types_in toolcell_guest::bindings);
