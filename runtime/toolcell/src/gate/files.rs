//! The file checks of a grant: what a policy's [`FileRules`] decide about one path in one
//! workspace (protected from writing, denied reading, too large to read), and what no rule
//! decides: the host's own files and the kernel's views of the host (`hostfs`).

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
        // What runs code for the user later (shell start-up files, autostart entries, ...).
        let real = workspace.root().join(path);
        if let Some((part, pattern)) = self.deny_write.hiding(path, Some(&real)) {
            return Err(format!(
                "{part} matches {pattern:?}: it runs code for the user later, outside any \
                 sandbox, so no tool may write it (the policy's [files] deny_write)"
            ));
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
        Ok(())
    }

    fn check_read(&self, workspace: &Workspace, path: &Path, is_dir: bool) -> Result<(), String> {
        let real = workspace.root().join(path);
        if let Some((part, pattern)) = self.deny_read.hiding(path, Some(&real)) {
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

/// Whether `kind` on `path` (canonical, relative to the workspace) leaves the host alone: not
/// one of its own files (`hostfs::OwnFiles`: its policy, audit, tokens, keys, password and
/// cache files, a companion of one, anything under its tools directories), by path and by what
/// the file is (a hard link elsewhere); and not on a file system that shows the host itself
/// (procfs, sysfs, devfs: `hostfs::host_view`), by what the opened directory and file lie on.
/// Neither written nor read, whatever policy a call runs under and whatever its `[files]` say.
pub(crate) fn check_host(
    own: &[crate::hostfs::OwnFile],
    workspace: &Workspace,
    kind: CapabilityKind,
    path: &Path,
    dir: &cap_std::fs::Dir,
    name: Option<&std::ffi::OsStr>,
) -> Result<(), String> {
    let verb = match kind {
        CapabilityKind::FilesystemWrite => "write",
        CapabilityKind::FilesystemRead => "read",
        _ => return Ok(()),
    };
    let view = crate::hostfs::host_view(dir)
        .or_else(|| name.and_then(|name| crate::hostfs::host_view_at(dir, Path::new(name))));
    if let Some(view) = view {
        return Err(format!(
            "it is on {view}, which shows the host itself (its processes, devices and kernel), \
             not files: no path grant reaches it"
        ));
    }
    let target = workspace.root().join(path);
    if crate::hostfs::own::covers_path(own, &target)
        || std::fs::metadata(&target)
            .is_ok_and(|found| crate::hostfs::own::covers_identity(own, &found))
    {
        return Err(format!(
            "it is one of the server's own files (its policy, audit, tokens, keys, password or \
             compile-cache files, one of their companions: a rotated copy, a head, a signature), \
             or in a directory it loads tools from: no tool may {verb} it"
        ));
    }
    Ok(())
}

/// Whether the file at `path` (canonical, relative to the workspace) is another name of one of
/// the workspace's credential files (`gate/secrets.rs`): a hard link planted under an innocent
/// name is that file, and is refused as it would be. Only a file with more than one name is
/// looked up.
pub(crate) fn check_credential_link(
    rules: &FileRules,
    workspace: &Workspace,
    path: &Path,
) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    if rules.deny_read.is_empty() {
        return Ok(());
    }
    let Ok(meta) = std::fs::symlink_metadata(workspace.root().join(path)) else {
        return Ok(());
    };
    if !meta.is_file() || meta.nlink() < 2 {
        return Ok(());
    }
    if workspace
        .credential_identities(&rules.deny_read)
        .covers(meta.dev(), meta.ino())
    {
        return Err(
            "it is (or, when the workspace's credential places are too large to look at \
             whole, may be) another name (a hard link) of a credential file no tool may read \
             (the policy's [files] deny_read)"
                .to_owned(),
        );
    }
    Ok(())
}
