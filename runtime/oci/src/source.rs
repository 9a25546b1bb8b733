//! [`OciSource`]: the store (and a workspace's lock) as the core's
//! [`ComponentSource`](toolcell::source::ComponentSource), so a [`Runtime`](toolcell::Runtime)
//! loads pulled tools and checks their signatures without the core knowing OCI.

use crate::signing::{Signers, TrustRoot, TrustedKey};
use crate::{Lock, Store, ToolRef};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use toolcell::policy::{Identity, Signer};
use toolcell::source::{ComponentSource, SourceError, SourcedComponent};

/// Pulled tools from a [`Store`], tags resolved through a lock file, signatures checked against
/// the keys and trust root the policy names (each file read once per source).
///
/// ```no_run
/// use std::sync::Arc;
/// # fn main() -> Result<(), toolcell::BuildError> {
/// let source = toolcell_oci::OciSource::new(
///     toolcell_oci::Store::default_dir(),
///     Some("toolcell.lock".into()),
/// );
/// let runtime = toolcell::Runtime::builder()
///     .source(Arc::new(source))
///     .pulled("oci://ghcr.io/acme/fetch:2")
///     .build()?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct OciSource {
    store: Option<Store>,
    lock_file: Option<PathBuf>,
    keys: Mutex<KeyRing>,
}

impl OciSource {
    /// Tools from the store at `store` (none: every reference is refused), tags through the
    /// lock file at `lock_file` (usually the workspace's [`LOCK_FILE`](crate::LOCK_FILE); none:
    /// only `@sha256:` references load).
    pub fn new(store: Option<PathBuf>, lock_file: Option<PathBuf>) -> OciSource {
        OciSource {
            store: store.map(Store::new),
            lock_file,
            keys: Mutex::new(KeyRing::default()),
        }
    }

    /// [`OciSource::new`] with the workspace's lock file, `WORKSPACE/toolcell.lock`.
    pub fn for_workspace(store: Option<PathBuf>, workspace: &Path) -> OciSource {
        OciSource::new(store, Some(workspace.join(crate::LOCK_FILE)))
    }
}

impl ComponentSource for OciSource {
    fn load(&self, reference: &str) -> Result<SourcedComponent, SourceError> {
        let reference = ToolRef::parse(reference)?;
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| "no store directory (set $TOOLCELL_STORE)".to_owned())?;
        let lock = self.lock_file.as_ref().map(Lock::open).transpose()?;
        let stored = crate::load(&reference, store, lock.as_ref())?;
        Ok(SourcedComponent {
            source: stored.source,
            digest: stored.digest,
            bytes: stored.bytes,
        })
    }

    fn check_signed(
        &self,
        digest: &str,
        required: &[&Signer],
        trust_root: Option<&Path>,
    ) -> Result<Vec<String>, SourceError> {
        let store = self
            .store
            .as_ref()
            .ok_or_else(|| "no store directory".to_owned())?;
        let signatures = store.signatures(digest)?;
        let mut keys = toolcell::sync::lock(&self.keys);
        let (trusted, identities, root) = keys.read(required, trust_root)?;
        let signers = Signers {
            keys: &trusted,
            identities: &identities,
            root,
        };
        crate::signing::signers(digest, &signatures, signers).map_err(SourceError::new)
    }

    fn protected_files(&self) -> Vec<PathBuf> {
        self.lock_file.iter().cloned().collect()
    }
}

/// The public keys and the trust root a build's policy names, each read once.
#[derive(Debug, Default)]
struct KeyRing {
    keys: HashMap<PathBuf, TrustedKey>,
    root: Option<TrustRoot>,
}

/// The keys, identities and trust root a tool's signature is checked against.
type Required<'a> = (
    Vec<&'a TrustedKey>,
    Vec<&'a Identity>,
    Option<&'a TrustRoot>,
);

impl KeyRing {
    /// The keys and identities among `signers`, and the trust root at `root` if an identity
    /// needs it; files are read now if not before.
    fn read<'a>(
        &'a mut self,
        signers: &[&'a Signer],
        root: Option<&Path>,
    ) -> Result<Required<'a>, String> {
        let mut identities = Vec::new();
        for signer in signers {
            match signer {
                Signer::Key(path) if !self.keys.contains_key(path) => {
                    let key = TrustedKey::read(path)?;
                    self.keys.insert(path.clone(), key);
                }
                Signer::Key(_) => {}
                Signer::Identity(identity) => identities.push(identity),
                // A kind of signer this source cannot check: never taken as checked.
                other => return Err(format!("a signer this build cannot check: {other}")),
            }
        }
        if !identities.is_empty() && self.root.is_none() {
            // The policy's parser refuses an identity without a trust root.
            let path = root.ok_or("a keyless signer needs [registry] trust_root")?;
            self.root = Some(TrustRoot::read(path)?);
        }
        let keys = signers
            .iter()
            .filter_map(|signer| match signer {
                Signer::Key(path) => self.keys.get(path),
                _ => None,
            })
            .collect();
        let root = if identities.is_empty() {
            None
        } else {
            self.root.as_ref()
        };
        Ok((keys, identities, root))
    }
}

impl From<crate::OciError> for SourceError {
    fn from(error: crate::OciError) -> SourceError {
        SourceError::new(error)
    }
}
