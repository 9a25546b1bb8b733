//! The on-disk cache of compiled components, so a process starts without recompiling.
//!
//! An entry is keyed by the sha256 of the component and the engine's compatibility hash (the
//! wasmtime version and every setting that changes generated code), and it starts with the
//! sha256 of its own payload. An entry whose digest does not match (a torn write, a flipped
//! bit), or that wasmtime refuses (an artifact of another engine put under this name), is
//! compiled again and replaced: nothing read from the cache is used before it is verified.
//! Entries are written to a temporary file and renamed into place, in a directory only the
//! user can read.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The environment variable that overrides where the cache lives.
pub const CACHE_DIR_ENV: &str = "TOOLCELL_CACHE_DIR";

/// The cache directory to use: `$TOOLCELL_CACHE_DIR`, else `toolcell` in the user's cache
/// directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux). `None` when neither is known.
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os(CACHE_DIR_ENV)
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|dir| dir.join("toolcell")))
}

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Read from a verified cache entry.
    Hit,
    /// Compiled; the cache had no entry (it has one now, if it could be written).
    Miss,
    /// Compiled; the entry was corrupt or foreign and has been replaced.
    Replaced,
    /// Compiled; no cache is in use.
    Uncached,
}

/// Counts of [`CacheOutcome`]s over a port's components.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Components read from the cache.
    pub hits: usize,
    /// Components compiled for want of an entry.
    pub misses: usize,
    /// Components whose entry was corrupt or foreign, compiled again.
    pub replaced: usize,
    /// Components compiled with no cache in use.
    pub uncached: usize,
}

impl CacheStats {
    pub(crate) fn record(&mut self, outcome: CacheOutcome) {
        match outcome {
            CacheOutcome::Hit => self.hits += 1,
            CacheOutcome::Miss => self.misses += 1,
            CacheOutcome::Replaced => self.replaced += 1,
            CacheOutcome::Uncached => self.uncached += 1,
        }
    }
}

/// Compiles components, through the cache directory when there is one.
#[derive(Debug, Clone)]
pub(crate) struct CompileCache {
    dir: Option<PathBuf>,
}

impl CompileCache {
    pub(crate) fn new(dir: Option<PathBuf>) -> Self {
        CompileCache { dir }
    }

    /// The cache entry for `bytes` (the component is hashed once, here).
    pub(crate) fn entry(&self, engine: &Engine, bytes: &[u8]) -> CacheEntry {
        let path = self.dir.as_ref().map(|dir| {
            let component = sha256_hex(bytes);
            let mut hasher = Sha256Hasher::default();
            engine.precompile_compatibility_hash().hash(&mut hasher);
            let engine = hex(&hasher.0.finalize()[..8]);
            dir.join(format!("{component}-{engine}.cwasm"))
        });
        CacheEntry { path }
    }
}

/// Where one component's compiled form lives in the cache, if a cache is in use.
#[derive(Debug, Clone)]
pub(crate) struct CacheEntry {
    path: Option<PathBuf>,
}

impl CacheEntry {
    /// True when an entry exists (for progress reporting; it is still verified when read).
    pub(crate) fn exists(&self) -> bool {
        self.path.as_ref().is_some_and(|path| path.is_file())
    }

    /// The component for `bytes`: from a verified entry, or compiled (and stored).
    pub(crate) fn component(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> Result<(Component, CacheOutcome), String> {
        let Some(path) = &self.path else {
            return compile(engine, bytes).map(|component| (component, CacheOutcome::Uncached));
        };
        let outcome = match std::fs::read(path) {
            Ok(entry) => match read_entry(engine, &entry) {
                Some(component) => return Ok((component, CacheOutcome::Hit)),
                None => CacheOutcome::Replaced,
            },
            Err(_) => CacheOutcome::Miss,
        };
        let artifact = engine
            .precompile_component(bytes)
            .map_err(|error| format!("not a valid WebAssembly component: {error:#}"))?;
        // The cache only saves time: a cache that cannot be written is not an error.
        let _ = write_entry(path, &artifact);
        deserialize(engine, &artifact)
            .map(|component| (component, outcome))
            .ok_or_else(|| "wasmtime refused its own compilation of the component".to_owned())
    }
}

fn compile(engine: &Engine, bytes: &[u8]) -> Result<Component, String> {
    Component::new(engine, bytes)
        .map_err(|error| format!("not a valid WebAssembly component: {error:#}"))
}

/// The component in a cache entry, if its digest matches its payload and wasmtime accepts it.
fn read_entry(engine: &Engine, entry: &[u8]) -> Option<Component> {
    let (digest, payload) = entry.split_at_checked(DIGEST_BYTES)?;
    if Sha256::digest(payload).as_slice() != digest {
        return None;
    }
    deserialize(engine, payload)
}

const DIGEST_BYTES: usize = 32;

/// Deserialize an artifact this process compiled, or read from a cache entry whose digest
/// matched.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artifact: &[u8]) -> Option<Component> {
    // SAFETY: `Component::deserialize` trusts its input to be wasmtime's own output. The
    // artifact is either what `precompile_component` just returned, or a cache entry written by
    // `write_entry` whose sha256 matched on read, in a directory only this user can write.
    // wasmtime itself checks the artifact's version and engine settings and refuses a mismatch.
    unsafe { Component::deserialize(engine, artifact) }.ok()
}

/// Write `artifact` under `path`, prefixed by its digest, atomically (temp file and rename).
fn write_entry(path: &Path, artifact: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("cache entry has no directory"))?;
    create_private_dir(dir)?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("entry"),
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(&Sha256::digest(artifact))?;
        file.write_all(artifact)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of `bytes`, as lowercase hex: a component's identity (cache keys, policy pins).
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Feeds `Hash` output into sha256, so the key does not depend on the std hasher's algorithm.
#[derive(Default)]
struct Sha256Hasher(Sha256);

impl Hasher for Sha256Hasher {
    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(first)
    }

    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}
