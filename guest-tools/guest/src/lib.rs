//! Write a toolcell tool in a few lines.
//!
//! A tool is a type that implements [`Tool`]: it describes itself and runs one call with typed
//! arguments. [`export_tool!`] exports it as the `toolcell:tool/tool` interface from `wit/`.
//! This crate hides the generated bindings, parses the call's JSON into your argument type
//! (a parse failure is an `invalid-input` error the model can read), and keeps a guest's
//! normal failures out of traps.
//!
//! ```ignore
//! use serde::Deserialize;
//! use toolcell_guest::{Info, Tool, ToolError};
//!
//! struct Echo;
//!
//! #[derive(Deserialize)]
//! struct Args { text: String }
//!
//! impl Tool for Echo {
//!     type Args = Args;
//!     type Output = String;
//!     fn describe() -> Info {
//!         toolcell_guest::info("echo", "Returns its text argument unchanged.", serde_json::json!({
//!             "type": "object",
//!             "properties": { "text": { "type": "string" } },
//!             "required": ["text"]
//!         }))
//!     }
//!     fn call(args: Args) -> Result<String, ToolError> { Ok(args.text) }
//! }
//!
//! toolcell_guest::export_tool!(Echo);
//! ```
//!
//! Build it with `cargo build --release --target wasm32-wasip2` (the linker shipped with the
//! Rust toolchain emits a component directly) or with `cargo component build --release`.

/// The bindings generated from `wit/`. Tools should not need them directly: the useful types
/// are re-exported at the crate root, and [`export_tool!`] wires a [`Tool`] to the exports.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "guest",
        pub_export_macro: true,
        default_bindings_module: "toolcell_guest::bindings",
    });
}

use serde::de::DeserializeOwned;

pub use bindings::exports::toolcell::tool::tool::Info;
pub use bindings::toolcell::tool::types::{
    Capability, CapabilityKind, ClientFeature, ClientNeed, EmbeddedResource, Media, Part,
    ResourceContents, ResourceLink, ResourceRef, ToolError,
};

/// Talking to the client that made the call: log messages, progress, and questions for the
/// model or the person. Declare each feature in your [`Info`] ([`talks`]); the host decides it
/// per call, and what it does not grant is dropped (log, progress) or answered `denied`
/// (`ask`).
pub mod client {
    pub use crate::bindings::toolcell::tool::client::{
        Action, Answer, AskError, Content, Elicited, FeatureSet, Form, Level, Message,
        ModelPreferences, Question, Request, Role, Root, Sampled, Sampling, UrlRequest, ask,
        features, log, progress,
    };

    /// Ask the person one form: `schema` is the JSON Schema of the answer (an object of flat
    /// properties). The answer, or why there is none.
    pub fn elicit(
        key: &str,
        message: &str,
        schema: &serde_json::Value,
    ) -> Result<Elicited, AskError> {
        let form = Request::Elicit(Form {
            message: message.to_owned(),
            requested_schema: schema.to_string(),
        });
        match one(key, form)? {
            Answer::Elicited(elicited) => Ok(elicited),
            _ => Err(AskError::Failed("an answer of another kind".to_owned())),
        }
    }

    /// Ask the client's model to answer `prompt` in at most `max_tokens` tokens.
    pub fn sample(key: &str, prompt: &str, max_tokens: u32) -> Result<Sampled, AskError> {
        let sampling = Request::Sample(Sampling {
            messages: vec![Message {
                role: Role::User,
                content: Content::Text(prompt.to_owned()),
            }],
            system_prompt: None,
            max_tokens,
            temperature: None,
            stop_sequences: Vec::new(),
            model_preferences: None,
        });
        match one(key, sampling)? {
            Answer::Sampled(sampled) => Ok(sampled),
            _ => Err(AskError::Failed("an answer of another kind".to_owned())),
        }
    }

    /// Ask the client for its roots.
    pub fn roots(key: &str) -> Result<Vec<Root>, AskError> {
        match one(key, Request::ListRoots)? {
            Answer::Roots(roots) => Ok(roots),
            _ => Err(AskError::Failed("an answer of another kind".to_owned())),
        }
    }

    fn one(key: &str, request: Request) -> Result<Answer, AskError> {
        let mut answers = ask(&[Question {
            key: key.to_owned(),
            request,
        }])?;
        answers
            .pop()
            .ok_or_else(|| AskError::Failed("no answer".to_owned()))
    }
}

/// One tool: what it says about itself and how it runs a call.
pub trait Tool {
    /// The call's arguments. The JSON the host passes is parsed into this type; a value that
    /// does not parse becomes [`ToolError::InvalidInput`] with serde's message, and
    /// [`Tool::call`] is not run.
    type Args: DeserializeOwned;

    /// What a call returns: `String` for text (most tools), or `Vec<Part>` for a result of
    /// parts (text, [`image`]s, [`audio`], [`embedded_text`] resources, [`link`]s).
    type Output: IntoParts;

    /// What the tool says about itself: read once by the host, when it loads the component.
    fn describe() -> Info;

    /// Run one call. Return `Err` for any failure the model should read; never panic for one.
    fn call(args: Self::Args) -> Result<Self::Output, ToolError>;
}

/// What a call may return: its parts.
pub trait IntoParts {
    /// The result as the contract carries it.
    fn into_parts(self) -> Vec<Part>;
}

impl IntoParts for String {
    fn into_parts(self) -> Vec<Part> {
        vec![Part::Text(self)]
    }
}

impl IntoParts for Vec<Part> {
    fn into_parts(self) -> Vec<Part> {
        self
    }
}

impl IntoParts for Part {
    fn into_parts(self) -> Vec<Part> {
        vec![self]
    }
}

/// An image part: `mime_type` is `image/png`, `image/jpeg`, `image/gif` or `image/webp`, and
/// `data` must begin as that type's files do (the host checks both).
pub fn image(mime_type: &str, data: Vec<u8>) -> Part {
    Part::Image(Media {
        mime_type: mime_type.to_owned(),
        data,
    })
}

/// An audio part: `mime_type` is `audio/wav`, `audio/mpeg`, `audio/ogg`, `audio/webm` or
/// `audio/flac`, true to `data`.
pub fn audio(mime_type: &str, data: Vec<u8>) -> Part {
    Part::Audio(Media {
        mime_type: mime_type.to_owned(),
        data,
    })
}

/// A text resource carried whole: `uri` names it, `mime_type` says what it is (`text/plain`,
/// `text/markdown`, `text/csv`, `application/json`, ...).
pub fn embedded_text(uri: &str, mime_type: &str, text: &str) -> Part {
    Part::Resource(EmbeddedResource {
        uri: uri.to_owned(),
        mime_type: Some(mime_type.to_owned()),
        contents: ResourceContents::Text(text.to_owned()),
    })
}

/// A link to a resource the client may open itself.
pub fn link(uri: &str, name: &str) -> Part {
    Part::ResourceLink(ResourceLink {
        uri: uri.to_owned(),
        name: name.to_owned(),
        description: None,
        mime_type: None,
    })
}

/// An [`Info`] with the given name, description and JSON Schema, and the conservative
/// defaults: not read-only, not concurrency-safe, no capabilities. Change the fields you need.
pub fn info(name: &str, description: &str, input_schema: serde_json::Value) -> Info {
    Info {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: input_schema.to_string(),
        read_only: false,
        concurrency_safe: false,
        capabilities: Vec::new(),
        output_schema: None,
        client_needs: Vec::new(),
    }
}

/// `info` for a tool that may talk to its client in the ways `features` name: each optional
/// (the tool copes without it).
pub fn talks(mut info: Info, features: &[ClientFeature]) -> Info {
    info.client_needs = features
        .iter()
        .map(|feature| ClientNeed {
            feature: *feature,
            required: false,
        })
        .collect();
    info
}

/// `info` for a tool whose result is a JSON object that fits `output_schema` (an object
/// schema): the host checks every result against it, and MCP clients get it as
/// `structuredContent`.
pub fn structured(mut info: Info, output_schema: serde_json::Value) -> Info {
    info.output_schema = Some(output_schema.to_string());
    info
}

/// `info` for a tool that only reads the file or directory its argument at `pointer` names:
/// read-only, concurrency-safe, needing `filesystem-read` on that argument and nothing else.
pub fn reads_path(info: Info, pointer: &str) -> Info {
    path_tool(info, CapabilityKind::FilesystemRead, pointer)
}

/// `info` for a tool that writes the file its argument at `pointer` names: not read-only, not
/// concurrency-safe, needing `filesystem-write` on that argument and nothing else.
pub fn writes_path(info: Info, pointer: &str) -> Info {
    path_tool(info, CapabilityKind::FilesystemWrite, pointer)
}

/// A tool whose one capability is `kind` on the path at `pointer`; it is read-only and safe to
/// run concurrently exactly when that capability only reads.
fn path_tool(mut info: Info, kind: CapabilityKind, pointer: &str) -> Info {
    let reads = matches!(kind, CapabilityKind::FilesystemRead);
    info.read_only = reads;
    info.concurrency_safe = reads;
    info.capabilities = vec![capability_from_argument(kind, pointer)];
    info
}

/// A capability whose resource is named by the argument at `pointer` (a JSON pointer such as
/// `/path`).
pub fn capability_from_argument(kind: CapabilityKind, pointer: &str) -> Capability {
    Capability {
        kind,
        target: ResourceRef::Argument(pointer.to_owned()),
    }
}

/// A capability granted whole, with no resource (the clock).
pub fn capability_whole(kind: CapabilityKind) -> Capability {
    Capability {
        kind,
        target: ResourceRef::Whole,
    }
}

/// The tool error for an I/O failure on `what`: a missing file is `not-found`, a refused one
/// `denied` (the host withheld it), anything else `failed`.
pub fn io_error(what: &str, error: std::io::Error) -> ToolError {
    match error.kind() {
        std::io::ErrorKind::NotFound => {
            ToolError::NotFound(format!("{what}: no such file or directory"))
        }
        std::io::ErrorKind::PermissionDenied => ToolError::Denied(format!("{what}: {error}")),
        _ => ToolError::Failed(format!("{what}: {error}")),
    }
}

/// The paths, relative to `root`, of every regular file below `root`, unsorted. Symlinks are
/// neither followed nor listed (the host would refuse one that leads out anyway).
pub fn files_below(root: &std::path::Path) -> std::io::Result<Vec<String>> {
    fn walk(root: &std::path::Path, prefix: &str, files: &mut Vec<String>) -> std::io::Result<()> {
        let dir = if prefix.is_empty() {
            root.to_path_buf()
        } else {
            root.join(prefix)
        };
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = if prefix.is_empty() {
                name
            } else {
                format!("{prefix}/{name}")
            };
            let kind = entry.file_type()?;
            if kind.is_dir() {
                walk(root, &relative, files)?;
            } else if kind.is_file() {
                files.push(relative);
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(root, "", &mut files)?;
    Ok(files)
}

/// The default for an optional `path` argument: the workspace itself.
pub fn workspace_path() -> String {
    ".".to_owned()
}

/// Parse `arguments` as `T::Args` and run `T::call`. Used by [`export_tool!`]; public so a
/// tool's own tests can drive the same path the host does.
pub fn run<T: Tool>(arguments: &str) -> Result<Vec<Part>, ToolError> {
    let args = serde_json::from_str::<T::Args>(arguments)
        .map_err(|error| ToolError::InvalidInput(format!("arguments: {error}")))?;
    T::call(args).map(IntoParts::into_parts)
}

/// Export a [`Tool`] as this component's `toolcell:tool/tool` interface. Use it once per crate.
#[macro_export]
macro_rules! export_tool {
    ($tool:ty) => {
        #[doc(hidden)]
        pub struct ToolcellExport;

        impl $crate::bindings::exports::toolcell::tool::tool::Guest for ToolcellExport {
            fn describe() -> $crate::Info {
                <$tool as $crate::Tool>::describe()
            }

            fn call(
                arguments: ::std::string::String,
            ) -> Result<::std::vec::Vec<$crate::Part>, $crate::ToolError> {
                $crate::run::<$tool>(&arguments)
            }
        }

        $crate::bindings::export!(ToolcellExport with_types_in $crate::bindings);
    };
}
