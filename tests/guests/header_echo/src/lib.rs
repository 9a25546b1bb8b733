//! A tool with a parameter an MCP 2026-07-28 client mirrors into an HTTP header
//! (`x-mcp-header`, SEP-2243): `region` travels as `Mcp-Param-Region` too, so a gateway can
//! route on it, and the server must refuse a request whose header and body disagree. The
//! conformance suite's custom-header scenario looks for any such tool; this one answers with
//! where and what it was asked.

use serde::Deserialize;
use toolcell_guest::{Info, Tool, ToolError};

struct HeaderEcho;

#[derive(Deserialize)]
struct Args {
    region: String,
    #[serde(default)]
    query: String,
}

impl Tool for HeaderEcho {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "header_echo",
            "Answers with the region and query it was asked for.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "region": {
                        "type": "string",
                        "description": "Where to look; also sent as the Mcp-Param-Region header.",
                        "x-mcp-header": "Region"
                    },
                    "query": { "type": "string" }
                },
                "required": ["region"]
            }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(args: Args) -> Result<String, ToolError> {
        Ok(format!("{}: {}", args.region, args.query))
    }
}

toolcell_guest::export_tool!(HeaderEcho);
