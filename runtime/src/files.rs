//! What no tool may touch whatever a policy's rules say: paths no tool may write, files no tool
//! may read, and the largest file a tool may be handed to read.
//!
//! - **Protected from writing**: anything in a `.git` (its config and hooks are code the user's
//!   git runs) or a `.toolcell` (saved rules grant authority; a planted rule would approve
//!   later calls) at any depth, the policy file and the audit file when they lie in the
//!   workspace, and the policy's own `[files] protected` list (a file with other names is
//!   handed over as a copy, so a hard link to a protected file is not written through it:
//!   `staging.rs`). Directories are never granted for writing: a tool writes the files it
//!   names.
//!   What a write grant hands over can be read, so it must pass the read rules too.
//! - **Denied reading**: any path with a part that matches [`DEFAULT_DENY_READ`] (or the
//!   policy's `[files] deny_read`, which replaces it): `.env` files, private keys, credential
//!   files, `.ssh`. The gate refuses a grant that names one; and inside a directory a wasm
//!   tool is granted (`list_dir`, `glob`, `grep`), they are not there: not listed, and
//!   `no-entry` to whatever path names them, as written (`sub/../.env`) or as it resolves (a
//!   link to one) (`guest_fs.rs`). Names are what is matched: a hard link to a secret under
//!   an innocent name is that file. A native tool is handed the directory itself, and its
//!   grants bound it only as far as it uses them (`native.rs`).
//! - **Largest read**: the policy's `[files] max_read_bytes`, checked on the file a read grant
//!   names.

use crate::info::CapabilityKind;
use crate::workspace::Workspace;
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
    /// Absolute paths never written (the policy file, the audit file).
    pub(crate) protected_files: Vec<PathBuf>,
    /// Name patterns never read.
    pub(crate) deny_read: DenyRead,
    /// The largest file a read grant may name.
    pub(crate) max_read_bytes: Option<u64>,
}

impl Default for FileRules {
    fn default() -> Self {
        FileRules {
            protected: ALWAYS_PROTECTED.iter().map(PathBuf::from).collect(),
            protected_files: Vec::new(),
            deny_read: DenyRead::default(),
            max_read_bytes: None,
        }
    }
}

impl FileRules {
    /// These rules, also protecting the file at `path` (absolute, or relative to the current
    /// directory) from every tool's writes.
    pub fn protecting(mut self, path: &Path) -> FileRules {
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
        self.protected_files.push(absolute);
        self
    }

    /// Whether `kind` may be granted on `path` (canonical, relative to the workspace; a
    /// directory when `is_dir`), or why not.
    ///
    /// A write grant is checked against the read rules too: the file it hands over can be
    /// read through it.
    pub(crate) fn check(
        &self,
        workspace: &Workspace,
        kind: CapabilityKind,
        path: &Path,
        is_dir: bool,
    ) -> Result<(), String> {
        match kind {
            CapabilityKind::FilesystemWrite => {
                self.check_write(workspace, path, is_dir)?;
                self.check_read(workspace, path, is_dir)
            }
            CapabilityKind::FilesystemRead => self.check_read(workspace, path, is_dir),
            _ => Ok(()),
        }
    }

    fn check_write(&self, workspace: &Workspace, path: &Path, is_dir: bool) -> Result<(), String> {
        if is_dir {
            // A directory may hold a repository, saved rules or the policy anywhere below it,
            // now or later: directories are granted for reading only. Grant files.
            return Err(
                "a directory is never granted for writing (a tool may write the files it names)"
                    .to_owned(),
            );
        }
        // `.git` and `.toolcell` anywhere: a nested repository's hooks run as surely as the
        // top one's. Compared ignoring case, for file systems that do.
        for part in path.components() {
            if let Component::Normal(part) = part
                && let Some(name) = ALWAYS_PROTECTED
                    .iter()
                    .find(|name| part.to_string_lossy().eq_ignore_ascii_case(name))
            {
                return Err(format!("{name} is protected: no tool may write in it"));
            }
        }
        // The policy's own list, resolved in this workspace as the path was (so a link to a
        // protected directory, or `./deploy` for `deploy`, is the same path).
        for protected in &self.protected {
            let canonical = crate::gate::resolve(workspace, &protected.to_string_lossy())
                .map(|resolved| resolved.path)
                .unwrap_or_else(|_| protected.clone());
            if path.starts_with(&canonical) || path.starts_with(protected) {
                return Err(format!(
                    "{} is protected (the policy's [files] protected): no tool may write it",
                    protected.display()
                ));
            }
        }
        self.check_protected_files(workspace, CapabilityKind::FilesystemWrite, path)
    }

    /// Whether `kind` on `path` leaves the files this runtime protects by name (its policy,
    /// audit and tokens files) alone: what holds whatever policy a call runs under.
    pub(crate) fn check_protected_files(
        &self,
        workspace: &Workspace,
        kind: CapabilityKind,
        path: &Path,
    ) -> Result<(), String> {
        if kind == CapabilityKind::FilesystemWrite
            && self
                .protected_files
                .iter()
                .any(|file| workspace.root().join(path) == *file)
        {
            return Err(
                "it is a policy, audit or tokens file of this server: no tool may write it"
                    .to_owned(),
            );
        }
        Ok(())
    }

    fn check_read(&self, workspace: &Workspace, path: &Path, is_dir: bool) -> Result<(), String> {
        if let Some((part, pattern)) = self.deny_read.part_matching(path) {
            return Err(format!(
                "{part} matches {pattern:?}, which no tool may read (the policy's [files] \
                 deny_read)"
            ));
        }
        if let Some(max) = self.max_read_bytes
            && !is_dir
            && let Ok(meta) = workspace.dir.metadata(path)
            && meta.len() > max
        {
            return Err(format!(
                "it is {} bytes; the policy lets a tool read at most {max}",
                meta.len()
            ));
        }
        Ok(())
    }
}

/// The name patterns no tool may read: the one matcher for the gate (a path a call names) and
/// the wasm sandbox (every path a guest names inside its preopens, every name it lists:
/// `guest_fs.rs`). Cheap to clone; by default [`DEFAULT_DENY_READ`].
#[derive(Debug, Clone)]
pub(crate) struct DenyRead(Arc<[String]>);

impl Default for DenyRead {
    fn default() -> Self {
        DenyRead(DEFAULT_DENY_READ.iter().map(|p| (*p).to_owned()).collect())
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
