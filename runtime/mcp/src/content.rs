//! A result's parts as MCP content blocks: text as text, images and audio as base64 with
//! their media type, resources embedded whole (text, or a base64 blob) and links to them.
//!
//! The host checked every part before it got here (`toolcell::content`): types from its list
//! and true to their bytes, URIs bounded and plain, the whole within the result cap counted as
//! this base64. Here they are only written out.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{ContentBlock, Resource, ResourceContents};
use toolcell::content::{Contents, Part};

/// The content block a client receives for `part`.
pub(crate) fn block(part: &Part) -> ContentBlock {
    match part {
        Part::Text { text } => ContentBlock::text(text.clone()),
        Part::Image(media) => ContentBlock::image(STANDARD.encode(&media.data), &media.mime_type),
        Part::Audio(media) => ContentBlock::audio(STANDARD.encode(&media.data), &media.mime_type),
        Part::Resource {
            uri,
            mime_type,
            contents,
        } => ContentBlock::resource(match contents {
            Contents::Text(text) => ResourceContents::TextResourceContents {
                uri: uri.clone(),
                mime_type: mime_type.clone(),
                text: text.clone(),
                meta: None,
            },
            Contents::Blob(blob) => ResourceContents::BlobResourceContents {
                uri: uri.clone(),
                mime_type: mime_type.clone(),
                blob: STANDARD.encode(blob),
                meta: None,
            },
            // A kind of contents this server does not know yet: what the host reads as text.
            _ => ResourceContents::TextResourceContents {
                uri: uri.clone(),
                mime_type: mime_type.clone(),
                text: toolcell::content::as_text(std::slice::from_ref(part)),
                meta: None,
            },
        }),
        Part::ResourceLink {
            uri,
            name,
            description,
            mime_type,
        } => {
            let mut link = Resource::new(uri.clone(), name.clone());
            link.description = description.clone();
            link.mime_type = mime_type.clone();
            ContentBlock::resource_link(link)
        }
        // A kind of part this server does not know yet: what the host reads as text.
        _ => ContentBlock::text(toolcell::content::as_text(std::slice::from_ref(part))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use toolcell::content::Media;

    #[test]
    fn each_part_is_the_block_mcp_defines() {
        let png = b"\x89PNG\r\n\x1a\n".to_vec();
        let rows = [
            (
                Part::text("hi"),
                serde_json::json!({"type": "text", "text": "hi"}),
            ),
            (
                Part::Image(Media {
                    mime_type: "image/png".to_owned(),
                    data: Arc::from(png.clone()),
                }),
                serde_json::json!({"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}),
            ),
            (
                Part::Resource {
                    uri: "test://r".to_owned(),
                    mime_type: Some("text/plain".to_owned()),
                    contents: Contents::Text("inside".to_owned()),
                },
                serde_json::json!({"type": "resource", "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "inside"}}),
            ),
            (
                Part::Resource {
                    uri: "test://b".to_owned(),
                    mime_type: None,
                    contents: Contents::Blob(Arc::from(&b"abc"[..])),
                },
                serde_json::json!({"type": "resource", "resource": {"uri": "test://b", "blob": "YWJj"}}),
            ),
            (
                Part::ResourceLink {
                    uri: "file:///r.pdf".to_owned(),
                    name: "r".to_owned(),
                    description: Some("a report".to_owned()),
                    mime_type: Some("application/pdf".to_owned()),
                },
                serde_json::json!({"type": "resource_link", "uri": "file:///r.pdf", "name": "r", "description": "a report", "mimeType": "application/pdf"}),
            ),
        ];
        for (part, expected) in rows {
            let written = serde_json::to_value(block(&part)).expect("serializes");
            assert_eq!(written, expected, "{part:?}");
        }
    }
}
