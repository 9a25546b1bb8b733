//! What the cache remembers about the components at one place (a tools directory, or the tools
//! built into toolcell), so a process starts without reading, compiling or instantiating them.
//!
//! For each component the index keeps how its file looked when it was last read (its
//! *identity*: device, inode, size, modification and change times), its sha256, and what it
//! said about itself (its checked [`ToolInfo`], and what it offers beside a tool). A start
//! stats each file; a file whose identity matches is taken at its indexed digest and
//! description, and its compiled code is read from its cache entry on its first call ([`LazyCode`](crate::wasm::lazy::LazyCode)). Anything else
//! (a new file, a changed one, an index that fails its check) is read, hashed, compiled and
//! described as before, and the index is written again.
//!
//! The index is authenticated like the compiled code: an HMAC-SHA256 under the cache key over
//! its place, the engine's hash, toolcell's version and the whole payload, so whoever can write
//! the cache directory cannot make a component say something else about itself, nor make
//! another digest stand for a file. What runs on a call is the compiled entry of the indexed
//! digest, itself bound to that digest by its own MAC: a file changed in a way its identity
//! does not show (which needs the change time to stand still) can only leave the *old*
//! component, the one whose digest the policy's pin checked, in service.

use crate::digest::{hex, random};
use crate::tool::info::ToolInfo;
use crate::wasm::cache::{CompileCache, KEY_BYTES, create_new_private, read_bounded};
use hmac::{Hmac, Mac as _};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::io::Write as _;
use std::path::PathBuf;
use wasmtime::Engine;

/// What starts an index file: the format, so an index of another layout is not read.
const INDEX_MAGIC: &[u8; 8] = b"tcindx01";

/// The length of an index's MAC (HMAC-SHA256).
const MAC_BYTES: usize = 32;

/// The largest index read back: a thousand tools, each with a description and schemas at their
/// limits, fit many times over. A larger file is not ours, and is not read.
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// One component as the index remembers it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct IndexEntry {
    /// Where it came from (a file path, `builtin:<name>`).
    pub(crate) source: String,
    /// How its file looked when it was read (see the module docs), or its digest where the
    /// bytes are toolcell's own.
    pub(crate) identity: String,
    /// Its sha256, lowercase hex.
    pub(crate) sha256: String,
    /// What it said about itself, as checked at load (for a component of plain typed exports,
    /// its first function's; `typed` holds them all); none for a component of prompts and
    /// resources with no tool.
    pub(crate) info: Option<ToolInfo>,
    /// What it offers beside a tool (prompts, resources, completion), as checked at load.
    #[serde(default)]
    pub(crate) offers: Option<crate::tool::offer::Offers>,
    /// A component of plain typed exports: its functions and those left out, as read at load.
    #[serde(default)]
    pub(crate) typed: Option<crate::wasm::typed::Indexed>,
}

/// The index of one place, as read at start; written back when it changed.
pub(crate) struct Index {
    path: PathBuf,
    key: [u8; KEY_BYTES],
    /// The place, the engine's hash and toolcell's version: what the MAC binds the index to.
    bound: Vec<u8>,
    entries: HashMap<String, IndexEntry>,
    changed: bool,
}

impl CompileCache {
    /// The index of `place` (a canonical tools directory, or `builtin`) for `engine`: as the
    /// cache holds it if its MAC checks out, else empty. `None` when no cache is in use.
    pub(crate) fn index(&self, engine: &Engine, place: &str) -> Option<Index> {
        let (dir, key) = self.store()?;
        let engine = self.engine_hash(engine);
        let place_hash = Sha256::digest(place.as_bytes());
        let path = dir.join(format!(
            "index-{}-{}.json",
            hex(&place_hash[..8]),
            hex(&engine[..8])
        ));
        let mut bound = b"toolcell index\0".to_vec();
        bound.extend_from_slice(place.as_bytes());
        bound.push(0);
        bound.extend_from_slice(&engine);
        bound.extend_from_slice(env!("CARGO_PKG_VERSION").as_bytes());
        let mut index = Index {
            path,
            key: *key,
            bound,
            entries: HashMap::new(),
            changed: false,
        };
        index.entries = index.read().unwrap_or_default();
        Some(index)
    }
}

impl Index {
    /// The entry for `source`, if its file still has `identity`.
    pub(crate) fn get(&self, source: &str, identity: &str) -> Option<&IndexEntry> {
        self.entries
            .get(source)
            .filter(|entry| entry.identity == identity)
    }

    /// Remember `entry` (replacing what was known of its source).
    pub(crate) fn put(&mut self, entry: IndexEntry) {
        let same = self.entries.get(&entry.source).is_some_and(|known| {
            known.identity == entry.identity
                && known.sha256 == entry.sha256
                && known.info == entry.info
                && known.typed == entry.typed
                && known.offers == entry.offers
        });
        if !same {
            self.entries.insert(entry.source.clone(), entry);
            self.changed = true;
        }
    }

    /// Forget every source `keep` does not name (files that are gone).
    pub(crate) fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        let before = self.entries.len();
        self.entries.retain(|source, _| keep(source));
        self.changed |= self.entries.len() != before;
    }

    /// Write the index back if it changed: a new file, renamed into place. The index only
    /// saves time, so a failure is logged, not returned.
    pub(crate) fn save(&mut self) {
        if !self.changed {
            return;
        }
        match self.write() {
            Ok(()) => self.changed = false,
            Err(error) => {
                tracing::debug!(%error, path = %self.path.display(), "index not written");
            }
        }
    }

    fn mac(&self, payload: &[u8]) -> Option<Hmac<Sha256>> {
        let mut mac = <Hmac<Sha256>>::new_from_slice(&self.key).ok()?;
        mac.update(&self.bound);
        mac.update(payload);
        Some(mac)
    }

    /// The entries of the index file, if it is one whose MAC is this place's under this key,
    /// and every description in it still passes the checks a component's does at load.
    fn read(&self) -> Option<HashMap<String, IndexEntry>> {
        let bytes = read_bounded(&self.path, MAX_INDEX_BYTES).ok()?;
        let rest = bytes.strip_prefix(INDEX_MAGIC.as_slice())?;
        let (tag, payload) = rest.split_at_checked(MAC_BYTES)?;
        self.mac(payload)?.verify_slice(tag).ok()?;
        let entries: Vec<IndexEntry> = serde_json::from_slice(payload).ok()?;
        let mut by_source = HashMap::with_capacity(entries.len());
        for mut entry in entries {
            // Authenticated, and checked again all the same: the limits are the host's, and
            // this toolcell's may be narrower than the one that wrote the index.
            entry.info = match entry.info {
                Some(info) => Some(info.checked().ok()?),
                None => None,
            };
            entry.offers = match entry.offers {
                Some(offers) => Some(offers.checked().ok()?),
                None => None,
            };
            by_source.insert(entry.source.clone(), entry);
        }
        Some(by_source)
    }

    fn write(&self) -> std::io::Result<()> {
        let mut entries: Vec<&IndexEntry> = self.entries.values().collect();
        entries.sort_by(|a, b| a.source.cmp(&b.source));
        let payload = serde_json::to_vec(&entries).map_err(std::io::Error::other)?;
        let mac = self
            .mac(&payload)
            .ok_or_else(|| std::io::Error::other("no MAC"))?;
        let dir = self
            .path
            .parent()
            .ok_or_else(|| std::io::Error::other("the index has no directory"))?;
        let temp = dir.join(format!(".index.{}.tmp", hex(&random::<8>()?)));
        let result = (|| {
            let mut file = create_new_private(&temp)?;
            file.write_all(INDEX_MAGIC)?;
            file.write_all(&mac.finalize().into_bytes())?;
            file.write_all(&payload)?;
            file.sync_all()?;
            std::fs::rename(&temp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        result
    }
}

/// The identity of a file, from its metadata: what changes whenever its bytes can have (its
/// change time is set by the kernel on every write and rename, and no one can set it back).
pub(crate) fn file_identity(meta: &std::fs::Metadata) -> String {
    use std::os::unix::fs::MetadataExt as _;
    format!(
        "file:{}:{}:{}:{}.{}:{}.{}",
        meta.dev(),
        meta.ino(),
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec()
    )
}
