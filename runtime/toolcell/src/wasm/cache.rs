//! The on-disk cache of compiled components, so a process starts without recompiling.
//!
//! A cache entry is native code the host will run, so the cache is trusted only as far as it is
//! authenticated:
//!
//! - an entry is keyed by the sha256 of the component and the engine's compatibility hash (the
//!   wasmtime version and every setting that changes generated code);
//! - it carries an HMAC-SHA256, under a key that lives **outside** the cache directory
//!   ([`default_cache_key_file`], created on first use, 0600), over the component's sha256,
//!   the engine hash and the compiled payload. Whoever can write the cache directory but not
//!   read the key can neither patch an entry (the MAC no longer matches) nor move another
//!   component's entry under this one's name (the MAC covers the component's digest), so what
//!   runs is what toolcell compiled from the very bytes a policy's `sha256` pin checked;
//! - a cache directory that is a symlink, owned by another user, or writable by group or
//!   others is not used (every component is compiled instead, and a warning says why); so is a
//!   key file that is not a regular file of this user's, readable by no one else;
//! - entries are written to a new temporary file (created exclusively, never through an
//!   existing name or link) and renamed into place; an artifact is written only after it has
//!   been loaded back, so nothing in the cache fails to load.
//!
//! An entry that fails any check (a torn write, a flipped bit, a foreign or forged artifact) is
//! compiled again and replaced: nothing read from the cache reaches wasmtime's unchecked
//! deserialization before its MAC is verified.

use crate::digest::{hex, random};
use hmac::{Hmac, Mac as _};
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The environment variable that overrides where the cache lives.
pub const CACHE_DIR_ENV: &str = "TOOLCELL_CACHE_DIR";

/// The environment variable that overrides where the cache's key lives.
pub const CACHE_KEY_ENV: &str = "TOOLCELL_CACHE_KEY";

/// The cache directory to use: `$TOOLCELL_CACHE_DIR`, else `toolcell` in the user's cache
/// directory (`$XDG_CACHE_HOME` or `~/.cache` on Linux). `None` when neither is known.
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os(CACHE_DIR_ENV)
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|dir| dir.join("toolcell")))
}

/// The file holding the key that authenticates cache entries: `$TOOLCELL_CACHE_KEY`, else
/// `toolcell/cache.key` in the user's local data directory (`$XDG_DATA_HOME` or
/// `~/.local/share` on Linux), which is not the cache directory. `None` when neither is known
/// (then nothing is cached).
pub fn default_cache_key_file() -> Option<PathBuf> {
    std::env::var_os(CACHE_KEY_ENV)
        .map(PathBuf::from)
        .or_else(|| dirs::data_local_dir().map(|dir| dir.join("toolcell").join("cache.key")))
}

/// What starts every entry: the format, so an entry of an older toolcell is recompiled.
const ENTRY_MAGIC: &[u8; 8] = b"tcache02";

/// The length of an entry's MAC (HMAC-SHA256).
const MAC_BYTES: usize = 32;

/// The length of the cache key: 256 bits, as HMAC-SHA256 wants.
pub(crate) const KEY_BYTES: usize = 32;

/// The largest cache entry read back. A compiled Python tool is tens of MiB; a file far
/// beyond that in the cache directory is not ours, and is not read into memory.
pub const MAX_CACHE_ENTRY_BYTES: u64 = 1 << 30;

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Tools whose description came from the cache's index at start, so that none of them
    /// was compiled, linked or instantiated then (a file unchanged since it was indexed is not
    /// even read): their code is loaded on their first call, and counted then among the
    /// others.
    pub indexed: usize,
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
#[derive(Clone)]
pub(crate) struct CompileCache {
    /// The directory and the key, when the cache may be used.
    store: Option<(PathBuf, [u8; KEY_BYTES])>,
    /// The engine's hash, computed once (a runtime has one engine; hashing its settings for
    /// every tool would be most of a start's work per tool).
    engine_hash: std::sync::OnceLock<[u8; 32]>,
}

impl CompileCache {
    /// The directory and the key, when the cache is in use.
    pub(crate) fn store(&self) -> Option<(&Path, &[u8; KEY_BYTES])> {
        self.store.as_ref().map(|(dir, key)| (dir.as_path(), key))
    }
}

impl std::fmt::Debug for CompileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileCache")
            .field("dir", &self.store.as_ref().map(|(dir, _)| dir))
            .finish_non_exhaustive()
    }
}

impl CompileCache {
    /// A cache in `dir` authenticated with the key in `key_file`; no cache when either is
    /// `None`, or (with a warning saying why) when the directory or the key cannot be
    /// trusted.
    pub(crate) fn new(dir: Option<PathBuf>, key_file: Option<PathBuf>) -> Self {
        let (Some(dir), Some(key_file)) = (dir, key_file) else {
            return CompileCache {
                store: None,
                engine_hash: std::sync::OnceLock::new(),
            };
        };
        let opened = open_private_dir(&dir)
            .map_err(|why| format!("the cache directory {}: {why}", dir.display()))
            .and_then(|()| {
                load_or_create_key(&key_file)
                    .map_err(|why| format!("the cache key {}: {why}", key_file.display()))
            });
        match opened {
            Ok(key) => CompileCache {
                store: Some((dir, key)),
                engine_hash: std::sync::OnceLock::new(),
            },
            Err(why) => {
                tracing::warn!("not caching compiled components: {why}");
                CompileCache {
                    store: None,
                    engine_hash: std::sync::OnceLock::new(),
                }
            }
        }
    }

    /// The sha256 of `engine`'s compatibility hash (computed for the first engine asked
    /// about: a cache serves one runtime, which has one engine).
    pub(crate) fn engine_hash(&self, engine: &Engine) -> [u8; 32] {
        *self.engine_hash.get_or_init(|| engine_hash(engine))
    }

    /// Whether a cache is in use (a directory and a key that could be trusted).
    pub(crate) fn in_use(&self) -> bool {
        self.store.is_some()
    }

    /// The cache entry for `bytes` (the component is hashed once, here).
    pub(crate) fn entry(&self, engine: &Engine, bytes: &[u8]) -> CacheEntry {
        let component: [u8; 32] = Sha256::digest(bytes).into();
        self.entry_for(engine, component)
    }

    /// The cache entry of the component whose sha256 is `digest` (lowercase hex), when its
    /// digest is known without its bytes (from the [`Index`]); `None` if `digest` is not one.
    pub(crate) fn entry_for_digest(&self, engine: &Engine, digest: &str) -> Option<CacheEntry> {
        let bytes = crate::digest::unhex(digest)?;
        Some(self.entry_for(engine, bytes.try_into().ok()?))
    }

    fn entry_for(&self, engine: &Engine, component: [u8; 32]) -> CacheEntry {
        let store = self.store.as_ref().map(|(dir, key)| {
            let engine_hash = self.engine_hash(engine);
            let path = dir.join(format!(
                "{}-{}.cwasm",
                hex(&component),
                hex(&engine_hash[..8])
            ));
            // What the MAC binds an entry to: this component, for this engine.
            let mut bound = component.to_vec();
            bound.extend_from_slice(&engine_hash);
            EntryStore {
                path,
                key: *key,
                bound,
            }
        });
        CacheEntry { store }
    }
}

/// Where one component's compiled form lives in the cache, if a cache is in use.
#[derive(Clone)]
pub(crate) struct CacheEntry {
    store: Option<EntryStore>,
}

#[derive(Clone)]
struct EntryStore {
    path: PathBuf,
    key: [u8; KEY_BYTES],
    /// The component's sha256 and the engine's hash, which the MAC covers.
    bound: Vec<u8>,
}

impl CacheEntry {
    /// True when an entry exists (for progress reporting; it is still verified when read).
    pub(crate) fn exists(&self) -> bool {
        self.store
            .as_ref()
            .is_some_and(|store| store.path.is_file())
    }

    /// The component for `bytes`: from a verified entry, or compiled (and stored).
    pub(crate) fn component(
        &self,
        engine: &Engine,
        bytes: &[u8],
    ) -> Result<(Component, CacheOutcome), String> {
        self.component_or(engine, || Ok(std::borrow::Cow::Borrowed(bytes)))
    }

    /// The component: from a verified entry, or compiled (and stored) from the bytes `bytes`
    /// gives, asked for only then. Whoever gives them has checked that they are this
    /// entry's component (their sha256 is its digest).
    pub(crate) fn component_or<'b>(
        &self,
        engine: &Engine,
        bytes: impl FnOnce() -> Result<std::borrow::Cow<'b, [u8]>, String>,
    ) -> Result<(Component, CacheOutcome), String> {
        let Some(store) = &self.store else {
            return compile(engine, &bytes()?).map(|component| (component, CacheOutcome::Uncached));
        };
        let outcome = match read_bounded(&store.path, MAX_CACHE_ENTRY_BYTES) {
            Ok(entry) => match store
                .verified(&entry)
                .map(|payload| deserialize(engine, payload))
            {
                Some(Ok(component)) => return Ok((component, CacheOutcome::Hit)),
                _ => CacheOutcome::Replaced,
            },
            Err(_) => CacheOutcome::Miss,
        };
        let artifact = engine
            .precompile_component(&bytes()?)
            .map_err(|error| not_valid(&error))?;
        // Loaded back before it is stored: an artifact this engine refuses (a limit of the
        // instance pool, say) is refused with wasmtime's reason, and never cached.
        let component = deserialize(engine, &artifact)?;
        // The cache only saves time: a cache that cannot be written is not an error.
        if let Err(error) = store.write(&artifact) {
            tracing::debug!(%error, path = %store.path.display(), "cache entry not written");
        }
        Ok((component, outcome))
    }
}

impl EntryStore {
    /// The MAC of `payload` as this component's entry (`None` only if HMAC refused the key,
    /// which it does for no length).
    fn mac(&self, payload: &[u8]) -> Option<Hmac<Sha256>> {
        let mut mac = <Hmac<Sha256>>::new_from_slice(&self.key).ok()?;
        mac.update(&self.bound);
        mac.update(payload);
        Some(mac)
    }

    /// The payload of `entry` if its MAC is this component's, under this key.
    fn verified<'a>(&self, entry: &'a [u8]) -> Option<&'a [u8]> {
        let rest = entry.strip_prefix(ENTRY_MAGIC.as_slice())?;
        let (tag, payload) = rest.split_at_checked(MAC_BYTES)?;
        self.mac(payload)?.verify_slice(tag).ok()?;
        Some(payload)
    }

    /// Write `artifact` as this entry, atomically: a new temporary file (created exclusively)
    /// renamed into place.
    fn write(&self, artifact: &[u8]) -> std::io::Result<()> {
        let dir = self
            .path
            .parent()
            .ok_or_else(|| std::io::Error::other("cache entry has no directory"))?;
        let temp = dir.join(format!(".entry.{}.tmp", hex(&random::<8>()?)));
        let result = (|| {
            let mut file = create_new_private(&temp)?;
            file.write_all(ENTRY_MAGIC)?;
            let mac = self
                .mac(artifact)
                .ok_or_else(|| std::io::Error::other("no MAC"))?;
            file.write_all(&mac.finalize().into_bytes())?;
            file.write_all(artifact)?;
            file.sync_all()?;
            std::fs::rename(&temp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }
}

/// Why a component did not compile, with what its author can do about it where we know.
fn not_valid(error: &wasmtime::Error) -> String {
    let why = format!("not a valid WebAssembly component: {error:#}");
    // componentize-qjs, for one, emits the component model's async ABI by default; the engine
    // does not enable it (wasmtime 48 has it behind a feature still being settled), so such a
    // component cannot load, however it is called.
    if why.contains("component model async") {
        return format!(
            "{why} (it uses the component model's async ABI, which toolcell does not enable: \
             build it for the synchronous ABI, e.g. componentize-qjs --sync)"
        );
    }
    why
}

fn compile(engine: &Engine, bytes: &[u8]) -> Result<Component, String> {
    Component::new(engine, bytes).map_err(|error| not_valid(&error))
}

/// Deserialize an artifact this process compiled, or a cache entry whose MAC matched.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artifact: &[u8]) -> Result<Component, String> {
    // SAFETY: `Component::deserialize` trusts its input to be wasmtime's own output. The
    // artifact is either what `precompile_component` just returned, or a cache entry whose
    // HMAC, under a key only this user can read and that the cache directory does not hold,
    // matched this component and this engine: bytes this host compiled and stored.
    // wasmtime itself checks the artifact's version and engine settings and refuses a mismatch.
    unsafe { Component::deserialize(engine, artifact) }
        .map_err(|error| format!("wasmtime refused the compiled component: {error:#}"))
}

/// A file's bytes, if it is a regular file (not followed through a link, and opened without
/// waiting on it: a FIFO planted in the cache directory holds up nothing) of at most `max`
/// bytes.
pub(crate) fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    crate::hostfs::read_bounded_no_link(path, max)
}

/// Create `dir` (and its parents) if missing, mode 0700.
fn create_dir_0700(dir: &Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|error| error.to_string())
}

/// Create `dir` (and its parents) if missing, mode 0700, and check that it is a directory
/// of this user's that no one else can write, reached without a symlink.
fn open_private_dir(dir: &Path) -> Result<(), String> {
    create_dir_0700(dir)?;
    let meta = std::fs::symlink_metadata(dir).map_err(|error| error.to_string())?;
    check_private(&meta, "directory", 0o022)?;
    if !meta.is_dir() {
        return Err("it is not a directory".to_owned());
    }
    Ok(())
}

/// Refuse what is a symlink, belongs to another user, or has any of `forbidden` mode bits.
fn check_private(meta: &std::fs::Metadata, what: &str, forbidden: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    if meta.file_type().is_symlink() {
        return Err(format!("the {what} is a symlink"));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "the {what} belongs to user {}, not to this user ({me})",
            meta.uid()
        ));
    }
    if meta.mode() & forbidden != 0 {
        return Err(format!(
            "the {what} has mode {:o}: others may change it",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// The key in `path`, or a new one written there (0600, in a 0700 directory) if there is
/// none. A key file must be a regular file of this user's that no one else can read or write.
fn load_or_create_key(path: &Path) -> Result<[u8; KEY_BYTES], String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            check_private(&meta, "key file", 0o077)?;
            if !meta.is_file() || meta.len() != KEY_BYTES as u64 {
                return Err(format!("it is not a {KEY_BYTES}-byte file"));
            }
            let bytes = read_bounded(path, KEY_BYTES as u64).map_err(|error| error.to_string())?;
            bytes
                .try_into()
                .map_err(|_| format!("it is not a {KEY_BYTES}-byte file"))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            // The key's directory need not be private: the key file itself must be this
            // user's, 0600, and is created exclusively, so no one else's file is ever used.
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                create_dir_0700(parent)?;
            }
            let key = random::<KEY_BYTES>().map_err(|error| error.to_string())?;
            let temp = path.with_extension(format!(
                "{}.tmp",
                hex(&random::<8>().map_err(|e| e.to_string())?)
            ));
            let written = (|| {
                let mut file = create_new_private(&temp)?;
                file.write_all(&key)?;
                file.sync_all()?;
                // Another process may have made one meanwhile: theirs stands, and is read.
                std::fs::hard_link(&temp, path)
            })();
            let _ = std::fs::remove_file(&temp);
            match written {
                Ok(()) => Ok(key),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    load_or_create_key(path)
                }
                Err(error) => Err(error.to_string()),
            }
        }
        Err(error) => Err(error.to_string()),
    }
}

/// A new file at `path`, mode 0600: never an existing file, and never through a symlink.
pub(crate) fn create_new_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// The sha256 of the engine's compatibility hash: what decides whether compiled code (and a
/// component's successful link) carries over.
fn engine_hash(engine: &Engine) -> [u8; 32] {
    let mut hasher = Sha256Hasher::default();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hasher.0.finalize().into()
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
