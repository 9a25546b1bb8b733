//! The identities of a workspace's credential files: so that a hard link to one, planted under
//! an innocent name inside a grant, is that file.
//!
//! The deny-read list matches names. A hard link is the same file under another name, and
//! finding every name a file has means searching the whole file system, so instead the places
//! credentials are kept are looked at: what the list hides at the top of the workspace (and of
//! the user's home, when the workspace holds it), in the directories it hides there
//! (`.ssh`, `.aws`, `.gnupg`, ... whole), and in the directories its places pass through
//! (`.config` for `.config/gcloud`). Every file found there with more than one name is noted
//! by device and inode; an open of a file with more than one name is refused when it is one of
//! them. Looked at again at most every [`SECRET_SCAN_EVERY`], and bounded by
//! [`MAX_SECRET_SCAN_ENTRIES`]. A hard link to a credential kept anywhere else (a project's
//! `.env` deep in the tree) is not found this way: that name's rules are its own.

use crate::policy::files::DenyRead;
use std::collections::HashSet;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a scan of a workspace's credential places is used before it is made again: a
/// link planted a moment ago is found within this.
pub const SECRET_SCAN_EVERY: Duration = Duration::from_secs(5);

/// The most entries one scan looks at: a home directory's credential places hold tens of
/// files; a scan past this stops (what it found so far is kept).
pub const MAX_SECRET_SCAN_ENTRIES: usize = 4096;

/// How deep a scan goes into a hidden directory (`.gnupg/private-keys-v1.d/...`).
const MAX_SECRET_SCAN_DEPTH: usize = 6;

/// Identities (device, inode) of credential files that have other names.
pub(crate) type Identities = Arc<HashSet<(u64, u64)>>;

/// One workspace's last scan.
#[derive(Debug, Default)]
pub(crate) struct SecretScan {
    last: Mutex<Option<(Instant, Identities)>>,
}

impl SecretScan {
    /// The identities of the credential files under `root` with more than one name, under
    /// `deny`'s patterns: from the last scan if it is recent, else scanned now.
    pub(crate) fn identities(&self, root: &Path, deny: &DenyRead) -> Identities {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, found)) = last.as_ref()
            && at.elapsed() < SECRET_SCAN_EVERY
        {
            return Arc::clone(found);
        }
        let found = Arc::new(scan(root, deny));
        *last = Some((Instant::now(), Arc::clone(&found)));
        found
    }
}

/// The scan: `root`, and the user's home when it lies inside `root`.
fn scan(root: &Path, deny: &DenyRead) -> HashSet<(u64, u64)> {
    let mut found = HashSet::new();
    let mut budget = MAX_SECRET_SCAN_ENTRIES;
    let mut tops = vec![root.to_owned()];
    if let Some(home) = dirs::home_dir().and_then(|home| home.canonicalize().ok())
        && home != root
        && home.starts_with(root)
    {
        tops.push(home);
    }
    for top in tops {
        look(&top, &top, deny, false, 0, &mut budget, &mut found);
    }
    found
}

/// Look at the entries of `dir` (under `top`): a hidden one (by `deny`, or everything when
/// `hidden`) is noted if it is a file with other names, and searched whole if a directory; a
/// directory a place of several parts passes through (`.config`) is looked into.
fn look(
    top: &Path,
    dir: &Path,
    deny: &DenyRead,
    hidden: bool,
    depth: usize,
    budget: &mut usize,
    found: &mut HashSet<(u64, u64)>,
) {
    if depth > MAX_SECRET_SCAN_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        let path: PathBuf = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let relative = path.strip_prefix(top).unwrap_or(&path);
        let is_hidden = hidden || deny.hiding(relative, Some(&path)).is_some();
        if meta.is_file() {
            if is_hidden && meta.nlink() > 1 {
                found.insert((meta.dev(), meta.ino()));
            }
        } else if meta.is_dir() {
            if is_hidden {
                look(top, &path, deny, true, depth + 1, budget, found);
            } else if deny.passes_through(relative) {
                look(top, &path, deny, false, depth + 1, budget, found);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_with_another_name_is_found_by_identity() {
        let temp = tempfile::tempdir().expect("temp dir");
        let root = temp.path().canonicalize().expect("canonical");
        for (path, text) in [
            (".ssh/id_rsa", "KEY"),
            (".aws/credentials", "AWS"),
            (".config/gcloud/credentials.db", "GCLOUD"),
            (".config/nvim/init.lua", "vim"),
            ("notes/plain.txt", "plain"),
        ] {
            std::fs::create_dir_all(root.join(path).parent().expect("parent")).expect("mkdir");
            std::fs::write(root.join(path), text).expect("write");
        }
        let link = |from: &str, to: &str| {
            std::fs::hard_link(root.join(from), root.join(to)).expect("link");
        };
        link(".ssh/id_rsa", "notes/innocent");
        link(".aws/credentials", "notes/aws");
        link(".config/gcloud/credentials.db", "notes/gcloud");
        link("notes/plain.txt", "notes/plain-too");
        let found = SecretScan::default().identities(&root, &DenyRead::default());
        let id = |path: &str| {
            let meta = std::fs::metadata(root.join(path)).expect("stat");
            (meta.dev(), meta.ino())
        };
        for hidden in ["notes/innocent", "notes/aws", "notes/gcloud"] {
            assert!(found.contains(&id(hidden)), "{hidden}");
        }
        assert!(!found.contains(&id("notes/plain-too")));
        assert!(!found.contains(&id(".config/nvim/init.lua")));
    }
}
