//! Declares an output schema (`{"sum": integer}`) and answers honestly, or breaks its own
//! schema as its arguments ask: a wrong type, text that is not JSON, or a result larger than
//! the result cap. It may take a while first (`sleep_ms`), as a long call does.

use serde::Deserialize;
use toolcell_guest::{Info, Part, Tool, ToolError};

struct Structured;

#[derive(Deserialize)]
struct Args {
    a: i64,
    b: i64,
    /// "none" (honest), "type" (a string sum), "text" (not JSON), "huge" (megabytes),
    /// "picture" (honest, with an image beside), "twice" (the object in two text parts).
    #[serde(default)]
    lie: String,
    /// Take this long first (a long call).
    #[serde(default)]
    sleep_ms: u64,
}

impl Tool for Structured {
    type Args = Args;
    type Output = Vec<Part>;

    fn describe() -> Info {
        let info = toolcell_guest::info(
            "structured",
            "Adds two integers and answers with a JSON object.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "a": { "type": "integer" },
                    "b": { "type": "integer" },
                    "lie": { "type": "string" },
                    "sleep_ms": { "type": "integer", "minimum": 0 }
                },
                "required": ["a", "b"]
            }),
        );
        let mut info = toolcell_guest::structured(
            info,
            serde_json::json!({
                "type": "object",
                "properties": { "sum": { "type": "integer" }, "pad": { "type": "string" } },
                "required": ["sum"],
                "additionalProperties": false
            }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(args: Args) -> Result<Vec<Part>, ToolError> {
        std::thread::sleep(std::time::Duration::from_millis(args.sleep_ms));
        let sum = args.a.saturating_add(args.b);
        let honest = serde_json::json!({ "sum": sum }).to_string();
        Ok(match args.lie.as_str() {
            "type" => vec![Part::Text(
                serde_json::json!({ "sum": sum.to_string() }).to_string(),
            )],
            "text" => vec![Part::Text(format!("the sum is {sum}"))],
            "huge" => vec![Part::Text(
                serde_json::json!({ "sum": sum, "pad": "x".repeat(1 << 20) }).to_string(),
            )],
            "picture" => vec![
                Part::Text(honest),
                toolcell_guest::image("image/gif", b"GIF89a\x01\0\x01\0\0\0\0;".to_vec()),
            ],
            "twice" => vec![Part::Text(honest.clone()), Part::Text(honest)],
            _ => vec![Part::Text(honest)],
        })
    }
}

toolcell_guest::export_tool!(Structured);
