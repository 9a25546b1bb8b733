//! What no tool may touch whatever a policy's rules say: paths no tool may write, files no tool
//! may read, and the largest file a tool may be handed to read.
//!
//! - **Protected from writing**: anything in a `.git` (its config and hooks are code the user's
//!   git runs) or a `.toolcell` (saved rules grant authority; a planted rule would approve
//!   later calls) at any depth, the policy file and the audit file when they lie in the
//!   workspace, and the policy's own `[files] protected` list (a file with other names is
//!   handed over as a copy, so a hard link to a protected file is not written through it:
//!   `gate/staging.rs`). Directories are never granted for writing: a tool writes the files it
//!   names.
//!   What a write grant hands over can be read, so it must pass the read rules too.
//! - **Denied reading**: any path with a part that matches [`DEFAULT_DENY_READ`] (or the
//!   policy's `[files] deny_read`, which replaces it): `.env` files, private keys, credential
//!   files, `.ssh`. The gate refuses a grant that names one; and inside a directory a wasm
//!   tool is granted (`list_dir`, `glob`, `grep`), they are not there: not listed, and
//!   `no-entry` to whatever path names them, as written (`sub/../.env`) or as it resolves (a
//!   link to one) (`wasm/guest_fs.rs`). Names are what is matched: a hard link to a secret under
//!   an innocent name is that file. A native tool is handed the directory itself, and its
//!   grants bound it only as far as it uses them (`pipeline/native.rs`).
//! - **Largest read**: the policy's `[files] max_read_bytes`, checked on the file a read grant
//!   names.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Paths, relative to the workspace, that no tool may write.
pub const ALWAYS_PROTECTED: &[&str] = &[".git", ".toolcell"];

/// File name patterns (`*` matches any run of characters) that no tool may read by default.
pub const DEFAULT_DENY_READ: &[&str] = &[
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".ssh",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
];

/// The rules on files of one runtime (from the policy's `[files]` section, and the files the
/// host itself keeps).
#[derive(Debug, Clone)]
pub struct FileRules {
    /// Relative to the workspace, never written.
    pub(crate) protected: Vec<PathBuf>,
    /// Absolute paths never written nor read (the policy file, the audit file, the tokens
    /// files, the compile cache and its key, the tools directories), whatever the rules above
    /// say. Shared: every call's grants hold it (`wasm/guest_fs.rs`).
    pub(crate) protected_files: Arc<[PathBuf]>,
    /// Name patterns never read.
    pub(crate) deny_read: DenyRead,
    /// The largest file a read grant may name.
    pub(crate) max_read_bytes: Option<u64>,
}

impl Default for FileRules {
    fn default() -> Self {
        FileRules {
            protected: ALWAYS_PROTECTED.iter().map(PathBuf::from).collect(),
            protected_files: Arc::from(Vec::new()),
            deny_read: DenyRead::default(),
            max_read_bytes: None,
        }
    }
}

impl FileRules {
    /// These rules, also protecting the file at `path` (absolute, or relative to the current
    /// directory) from every tool's writes and reads.
    pub(crate) fn protecting(mut self, path: &Path) -> FileRules {
        // A file that does not exist yet (an audit file about to be made) is named through its
        // directory's canonical path.
        let absolute = std::fs::canonicalize(path)
            .ok()
            .or_else(|| {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty())?;
                Some(std::fs::canonicalize(parent).ok()?.join(path.file_name()?))
            })
            .or_else(|| std::path::absolute(path).ok())
            .unwrap_or_else(|| path.to_owned());
        let mut files = self.protected_files.to_vec();
        files.push(absolute);
        self.protected_files = files.into();
        self
    }
}

/// The name patterns no tool may read: the one matcher for the gate (a path a call names) and
/// the wasm sandbox (every path a guest names inside its preopens, every name it lists:
/// `wasm/guest_fs.rs`). Cheap to clone; by default [`DEFAULT_DENY_READ`].
#[derive(Debug, Clone)]
pub(crate) struct DenyRead(Arc<[String]>);

impl Default for DenyRead {
    /// [`DEFAULT_DENY_READ`], made once and shared: every call's grants start from it.
    fn default() -> Self {
        static DEFAULT: std::sync::LazyLock<DenyRead> = std::sync::LazyLock::new(|| {
            DenyRead(DEFAULT_DENY_READ.iter().map(|p| (*p).to_owned()).collect())
        });
        DEFAULT.clone()
    }
}

impl From<Vec<String>> for DenyRead {
    fn from(patterns: Vec<String>) -> Self {
        DenyRead(patterns.into())
    }
}

impl DenyRead {
    /// True when no name is denied (a policy's `deny_read = []`).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The pattern the single path part `name` matches, if any.
    pub(crate) fn matching(&self, name: &OsStr) -> Option<&str> {
        // ASCII case is folded: on a case-insensitive file system (macOS, a casefolded ext4,
        // a network share) `.ENV` opens `.env`, and hiding `.ENV` where it is another file
        // costs nothing that matters.
        let name = name.to_string_lossy().to_ascii_lowercase();
        self.0
            .iter()
            .find(|pattern| glob(&pattern.to_ascii_lowercase(), &name))
            .map(String::as_str)
    }

    /// The first part of `path` that a pattern matches, and the pattern. `.` and `..` are
    /// never matched: `sub/../.env` is caught by its `.env`.
    pub(crate) fn part_matching<'p>(&self, path: &'p Path) -> Option<(Cow<'p, str>, &str)> {
        path.components().find_map(|part| match part {
            Component::Normal(part) => self
                .matching(part)
                .map(|pattern| (part.to_string_lossy(), pattern)),
            _ => None,
        })
    }
}

/// True when `name` matches `pattern`, where `*` matches any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            let Some(mut remaining) = name.strip_prefix(prefix) else {
                return false;
            };
            let parts: Vec<&str> = rest.split('*').collect();
            let (last, middle) = parts.split_last().unwrap_or((&"", &[]));
            for part in middle {
                match remaining.find(part) {
                    Some(at) => remaining = &remaining[at + part.len()..],
                    None => return false,
                }
            }
            remaining.len() >= last.len() && remaining.ends_with(last)
        }
    }
}

/// Whether the open `file` is one of the `protected` files itself, under whatever name (a hard
/// link elsewhere): the same device and inode.
pub(crate) fn is_protected_file(protected: &[std::path::PathBuf], file: &std::fs::File) -> bool {
    match file.metadata() {
        Ok(opened) => is_protected_identity(protected, &opened),
        Err(_) => true,
    }
}

/// Whether a file with metadata `found` is one of the `protected` files (same device and
/// inode).
pub(crate) fn is_protected_identity(
    protected: &[std::path::PathBuf],
    found: &std::fs::Metadata,
) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    found.is_file()
        && protected.iter().any(|path| {
            std::fs::metadata(path).is_ok_and(|meta| {
                meta.is_file() && meta.dev() == found.dev() && meta.ino() == found.ino()
            })
        })
}

/// Whether the absolute path `target` is one of `protected`, a companion of one, or under one.
pub(crate) fn is_protected(protected: &[std::path::PathBuf], target: &Path) -> bool {
    protected
        .iter()
        .any(|file| target.starts_with(file) || is_companion(target, file))
}

/// Whether `target` is a companion of the protected file `file`: in the same directory, named
/// `FILE.` and more (an audit file's head `FILE.head`, its rotated copies `FILE.1` and their
/// heads, its signed head `FILE.head.sig`; a policy's backup). They are protected with it.
pub(crate) fn is_companion(target: &Path, file: &Path) -> bool {
    let (Some(name), Some(protected)) = (
        target.file_name().and_then(|name| name.to_str()),
        file.file_name().and_then(|name| name.to_str()),
    ) else {
        return false;
    };
    target.parent() == file.parent()
        && name
            .strip_prefix(protected)
            .is_some_and(|rest| rest.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names() {
        for (pattern, name, expected) in [
            (".env", ".env", true),
            (".env", ".envx", false),
            (".env.*", ".env.local", true),
            (".env.*", ".env", false),
            ("*.pem", "server.pem", true),
            ("*.pem", "server.pem.bak", false),
            ("id_rsa*", "id_rsa.pub", true),
            ("*a*b*", "xaybz", true),
            ("*a*b", "xaybz", false),
            ("*a*b", "xaybzb", true),
            ("*", "", true),
        ] {
            assert_eq!(glob(pattern, name), expected, "{pattern} vs {name}");
        }
    }

    #[test]
    fn a_path_is_denied_by_any_of_its_parts() {
        let deny = DenyRead::default();
        for (path, expected) in [
            (".env", Some(".env")),
            ("sub/../.env", Some(".env")),
            ("./keys/server.pem", Some("server.pem")),
            // Case folded: on a case-insensitive file system these are the same files.
            (".ENV", Some(".ENV")),
            ("keys/Server.PEM", Some("Server.PEM")),
            (".ssh/config", Some(".ssh")),
            ("a/.ssh", Some(".ssh")),
            ("notes.txt", None),
            ("sub/..", None),
            ("env/.envy", None),
        ] {
            let found = deny.part_matching(Path::new(path)).map(|(part, _)| part);
            assert_eq!(found.as_deref(), expected, "{path}");
        }
        assert_eq!(
            DenyRead::from(Vec::new()).matching(OsStr::new(".env")),
            None
        );
    }
}
