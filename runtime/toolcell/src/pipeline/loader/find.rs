//! Finding the components a load makes tools of (the built-in ones, each tools directory's
//! files, the embedder's bytes, the pulled references), where each was found, and the
//! fingerprint that says whether the sources changed since.

use crate::pipeline::builtin::{BUILTIN_DIGESTS, BUILTIN_TOOLS};
use crate::pipeline::catalog::Loader;
use crate::pipeline::loader::error::BuildError;
use crate::wasm::files::{ComponentFile, scan_tools_dir};
use crate::wasm::index::{Index, file_identity};
use crate::wasm::lazy::Origin;
use crate::wasm::load::LoadError;
use std::hash::{Hash as _, Hasher as _};
use std::path::Path;
use std::sync::Arc;
use wasmtime::Engine;

/// The index place of the built-in tools.
const BUILTIN_PLACE: &str = "builtin";

/// The index place where descriptions are kept by digest alone, for components whose bytes
/// are read anyway (given by an embedder, pulled from a store, or a file whose identity
/// changed but whose bytes did not).
pub(super) const DIGEST_PLACE: &str = "digests";

/// Where a component loaded from the store came from.
pub(crate) struct Provenance {
    /// The manifest digest (what signatures sign).
    pub(crate) digest: String,
    /// The tool the policy's `source` loads under this name, if it was named there.
    pub(crate) named: Option<String>,
}

/// Where a found component is, apart from its bytes (which loading may have taken): what
/// its tools and offers are made with.
#[derive(Clone, Copy)]
pub(super) struct FoundPlace<'a> {
    pub(super) source: &'a String,
    pub(super) indexed: Option<&'a (usize, String)>,
    pub(super) provenance: Option<&'a Provenance>,
}

/// One component found.
pub(super) struct Found {
    pub(super) source: String,
    pub(super) origin: Origin,
    /// Its digest, when it is known without reading it (a built-in tool).
    pub(super) digest: Option<String>,
    /// The index that remembers it and its identity there.
    pub(super) indexed: Option<(usize, String)>,
    pub(super) provenance: Option<Provenance>,
}

impl Loader {
    /// The built-in tools, into `found`, remembered in the index of their place (pushed to
    /// `indexes`, if the cache keeps one).
    pub(super) fn found_builtin(
        &self,
        engine: &Engine,
        indexes: &mut Vec<Index>,
        found: &mut Vec<Found>,
    ) {
        let slot = self.cache.index(engine, BUILTIN_PLACE).map(|index| {
            indexes.push(index);
            indexes.len() - 1
        });
        for ((name, bytes), digest) in BUILTIN_TOOLS.iter().zip(BUILTIN_DIGESTS) {
            found.push(Found {
                source: format!("builtin:{name}"),
                origin: Origin::Static(bytes),
                digest: Some((*digest).to_owned()),
                indexed: slot.map(|slot| (slot, format!("sha256:{digest}"))),
                provenance: None,
            });
        }
    }

    /// The component files of each tools directory (`scans`, one per directory), into
    /// `found`, each directory's index (pushed to `indexes`) forgetting the files no longer
    /// there; the files a scan refused go to `errors`. Fails when a directory cannot be listed.
    pub(super) fn found_in_dirs(
        &self,
        engine: &Engine,
        scans: Vec<std::io::Result<(Vec<ComponentFile>, Vec<LoadError>)>>,
        (indexes, found): (&mut Vec<Index>, &mut Vec<Found>),
        errors: &mut Vec<LoadError>,
    ) -> Result<(), BuildError> {
        for (dir, scan) in self.dirs.iter().zip(scans) {
            let (files, refused) = scan.map_err(|source| BuildError::ToolsDir {
                dir: dir.clone(),
                source,
            })?;
            errors.extend(refused);
            let sources: Vec<String> = files
                .iter()
                .map(|(path, _)| path.display().to_string())
                .collect();
            let place = dir
                .canonicalize()
                .unwrap_or_else(|_| dir.clone())
                .display()
                .to_string();
            let slot = self.cache.index(engine, &place).map(|mut index| {
                let present: std::collections::HashSet<&str> =
                    sources.iter().map(String::as_str).collect();
                index.retain(|source| present.contains(source));
                indexes.push(index);
                indexes.len() - 1
            });
            for ((path, identity), source) in files.into_iter().zip(sources) {
                found.push(Found {
                    source,
                    origin: Origin::File(path),
                    digest: None,
                    indexed: slot.map(|slot| (slot, identity)),
                    provenance: None,
                });
            }
        }
        Ok(())
    }

    /// The components the embedder gave as bytes, into `found`.
    pub(super) fn found_given(&self, found: &mut Vec<Found>) {
        for (source, bytes) in &self.components {
            found.push(Found {
                source: source.clone(),
                origin: Origin::Shared(Arc::clone(bytes)),
                digest: None,
                indexed: None,
                provenance: None,
            });
        }
    }

    /// Read the components named by reference (to the builder and in the policy's `source`s)
    /// into `found`; what cannot be read goes to `refused`.
    pub(super) fn pulled_sources(&self, found: &mut Vec<Found>, refused: &mut Vec<LoadError>) {
        let named = self
            .pulled
            .iter()
            .map(|reference| (None, reference.clone()))
            .chain(
                self.policy
                    .sources()
                    .iter()
                    .map(|(tool, reference)| (Some(tool.clone()), reference.clone())),
            )
            .collect::<Vec<_>>();
        for (tool, text) in named {
            let loaded = match &self.source {
                Some(source) => source.load(&text).map_err(|error| error.to_string()),
                None => Err("this runtime has no component source to load it from (see \
                             RuntimeBuilder::source)"
                    .to_owned()),
            };
            match loaded {
                Ok(stored) => found.push(Found {
                    source: stored.source,
                    origin: Origin::Shared(stored.bytes.into()),
                    digest: None,
                    indexed: None,
                    provenance: Some(Provenance {
                        digest: stored.digest,
                        named: tool,
                    }),
                }),
                Err(message) => refused.push(LoadError {
                    source: tool
                        .map_or_else(|| text.clone(), |tool| format!("{text} (tool {tool})")),
                    message,
                    guest_stderr: String::new(),
                }),
            }
        }
    }

    /// A hash of what the sources look like now, without reading any component: each tools
    /// directory's `*.wasm` files and their identities, and the files that decide what a
    /// reference loads (a lock file). A reload is worth making only when it changes.
    pub(crate) fn fingerprint(&self) -> u64 {
        let scans: Vec<_> = self.dirs.iter().map(|dir| scan_tools_dir(dir)).collect();
        self.fingerprint_of(&scans)
    }

    /// [`Loader::fingerprint`] from the scans of the tools directories just made.
    pub(super) fn fingerprint_of(
        &self,
        scans: &[std::io::Result<(Vec<ComponentFile>, Vec<LoadError>)>],
    ) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for scan in scans {
            match scan {
                Ok((files, refused)) => {
                    files.hash(&mut hasher);
                    for error in refused {
                        error.source.hash(&mut hasher);
                        error.message.hash(&mut hasher);
                    }
                }
                Err(error) => error.kind().hash(&mut hasher),
            }
        }
        // The policy.yaml each component of plain typed exports may read (beside it, or named
        // by the embedder or the policy):
        // an edited or removed one is a change as a component's is.
        let yamls = scans
            .iter()
            .flatten()
            .flat_map(|(files, _)| files.iter())
            .filter_map(|file| crate::policy::yaml::PolicyYaml::beside(&file.0))
            .chain(self.policy_yamls.iter().map(|(_, path)| path.clone()))
            .chain(self.policy.policy_yamls().map(Path::to_path_buf));
        for yaml in yamls {
            yaml.hash(&mut hasher);
            match std::fs::metadata(&yaml) {
                Ok(meta) => file_identity(&meta).hash(&mut hasher),
                Err(error) => error.kind().hash(&mut hasher),
            }
        }
        if let Some(source) = &self.source {
            for file in source.protected_files() {
                match std::fs::metadata(&file) {
                    Ok(meta) => file_identity(&meta).hash(&mut hasher),
                    Err(error) => error.kind().hash(&mut hasher),
                }
            }
        }
        hasher.finish()
    }
}
