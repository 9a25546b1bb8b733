//! The file checks of a grant: what a policy's [`FileRules`] decide about one path in one
//! workspace (protected from writing, denied reading, too large to read).

use crate::gate::workspace::Workspace;
use crate::policy::files::{ALWAYS_PROTECTED, FileRules};
use crate::tool::info::CapabilityKind;
use std::path::{Component, Path};

impl FileRules {
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
    /// audit, tokens and OAuth files, its compile cache and the cache's key) alone, and
    /// everything under the directories it protects (its tools directories, whose files a
    /// running server loads as they change, and the cache): neither written nor read, whatever
    /// policy a call runs under and whatever its `[files]` lists say. (A grant of a directory
    /// that holds them is the directory's; inside it they are not there, `wasm/guest_fs.rs`.)
    pub(crate) fn check_protected_files(
        &self,
        workspace: &Workspace,
        kind: CapabilityKind,
        path: &Path,
    ) -> Result<(), String> {
        let verb = match kind {
            CapabilityKind::FilesystemWrite => "write",
            CapabilityKind::FilesystemRead => "read",
            _ => return Ok(()),
        };
        let target = workspace.root().join(path);
        // By path, and by what the file is (a hard link to a protected file elsewhere).
        if self.is_protected(&target)
            || std::fs::metadata(&target).is_ok_and(|found| {
                crate::policy::files::is_protected_identity(&self.protected_files, &found)
            })
        {
            return Err(format!(
                "it is a policy, audit, tokens or compile-cache file of this server (or one of \
                 its companions: a rotated copy, a head, a signature), or in a directory it \
                 loads tools from: no tool may {verb} it"
            ));
        }
        Ok(())
    }

    /// Whether the absolute path `target` is one of the files this runtime protects, a
    /// companion of one, or under a directory it protects.
    pub(crate) fn is_protected(&self, target: &Path) -> bool {
        crate::policy::files::is_protected(&self.protected_files, target)
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
