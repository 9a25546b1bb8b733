//! Path resolution: a path a call names, contained in its workspace by the host (relative
//! from the call's working directory, `..` refused, an absolute path only inside the
//! workspace, canonicalized through `cap-std` so a symlink that leads out is refused, never
//! followed).

use crate::gate::workspace::Workspace;
use cap_std::fs::Dir;
use std::io;
use std::path::{Component, Path, PathBuf};

/// A path the gate resolved inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Canonical, relative to the workspace ("" for the workspace itself).
    pub(crate) path: PathBuf,
    /// The directory to preopen: the path if it is a directory, else its parent.
    pub(crate) dir: PathBuf,
}

/// Resolve `requested` inside the workspace, a relative path from `base` (a directory
/// relative to the workspace, already contained), or say why it may not be used.
pub(crate) fn resolve_from(
    workspace: &Workspace,
    base: &Path,
    requested: &str,
) -> Result<Resolved, String> {
    let path = Path::new(requested);
    if path.is_absolute() || base.as_os_str().is_empty() {
        return resolve(workspace, requested);
    }
    resolve(workspace, &base.join(path).to_string_lossy())
}

/// Resolve `requested` inside the workspace, or say why it may not be used.
pub(crate) fn resolve(workspace: &Workspace, requested: &str) -> Result<Resolved, String> {
    let path = Path::new(requested);
    let relative = if path.is_absolute() {
        path.strip_prefix(workspace.root())
            .map_err(|_| "an absolute path outside the workspace".to_owned())?
    } else {
        path
    };
    let mut lexical = PathBuf::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => lexical.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err("`..` is not allowed: a path may not climb out of its root".to_owned());
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err("not a path inside the workspace".to_owned());
            }
        }
    }
    let dir = &workspace.dir;
    let existing = if lexical.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &lexical
    };
    match dir.canonicalize(existing) {
        Ok(canonical) => {
            let canonical = strip_dot(canonical);
            let is_dir = dir
                .metadata(if canonical.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    &canonical
                })
                .map_err(|error| error.to_string())?
                .is_dir();
            let parent = if is_dir {
                canonical.clone()
            } else {
                canonical
                    .parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_default()
            };
            Ok(Resolved {
                path: canonical,
                dir: parent,
            })
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            // A file that does not exist yet (a write, or a read the tool will report as
            // missing): its directory must exist and be contained, and the name itself must not
            // be a dangling symlink.
            if dir.symlink_metadata(&lexical).is_ok() {
                return Err("it is a symlink whose target does not exist".to_owned());
            }
            let name = lexical
                .file_name()
                .ok_or_else(|| "it does not exist".to_owned())?;
            let parent = lexical.parent().unwrap_or(Path::new(""));
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            let canonical_parent = strip_dot(dir.canonicalize(parent).map_err(|error| {
                if error.kind() == io::ErrorKind::NotFound {
                    "its directory does not exist".to_owned()
                } else {
                    escape_or(error)
                }
            })?);
            Ok(Resolved {
                path: canonical_parent.join(name),
                dir: canonical_parent,
            })
        }
        Err(error) => Err(escape_or(error)),
    }
}

/// cap-std reports a path that leads outside its directory (through a symlink or otherwise)
/// as permission denied.
pub(crate) fn escape_or(error: io::Error) -> String {
    if error.kind() == io::ErrorKind::PermissionDenied {
        "it leads outside the workspace (through a symlink)".to_owned()
    } else {
        error.to_string()
    }
}

pub(crate) fn strip_dot(path: PathBuf) -> PathBuf {
    if path == Path::new(".") {
        PathBuf::new()
    } else {
        path
    }
}

/// The path as a tool sees it: relative to the workspace, `.` for the workspace itself.
pub(crate) fn display(path: &Path) -> String {
    if path.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        path.to_string_lossy().into_owned()
    }
}

/// True when the canonical `path` lies in the policy root `root` (relative to the workspace).
pub(crate) fn within_root(workspace: &Workspace, root: &str, path: &Path) -> bool {
    let Ok(root) = resolve(workspace, root) else {
        return false;
    };
    path.starts_with(&root.path)
}

/// Open `relative` (a canonical directory inside the workspace) through cap-std, which refuses
/// to leave the workspace, so a directory swapped for a symlink after the check is not
/// followed out.
pub(crate) fn open_contained_dir(workspace: &Workspace, relative: &Path) -> io::Result<Dir> {
    if relative.as_os_str().is_empty() {
        workspace.dir.try_clone()
    } else {
        workspace.dir.open_dir(relative)
    }
}
