//! Where pulled tools live: a content-addressed store, and the workspace's lock file.

use crate::OciError;
use crate::{MAX_MANIFEST_BYTES, check_digest, digest_of};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The longest lock file read: thousands of tools.
pub const MAX_LOCK_FILE_BYTES: u64 = 1 << 20;

/// The largest signature record kept per manifest (its signatures' payloads and annotations).
pub const MAX_SIGNATURES_FILE_BYTES: u64 = 1 << 20;

/// A content-addressed store: `blobs/sha256/HEX` holds bytes whose sha256 is HEX (manifests
/// and components), `signatures/sha256/HEX.json` the cosign signatures found for the manifest
/// HEX. A blob is written to a temporary file, checked, and renamed into place: a reader never
/// sees part of one, and what is there has been checked. It is checked again when read.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// The store at `root` (made when first written).
    pub fn new(root: impl Into<PathBuf>) -> Store {
        Store { root: root.into() }
    }

    /// `$TOOLCELL_STORE`, else `toolcell/store` in the user's local data directory.
    pub fn default_dir() -> Option<PathBuf> {
        std::env::var_os("TOOLCELL_STORE")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .or_else(|| dirs::data_local_dir().map(|dir| dir.join("toolcell").join("store")))
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn blob_path(&self, digest: &str) -> Result<PathBuf, OciError> {
        check_digest(digest)?;
        let hex = &digest["sha256:".len()..];
        Ok(self.root.join("blobs").join("sha256").join(hex))
    }

    fn signatures_path(&self, digest: &str) -> Result<PathBuf, OciError> {
        check_digest(digest)?;
        let hex = &digest["sha256:".len()..];
        Ok(self
            .root
            .join("signatures")
            .join("sha256")
            .join(format!("{hex}.json")))
    }

    /// Whether the blob `digest` is stored.
    pub fn has(&self, digest: &str) -> bool {
        self.blob_path(digest).is_ok_and(|path| path.is_file())
    }

    /// The blob `digest`, at most `max` bytes, checked against its digest.
    pub fn read(&self, digest: &str, max: u64) -> Result<Vec<u8>, OciError> {
        let path = self.blob_path(digest)?;
        let bytes = toolcell::hostfs::read_bounded(&path, max)
            .map_err(|why| OciError::local(&path, format!("{digest} in the store: {why}")))?;
        if digest_of(&bytes) != digest {
            return Err(OciError::local(
                &path,
                format!("{digest} in the store does not match its digest: it was changed"),
            ));
        }
        Ok(bytes)
    }

    /// The image manifest `digest`.
    pub fn manifest(
        &self,
        digest: &str,
    ) -> Result<oci_client::manifest::OciImageManifest, OciError> {
        let bytes = self.read(digest, MAX_MANIFEST_BYTES as u64)?;
        serde_json::from_slice(&bytes).map_err(|error| {
            OciError::local(
                &self.blob_path(digest).unwrap_or_default(),
                format!("the manifest {digest}: {error}"),
            )
        })
    }

    /// Keep `bytes` as the blob `digest`, after checking they are.
    pub fn write(&self, digest: &str, bytes: &[u8]) -> Result<(), OciError> {
        let path = self.blob_path(digest)?;
        let actual = digest_of(bytes);
        if actual != digest {
            return Err(OciError::local(
                &path,
                format!("not stored: the bytes are {actual}, not {digest}"),
            ));
        }
        write_atomic(&path, bytes)
            .map_err(|error| OciError::local(&path, format!("storing {digest}: {error}")))
    }

    /// The signatures recorded for the manifest `digest` (none if none were found).
    pub fn signatures(
        &self,
        digest: &str,
    ) -> Result<Vec<crate::signing::StoredSignature>, OciError> {
        let path = self.signatures_path(digest)?;
        match toolcell::hostfs::read_bounded(&path, MAX_SIGNATURES_FILE_BYTES) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
                OciError::local(&path, format!("the signatures of {digest}: {error}"))
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(error) => Err(OciError::local(
                &path,
                format!("the signatures of {digest}: {error}"),
            )),
        }
    }

    /// Add `signatures` to those recorded for the manifest `digest`: the ones recorded before
    /// stay first (a registry that now serves fewer, or junk, does not erase them), at most
    /// [`MAX_SIGNATURES`](crate::signing::MAX_SIGNATURES) in all and at most
    /// `MAX_SIGNATURES_FILE_BYTES` written, so what is written can always be read back.
    pub fn write_signatures(
        &self,
        digest: &str,
        signatures: &[crate::signing::StoredSignature],
    ) -> Result<(), OciError> {
        let path = self.signatures_path(digest)?;
        let mut kept = self.signatures(digest).unwrap_or_default();
        // Two bytes for the brackets; one comma between each.
        let mut size = 2 + kept
            .iter()
            .map(|signature| serde_json::to_vec(signature).map_or(0, |text| text.len() + 1))
            .sum::<usize>();
        for signature in signatures {
            if kept.len() >= crate::signing::MAX_SIGNATURES {
                break;
            }
            let length = serde_json::to_vec(signature).map_or(usize::MAX, |text| text.len());
            if kept.contains(signature) || (size + length + 1) as u64 > MAX_SIGNATURES_FILE_BYTES {
                continue;
            }
            size += length + 1;
            kept.push(signature.clone());
        }
        let text = serde_json::to_vec(&kept).map_err(|error| OciError::local(&path, error))?;
        write_atomic(&path, &text).map_err(|error| {
            OciError::local(
                &path,
                format!("storing the signatures of {digest}: {error}"),
            )
        })
    }
}

/// Write `bytes` to a fresh temporary file beside `path`, flush it to disk, and rename it into
/// place. On any failure (a full disk, say) the temporary file is removed and `path` is as it was.
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("no directory"))?;
    std::fs::create_dir_all(dir)?;
    let suffix = toolcell::digest::hex(&toolcell::digest::random::<8>()?);
    let temporary = dir.join(format!(
        ".{}.{suffix}.tmp",
        path.file_name()
            .map(|name| name.to_string_lossy())
            .unwrap_or_default()
    ));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// One locked tag.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// `REGISTRY/REPOSITORY:TAG`.
    pub reference: String,
    /// The manifest's digest the tag resolved to.
    pub digest: String,
    /// The component layer's digest.
    pub component: String,
    /// The keys whose signatures verified when it was pulled (`sha256:` of each public key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signers: Vec<String>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LockFile {
    #[serde(default)]
    tool: Vec<LockEntry>,
}

/// `toolcell.lock`: the digest each pulled tag resolved to. `toolcell pull` writes it; loading
/// a tag reads it. Check it in beside the policy, as a `Cargo.lock`.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
    file: LockFile,
}

/// What the lock file starts with.
const LOCK_HEADER: &str = "# toolcell.lock: the digest each pulled tool's tag resolved to.\n\
# Written by `toolcell pull`; `toolcell pull --update REF` moves a tag. Check it in.\n\n";

impl Lock {
    /// The lock file at `path` (empty if there is none).
    pub fn open(path: impl Into<PathBuf>) -> Result<Lock, OciError> {
        let path = path.into();
        let file = match toolcell::hostfs::read_bounded(&path, MAX_LOCK_FILE_BYTES) {
            Ok(bytes) => {
                let text =
                    String::from_utf8(bytes).map_err(|_| OciError::local(&path, "not UTF-8"))?;
                toml::from_str(&text).map_err(|error| OciError::local(&path, error))?
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => LockFile::default(),
            Err(error) => return Err(OciError::local(&path, error)),
        };
        Ok(Lock { path, file })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The entry of `reference` (`REGISTRY/REPOSITORY:TAG`), if it is locked.
    pub fn get(&self, reference: &str) -> Option<&LockEntry> {
        self.file
            .tool
            .iter()
            .find(|entry| entry.reference == reference)
    }

    /// Every entry.
    pub fn entries(&self) -> &[LockEntry] {
        &self.file.tool
    }

    /// Lock `entry`'s reference to it (replacing what was there).
    pub fn set(&mut self, entry: LockEntry) {
        match self
            .file
            .tool
            .iter_mut()
            .find(|known| known.reference == entry.reference)
        {
            Some(known) => *known = entry,
            None => self.file.tool.push(entry),
        }
        self.file.tool.sort_by(|a, b| a.reference.cmp(&b.reference));
    }

    /// Write the lock file (whole, atomically).
    pub fn save(&self) -> Result<(), OciError> {
        let body =
            toml::to_string(&self.file).map_err(|error| OciError::local(&self.path, error))?;
        write_atomic(&self.path, format!("{LOCK_HEADER}{body}").as_bytes())
            .map_err(|error| OciError::local(&self.path, format!("writing: {error}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_keeps_only_what_matches_its_digest_and_notices_a_change() {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::new(dir.path());
        let digest = digest_of(b"component");
        assert!(store.write(&digest, b"other bytes").is_err());
        assert!(!store.has(&digest), "nothing kept");
        store.write(&digest, b"component").expect("write");
        assert_eq!(store.read(&digest, 100).expect("read"), b"component");
        assert!(store.read(&digest, 3).is_err(), "bounded");
        let path = store.blob_path(&digest).expect("path");
        std::fs::write(&path, b"changed").expect("tamper");
        let refused = store.read(&digest, 100).expect_err("changed");
        assert!(refused.to_string().contains("was changed"), "{refused}");
        assert!(store.read("sha256:../../x", 100).is_err());
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(path.parent().expect("dir"))
            .expect("list")
            .map(|entry| entry.expect("entry").file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn the_lock_round_trips_and_replaces_an_entry() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("toolcell.lock");
        let mut lock = Lock::open(&path).expect("empty");
        assert!(lock.entries().is_empty());
        let entry = |digest: &str| LockEntry {
            reference: "127.0.0.1:5000/echo:1".to_owned(),
            digest: digest.to_owned(),
            component: digest_of(b"c"),
            signers: Vec::new(),
        };
        lock.set(entry(&digest_of(b"one")));
        lock.set(entry(&digest_of(b"two")));
        lock.save().expect("save");
        let again = Lock::open(&path).expect("read");
        assert_eq!(again.entries(), &[entry(&digest_of(b"two"))]);
        std::fs::write(&path, "[[tool]]\nreference = 1\n").expect("corrupt");
        assert!(Lock::open(&path).is_err());
    }
}
