//! The host's own files: every file and directory the host (the command line, a server, an
//! embedding) reads or writes for itself, in one registry per runtime. No tool reads or writes
//! them, whatever a policy says: the policy file, the audit file and its companions, the tokens
//! and OAuth files and their key sets, tenant policies, password, key and CA files, the compile
//! cache and its key, the tools directories, and whatever a later flag adds.
//!
//! A file is registered where it is opened: the host reads its own files through
//! [`OwnFiles::read`], which records the file's path and its identity (device and inode) as it
//! reads it, so that a hard link to it under another name is that file too; what the host
//! writes (the audit) or only names (a directory) is registered with [`OwnFiles::register`].
//! A file's companions (`FILE.` and more in its directory: an audit file's head, rotated
//! copies and signatures) and everything under a registered directory are the host's as well.

use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// One of the host's own files (or directories), as registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnFile {
    /// Absolute, links resolved (a file that did not exist yet: through its directory).
    path: PathBuf,
    /// Device and inode of the file when it was registered, if it existed and was a file.
    identity: Option<(u64, u64)>,
}

impl OwnFile {
    /// The file's path, absolute.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its device and inode when it was registered, if it existed and was a file.
    pub fn identity(&self) -> Option<(u64, u64)> {
        self.identity
    }
}

/// The registry of one runtime's own files: cheap to clone (every clone is the same registry),
/// read on every call's grants as a snapshot ([`OwnFiles::snapshot`]).
#[derive(Debug, Clone, Default)]
pub struct OwnFiles {
    files: Arc<RwLock<Arc<[OwnFile]>>>,
}

/// How many identities one path keeps: a file the operator replaces (an editor's save, a
/// reload) is a new inode each time, and the last few are protected by identity; older ones no
/// longer hold what the path holds now. Bounds a registry that reloads would otherwise grow.
pub const MAX_IDENTITIES_PER_FILE: usize = 8;

/// How many companions of one file already there are registered by identity when it is
/// (`OwnFiles::register_companions`): an audit rotated daily for years keeps about a thousand
/// copies; each registration copies the registry, so the bound keeps start-up linear.
pub const MAX_COMPANIONS_REGISTERED: usize = 1024;

impl OwnFiles {
    /// An empty registry.
    pub fn new() -> OwnFiles {
        OwnFiles::default()
    }

    /// Register `path` (absolute, or relative to the current directory; a file, a directory, or
    /// a file about to be made) as the host's own. A file that exists is registered by its
    /// identity too. Registering a path again records its identity again (a file replaced since
    /// keeps both).
    pub fn register(&self, path: &Path) {
        let identity = std::fs::metadata(path)
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|meta| (meta.dev(), meta.ino()));
        self.add(OwnFile {
            path: absolute(path),
            identity,
        });
    }

    /// Register every companion of `path` that exists now (`FILE.` and more in its
    /// directory: an audit's rotated copies and heads), each by its identity, at most
    /// `MAX_COMPANIONS_REGISTERED` of them (the newest, by name); the rest are the host's by
    /// their names.
    pub fn register_companions(&self, path: &Path) {
        let path = absolute(path);
        let (Some(dir), Some(own)) = (path.parent(), path.file_name()) else {
            return;
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut prefix = own.to_owned();
        prefix.push(".");
        let prefix = prefix.as_encoded_bytes().to_vec();
        let mut companions: Vec<PathBuf> = entries
            .flatten()
            .filter(|entry| entry.file_name().as_encoded_bytes().starts_with(&prefix))
            .map(|entry| entry.path())
            .collect();
        // `FILE.12` after `FILE.9`: the longest names, then the greatest, are the newest.
        companions.sort_by_key(|path| {
            let name = path.as_os_str().as_encoded_bytes().to_vec();
            (std::cmp::Reverse(name.len()), std::cmp::Reverse(name))
        });
        for companion in companions.iter().take(MAX_COMPANIONS_REGISTERED) {
            self.register(companion);
        }
    }

    /// The bytes of the host's own file at `path`, at most `max` of them (a longer file, or
    /// anything but a regular file, is an error), registered as it is read: by its path, and by
    /// the identity of the very file that was opened.
    pub fn read(&self, path: &Path, max: u64) -> io::Result<Vec<u8>> {
        let file = super::read::open_regular(path)?;
        let meta = file.metadata()?;
        self.add(OwnFile {
            path: absolute(path),
            identity: Some((meta.dev(), meta.ino())),
        });
        super::read::read_opened(file, max)
    }

    /// [`OwnFiles::read`], as UTF-8 text.
    pub fn read_to_string(&self, path: &Path, max: u64) -> io::Result<String> {
        String::from_utf8(self.read(path, max)?)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
    }

    /// Whether `path` (absolute, links resolved) is one of these files, a companion of one, or
    /// under one of these directories.
    pub fn contains_path(&self, path: &Path) -> bool {
        covers_path(&self.snapshot(), path)
    }

    /// The files as they are now, for one call's checks.
    pub fn snapshot(&self) -> Arc<[OwnFile]> {
        Arc::clone(&self.files.read().unwrap_or_else(|p| p.into_inner()))
    }

    fn add(&self, file: OwnFile) {
        let mut files = self.files.write().unwrap_or_else(|p| p.into_inner());
        if files.contains(&file) {
            return;
        }
        let mut grown = files.to_vec();
        let same_path = grown.iter().filter(|known| known.path == file.path).count();
        if same_path >= MAX_IDENTITIES_PER_FILE
            && let Some(oldest) = grown.iter().position(|known| known.path == file.path)
        {
            grown.remove(oldest);
        }
        grown.push(file);
        *files = grown.into();
    }
}

/// Whether `target` (absolute, links resolved) is one of `files`, a companion of one, or under
/// one of them (a directory).
pub(crate) fn covers_path(files: &[OwnFile], target: &Path) -> bool {
    files
        .iter()
        .any(|file| target.starts_with(&file.path) || is_companion(target, &file.path))
}

/// Whether a file with metadata `found` is one of `files` under whatever name (a hard link):
/// the same device and inode as one registered.
pub(crate) fn covers_identity(files: &[OwnFile], found: &std::fs::Metadata) -> bool {
    found.is_file()
        && files
            .iter()
            .any(|file| file.identity == Some((found.dev(), found.ino())))
}

/// Whether the open `file` is one of `files` (by identity); a file whose identity cannot be
/// read is taken for one.
pub(crate) fn covers_file(files: &[OwnFile], file: &std::fs::File) -> bool {
    match file.metadata() {
        Ok(meta) => covers_identity(files, &meta),
        Err(_) => true,
    }
}

/// Whether `target` is a companion of the file `file`: in the same directory, named `FILE.`
/// and more (an audit file's head `FILE.head`, its rotated copies `FILE.1` and their heads,
/// its signed head `FILE.head.sig`; a policy's backup). They are the host's with it.
pub(crate) fn is_companion(target: &Path, file: &Path) -> bool {
    let (Some(name), Some(own)) = (
        target.file_name().and_then(|name| name.to_str()),
        file.file_name().and_then(|name| name.to_str()),
    ) else {
        return false;
    };
    target.parent() == file.parent()
        && name
            .strip_prefix(own)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// `path` made absolute with its links resolved; a file that does not exist yet (an audit file
/// about to be made) through its directory's canonical path.
fn absolute(path: &Path) -> PathBuf {
    std::fs::canonicalize(path)
        .ok()
        .or_else(|| {
            let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
            let parent = match parent {
                Some(parent) => std::fs::canonicalize(parent).ok()?,
                None => std::env::current_dir().ok()?,
            };
            Some(parent.join(path.file_name()?))
        })
        .or_else(|| std::path::absolute(path).ok())
        .unwrap_or_else(|| path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_own_file_is_known_by_path_companion_and_identity() {
        let temp = tempfile::tempdir().expect("temp dir");
        let root = std::fs::canonicalize(temp.path()).expect("canonical");
        std::fs::write(root.join("password"), "hunter2").expect("write");
        std::fs::create_dir(root.join("tools")).expect("mkdir");
        let own = OwnFiles::new();
        assert_eq!(
            own.read_to_string(&root.join("password"), 100)
                .expect("read"),
            "hunter2"
        );
        own.register(&root.join("tools"));
        own.register(&root.join("audit.jsonl"));
        let files = own.snapshot();
        for (path, expected) in [
            ("password", true),
            ("password.old", true),
            ("passwords", false),
            ("tools/x.wasm", true),
            ("audit.jsonl", true),
            ("audit.jsonl.head", true),
            ("notes.txt", false),
        ] {
            assert_eq!(covers_path(&files, &root.join(path)), expected, "{path}");
        }
        // A hard link elsewhere is the same file.
        std::fs::create_dir(root.join("ws")).expect("mkdir");
        std::fs::hard_link(root.join("password"), root.join("ws/innocent")).expect("link");
        let meta = std::fs::metadata(root.join("ws/innocent")).expect("stat");
        assert!(covers_identity(&files, &meta));
        std::fs::write(root.join("ws/other"), "x").expect("write");
        let meta = std::fs::metadata(root.join("ws/other")).expect("stat");
        assert!(!covers_identity(&files, &meta));
        // A clone is the same registry.
        own.clone().register(&root.join("ws/later"));
        assert!(own.contains_path(&root.join("ws/later")));
    }
}
