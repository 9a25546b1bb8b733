//! A component's compiled code, loaded on its tool's first call and dropped again when others
//! need the memory more.
//!
//! A tool known from the cache's [`Index`](crate::wasm::index::Index) starts with no code in
//! memory: its first call reads its compiled entry (checked by its MAC, as at any load),
//! links it, and keeps it. The code of all tools together is held under a budget
//! ([`RuntimeBuilder::code_memory_budget`](crate::RuntimeBuilder::code_memory_budget)): past
//! it, the code of the tools called least recently is dropped, to be read again from the cache
//! on their next call. A call holds its own reference to the code it runs, so a call in flight
//! never loses it.
//!
//! Without a cache there is nothing to read code back from: every component is compiled at
//! start and stays.

use crate::wasm::bindings::GuestPre;
use crate::wasm::cache::{CacheEntry, CacheOutcome, CacheStats};
use crate::wasm::load::{code_size, link};
use crate::wasm::sandbox::CallState;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use wasmtime::Engine;
use wasmtime::component::Linker;

/// The memory the compiled code of all tools may hold at once, by default. A small Rust tool's
/// code is well under 1 MiB, a Python tool's about 40 MiB and a JavaScript one's about
/// 20 MiB: this keeps dozens of small tools and a few big ones resident, and bounds what a
/// server with hundreds of installed tools holds.
pub const DEFAULT_CODE_MEMORY_BUDGET: usize = 256 << 20;

/// Where a component's bytes are, should its compiled entry have to be made again.
pub(crate) enum Origin {
    /// A built-in tool's bytes, in the binary.
    Static(&'static [u8]),
    /// Bytes the process holds: an embedder's, or a pulled tool's.
    Shared(Arc<[u8]>),
    /// A component file, read again (and its sha256 checked) only if its compiled entry is
    /// gone.
    File(PathBuf),
}

impl Origin {
    /// The component's bytes, if they are still the ones whose sha256 is `digest`.
    fn bytes(&self, digest: &str) -> Result<Cow<'_, [u8]>, String> {
        match self {
            Origin::Static(bytes) => Ok(Cow::Borrowed(bytes)),
            Origin::Shared(bytes) => Ok(Cow::Borrowed(bytes.as_ref())),
            Origin::File(path) => {
                let root = path.parent().unwrap_or(path);
                let root = root
                    .canonicalize()
                    .map_err(|error| format!("{}: {error}", root.display()))?;
                let bytes = crate::wasm::files::read_component_file(&root, path)?;
                if crate::digest::sha256_hex(&bytes) != digest {
                    return Err(format!(
                        "{} has changed since it was loaded (its sha256 is no longer {digest}); \
                         it is not run until it is loaded again",
                        path.display()
                    ));
                }
                Ok(Cow::Owned(bytes))
            }
        }
    }
}

/// One component's code: resident or not, and how to get it.
pub(crate) struct LazyCode {
    digest: String,
    entry: CacheEntry,
    origin: Origin,
    /// The linked code and its size, while resident.
    resident: Mutex<Option<(GuestPre<CallState>, usize)>>,
    /// Held while the code is being loaded, so concurrent first calls load it once.
    loading: tokio::sync::Mutex<()>,
    /// When it was last used, on the executor's clock.
    last_used: AtomicU64,
    /// Whether it may be dropped (not without a cache to read it back from).
    evictable: bool,
    /// The count of resident code it is counted in, while it is (see [`Drop`]).
    counted_in: Mutex<Option<Arc<AtomicUsize>>>,
}

impl Drop for LazyCode {
    /// Code dropped with its tool (refused at load, a duplicate name, replaced at a reload and
    /// its last call ended) leaves the count, so the budget counts only what is held.
    fn drop(&mut self) {
        let held = self
            .resident
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let counter = self
            .counted_in
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let (Some((_, bytes)), Some(counter)) = (held, counter) {
            counter.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

impl LazyCode {
    pub(crate) fn new(digest: String, entry: CacheEntry, origin: Origin, evictable: bool) -> Self {
        LazyCode {
            digest,
            entry,
            origin,
            resident: Mutex::new(None),
            loading: tokio::sync::Mutex::new(()),
            last_used: AtomicU64::new(0),
            evictable,
            counted_in: Mutex::new(None),
        }
    }

    fn resident(&self) -> Option<GuestPre<CallState>> {
        crate::sync::lock(&self.resident)
            .as_ref()
            .map(|(pre, _)| pre.clone())
    }

    /// The file it was read from, when it was one (a tools directory's).
    pub(crate) fn file(&self) -> Option<&std::path::Path> {
        match &self.origin {
            Origin::File(path) => Some(path),
            _ => None,
        }
    }

    /// Whether its code is in memory now.
    pub(crate) fn is_resident(&self) -> bool {
        self.resident().is_some()
    }

    fn evict(&self) -> usize {
        crate::sync::lock(&self.resident)
            .take()
            .map_or(0, |(_, bytes)| bytes)
    }
}

/// The code of every tool, under one budget.
pub(crate) struct CodeMemory {
    budget: usize,
    /// Every tool whose code is resident (dead ones are swept as it goes).
    resident: Mutex<Vec<Weak<LazyCode>>>,
    bytes: Arc<AtomicUsize>,
    clock: AtomicU64,
    stats: Mutex<CacheStats>,
}

impl CodeMemory {
    pub(crate) fn new(budget: usize) -> Self {
        CodeMemory {
            budget,
            resident: Mutex::new(Vec::new()),
            bytes: Arc::new(AtomicUsize::new(0)),
            clock: AtomicU64::new(0),
            stats: Mutex::new(CacheStats::default()),
        }
    }

    /// How each component's code was obtained, so far.
    pub(crate) fn stats(&self) -> CacheStats {
        *crate::sync::lock(&self.stats)
    }

    /// Count a description read from the index.
    pub(crate) fn described_from_index(&self) {
        crate::sync::lock(&self.stats).indexed += 1;
    }

    pub(crate) fn record(&self, outcome: CacheOutcome) {
        crate::sync::lock(&self.stats).record(outcome);
    }

    /// How many bytes of code are resident.
    pub(crate) fn resident_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// `code`'s linked code, loaded (from its cache entry, or compiled) if it is not resident.
    pub(crate) async fn prepare(
        &self,
        engine: &Engine,
        linker: &Linker<CallState>,
        code: &Arc<LazyCode>,
    ) -> Result<GuestPre<CallState>, String> {
        code.last_used.store(self.tick(), Ordering::Relaxed);
        if let Some(pre) = code.resident() {
            return Ok(pre);
        }
        let _loading = code.loading.lock().await;
        if let Some(pre) = code.resident() {
            return Ok(pre);
        }
        let (component, outcome) = code
            .entry
            .component_or(engine, || code.origin.bytes(&code.digest))?;
        self.record(outcome);
        let pre = link(linker, &component)?;
        self.admit(code, pre.clone(), code_size(&component));
        Ok(pre)
    }

    /// Make `pre` (of `size` bytes) `code`'s resident code, and drop the code of the tools
    /// used least recently until all of it fits the budget again (never `code`'s own).
    pub(crate) fn admit(&self, code: &Arc<LazyCode>, pre: GuestPre<CallState>, size: usize) {
        code.last_used.store(self.tick(), Ordering::Relaxed);
        let previous = crate::sync::lock(&code.resident).replace((pre, size));
        *crate::sync::lock(&code.counted_in) = Some(Arc::clone(&self.bytes));
        let mut resident = crate::sync::lock(&self.resident);
        if let Some((_, before)) = previous {
            self.bytes.fetch_sub(before, Ordering::Relaxed);
        } else {
            resident.push(Arc::downgrade(code));
        }
        self.bytes.fetch_add(size, Ordering::Relaxed);
        resident.retain(|weak| weak.upgrade().is_some_and(|other| other.is_resident()));
        while self.bytes.load(Ordering::Relaxed) > self.budget {
            let oldest = resident
                .iter()
                .enumerate()
                .filter_map(|(at, weak)| Some((at, weak.upgrade()?)))
                .filter(|(_, other)| other.evictable && !Arc::ptr_eq(other, code))
                .min_by_key(|(_, other)| other.last_used.load(Ordering::Relaxed));
            let Some((at, oldest)) = oldest else {
                break;
            };
            let freed = oldest.evict();
            self.bytes.fetch_sub(freed, Ordering::Relaxed);
            resident.swap_remove(at);
        }
    }

    /// Forget `code`'s resident code (its tool was removed or replaced): calls in flight keep
    /// theirs.
    pub(crate) fn release(&self, code: &LazyCode) {
        let freed = code.evict();
        self.bytes.fetch_sub(freed, Ordering::Relaxed);
    }
}
