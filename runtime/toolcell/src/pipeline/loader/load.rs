//! One load: every component found, each made its tool (or kept as loaded before, when its
//! digest is unchanged), in the order the catalog serves them.

use crate::pipeline::catalog::{Catalog, Executable, Loader, Tool};
use crate::pipeline::loader::compile::{Compiled, admit, prepare_all};
use crate::pipeline::loader::error::BuildError;
use crate::pipeline::loader::find::{DIGEST_PLACE, Found, FoundPlace};
use crate::pipeline::loader::identify::{Identified, component_bytes, known_entry, lazy_code};
use crate::pipeline::loader::typed::remember_typed;
use crate::policy::Policy;
use crate::wasm::WasmExecutor;
use crate::wasm::cache::CompileCache;
use crate::wasm::files::scan_tools_dir;
use crate::wasm::index::Index;
use crate::wasm::load::LoadError;
use std::collections::HashMap;
use std::sync::Arc;

/// What one load made.
pub(crate) struct Loaded {
    /// The wasm tools, in load order.
    pub(crate) tools: Vec<Arc<Tool>>,
    /// What could not be loaded.
    pub(crate) errors: Vec<LoadError>,
}

impl Loader {
    /// Find every component and make each a tool. A tool of `old` whose source and digest are
    /// unchanged is kept as it is (its code too); a changed one that is refused leaves the old
    /// one in service, and says so in the errors. Fails only when a tools directory cannot be
    /// listed.
    pub(crate) async fn load(
        &mut self,
        wasm: &WasmExecutor,
        old: Option<&Catalog>,
    ) -> Result<Loaded, BuildError> {
        let scans: Vec<_> = self.dirs.iter().map(|dir| scan_tools_dir(dir)).collect();
        // What the sources look like as this load starts: a change from here on is seen by the
        // next look.
        self.seen = self.fingerprint_of(&scans);
        let engine = wasm.engine().clone();
        let mut errors = Vec::new();
        let mut indexes: Vec<Index> = Vec::new();
        let mut found: Vec<Found> = Vec::new();
        if self.builtin {
            self.found_builtin(&engine, &mut indexes, &mut found);
        }
        self.found_in_dirs(&engine, scans, (&mut indexes, &mut found), &mut errors)?;
        self.found_given(&mut found);
        self.pulled_sources(&mut found, &mut errors);
        let mut by_digest = self.cache.index(&engine, DIGEST_PLACE);
        let old_by_source = old_by_source(old);
        let mut tools = Vec::new();
        let total = found.len();
        for (at, found) in found.into_iter().enumerate() {
            let previous: &[&Arc<Tool>] = old_by_source
                .get(found.source.as_str())
                .map_or(&[], Vec::as_slice);
            let made = self
                .make(
                    wasm,
                    &mut indexes,
                    by_digest.as_mut(),
                    found,
                    at,
                    total,
                    previous,
                )
                .await;
            match made {
                Ok((made, left_out)) => {
                    tools.extend(made);
                    errors.extend(left_out);
                }
                Err((error, previous)) => {
                    errors.push(error);
                    tools.extend(previous.iter().map(|tool| Arc::clone(tool)));
                }
            }
        }
        for index in &mut indexes {
            index.save();
        }
        if let Some(index) = &mut by_digest {
            index.save();
        }
        if self.load_code_at_start {
            prepare_all(wasm, &tools, &mut errors).await;
        }
        Ok(Loaded { tools, errors })
    }

    /// Make one found component its tool (or, for one of plain typed exports, its tools, and
    /// the functions left out, as errors), or keep `previous`, what was loaded from the same
    /// source before, if its digest is unchanged. The error names the component, and carries
    /// `previous` back, to keep serving.
    #[allow(clippy::too_many_arguments)]
    async fn make<'p>(
        &mut self,
        wasm: &WasmExecutor,
        indexes: &mut [Index],
        by_digest: Option<&mut Index>,
        found: Found,
        at: usize,
        total: usize,
        previous: &'p [&'p Arc<Tool>],
    ) -> Result<(Vec<Arc<Tool>>, Vec<LoadError>), (LoadError, &'p [&'p Arc<Tool>])> {
        let source = found.source.clone();
        let refused = |error: LoadError| keeps_serving(error, previous);
        let refuse = |message: String| refused(LoadError::new(source.clone(), message));
        let place = FoundPlace {
            source: &found.source,
            indexed: found.indexed.as_ref(),
            provenance: found.provenance.as_ref(),
        };
        // Its digest and description, without reading it if the index knows it.
        let known = known_entry(indexes, &found);
        let Identified {
            digest,
            mut info,
            typed,
            mut offers,
            bytes,
        } = match known {
            Some(entry) => Identified::known(entry),
            None => Identified::read(&found.origin, found.digest.as_deref(), by_digest.as_deref())
                .map_err(&refuse)?,
        };
        if unchanged(previous, &digest) {
            return Ok((kept(previous), Vec::new()));
        }
        let entry = self
            .cache_entry(wasm, bytes.as_deref(), &digest)
            .map_err(&refuse)?;
        let evictable = self.cache.in_use();
        // A typed component the index knows: its tools from what the index kept, its code
        // compiled (or read from the cache) on its first call, as a contract tool's is.
        let typed_known = typed.is_some();
        if self.cache.in_use()
            && let Some(reflected) = typed.and_then(crate::wasm::typed::Indexed::reflected)
        {
            wasm.code().described_from_index();
            let code = lazy_code(&digest, entry, found.origin, evictable);
            return self
                .typed_tools_of(&found.source, found.provenance, code, reflected, digest)
                .map_err(refused);
        }
        if typed_known {
            // What the index kept no longer passes this toolcell's checks: read it again.
            info = None;
        }
        let described = info.is_some() || offers.is_some();
        let (code, schemas) = if described && self.cache.in_use() {
            // Known: nothing is compiled, linked or instantiated now.
            wasm.code().described_from_index();
            let code = lazy_code(&digest, entry, found.origin, evictable);
            (code, tokio::sync::OnceCell::new())
        } else {
            let bytes = match bytes {
                Some(bytes) => bytes,
                None => component_bytes(&found.origin).map_err(&refuse)?,
            };
            let loaded = self
                .compile(wasm, &entry, &found.source, &bytes, (at, total))
                .await
                .map_err(refused)?;
            let code = lazy_code(&digest, entry, found.origin, evictable);
            match admit(wasm, &code, loaded) {
                Compiled::Contract(contract) => {
                    let (described, described_offers, schemas) = *contract;
                    info = Some(described);
                    offers = described_offers;
                    (code, tokio::sync::OnceCell::new_with(Some(schemas)))
                }
                // Offers and no tool: nothing to describe, no schema to compile.
                Compiled::Provider(offers) => {
                    return self
                        .finish(
                            (indexes, by_digest),
                            &place,
                            (digest, code),
                            None,
                            Some(offers),
                        )
                        .map_err(refused);
                }
                Compiled::Typed(reflected) => {
                    remember_typed((indexes, by_digest), &place, &digest, &reflected);
                    return self
                        .typed_tools_of(&found.source, found.provenance, code, reflected, digest)
                        .map_err(refused);
                }
            }
        };
        if info.is_none() && offers.is_none() {
            return Err(refuse("it has no description".to_owned()));
        }
        let described = info.map(|info| (info, schemas));
        self.finish(
            (indexes, by_digest),
            &place,
            (digest, code),
            described,
            offers,
        )
        .map_err(refused)
    }

    /// A loader that finds nothing (a placeholder while the runtime is built).
    pub(crate) fn empty() -> Loader {
        Loader {
            builtin: false,
            dirs: Vec::new(),
            components: Vec::new(),
            pulled: Vec::new(),
            source: None,
            policy: Policy::embedded_default(),
            cache: CompileCache::new(None, None),
            progress: None,
            natives: Vec::new(),
            load_code_at_start: false,
            seen: 0,
            own: crate::hostfs::OwnFiles::new(),
            policy_yamls: Vec::new(),
        }
    }
}

/// A refusal as it stands (what the guest wrote to stderr included), saying that the version
/// loaded before keeps serving if there is one, and carrying that version (`previous`) back.
fn keeps_serving<'p>(
    mut error: LoadError,
    previous: &'p [&'p Arc<Tool>],
) -> (LoadError, &'p [&'p Arc<Tool>]) {
    if !previous.is_empty() {
        error.message = format!("{}; the version loaded before keeps serving", error.message);
    }
    (error, previous)
}

/// Whether what was loaded before from a source (`previous`, if anything) is still the
/// component of `digest`, and is kept as it is. A component read by its types is described
/// again: its tools' grants come from a policy.yaml too, which may have changed beside it (the
/// fingerprint notices that).
fn unchanged(previous: &[&Arc<Tool>], digest: &str) -> bool {
    !previous.is_empty()
        && previous.iter().all(|tool| {
            tool.digest.as_deref() == Some(digest)
                && !matches!(tool.executable, Executable::Typed(..))
        })
}

/// The tools loaded before from a source, kept as they are.
fn kept(previous: &[&Arc<Tool>]) -> Vec<Arc<Tool>> {
    previous.iter().map(|tool| Arc::clone(tool)).collect()
}

/// The wasm tools and offers of `old`, by source: a component of typed exports served several
/// tools, and they are its, together.
fn old_by_source(old: Option<&Catalog>) -> HashMap<&str, Vec<&Arc<Tool>>> {
    let mut old_by_source: HashMap<&str, Vec<&Arc<Tool>>> = HashMap::new();
    for tool in old
        .iter()
        .flat_map(|old| old.tools.values().chain(old.offers.values()))
    {
        if matches!(
            tool.executable,
            Executable::Wasm(_) | Executable::Typed(..) | Executable::Offer(..)
        ) {
            old_by_source
                .entry(tool.source.as_str())
                .or_default()
                .push(tool);
        }
    }
    old_by_source
}
