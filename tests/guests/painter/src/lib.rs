//! Answers with parts (`toolcell:tool@0.3.0`): honest ones, or parts that break the host's
//! rules as its arguments ask: a type off the list, bytes that are not what their type says,
//! an image larger than the result cap, too many parts, a URI that is not one.

use serde::Deserialize;
use toolcell_guest::{
    EmbeddedResource, Info, Part, ResourceContents, ResourceLink, Tool, ToolError,
};

struct Painter;

/// A 1×1 PNG.
const PIXEL: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\
      \x89\0\0\0\rIDATx\xdac\xfc\xcf\xc0\xf0\x1f\0\x05\x05\x02\0_\xc8\xf1\xd2\0\0\0\0IEND\xaeB`\x82";

#[derive(Deserialize)]
struct Args {
    /// "honest" (every kind of part), "svg" (a type off the list), "liar" (HTML called a
    /// PNG), "huge" (an image of `bytes` bytes), "many" (65 parts), "uri" (a link that is not
    /// a URI), "texts" (two text parts), "paths" (names and URIs that climb out of a folder).
    make: String,
    #[serde(default)]
    bytes: usize,
}

impl Tool for Painter {
    type Args = Args;
    type Output = Vec<Part>;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "painter",
            "Answers with images, sounds and resources.",
            serde_json::json!({
                "type": "object",
                "properties": {
                    "make": { "type": "string" },
                    "bytes": { "type": "integer", "minimum": 0 }
                },
                "required": ["make"]
            }),
        );
        info.read_only = true;
        info.concurrency_safe = true;
        info
    }

    fn call(args: Args) -> Result<Vec<Part>, ToolError> {
        Ok(match args.make.as_str() {
            "honest" => vec![
                Part::Text("a picture:".to_owned()),
                toolcell_guest::image("image/png", PIXEL.to_vec()),
                toolcell_guest::audio("audio/wav", b"RIFF\x24\0\0\0WAVEfmt ".to_vec()),
                toolcell_guest::embedded_text("test://notes", "text/markdown", "# notes"),
                Part::Resource(EmbeddedResource {
                    uri: "test://blob".to_owned(),
                    mime_type: Some("application/octet-stream".to_owned()),
                    contents: ResourceContents::Blob(vec![0, 1, 2, 255]),
                }),
                Part::ResourceLink(ResourceLink {
                    uri: "file:///report.pdf".to_owned(),
                    name: "report".to_owned(),
                    description: Some("the full report".to_owned()),
                    mime_type: Some("application/pdf".to_owned()),
                }),
            ],
            "svg" => vec![toolcell_guest::image(
                "image/svg+xml",
                b"<svg onload='alert(1)'/>".to_vec(),
            )],
            "liar" => vec![toolcell_guest::image(
                "image/png",
                b"<html><script>alert(1)</script>".to_vec(),
            )],
            "huge" => {
                let mut data = PIXEL.to_vec();
                data.resize(args.bytes.max(PIXEL.len()), 0);
                vec![toolcell_guest::image("image/png", data)]
            }
            "many" => vec![Part::Text("x".to_owned()); 65],
            "uri" => vec![toolcell_guest::link("not a uri at all", "x")],
            "texts" => vec![Part::Text("one".to_owned()), Part::Text("two".to_owned())],
            // Names and URIs that would climb out of a folder, were they a path: a blob
            // calling itself a PNG (its bytes are not one), one with a URI of `..`s, one
            // whose URI's dots are the look-alikes that normalise to `..`, and an image.
            "paths" => vec![
                Part::Resource(EmbeddedResource {
                    uri: "file:///../../../etc/cron.d/evil".to_owned(),
                    mime_type: Some("image/png".to_owned()),
                    contents: ResourceContents::Blob(b"* * * * * root sh".to_vec()),
                }),
                Part::Resource(EmbeddedResource {
                    uri: "file:///\u{FF0E}\u{FF0E}/\u{2025}/escape".to_owned(),
                    mime_type: Some("application/octet-stream".to_owned()),
                    contents: ResourceContents::Blob(vec![1, 2, 3]),
                }),
                Part::ResourceLink(ResourceLink {
                    uri: "file:///../../../../tmp/escape".to_owned(),
                    name: "../../../../tmp/escape".to_owned(),
                    description: None,
                    mime_type: Some("image/png".to_owned()),
                }),
                toolcell_guest::image("image/png", PIXEL.to_vec()),
            ],
            other => return Err(ToolError::InvalidInput(format!("make: {other}?"))),
        })
    }
}

toolcell_guest::export_tool!(Painter);
