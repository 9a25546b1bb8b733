//! Finding the components a runtime serves and making them tools: once at build, and again at
//! each [`Runtime::reload`].
//!
//! A component known from the cache's [`Index`] (a built-in tool, or a file whose identity
//! has not changed) is not read: its digest and description come from the index, and its code
//! is loaded on its first call ([`LazyCode`]). Any other is read, hashed, compiled (or read
//! compiled from the cache) and described, and the index remembers it. Either way, the same
//! checks decide whether it loads: its description's limits, the policy's `sha256` pin, where
//! it came from, and who signed it.
//!
//! Slightly past the house's 700 lines: finding, hashing, compiling, checking provenance and
//! reloading share the catalog's private state (`Found`, `Loader`).

use crate::pipeline::Runtime;
use crate::pipeline::builtin::{BUILTIN_DIGESTS, BUILTIN_TOOLS};
use crate::pipeline::catalog::{
    Catalog, Compiling, Executable, Listed, Loader, Offer, Schemas, Tool,
};
use crate::pipeline::source::ComponentSource;
use crate::policy::{Policy, ToolPolicy};
use crate::tool::info::ToolInfo;
use crate::tool::offer::Offers;
use crate::wasm::WasmExecutor;
use crate::wasm::cache::{CacheEntry, CompileCache};
use crate::wasm::files::{ComponentFile, read_component_file, scan_tools_dir};
use crate::wasm::index::{Index, IndexEntry, file_identity};
use crate::wasm::lazy::{LazyCode, Origin};
use crate::wasm::load::LoadError;
use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wasmtime::Engine;

/// The index place of the built-in tools.
const BUILTIN_PLACE: &str = "builtin";

/// The index place where descriptions are kept by digest alone, for components whose bytes
/// are read anyway (given by an embedder, pulled from a store, or a file whose identity
/// changed but whose bytes did not).
const DIGEST_PLACE: &str = "digests";

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
struct FoundPlace<'a> {
    source: &'a String,
    indexed: Option<&'a (usize, String)>,
    provenance: Option<&'a Provenance>,
}

/// One component found.
struct Found {
    source: String,
    origin: Origin,
    /// Its digest, when it is known without reading it (a built-in tool).
    digest: Option<String>,
    /// The index that remembers it and its identity there.
    indexed: Option<(usize, String)>,
    provenance: Option<Provenance>,
}

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

    /// The built-in tools, into `found`, remembered in the index of their place (pushed to
    /// `indexes`, if the cache keeps one).
    fn found_builtin(&self, engine: &Engine, indexes: &mut Vec<Index>, found: &mut Vec<Found>) {
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
    fn found_in_dirs(
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
    fn found_given(&self, found: &mut Vec<Found>) {
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

    /// Where the component of `digest` compiled for this engine is (or would be) cached: by
    /// its `bytes` when they were read and the cache is not in use, else by its digest.
    fn cache_entry(
        &self,
        wasm: &WasmExecutor,
        bytes: Option<&[u8]>,
        digest: &str,
    ) -> Result<CacheEntry, String> {
        match bytes {
            Some(bytes) if !self.cache.in_use() => Ok(wasm.cache_entry(&self.cache, bytes)),
            _ => self
                .cache
                .entry_for_digest(wasm.engine(), digest)
                .ok_or_else(|| format!("the index holds a digest that is not one: {digest}")),
        }
    }

    /// Compile (or read compiled from its cache `entry`) and describe the component `source`,
    /// telling the progress report first when it is not in the cache (it is component `at` of
    /// `total`), and count how it went.
    async fn compile(
        &mut self,
        wasm: &WasmExecutor,
        entry: &CacheEntry,
        source: &str,
        bytes: &[u8],
        (at, total): (usize, usize),
    ) -> Result<crate::wasm::load::Loaded, LoadError> {
        if !entry.exists()
            && let Some(report) = &mut self.progress
        {
            report(Compiling {
                index: at,
                total,
                source,
            });
        }
        let (loaded, outcome) = wasm.load(entry, source, bytes).await?;
        wasm.code().record(outcome);
        Ok(loaded)
    }

    /// [`Loader::typed_tools`] of the component loaded as `source`, with the `policy.yaml` its
    /// embedder named or the one beside its file.
    fn typed_tools_of(
        &self,
        source: &str,
        provenance: Option<Provenance>,
        code: Arc<LazyCode>,
        reflected: crate::wasm::typed::Reflected,
        digest: String,
    ) -> Result<(Vec<Arc<Tool>>, Vec<LoadError>), LoadError> {
        let beside = self.policy_yaml_of(source, &code);
        self.typed_tools(source, provenance, code, reflected, digest, beside)
    }

    /// The tool (if `described` holds one) and the offers of a component of the contract,
    /// remembered in the index, each under the policy of its name, with the pin and signatures
    /// that policy requires.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        (indexes, by_digest): (&mut [Index], Option<&mut Index>),
        found: &FoundPlace<'_>,
        (digest, code): (String, Arc<LazyCode>),
        described: Option<(ToolInfo, tokio::sync::OnceCell<Schemas>)>,
        offers: Option<Offers>,
    ) -> Result<(Vec<Arc<Tool>>, Vec<LoadError>), LoadError> {
        let FoundPlace {
            source,
            indexed,
            provenance,
        } = *found;
        let info = described.as_ref().map(|(info, _)| info.clone());
        // Remembered, whether or not the policy lets it load: it said this about itself.
        let entry = |source: &str, identity: &str| IndexEntry {
            source: source.to_owned(),
            identity: identity.to_owned(),
            sha256: digest.clone(),
            info: info.clone(),
            typed: None,
            offers: offers.clone(),
        };
        if let Some((slot, identity)) = &indexed
            && let Some(index) = indexes.get_mut(*slot)
        {
            index.put(entry(source, identity));
        }
        if let Some(index) = by_digest
            && indexed.is_none()
        {
            index.put(entry(&digest, &digest));
        }
        let refuse = |message: String| LoadError::new(source.as_str(), message);
        let mut made = Vec::new();
        let mut left_out = Vec::new();
        let artifact = provenance.map(|from| from.digest.clone());
        if let Some((info, schemas)) = described {
            let (policy, signers) = self
                .admitted(&info.name, &digest, provenance)
                .map_err(refuse)?;
            made.push(Arc::new(Tool {
                info,
                schemas,
                policy,
                source: source.clone(),
                digest: Some(digest.clone()),
                artifact: artifact.clone(),
                signers,
                executable: Executable::Wasm(Arc::clone(&code)),
            }));
        }
        // The name a policy's `source` gave a pulled component is its tool's: an offer is
        // held to the signatures, not to that name.
        let unnamed = provenance.map(|from| Provenance {
            digest: from.digest.clone(),
            named: None,
        });
        // A component the policy pulls under a name (`[tools.X] source`) is held to that
        // entry's signatures and pin whether or not it has a tool of that name: its offers
        // are served only if it passes them.
        if offers.is_some()
            && let Some(named) = provenance.and_then(|from| from.named.as_deref())
        {
            self.admitted(named, &digest, provenance).map_err(refuse)?;
        }
        for (key, offer) in offers.as_ref().map(Offer::all_of).unwrap_or_default() {
            // One offer the policy refuses leaves the component's others in service.
            let (policy, signers) = match self.admitted(&key, &digest, unnamed.as_ref()) {
                Ok(admitted) => admitted,
                Err(why) => {
                    left_out.push(refuse(why));
                    continue;
                }
            };
            made.push(Arc::new(Tool {
                info: offer.info(&key),
                schemas: tokio::sync::OnceCell::new(),
                policy,
                source: source.clone(),
                digest: Some(digest.clone()),
                artifact: artifact.clone(),
                signers,
                executable: Executable::Offer(Arc::clone(&code), Arc::new(offer)),
            }));
        }
        Ok((made, left_out))
    }

    /// The policy of the tool or offer `name` of a component whose sha256 is `digest`, and
    /// who signed it, if the policy lets it load: its pin holds, its signatures verify.
    fn admitted(
        &self,
        name: &str,
        digest: &str,
        provenance: Option<&Provenance>,
    ) -> Result<(ToolPolicy, Vec<String>), String> {
        let policy = self.policy.tool(name);
        let signers = check_provenance(
            &self.policy,
            self.source.as_deref(),
            name,
            &policy,
            provenance,
        )?;
        if let Some(pin) = &policy.sha256
            && pin != digest
        {
            return Err(format!(
                "its sha256 is {digest}, but the policy pins {name} to {pin}"
            ));
        }
        Ok((policy, signers))
    }

    /// The tools of a component of plain typed exports (from `source`, whose sha256 is
    /// `digest`, its code `code`): one per function served, each under its own policy (the
    /// capabilities its calls need are the policy's to say: such a component says nothing of
    /// them), and the functions left out, as errors naming them. A pin or a signature the
    /// policy requires holds for every one of its tools, or the component is refused.
    #[allow(clippy::too_many_arguments)]
    fn typed_tools(
        &self,
        source: &str,
        provenance: Option<Provenance>,
        code: Arc<LazyCode>,
        reflected: crate::wasm::typed::Reflected,
        digest: String,
        beside: Option<PathBuf>,
    ) -> Result<(Vec<Arc<Tool>>, Vec<LoadError>), LoadError> {
        let refuse = |message: String| LoadError::new(source, message);
        let mut tools = Vec::new();
        // Each policy.yaml read once, for every function that names it.
        let mut yamls: Vec<(PathBuf, crate::policy::yaml::PolicyYaml)> = Vec::new();
        for function in reflected.functions {
            let name = function.info.name.clone();
            let mut policy = self.policy.tool(&name);
            if let Some(path) = policy.policy_yaml.clone().or_else(|| beside.clone()) {
                let known = yamls.iter().position(|(at, _)| *at == path);
                let index = match known {
                    Some(index) => index,
                    None => {
                        let read = crate::policy::yaml::PolicyYaml::read(&path, &self.own)
                            .map_err(|why| refuse(format!("its policy.yaml: {why}")))?;
                        yamls.push((path, read));
                        yamls.len() - 1
                    }
                };
                // The operator's policy decides each kind it names; the yaml, the rest. A
                // yaml's environment key is one grant made two ways (the variable and the
                // `wasi:config` key): an operator who decides either decides both, so that
                // `env = { access = "deny" }` is not undone by the yaml's `config`.
                use crate::tool::info::CapabilityKind::{Config, Env};
                let environment_decided =
                    policy.rules.contains_key(&Env) || policy.rules.contains_key(&Config);
                for (kind, rule) in &yamls[index].1.rules {
                    if let Some(kind) = crate::policy::capability_kind(kind) {
                        if matches!(kind, Env | Config) && environment_decided {
                            continue;
                        }
                        policy.rules.entry(kind).or_insert_with(|| rule.clone());
                    }
                }
            }
            let signers = check_provenance(
                &self.policy,
                self.source.as_deref(),
                &name,
                &policy,
                provenance.as_ref(),
            )
            .map_err(&refuse)?;
            if let Some(pin) = &policy.sha256
                && *pin != digest
            {
                return Err(refuse(format!(
                    "its sha256 is {digest}, but the policy pins {name} to {pin}"
                )));
            }
            let mut info = function.info.clone();
            info.capabilities = crate::wasm::typed::capabilities_of(&policy);
            let info = info
                .checked()
                .map_err(|why| refuse(format!("the policy's capabilities of {name}: {why}")))?;
            tools.push(Arc::new(Tool {
                info,
                schemas: tokio::sync::OnceCell::new(),
                policy,
                source: source.to_owned(),
                digest: Some(digest.clone()),
                artifact: provenance.as_ref().map(|from| from.digest.clone()),
                signers,
                executable: Executable::Typed(Arc::clone(&code), function),
            }));
        }
        let left_out = reflected
            .left_out
            .into_iter()
            .map(|left| {
                LoadError::new(
                    format!("{source}#{}", left.function),
                    format!("left out: {}", left.why),
                )
            })
            .collect();
        Ok((tools, left_out))
    }

    /// The `policy.yaml` of the component loaded as `source`: the one the embedder named, or
    /// the one beside its file.
    fn policy_yaml_of(&self, source: &str, code: &LazyCode) -> Option<PathBuf> {
        self.policy_yamls
            .iter()
            .find(|(named, _)| named == source)
            .map(|(_, path)| path.clone())
            .or_else(|| {
                code.file()
                    .and_then(crate::policy::yaml::PolicyYaml::beside)
            })
    }

    /// Read the components named by reference (to the builder and in the policy's `source`s)
    /// into `found`; what cannot be read goes to `refused`.
    fn pulled_sources(&self, found: &mut Vec<Found>, refused: &mut Vec<LoadError>) {
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
    fn fingerprint_of(
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

/// Whether the tool `name`, loaded from where `provenance` says (a registry, or `None`
/// for anywhere else), may load under `policy`: the name the policy's `source` gave it,
/// and the signatures it requires. Its signers, as the source verified them (none when no
/// signature was required); the error names the tool.
fn check_provenance(
    policy_file: &Policy,
    source: Option<&dyn ComponentSource>,
    name: &str,
    policy: &ToolPolicy,
    provenance: Option<&Provenance>,
) -> Result<Vec<String>, String> {
    if let Some(Provenance {
        named: Some(named), ..
    }) = provenance
        && named != name
    {
        return Err(format!(
            "the policy's tools.{named}.source is a component that calls itself {name:?}"
        ));
    }
    if let Some((_, source)) = policy_file.sources().iter().find(|(tool, _)| tool == name)
        && provenance.and_then(|from| from.named.as_deref()) != Some(name)
    {
        // The policy's entry (its grants) is for the artifact it names, not for whatever
        // component calls itself the same.
        return Err(format!(
            "the policy loads {name} from {source}; a component of that name from elsewhere \
             does not get its entry"
        ));
    }
    // Each list that applies must be satisfied on its own: the tool's, and for a pulled tool
    // the registry's (a vendor's key does not stand in for the team's, nor the other way).
    let mut groups: Vec<(&str, &[crate::policy::Signer])> = Vec::new();
    if !policy.signed_by.is_empty() {
        groups.push(("its policy's signed_by", &policy.signed_by));
    }
    if provenance.is_some() && !policy_file.registry().signed_by.is_empty() {
        groups.push(("[registry] signed_by", &policy_file.registry().signed_by));
    }
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let Some(provenance) = provenance else {
        return Err(format!(
            "{name} must be signed (its policy's signed_by), and only a tool pulled from a \
             registry carries a signature"
        ));
    };
    let source = source.ok_or_else(|| format!("{name}: this runtime has no component source"))?;
    let mut signers: Vec<String> = Vec::new();
    for (list, required) in groups {
        let required: Vec<&crate::policy::Signer> = required.iter().collect();
        let named = required
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let found = source
            .check_signed(
                &provenance.digest,
                &required,
                policy_file.registry().trust_root.as_deref(),
            )
            .map_err(|why| {
                format!(
                    "{name} ({}) is refused: {why} ({list}: {named})",
                    provenance.digest
                )
            })?;
        for signer in found {
            if !signers.contains(&signer) {
                signers.push(signer);
            }
        }
    }
    Ok(signers)
}

/// The catalog of `wasm` tools then `natives`, in that order; a tool whose name is taken
/// already is left out, with an error.
///
/// At a reload (`serving` is the catalog before it), a name a tool still in service holds stays
/// that tool's: a component added meanwhile that calls itself the same is the one refused.
pub(crate) fn catalog(
    wasm: Vec<Arc<Tool>>,
    natives: &[Arc<Tool>],
    errors: &mut Vec<LoadError>,
    serving: Option<&Catalog>,
) -> Catalog {
    let candidates: Vec<Arc<Tool>> = wasm.into_iter().chain(natives.iter().cloned()).collect();
    let kept = |tool: &Arc<Tool>| {
        serving
            .and_then(|serving| serving.any(&tool.info.name))
            .is_some_and(|now| Arc::ptr_eq(now, tool))
    };
    let held: std::collections::HashSet<&str> = candidates
        .iter()
        .filter(|tool| kept(tool))
        .map(|tool| tool.info.name.as_str())
        .collect();
    let mut tools: HashMap<String, Arc<Tool>> = HashMap::new();
    // Each template's shape (its variables' names left out), and the key that holds it: the
    // ones in service first, so that a component added meanwhile is the one refused.
    let mut shapes: HashMap<String, String> = candidates
        .iter()
        .filter(|tool| kept(tool))
        .filter_map(|tool| Some((template_of(tool)?.shape(), tool.info.name.clone())))
        .collect();
    let mut order = Vec::new();
    for tool in &candidates {
        if held.contains(tool.info.name.as_str()) && !kept(tool) {
            let serving = serving
                .and_then(|serving| serving.any(&tool.info.name))
                .map_or("", |now| now.source.as_str());
            errors.push(LoadError {
                message: format!(
                    "{} is already served from {serving}",
                    named(&tool.info.name)
                ),
                source: tool.source.clone(),
                guest_stderr: String::new(),
            });
            continue;
        }
        let tool = Arc::clone(tool);
        let twin = tools
            .get(&tool.info.name)
            .map(|first| first.source.clone())
            .or_else(|| {
                // Two templates of one shape would both match every URI of it.
                let holder = shapes.get(&template_of(&tool)?.shape())?;
                (*holder != tool.info.name)
                    .then(|| candidates.iter().find(|t| t.info.name == *holder))
                    .flatten()
                    .map(|holder| holder.source.clone())
            });
        if let Some(first) = twin {
            // A completion goes with its prompt or template, whose refusal says it all.
            if tool.info.name.starts_with("completion:") {
                continue;
            }
            errors.push(LoadError {
                message: format!("{} is already loaded from {first}", named(&tool.info.name)),
                source: tool.source.clone(),
                guest_stderr: String::new(),
            });
            continue;
        }
        if let Some(template) = template_of(&tool) {
            shapes.insert(template.shape(), tool.info.name.clone());
        }
        if !matches!(tool.executable, Executable::Offer(..)) {
            order.push(tool.info.name.clone());
        }
        tools.insert(tool.info.name.clone(), tool);
    }
    settle_offers(&mut tools, errors, &kept);
    let (offers, tools): (HashMap<_, _>, HashMap<_, _>) = tools
        .into_iter()
        .partition(|(_, tool)| matches!(tool.executable, Executable::Offer(..)));
    let registry = crate::call::registry::Registry::new(
        order
            .iter()
            .filter_map(|name| tools.get(name))
            .map(|tool| crate::call::registry::Entry {
                schema: tool.info.schema(),
                core: tool.policy.core,
            })
            .collect(),
    );
    Catalog {
        registry: Arc::new(registry),
        tools,
        offers,
    }
}

/// The URI template an offer reads by, if it is one.
fn template_of(tool: &Tool) -> Option<&crate::tool::offer::Template> {
    match &tool.executable {
        Executable::Offer(_, offer) => match &offer.listed {
            Listed::Template(_, template) => Some(template),
            _ => None,
        },
        _ => None,
    }
}

/// What one component offers may not reach into another's: a listed resource whose URI
/// another component's template matches is refused (unless the resource is in service and
/// the template is new: then the template is), and a completion is kept only beside the
/// prompt or template it completes, from the same component.
fn settle_offers(
    tools: &mut HashMap<String, Arc<Tool>>,
    errors: &mut Vec<LoadError>,
    kept: &dyn Fn(&Arc<Tool>) -> bool,
) {
    let templates: Vec<Arc<Tool>> = tools
        .values()
        .filter(|tool| template_of(tool).is_some())
        .cloned()
        .collect();
    let resources: Vec<Arc<Tool>> = tools
        .values()
        .filter(|tool| tool.info.name.starts_with("resource:"))
        .cloned()
        .collect();
    let mut refused: Vec<(Arc<Tool>, String)> = Vec::new();
    for resource in &resources {
        let uri = &resource.info.name["resource:".len()..];
        for template in &templates {
            if template.source == resource.source
                || template_of(template).and_then(|t| t.matches(uri)).is_none()
            {
                continue;
            }
            let (loser, winner) = if kept(resource) && !kept(template) {
                (template, resource)
            } else {
                (resource, template)
            };
            refused.push((
                Arc::clone(loser),
                format!(
                    "{} overlaps {} of {}: a URI is read by one component only",
                    named(&loser.info.name),
                    named(&winner.info.name),
                    winner.source
                ),
            ));
        }
    }
    for (loser, message) in refused {
        if tools.remove(&loser.info.name).is_some() {
            errors.push(LoadError {
                message,
                source: loser.source.clone(),
                guest_stderr: String::new(),
            });
        }
    }
    let orphans: Vec<String> = tools
        .iter()
        .filter_map(|(key, tool)| {
            let owner = key.strip_prefix("completion:")?;
            let beside = tools
                .get(owner)
                .is_some_and(|owner| owner.source == tool.source);
            (!beside).then(|| key.clone())
        })
        .collect();
    for key in orphans {
        tools.remove(&key);
    }
}

/// What a catalog key names, for a refusal: `a tool named "x"`, `a prompt named "x"`.
fn named(key: &str) -> String {
    let echoed = crate::call::names::echoed;
    match key.split_once(':') {
        Some(("prompt", name)) => format!("a prompt named {}", echoed(name)),
        Some(("resource", uri)) => format!("a resource {}", echoed(uri)),
        Some(("template", name)) => {
            format!("a URI template named {} (or of its pattern)", echoed(name))
        }
        _ => format!("a tool named {key:?}"),
    }
}

impl Loader {
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

/// What a [`Runtime::reload`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reloaded {
    /// The tools that were not there before, by name.
    pub added: Vec<String>,
    /// The tools now served from other bytes (a new digest), by name.
    pub replaced: Vec<String>,
    /// The tools no longer served, by name.
    pub removed: Vec<String>,
    /// What components offer beside tools that was added, replaced or removed, by key
    /// (`prompt:NAME`, `resource:URI`, `template:NAME`, `completion:...`).
    pub offers: Vec<String>,
    /// The components that could not be loaded this time, and why. A changed component that
    /// is refused (a broken pin, a missing signature, a description past its limits) leaves
    /// the version loaded before in service, and its error says so.
    pub errors: Vec<LoadError>,
}

impl Reloaded {
    /// Whether the tools a client sees changed (their names, or what they run), or what the
    /// components offer beside them.
    pub fn changed(&self) -> bool {
        !(self.added.is_empty()
            && self.replaced.is_empty()
            && self.removed.is_empty()
            && self.offers.is_empty())
    }

    /// Whether the tools a client sees changed (an MCP server's `tools/list_changed`).
    pub fn tools_changed(&self) -> bool {
        !(self.added.is_empty() && self.replaced.is_empty() && self.removed.is_empty())
    }
}

impl Runtime {
    /// Look at the tools directories (and the lock and store a pulled tool comes from) again
    /// and serve what is there now: a component added is loaded, a changed one is loaded again,
    /// a removed one stops being served. A new or changed component goes through every check
    /// it would at start (its description's limits, the policy's pin, its signatures); if it
    /// is refused, the version loaded before keeps serving. Calls in flight finish with the
    /// tools they started with. The built-in and native tools, and the policy, stay as built.
    ///
    /// Fails only when a tools directory cannot be listed (then nothing changes).
    pub async fn reload(&self) -> Result<Reloaded, BuildError> {
        let mut loader = self.loader.lock().await;
        self.reload_with(&mut loader).await
    }

    /// [`Runtime::reload`], only if the sources look different from the last load (a file's
    /// name or identity in a tools directory, or a lock file): `None` when they do not. Cheap
    /// enough to call every second: it reads only directories and metadata.
    pub async fn reload_if_changed(&self) -> Result<Option<Reloaded>, BuildError> {
        let mut loader = self.loader.lock().await;
        if loader.fingerprint() == loader.seen {
            return Ok(None);
        }
        self.reload_with(&mut loader).await.map(Some)
    }

    /// [`Runtime::reload`] from synchronous code.
    pub fn reload_blocking(&self) -> Result<Reloaded, BuildError> {
        self.block_on(self.reload())
    }

    async fn reload_with(&self, loader: &mut Loader) -> Result<Reloaded, BuildError> {
        let old = self.catalog();
        let Loaded { tools, mut errors } = loader.load(&self.wasm, Some(&old)).await?;
        let new = catalog(tools, &loader.natives, &mut errors, Some(&old));
        let mut reloaded = Reloaded {
            errors,
            ..Reloaded::default()
        };
        for entry in new.registry.entries() {
            let name = &entry.schema.name;
            match (old.tools.get(name), new.tools.get(name)) {
                (None, _) => reloaded.added.push(name.clone()),
                (Some(before), Some(now)) if !Arc::ptr_eq(before, now) => {
                    reloaded.replaced.push(name.clone());
                }
                _ => {}
            }
        }
        for entry in old.registry.entries() {
            if !new.tools.contains_key(&entry.schema.name) {
                reloaded.removed.push(entry.schema.name.clone());
            }
        }
        for (key, before) in &old.offers {
            if new
                .offers
                .get(key)
                .is_none_or(|now| !Arc::ptr_eq(now, before))
            {
                reloaded.offers.push(key.clone());
            }
        }
        for key in new.offers.keys() {
            if !old.offers.contains_key(key) {
                reloaded.offers.push(key.clone());
            }
        }
        reloaded.offers.sort();
        if reloaded.changed() {
            *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(new);
            // The code of what is no longer served is let go (a call in flight keeps its own).
            for (name, tool) in old.tools.iter().chain(&old.offers) {
                let gone = self
                    .catalog()
                    .any(name)
                    .is_none_or(|now| !Arc::ptr_eq(now, tool));
                if gone
                    && let Executable::Wasm(code)
                    | Executable::Typed(code, _)
                    | Executable::Offer(code, _) = &tool.executable
                {
                    self.wasm.code().release(code);
                }
            }
            tracing::info!(
                added = ?reloaded.added,
                replaced = ?reloaded.replaced,
                removed = ?reloaded.removed,
                offers = ?reloaded.offers,
                "the tools changed"
            );
        }
        for error in &reloaded.errors {
            tracing::warn!("{error}");
        }
        Ok(reloaded)
    }
}

/// Why a runtime could not be built at all. (A tool that cannot be loaded does not stop the
/// build: it is a [`LoadError`] in [`Runtime::load_errors`].)
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// A tools directory could not be listed.
    #[error("reading the tools directory {}: {source}", dir.display())]
    ToolsDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The default workspace could not be opened.
    #[error("opening the workspace {}: {source}", dir.display())]
    Workspace {
        /// The directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The wasm engine or its instance pool could not be made here (the machine refused the
    /// pool's address space, or the engine's settings): the host cannot run.
    #[error("making the wasm engine and its instance pool: {}", with_causes(.source.as_ref()))]
    Engine {
        /// What the engine said, with its causes ([`std::error::Error::source`]).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The host's async runtime (its blocking pool and timers) could not be started.
    #[error("starting the host's async runtime: {source}")]
    AsyncRuntime {
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// `error` and each of its causes, as `error: cause: cause` (the engine's own error says only
/// its outermost context; what the machine refused is further down).
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        text.push_str(": ");
        text.push_str(&next.to_string());
        cause = next.source();
    }
    text
}

/// A found component's digest and what the indexes say of it, and its bytes if they were read
/// to learn its digest.
struct Identified<'f> {
    digest: String,
    info: Option<ToolInfo>,
    typed: Option<crate::wasm::typed::Indexed>,
    offers: Option<Offers>,
    bytes: Option<std::borrow::Cow<'f, [u8]>>,
}

impl<'f> Identified<'f> {
    /// What the index that remembers a component knows of it: nothing is read.
    fn known(entry: IndexEntry) -> Identified<'f> {
        Identified {
            digest: entry.sha256,
            info: entry.info,
            typed: entry.typed,
            offers: entry.offers,
            bytes: None,
        }
    }

    /// A component the index does not know: read from `origin` and hashed (unless its
    /// `digest` is known: a built-in tool's), and described by what `by_digest` keeps under
    /// that digest, if anything. The error says why it cannot be read.
    fn read(
        origin: &'f Origin,
        digest: Option<&str>,
        by_digest: Option<&Index>,
    ) -> Result<Identified<'f>, String> {
        let bytes = component_bytes(origin)?;
        let digest = match digest {
            Some(digest) => digest.to_owned(),
            None => crate::digest::hex(&<sha2::Sha256 as sha2::Digest>::digest(&bytes)),
        };
        let (info, typed, offers) = by_digest
            .and_then(|index| index.get(&digest, &digest))
            .map(|entry| {
                (
                    entry.info.clone(),
                    entry.typed.clone(),
                    entry.offers.clone(),
                )
            })
            .unwrap_or_default();
        Ok(Identified {
            digest,
            info,
            typed,
            offers,
            bytes: Some(bytes),
        })
    }
}

/// The bytes of a component from `origin`: borrowed when they are in memory, read (inside the
/// directory of its file) when it is a file. The error says why it cannot be read.
fn component_bytes(origin: &Origin) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    Ok(match origin {
        Origin::Static(bytes) => std::borrow::Cow::Borrowed(*bytes),
        Origin::Shared(bytes) => std::borrow::Cow::Borrowed(bytes.as_ref()),
        Origin::File(path) => {
            let root = path.parent().unwrap_or(path);
            let root = root
                .canonicalize()
                .map_err(|error| format!("cannot be read: {error}"))?;
            std::borrow::Cow::Owned(read_component_file(&root, path)?)
        }
    })
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

/// Remember a component of plain typed exports (its digest, its functions as `reflected`) in
/// the index of its place, or in `by_digest` when it has none, as a contract component's
/// description is remembered.
fn remember_typed(
    (indexes, by_digest): (&mut [Index], Option<&mut Index>),
    place: &FoundPlace<'_>,
    digest: &str,
    reflected: &crate::wasm::typed::Reflected,
) {
    let kept = crate::wasm::typed::Indexed::of(reflected);
    let Some(first) = kept.functions.first() else {
        return;
    };
    let entry = |source: &str, identity: &str| IndexEntry {
        source: source.to_owned(),
        identity: identity.to_owned(),
        sha256: digest.to_owned(),
        info: Some(first.info.clone()),
        typed: Some(kept.clone()),
        offers: None,
    };
    if let Some((slot, identity)) = place.indexed
        && let Some(index) = indexes.get_mut(*slot)
    {
        index.put(entry(place.source, identity));
    }
    if let Some(index) = by_digest
        && place.indexed.is_none()
    {
        index.put(entry(digest, digest));
    }
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

/// Load the code of every wasm tool now (not on its first call); what fails goes to `errors`.
async fn prepare_all(wasm: &WasmExecutor, tools: &[Arc<Tool>], errors: &mut Vec<LoadError>) {
    for tool in tools {
        if let Executable::Wasm(code) | Executable::Typed(code, _) | Executable::Offer(code, _) =
            &tool.executable
            && let Err(message) = wasm.prepare(code).await
        {
            errors.push(LoadError {
                source: tool.source.clone(),
                message,
                guest_stderr: String::new(),
            });
        }
    }
}

/// What a component compiled now turned out to be, its code admitted to the executor.
enum Compiled {
    /// A component of the contract: its description and offers, and its schemas.
    Contract(Box<(ToolInfo, Option<Offers>, Schemas)>),
    /// A component that offers prompts, resources or completion, and no tool.
    Provider(Offers),
    /// A component of plain typed exports: its functions.
    Typed(crate::wasm::typed::Reflected),
}

/// Admit the prepared instance `loaded` holds as `code`'s, and say what the component is.
fn admit(wasm: &WasmExecutor, code: &Arc<LazyCode>, loaded: crate::wasm::load::Loaded) -> Compiled {
    match loaded {
        crate::wasm::load::Loaded::Contract(loaded) => {
            let loaded = *loaded;
            wasm.code().admit(code, loaded.pre, loaded.code_bytes);
            let schemas = Schemas {
                input: loaded.schema,
                output: loaded.output,
            };
            Compiled::Contract(Box::new((loaded.info, loaded.offers, schemas)))
        }
        crate::wasm::load::Loaded::Provider(provider) => {
            wasm.code().admit(code, provider.pre, provider.code_bytes);
            Compiled::Provider(provider.offers)
        }
        crate::wasm::load::Loaded::Typed(typed) => {
            wasm.code().admit(code, typed.pre, typed.code_bytes);
            Compiled::Typed(typed.reflected)
        }
    }
}

/// The code of the component of `digest`, from `origin`, loaded (from its cache `entry`) on
/// its first call.
fn lazy_code(digest: &str, entry: CacheEntry, origin: Origin, evictable: bool) -> Arc<LazyCode> {
    Arc::new(LazyCode::new(digest.to_owned(), entry, origin, evictable))
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

/// What the index of `found`'s place remembers of it, if its identity there is unchanged.
fn known_entry(indexes: &[Index], found: &Found) -> Option<IndexEntry> {
    found
        .indexed
        .as_ref()
        .and_then(|(slot, identity)| indexes.get(*slot)?.get(&found.source, identity))
        .cloned()
}

/// The tools loaded before from a source, kept as they are.
fn kept(previous: &[&Arc<Tool>]) -> Vec<Arc<Tool>> {
    previous.iter().map(|tool| Arc::clone(tool)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that cannot be made says why, all the way down: wasmtime's error names only
    /// its outermost context, and what the machine refused is its cause.
    #[test]
    fn an_engine_failure_shows_its_causes() {
        let refused = anyhow::anyhow!("mmap of 1 GiB refused (os error 12)")
            .context("reserving the instance pool")
            .context("configuring the wasmtime engine");
        let error = BuildError::Engine {
            source: refused.into(),
        };
        assert_eq!(
            error.to_string(),
            "making the wasm engine and its instance pool: configuring the wasmtime engine: \
             reserving the instance pool: mmap of 1 GiB refused (os error 12)"
        );
    }
}
