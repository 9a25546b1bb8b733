//! Results beyond text: the parts a `toolcell:tool@0.3.0` tool may return (text, an image,
//! audio, an embedded resource, a link to a resource), and the host's checks of them.
//!
//! A tool says what its bytes are; the host does not take its word for it. Every media type
//! must be on the host's list ([`IMAGE_TYPES`], [`AUDIO_TYPES`], [`RESOURCE_TYPES`]), and the
//! bytes of an image or a sound must begin as that type's do ([`sniff`]): a tool cannot hand
//! a client an SVG with script in it, or HTML labelled `image/png`. Every URI is bounded and
//! plain. And the whole result must fit the result cap counted as the model receives it (text
//! as its UTF-8 bytes, bytes as their base64): a result of parts is never cut, since half an
//! image is no image, so one over the cap is a failure ([`check`]).
//!
//! The base64 itself is done where the result leaves the host (the MCP server, `toolcell call
//! --json`); here only its length counts.

use serde::Serialize;
use std::sync::Arc;

/// The most parts one result may have: a screenshot tool's handful, with room to spare. More
/// is a failure, not a truncation.
pub const MAX_PARTS: usize = 64;

/// The longest URI a resource or a link may carry, in bytes (the common limit of browsers and
/// proxies).
pub const MAX_URI_BYTES: usize = 2048;

/// The longest name or description of a link, in bytes.
pub const MAX_LINK_TEXT_BYTES: usize = 1024;

/// The image types a tool may declare: the raster formats every MCP client can show. Not SVG,
/// which can carry script.
pub const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The audio types a tool may declare.
pub const AUDIO_TYPES: &[&str] = &[
    "audio/wav",
    "audio/mpeg",
    "audio/ogg",
    "audio/webm",
    "audio/flac",
];

/// The types an embedded resource or a link may declare, beside the image and audio types:
/// text a client shows as text, and documents and bytes it offers to save. Not HTML or
/// JavaScript, which a client might render or run.
pub const RESOURCE_TYPES: &[&str] = &[
    "text/plain",
    "text/markdown",
    "text/csv",
    "application/json",
    "application/pdf",
    "application/octet-stream",
];

/// One part of a tool's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Part {
    /// Text for the model.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image(Media),
    /// A sound.
    Audio(Media),
    /// A resource carried whole.
    Resource {
        /// Its URI.
        uri: String,
        /// Its media type, if known.
        #[serde(skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// What it holds.
        contents: Contents,
    },
    /// A link to a resource: nothing of it is carried.
    ResourceLink {
        /// Its URI.
        uri: String,
        /// Its name.
        name: String,
        /// What it is.
        #[serde(skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its media type, if known.
        #[serde(skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// Bytes and their media type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Media {
    /// The media type, from the host's list.
    pub mime_type: String,
    /// The bytes (serialized as their length and sha256, never whole: a record is not the
    /// place for an image).
    #[serde(serialize_with = "summarize")]
    pub data: Arc<[u8]>,
}

/// What an embedded resource holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Contents {
    /// Text.
    Text(String),
    /// Bytes (serialized as their length and sha256).
    Blob(#[serde(serialize_with = "summarize")] Arc<[u8]>),
}

/// Bytes in a record: how many, and their sha256.
fn summarize<S: serde::Serializer>(data: &Arc<[u8]>, serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct as _;
    let mut summary = serializer.serialize_struct("Bytes", 2)?;
    summary.serialize_field("bytes", &data.len())?;
    summary.serialize_field("sha256", &crate::digest::sha256_hex(data))?;
    summary.end()
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Part {
        Part::Text { text: text.into() }
    }

    /// The bytes the model receives for this part: text as UTF-8, bytes as base64, and the
    /// URIs, names and types that travel with them.
    pub fn model_bytes(&self) -> usize {
        let optional = |text: &Option<String>| text.as_ref().map_or(0, String::len);
        match self {
            Part::Text { text } => text.len(),
            Part::Image(media) | Part::Audio(media) => {
                media.mime_type.len() + base64_len(media.data.len())
            }
            Part::Resource {
                uri,
                mime_type,
                contents,
            } => {
                uri.len()
                    + optional(mime_type)
                    + match contents {
                        Contents::Text(text) => text.len(),
                        Contents::Blob(blob) => base64_len(blob.len()),
                    }
            }
            Part::ResourceLink {
                uri,
                name,
                description,
                mime_type,
            } => uri.len() + name.len() + optional(description) + optional(mime_type),
        }
    }

    /// How the part reads where only text goes (an agent loop's tool result, a terminal):
    /// text as itself; a resource's text after a line naming it; anything else one line
    /// saying what it is.
    pub fn as_text(&self) -> String {
        match self {
            Part::Text { text } => text.clone(),
            Part::Image(media) => {
                format!("[image: {}, {} bytes]", media.mime_type, media.data.len())
            }
            Part::Audio(media) => {
                format!("[audio: {}, {} bytes]", media.mime_type, media.data.len())
            }
            Part::Resource {
                uri,
                mime_type,
                contents,
            } => {
                let kind = mime_type.as_deref().unwrap_or("unknown type");
                match contents {
                    Contents::Text(text) => format!("[resource: {uri} ({kind})]\n{text}"),
                    Contents::Blob(blob) => {
                        format!("[resource: {uri} ({kind}), {} bytes]", blob.len())
                    }
                }
            }
            Part::ResourceLink { uri, name, .. } => format!("[link: {name} <{uri}>]"),
        }
    }
}

/// The text a result of `parts` reads as where only text goes: each part's
/// [`as_text`](Part::as_text), one after another, a newline between.
pub fn as_text(parts: &[Part]) -> String {
    parts
        .iter()
        .map(Part::as_text)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The length of the base64 (padded) of `bytes` bytes.
pub const fn base64_len(bytes: usize) -> usize {
    bytes.div_ceil(3).saturating_mul(4)
}

/// Check a result of `parts` against the host's rules: at most [`MAX_PARTS`]; each media type
/// on its list and, for images and sounds, true to the bytes; each URI, name and description
/// bounded and plain; and all of it within `cap` bytes as the model receives it. The error
/// says what broke which rule, for the person who wrote the tool and the model that called it.
pub fn check(parts: &[Part], cap: usize) -> Result<(), String> {
    if parts.len() > MAX_PARTS {
        return Err(format!(
            "the result has {} parts; a result may have at most {MAX_PARTS}",
            parts.len()
        ));
    }
    let mut total = 0usize;
    for (index, part) in parts.iter().enumerate() {
        let at = |why: String| format!("part {index} of the result: {why}");
        match part {
            Part::Text { .. } => {}
            Part::Image(media) => check_media("image", IMAGE_TYPES, media).map_err(at)?,
            Part::Audio(media) => check_media("audio", AUDIO_TYPES, media).map_err(at)?,
            Part::Resource { uri, mime_type, .. } => {
                check_uri(uri).map_err(at)?;
                check_resource_type(mime_type.as_deref()).map_err(at)?;
            }
            Part::ResourceLink {
                uri,
                name,
                description,
                mime_type,
            } => {
                check_uri(uri).map_err(at)?;
                check_resource_type(mime_type.as_deref()).map_err(at)?;
                for (what, text) in [("name", Some(name)), ("description", description.as_ref())] {
                    if let Some(text) = text {
                        check_plain(what, text, MAX_LINK_TEXT_BYTES).map_err(at)?;
                    }
                }
                if name.is_empty() {
                    return Err(at("a link needs a name".to_owned()));
                }
            }
        }
        total = total.saturating_add(part.model_bytes());
    }
    if total > cap {
        return Err(format!(
            "the result is {total} bytes as the model receives it (text, and bytes as base64), \
             more than the result cap of {cap}; a result of parts is never cut"
        ));
    }
    Ok(())
}

/// An image's or a sound's type: on the list, and true to its first bytes.
fn check_media(what: &str, allowed: &[&str], media: &Media) -> Result<(), String> {
    if !allowed.contains(&media.mime_type.as_str()) {
        return Err(format!(
            "{what} type {} is not allowed; allowed: {}",
            crate::call::names::echoed(&media.mime_type),
            allowed.join(", ")
        ));
    }
    if media.data.is_empty() {
        return Err(format!("the {what} is empty"));
    }
    if sniff(&media.data) != Some(media.mime_type.as_str()) {
        return Err(format!(
            "the {what}'s bytes are not {} (they begin {})",
            media.mime_type,
            hex_prefix(&media.data)
        ));
    }
    Ok(())
}

/// A resource's type, if it declares one: on the list of resource, image or audio types.
fn check_resource_type(mime_type: Option<&str>) -> Result<(), String> {
    match mime_type {
        None => Ok(()),
        Some(kind)
            if RESOURCE_TYPES.contains(&kind)
                || IMAGE_TYPES.contains(&kind)
                || AUDIO_TYPES.contains(&kind) =>
        {
            Ok(())
        }
        Some(kind) => Err(format!(
            "resource type {} is not allowed; allowed: {}, and the image and audio types",
            crate::call::names::echoed(kind),
            RESOURCE_TYPES.join(", ")
        )),
    }
}

/// A URI: a scheme (`letter *(letter / digit / + - .)` then `:`), at most [`MAX_URI_BYTES`],
/// nothing a terminal or a log would read as a control or a break.
pub(crate) fn check_uri(uri: &str) -> Result<(), String> {
    check_plain("URI", uri, MAX_URI_BYTES)?;
    let scheme = uri.split(':').next().unwrap_or_default();
    let scheme_ok = uri.contains(':')
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok || uri.chars().any(char::is_whitespace) {
        return Err(format!(
            "URI {} is not a URI (a scheme, then no spaces)",
            crate::call::names::echoed(uri)
        ));
    }
    Ok(())
}

/// Text that travels beside a part: bounded, no control characters.
fn check_plain(what: &str, text: &str, limit: usize) -> Result<(), String> {
    if text.len() > limit {
        return Err(format!(
            "its {what} is {} bytes; at most {limit} are allowed",
            text.len()
        ));
    }
    if text.chars().any(|c| c.is_control() || is_format_control(c)) {
        return Err(format!(
            "its {what} {} holds a control character",
            crate::call::names::echoed(text)
        ));
    }
    Ok(())
}

/// The format characters that reorder or hide text (bidirectional embeddings, overrides and
/// isolates, zero-width characters, the word joiner and its kin, the byte order mark): in a
/// name or a link shown to a person they make it read as something it is not ("txt.exe" shown
/// as "exe.txt"), so they are refused as controls are.
pub(crate) fn is_format_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// The media type the first bytes of `data` say it is, among the image and audio types;
/// `None` for anything else.
pub fn sniff(data: &[u8]) -> Option<&'static str> {
    let riff = |form: &[u8]| data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == form;
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if data.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if riff(b"WEBP") {
        Some("image/webp")
    } else if riff(b"WAVE") {
        Some("audio/wav")
    } else if data.starts_with(b"ID3")
        || (data.len() >= 2 && data[0] == 0xff && data[1] & 0xe0 == 0xe0)
    {
        Some("audio/mpeg")
    } else if data.starts_with(b"OggS") {
        Some("audio/ogg")
    } else if data.starts_with(b"\x1a\x45\xdf\xa3") {
        Some("audio/webm")
    } else if data.starts_with(b"fLaC") {
        Some("audio/flac")
    } else {
        None
    }
}

/// The first bytes of `data`, as hex, for a message.
fn hex_prefix(data: &[u8]) -> String {
    let shown: String = data
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    if data.len() > 8 {
        format!("{shown}...")
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1×1 PNG, as the MCP conformance suite's reference server sends.
    const PNG: &[u8] =
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
    /// The first bytes of a WAV file.
    const WAV: &[u8] = b"RIFF\x26\0\0\0WAVEfmt \x10\0\0\0";

    fn image(mime_type: &str, data: &[u8]) -> Part {
        Part::Image(Media {
            mime_type: mime_type.to_owned(),
            data: Arc::from(data),
        })
    }

    #[test]
    fn parts_of_every_kind_that_keep_the_rules_pass() {
        let parts = vec![
            Part::text("a chart:"),
            image("image/png", PNG),
            Part::Audio(Media {
                mime_type: "audio/wav".to_owned(),
                data: Arc::from(WAV),
            }),
            Part::Resource {
                uri: "test://embedded-resource".to_owned(),
                mime_type: Some("text/plain".to_owned()),
                contents: Contents::Text("inside".to_owned()),
            },
            Part::ResourceLink {
                uri: "file:///work/report.pdf".to_owned(),
                name: "report".to_owned(),
                description: None,
                mime_type: Some("application/pdf".to_owned()),
            },
        ];
        assert_eq!(check(&parts, 64 * 1024), Ok(()));
        assert_eq!(
            as_text(&parts),
            format!(
                "a chart:\n[image: image/png, {} bytes]\n[audio: audio/wav, {} bytes]\n\
                 [resource: test://embedded-resource (text/plain)]\ninside\n\
                 [link: report <file:///work/report.pdf>]",
                PNG.len(),
                WAV.len()
            )
        );
    }

    #[test]
    fn a_type_off_the_list_or_untrue_to_its_bytes_is_refused() {
        let rows: &[(Part, &str)] = &[
            (
                image("image/svg+xml", b"<svg onload=alert(1)>"),
                "image type \"image/svg+xml\" is not allowed",
            ),
            (
                image("image/png", b"<html><script>"),
                "bytes are not image/png (they begin 3c68746d6c3e3c73...)",
            ),
            (image("image/jpeg", PNG), "bytes are not image/jpeg"),
            (
                Part::ResourceLink {
                    uri: "file:///notes/report".to_owned(),
                    name: "report\u{202E}txt.exe".to_owned(),
                    description: None,
                    mime_type: None,
                },
                "control character",
            ),
            (image("image/png", b""), "the image is empty"),
            (
                Part::Audio(Media {
                    mime_type: "audio/x-wav".to_owned(),
                    data: Arc::from(WAV),
                }),
                "audio type \"audio/x-wav\" is not allowed",
            ),
            (
                Part::Resource {
                    uri: "test://x".to_owned(),
                    mime_type: Some("text/html".to_owned()),
                    contents: Contents::Text("<script>".to_owned()),
                },
                "resource type \"text/html\" is not allowed",
            ),
            (
                Part::ResourceLink {
                    uri: "no scheme here".to_owned(),
                    name: "x".to_owned(),
                    description: None,
                    mime_type: None,
                },
                "is not a URI",
            ),
            (
                Part::ResourceLink {
                    uri: "https://example.test/\u{1b}[2J".to_owned(),
                    name: "x".to_owned(),
                    description: None,
                    mime_type: None,
                },
                "control character",
            ),
            (
                Part::ResourceLink {
                    uri: format!("https://h/{}", "a".repeat(MAX_URI_BYTES)),
                    name: "x".to_owned(),
                    description: None,
                    mime_type: None,
                },
                "at most 2048",
            ),
            (
                Part::ResourceLink {
                    uri: "https://h/".to_owned(),
                    name: String::new(),
                    description: None,
                    mime_type: None,
                },
                "needs a name",
            ),
        ];
        for (part, why) in rows {
            let error = check(&[Part::text("x"), part.clone()], 1 << 20).expect_err("refused");
            assert!(error.starts_with("part 1 of the result: "), "{error}");
            assert!(error.contains(why), "{why} not in {error}");
        }
    }

    #[test]
    fn the_cap_counts_bytes_as_base64_and_a_result_over_it_fails() {
        // 3 bytes are 4 of base64: an image of 3,000 bytes is 4,000 and its type's length.
        let data: Vec<u8> = PNG
            .iter()
            .copied()
            .chain(std::iter::repeat_n(0, 3000 - PNG.len()))
            .collect();
        let part = image("image/png", &data);
        assert_eq!(part.model_bytes(), 4000 + "image/png".len());
        let parts = [Part::text("ab"), part];
        assert_eq!(check(&parts, 4011), Ok(()));
        let error = check(&parts, 4010).expect_err("over the cap");
        assert!(
            error.contains("4011 bytes as the model receives it"),
            "{error}"
        );
        assert!(error.contains("never cut"), "{error}");
        // Too many parts.
        let many = vec![Part::text("x"); MAX_PARTS + 1];
        assert!(
            check(&many, usize::MAX)
                .expect_err("too many")
                .contains("at most 64")
        );
    }

    #[test]
    fn base64_lengths_are_padded() {
        for (bytes, base64) in [(0, 0), (1, 4), (2, 4), (3, 4), (4, 8), (44, 60)] {
            assert_eq!(base64_len(bytes), base64, "{bytes}");
        }
    }

    #[test]
    fn a_record_carries_the_size_and_digest_of_bytes_never_the_bytes() {
        let json = serde_json::to_value(image("image/png", PNG)).expect("serializes");
        assert_eq!(json["type"], "image");
        assert_eq!(json["mime_type"], "image/png");
        assert_eq!(json["data"]["bytes"], PNG.len());
        assert_eq!(json["data"]["sha256"].as_str().map(str::len), Some(64));
    }
}
