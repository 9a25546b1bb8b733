//! A fixture of the MCP conformance suite (`@modelcontextprotocol/conformance`): the scenario
//! `tools-call-mixed-content` calls it for text, an image and a resource in one result.
//! Its name and behaviour are the suite's (`tests/conformance/`); see `tests/src/conformance.rs`.

use toolcell_guest::{Info, Part, Tool, ToolError};

struct Fixture;

/// A 1×1 red PNG, the suite's reference image.
const PIXEL: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\
      \x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\
      \x89\x00\x00\x00\x0d\x49\x44\x41\x54\x78\xda\x63\xfc\xcf\xc0\xf0\
      \x1f\x00\x05\x05\x02\x00\x5f\xc8\xf1\xd2\x00\x00\x00\x00\x49\x45\
      \x4e\x44\xae\x42\x60\x82";

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = Vec<Part>;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "test_multiple_content_types",
            "Returns text, an image and a resource together.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(_: serde_json::Value) -> Result<Vec<Part>, ToolError> {
        Ok(vec![
            Part::Text("Multiple content types test:".to_owned()),
            toolcell_guest::image("image/png", PIXEL.to_vec()),
            toolcell_guest::embedded_text(
                "test://mixed-content-resource",
                "application/json",
                r#"{"test":"data","value":123}"#,
            ),
        ])
    }
}

toolcell_guest::export_tool!(Fixture);
