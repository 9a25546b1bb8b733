//! A fixture of the MCP conformance suite (`@modelcontextprotocol/conformance`): the scenario
//! `tools-call-audio` calls it for an audio block of `audio/wav`.
//! Its name and behaviour are the suite's (`tests/conformance/`); see `tests/src/conformance.rs`.

use toolcell_guest::{Info, Part, Tool, ToolError};

struct Fixture;

/// A WAV file of one silent sample, the suite's reference sound.
const SOUND: &[u8] = b"\x52\x49\x46\x46\x26\x00\x00\x00\x57\x41\x56\x45\x66\x6d\x74\x20\
      \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x00\x7d\x00\x00\
      \x02\x00\x10\x00\x64\x61\x74\x61\x02\x00\x00\x00";

impl Tool for Fixture {
    type Args = serde_json::Value;
    type Output = Vec<Part>;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "test_audio_content",
            "Returns a short WAV sound.",
            serde_json::json!({ "type": "object", "properties": {} }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(_: serde_json::Value) -> Result<Vec<Part>, ToolError> {
        Ok(vec![toolcell_guest::audio("audio/wav", SOUND.to_vec())])
    }
}

toolcell_guest::export_tool!(Fixture);
