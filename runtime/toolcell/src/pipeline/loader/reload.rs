//! Hot reload: [`Runtime::reload`] loads the sources again and serves what is there now, and
//! [`Reloaded`] says what changed.

use crate::pipeline::Runtime;
use crate::pipeline::catalog::{Executable, Loader};
use crate::pipeline::loader::error::BuildError;
use crate::pipeline::loader::load::Loaded;
use crate::pipeline::loader::merge::catalog;
use crate::wasm::load::LoadError;
use std::sync::Arc;

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
