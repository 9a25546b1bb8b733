//! Where the components a reference names come from, and whether their provenance meets the
//! policy: the one trait a registry plugs into the builder with ([`ComponentSource`]). The core
//! never speaks a registry's protocol; `toolcell-oci` implements this for its store.

use crate::policy::Signer;
use std::path::{Path, PathBuf};

/// A component a [`ComponentSource`] read.
#[derive(Debug, Clone)]
pub struct SourcedComponent {
    /// Where it came from, as load errors and [`Runtime::source`](crate::Runtime::source) name
    /// it (for a registry: `oci://REGISTRY/REPOSITORY@sha256:…`).
    pub source: String,
    /// What a signature signs (for a registry: the manifest's digest).
    pub digest: String,
    /// The component.
    pub bytes: Vec<u8>,
}

/// Why a source could not load a component, or refused its provenance: shown as the tool's
/// load error (the tool is left out; the others load). It carries the source's own error as
/// the source typed it (for `toolcell-oci`, an `OciError`): a caller that knows the source
/// reads it with [`SourceError::inner`] and `downcast_ref`, never by parsing the words.
#[derive(Debug, thiserror::Error)]
#[error("{inner}")]
pub struct SourceError {
    inner: Box<dyn std::error::Error + Send + Sync>,
}

impl SourceError {
    /// The source's `error` (a message alone, `String` or `&str`, is an error too).
    pub fn new(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SourceError {
        SourceError {
            inner: error.into(),
        }
    }

    /// The source's own error, to `downcast_ref` to the type that source uses.
    pub fn inner(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        self.inner.as_ref()
    }
}

impl From<String> for SourceError {
    fn from(message: String) -> Self {
        SourceError::new(message)
    }
}

/// Components named by reference (the builder's [`pulled`](crate::RuntimeBuilder::pulled), a
/// policy's `source`), read without the network, and the check of who signed them.
///
/// Called only while a runtime is built ([`RuntimeBuilder::build`](crate::RuntimeBuilder::build)),
/// from that thread.
pub trait ComponentSource: Send + Sync {
    /// The component `reference` names.
    fn load(&self, reference: &str) -> Result<SourcedComponent, SourceError>;

    /// Who among `required` signed the component whose digest is `digest` (each list the
    /// policy names is checked on its own call): at least one, else an error. `trust_root` is
    /// the policy's `[registry] trust_root`, for keyless signers. The names returned (a key's
    /// id, a keyless signer's identity) are what the audit records as the tool's signers.
    fn check_signed(
        &self,
        digest: &str,
        required: &[&Signer],
        trust_root: Option<&Path>,
    ) -> Result<Vec<String>, SourceError>;

    /// Files that decide which bytes a reference loads (a lock file): the builder protects them
    /// from every tool's writes.
    fn protected_files(&self) -> Vec<PathBuf> {
        Vec::new()
    }
}
