//! Identifying a found component (its digest and what the indexes remember of it, reading its
//! bytes only when no index knows it) and where its compiled code is cached.

use crate::pipeline::catalog::Loader;
use crate::pipeline::loader::find::Found;
use crate::tool::info::ToolInfo;
use crate::tool::offer::Offers;
use crate::wasm::WasmExecutor;
use crate::wasm::cache::CacheEntry;
use crate::wasm::files::read_component_file;
use crate::wasm::index::{Index, IndexEntry};
use crate::wasm::lazy::{LazyCode, Origin};
use std::sync::Arc;

/// A found component's digest and what the indexes say of it, and its bytes if they were read
/// to learn its digest.
pub(super) struct Identified<'f> {
    pub(super) digest: String,
    pub(super) info: Option<ToolInfo>,
    pub(super) typed: Option<crate::wasm::typed::Indexed>,
    pub(super) offers: Option<Offers>,
    pub(super) bytes: Option<std::borrow::Cow<'f, [u8]>>,
}

impl<'f> Identified<'f> {
    /// What the index that remembers a component knows of it: nothing is read.
    pub(super) fn known(entry: IndexEntry) -> Identified<'f> {
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
    pub(super) fn read(
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
pub(super) fn component_bytes(origin: &Origin) -> Result<std::borrow::Cow<'_, [u8]>, String> {
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

/// What the index of `found`'s place remembers of it, if its identity there is unchanged.
pub(super) fn known_entry(indexes: &[Index], found: &Found) -> Option<IndexEntry> {
    found
        .indexed
        .as_ref()
        .and_then(|(slot, identity)| indexes.get(*slot)?.get(&found.source, identity))
        .cloned()
}

impl Loader {
    /// Where the component of `digest` compiled for this engine is (or would be) cached: by
    /// its `bytes` when they were read and the cache is not in use, else by its digest.
    pub(super) fn cache_entry(
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
}

/// The code of the component of `digest`, from `origin`, loaded (from its cache `entry`) on
/// its first call.
pub(super) fn lazy_code(
    digest: &str,
    entry: CacheEntry,
    origin: Origin,
    evictable: bool,
) -> Arc<LazyCode> {
    Arc::new(LazyCode::new(digest.to_owned(), entry, origin, evictable))
}
