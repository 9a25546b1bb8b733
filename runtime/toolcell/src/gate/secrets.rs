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
//! them. Looked at again at most every [`SECRET_SCAN_EVERY`].
//!
//! Each hidden place is looked at breadth first, within its own budget of
//! [`MAX_SECRET_SCAN_ENTRIES_PER_PLACE`] (its own files before its subdirectories', so a
//! credential at the top of `.kube` is found however large `.kube/cache` grows, and one large
//! place cannot use up another's look), and the whole scan within [`MAX_SECRET_SCAN_ENTRIES`].
//! Caches inside a place (a directory named `cache` or `http-cache`: `kubectl`'s discovery
//! cache holds thousands of files, none a credential) are not looked into. A scan cut short
//! fails closed: while it stands, every file with more than one name in the workspace is
//! refused, and the server says so once on stderr. A hard link to a credential kept anywhere
//! else (a project's `.env` deep in the tree) is not found this way: that name's rules are its
//! own.

use crate::policy::files::DenyRead;
use std::collections::{HashSet, VecDeque};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a scan of a workspace's credential places is used before it is made again: a
/// link planted a moment ago is found within this.
pub const SECRET_SCAN_EVERY: Duration = Duration::from_secs(5);

/// The most entries one hidden place (`.ssh`, `.aws`, `.kube`, ...) is looked at for: such a
/// place holds tens of files, and its credentials are at its top, looked at first.
pub const MAX_SECRET_SCAN_ENTRIES_PER_PLACE: usize = 1024;

/// The most entries one scan looks at, over every place: a bound on what one look costs (a few
/// milliseconds) on a home with many places.
pub const MAX_SECRET_SCAN_ENTRIES: usize = 16384;

/// How deep a scan goes into a hidden directory (`.gnupg/private-keys-v1.d/...`).
const MAX_SECRET_SCAN_DEPTH: usize = 6;

/// Directories inside a hidden place that hold caches, not credentials: not looked into.
const CACHE_DIRECTORY_NAMES: &[&str] = &["cache", "http-cache"];

/// What a scan found: the identities (device, inode) of credential files that have other
/// names, and whether it was cut short (then every file with other names is refused).
#[derive(Debug, Default)]
pub(crate) struct Credentials {
    identities: HashSet<(u64, u64)>,
    cut: bool,
}

impl Credentials {
    /// Whether nothing can be refused by it (no identity noted, and the scan was whole).
    pub(crate) fn is_empty(&self) -> bool {
        self.identities.is_empty() && !self.cut
    }

    /// Whether a file with more than one name and this identity is refused: it is one of the
    /// credentials found, or the scan was cut short and it may be one.
    pub(crate) fn covers(&self, device: u64, inode: u64) -> bool {
        self.cut || self.identities.contains(&(device, inode))
    }
}

/// A scan's findings, shared by the calls that use it.
pub(crate) type Identities = Arc<Credentials>;

/// One workspace's last scan.
#[derive(Debug, Default)]
pub(crate) struct SecretScan {
    last: Mutex<Option<(Instant, Identities)>>,
    /// Whether a cut scan was said on stderr (once per workspace).
    said: AtomicBool,
}

impl SecretScan {
    /// The identities of the credential files under `root` with more than one name, under
    /// `deny`'s patterns: from the last scan if it is recent, else scanned now.
    pub(crate) fn identities(&self, root: &Path, deny: &DenyRead) -> Identities {
        let mut last = crate::sync::lock(&self.last);
        if let Some((at, found)) = last.as_ref()
            && at.elapsed() < SECRET_SCAN_EVERY
        {
            return Arc::clone(found);
        }
        let found = Arc::new(scan(root, deny));
        if found.cut && !self.said.swap(true, Ordering::Relaxed) {
            eprintln!(
                "toolcell: the credential places under {} hold more than {} entries: every \
                 file there with more than one name (a hard link) is refused to tools",
                crate::approval::shown_on_a_terminal(&root.display().to_string()),
                MAX_SECRET_SCAN_ENTRIES_PER_PLACE
            );
        }
        *last = Some((Instant::now(), Arc::clone(&found)));
        found
    }
}

/// The scan: `root`, and the user's home when it lies inside `root`.
fn scan(root: &Path, deny: &DenyRead) -> Credentials {
    let mut found = Credentials::default();
    let mut total = MAX_SECRET_SCAN_ENTRIES;
    let mut tops = vec![root.to_owned()];
    if let Some(home) = dirs::home_dir().and_then(|home| home.canonicalize().ok())
        && home != root
        && home.starts_with(root)
    {
        tops.push(home);
    }
    for top in tops {
        look(&top, &top, deny, 0, &mut total, &mut found);
    }
    found
}

/// Look at the entries of `dir` (under `top`), outside any hidden place: a hidden one (by
/// `deny`) is noted if it is a file with other names, and looked at whole
/// ([`look_at_place`]) if a directory; a directory a place of several parts passes through
/// (`.config`) is looked into.
fn look(
    top: &Path,
    dir: &Path,
    deny: &DenyRead,
    depth: usize,
    total: &mut usize,
    found: &mut Credentials,
) {
    if depth > MAX_SECRET_SCAN_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if *total == 0 {
            found.cut = true;
            return;
        }
        *total -= 1;
        let path: PathBuf = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let relative = path.strip_prefix(top).unwrap_or(&path);
        let hidden = deny.hiding(relative, Some(&path)).is_some();
        if meta.is_file() {
            if hidden && meta.nlink() > 1 {
                found.identities.insert((meta.dev(), meta.ino()));
            }
        } else if meta.is_dir() {
            if hidden {
                look_at_place(&path, depth + 1, total, found);
            } else if deny.passes_through(relative) {
                look(top, &path, deny, depth + 1, total, found);
            }
        }
    }
}

/// Look at a hidden directory whole, breadth first, within its own budget: every file with
/// other names is noted.
fn look_at_place(place: &Path, depth: usize, total: &mut usize, found: &mut Credentials) {
    let mut budget = MAX_SECRET_SCAN_ENTRIES_PER_PLACE;
    let mut queue = VecDeque::from([(place.to_owned(), depth)]);
    while let Some((dir, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if budget == 0 || *total == 0 {
                found.cut = true;
                return;
            }
            budget -= 1;
            *total -= 1;
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_file() {
                if meta.nlink() > 1 {
                    found.identities.insert((meta.dev(), meta.ino()));
                }
            } else if meta.is_dir()
                && depth < MAX_SECRET_SCAN_DEPTH
                && !CACHE_DIRECTORY_NAMES
                    .iter()
                    .any(|cache| entry.file_name().eq_ignore_ascii_case(cache))
            {
                queue.push_back((path, depth + 1));
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
        let covers = |path: &str| {
            let (device, inode) = id(path);
            found.covers(device, inode)
        };
        for hidden in ["notes/innocent", "notes/aws", "notes/gcloud"] {
            assert!(covers(hidden), "{hidden}");
        }
        assert!(!covers("notes/plain-too"));
        assert!(!covers(".config/nvim/init.lua"));
    }

    /// A place holding more than its budget (a large `.kube/cache`, and a large directory that
    /// is no cache) neither hides another place's credentials nor lets a link through: its
    /// own top is looked at first, a cache is skipped, and a place cut short refuses every
    /// file with other names.
    #[test]
    fn a_large_place_neither_hides_another_nor_lets_a_link_through() {
        let temp = tempfile::tempdir().expect("temp dir");
        let root = temp.path().canonicalize().expect("canonical");
        let make = |path: &str| {
            std::fs::create_dir_all(root.join(path).parent().expect("parent")).expect("mkdir");
            std::fs::write(root.join(path), path).expect("write");
        };
        make(".kube/config");
        for n in 0..(MAX_SECRET_SCAN_ENTRIES_PER_PLACE + 10) {
            make(&format!(".kube/cache/discovery/f{n}.json"));
        }
        make(".aws/credentials");
        make("notes/plain.txt");
        for (from, to) in [
            (".aws/credentials", "notes/aws"),
            (".kube/config", "notes/kube"),
            ("notes/plain.txt", "notes/plain-too"),
        ] {
            std::fs::hard_link(root.join(from), root.join(to)).expect("link");
        }
        let found = SecretScan::default().identities(&root, &DenyRead::default());
        let covers = |path: &str| {
            let meta = std::fs::metadata(root.join(path)).expect("stat");
            found.covers(meta.dev(), meta.ino())
        };
        assert!(covers("notes/aws") && covers("notes/kube"));
        assert!(
            !covers("notes/plain-too"),
            "the cache was skipped: the scan is whole"
        );

        // A place past its budget that is no cache: cut short, closed.
        for n in 0..(MAX_SECRET_SCAN_ENTRIES_PER_PLACE + 10) {
            make(&format!(".gnupg/many/f{n}"));
        }
        let found = SecretScan::default().identities(&root, &DenyRead::default());
        let meta = std::fs::metadata(root.join("notes/plain-too")).expect("stat");
        assert!(found.covers(meta.dev(), meta.ino()), "cut short: refused");
        let meta = std::fs::metadata(root.join("notes/aws")).expect("stat");
        assert!(found.covers(meta.dev(), meta.ino()));
    }
}
