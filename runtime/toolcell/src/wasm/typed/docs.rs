//! The documentation a component carries of its own WIT: the `package-docs` custom section
//! `wit-component` writes (version byte 0 or 1, then JSON), read for its functions' docs.
//!
//! Written here rather than with `wit-parser`: `wit-parser`'s reader keeps the metadata private
//! and refuses a section whose worlds a component's decoded package does not name (which is
//! every component's), and its structures refuse fields a newer writer adds. This reads only
//! what toolcell uses (world, interface and function docs; type items), ignores what it does not
//! know, and bounds what it reads: one section of at most [`MAX_PACKAGE_DOCS_BYTES`], each doc
//! cut to [`MAX_DOC_CHARS`] and stripped of control characters. A section that is there but
//! cannot be read (too large, two of them, not JSON, an unknown version) refuses the component
//! at load, with the reason: a description is what a model reads, and a component that says it
//! has docs and garbles them says something false. Most components carry none (the Rust,
//! Python and JavaScript toolchains do not write it): their tools get generated descriptions.

use serde::Deserialize;
use std::collections::BTreeMap;
use wasmtime::wasmparser::{Chunk, Parser, Payload};

/// The largest `package-docs` section read: the docs of a large package are tens of
/// kilobytes.
pub const MAX_PACKAGE_DOCS_BYTES: usize = 1024 * 1024;

/// The most characters of one doc kept (the rest cut, with `…`).
pub const MAX_DOC_CHARS: usize = 4096;

/// What a component's `package-docs` says of its functions.
#[derive(Debug, Default, Clone)]
pub(crate) struct Docs {
    metadata: Metadata,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
struct Metadata {
    docs: Option<String>,
    worlds: BTreeMap<String, World>,
    interfaces: BTreeMap<String, Interface>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
struct World {
    docs: Option<String>,
    interfaces: BTreeMap<String, Interface>,
    interface_exports: BTreeMap<String, Interface>,
    funcs: BTreeMap<String, Function>,
    func_exports: BTreeMap<String, Function>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
struct Interface {
    docs: Option<String>,
    funcs: BTreeMap<String, Function>,
}

/// A function's docs: a bare string or null (version 0), or `{docs, stability}` (version 1).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Function {
    Text(Option<String>),
    Full {
        #[serde(default)]
        docs: Option<String>,
    },
}

impl Function {
    fn docs(&self) -> Option<&str> {
        match self {
            Function::Text(text) => text.as_deref(),
            Function::Full { docs } => docs.as_deref(),
        }
    }
}

impl Docs {
    /// The docs in `component` (its own sections, not those of components or modules nested in
    /// it), or none; or why they cannot be read.
    pub(crate) fn read(component: &[u8]) -> Result<Docs, String> {
        let Some(section) = section(component)? else {
            return Ok(Docs::default());
        };
        let (version, json) = section
            .split_first()
            .ok_or_else(|| "its package-docs section is empty".to_owned())?;
        if *version > 1 {
            return Err(format!(
                "its package-docs section is of version {version}; toolcell reads 0 and 1"
            ));
        }
        let metadata: Metadata = serde_json::from_slice(json).map_err(|error| {
            format!(
                "its package-docs section is not the JSON wit-component writes: {}",
                crate::call::names::echoed(&error.to_string())
            )
        })?;
        Ok(Docs { metadata })
    }

    /// The docs of the function at `path` (its instances' export names, then its name).
    pub(crate) fn function(&self, path: &[String]) -> Option<String> {
        let found = match path {
            [function] => self.metadata.worlds.values().find_map(|world| {
                world
                    .func_exports
                    .get(function)
                    .or_else(|| world.funcs.get(function))
                    .and_then(Function::docs)
            }),
            [.., instance, function] => {
                // Interfaces are keyed by their bare name (`time` of `local:time-server/time@1`).
                let bare = instance
                    .rsplit_once('/')
                    .map_or(instance.as_str(), |(_, name)| name);
                let bare = bare.split_once('@').map_or(bare, |(name, _)| name);
                self.metadata
                    .interfaces
                    .get(bare)
                    .and_then(|interface| interface.funcs.get(function))
                    .or_else(|| {
                        self.metadata.worlds.values().find_map(|world| {
                            world
                                .interface_exports
                                .get(bare)
                                .or_else(|| world.interfaces.get(bare))
                                .and_then(|interface| interface.funcs.get(function))
                        })
                    })
                    .and_then(Function::docs)
            }
            [] => None,
        };
        found.map(clean).filter(|docs| !docs.is_empty())
    }

    /// The package's own docs, if any.
    #[allow(dead_code)]
    pub(crate) fn package(&self) -> Option<String> {
        self.metadata.docs.as_deref().map(clean)
    }
}

/// `docs` as a description holds it: control characters (but new lines) gone, cut to
/// [`MAX_DOC_CHARS`].
fn clean(docs: &str) -> String {
    let mut clean: String = docs
        .chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .take(MAX_DOC_CHARS)
        .collect();
    if docs.chars().count() > MAX_DOC_CHARS {
        clean.push('…');
    }
    clean.trim().to_owned()
}

/// The `package-docs` custom section of the outer component in `bytes`, if it has one.
fn section(bytes: &[u8]) -> Result<Option<&[u8]>, String> {
    let mut parser = Parser::new(0);
    let mut data = bytes;
    let mut found = None;
    loop {
        let chunk = parser
            .parse(data, true)
            .map_err(|error| format!("it cannot be read for its docs: {error}"))?;
        let Chunk::Parsed { consumed, payload } = chunk else {
            return Err("it ends before its last section".to_owned());
        };
        data = &data[consumed..];
        match payload {
            // A nested module or component: its own sections are not this component's.
            Payload::ModuleSection {
                unchecked_range, ..
            }
            | Payload::ComponentSection {
                unchecked_range, ..
            } => {
                let skip = unchecked_range.len().min(data.len());
                data = &data[skip..];
            }
            Payload::CustomSection(custom) if custom.name() == "package-docs" => {
                if custom.data().len() > MAX_PACKAGE_DOCS_BYTES {
                    return Err(format!(
                        "its package-docs section is {} bytes; at most {MAX_PACKAGE_DOCS_BYTES} \
                         are read",
                        custom.data().len()
                    ));
                }
                if found.replace(custom.data()).is_some() {
                    return Err("it has two package-docs sections".to_owned());
                }
            }
            Payload::End(_) => return Ok(found),
            _ => {}
        }
    }
}

/// The docs of a parameter, from its function's docs: a line that starts (after a list marker)
/// with the parameter's name, in backquotes or not, then `-` or `:` (the rustdoc convention
/// WIT authors use: "* `path` - the file to read"). WIT itself has no per-parameter docs.
pub(crate) fn parameter(function_docs: &str, name: &str) -> Option<String> {
    function_docs.lines().find_map(|line| {
        let line = line
            .trim_start()
            .trim_start_matches(['*', '-', '+'])
            .trim_start();
        let rest = line
            .strip_prefix('`')
            .and_then(|rest| rest.strip_prefix(name))
            .and_then(|rest| rest.strip_prefix('`'))
            .or_else(|| line.strip_prefix(name))?;
        let rest = rest.trim_start();
        let text = rest
            .strip_prefix('-')
            .or_else(|| rest.strip_prefix(':'))?
            .trim();
        (!text.is_empty()).then(|| clean(text))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component (the smallest there is) with `section` appended as `package-docs`.
    fn with_docs(payload: &[u8]) -> Vec<u8> {
        let mut bytes = wat::parse_str("(component)").expect("a component");
        let name = b"package-docs";
        let mut body = Vec::new();
        leb(&mut body, name.len());
        body.extend_from_slice(name);
        body.extend_from_slice(payload);
        bytes.push(0);
        leb(&mut bytes, body.len());
        bytes.extend_from_slice(&body);
        bytes
    }

    fn leb(out: &mut Vec<u8>, mut n: usize) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    #[test]
    fn docs_are_read_for_world_and_interface_functions() {
        let json = br#"{"worlds":{"w":{"func_exports":{"fetch":{"docs":"Fetch a URL.\n* `url` - where"}}}},
            "interfaces":{"time":{"funcs":{"now":"The time\u0007."}}},"extra":1}"#;
        let mut payload = vec![1];
        payload.extend_from_slice(json);
        let docs = Docs::read(&with_docs(&payload)).expect("docs");
        let fetch = docs.function(&["fetch".to_owned()]).expect("fetch's docs");
        assert!(fetch.starts_with("Fetch a URL."));
        assert_eq!(parameter(&fetch, "url").as_deref(), Some("where"));
        assert_eq!(
            docs.function(&["local:clock/time@1.0.0".to_owned(), "now".to_owned()])
                .as_deref(),
            Some("The time.")
        );
        assert_eq!(docs.function(&["other".to_owned()]), None);
        // None at all: no docs, no error.
        let plain = wat::parse_str("(component)").expect("a component");
        assert!(
            Docs::read(&plain)
                .expect("none")
                .function(&["f".to_owned()])
                .is_none()
        );
    }

    #[test]
    fn a_section_that_cannot_be_read_is_refused_with_its_reason() {
        assert!(Docs::read(&with_docs(b"\x01not json")).is_err());
        assert!(Docs::read(&with_docs(b"\x07{}")).is_err());
        assert!(Docs::read(&with_docs(b"")).is_err());
        let huge = vec![b' '; MAX_PACKAGE_DOCS_BYTES + 1];
        assert!(
            Docs::read(&with_docs(&huge))
                .expect_err("too large")
                .contains("bytes")
        );
        let mut twice = with_docs(b"\x01{}");
        let again = with_docs(b"\x01{}");
        twice.extend_from_slice(&again[8..]);
        assert!(Docs::read(&twice).expect_err("two").contains("two"));
    }
}
