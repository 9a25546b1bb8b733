//! Component files in a tools directory: found, checked and identified from their metadata
//! alone, and read only when their bytes are needed.

use crate::wasm::index::file_identity;
use crate::wasm::load::LoadError;
use std::path::{Path, PathBuf};

/// The largest component file read from a tools directory. A Python tool is about 20 MB, a
/// JavaScript one 12 MB; a file far larger is not a tool, and is not read into memory.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// A component file in a tools directory, and its identity.
pub(crate) type ComponentFile = (PathBuf, String);

/// The `*.wasm` files in `dir`, sorted by name, each with its identity (see
/// [`file_identity`]), read from its metadata alone; and the ones refused, each with why (the
/// others load regardless).
///
/// Only regular files count: a directory, a FIFO (opened without waiting on it), a device or a
/// dangling link named `*.wasm` is refused, and so is a link that leads out of the directory. A
/// file larger than [`MAX_COMPONENT_BYTES`] is refused before it is read.
pub(crate) fn scan_tools_dir(dir: &Path) -> std::io::Result<(Vec<ComponentFile>, Vec<LoadError>)> {
    let entries = std::fs::read_dir(dir)?;
    let root = dir.canonicalize()?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().is_some_and(|ext| ext == "wasm") {
            paths.push(path);
        }
    }
    paths.sort();
    let (mut files, mut refused) = (Vec::new(), Vec::new());
    for path in paths {
        // The index and a reload know a file by its name as text: two names that are not
        // UTF-8 could read alike.
        if path.file_name().and_then(|name| name.to_str()).is_none() {
            refused.push(LoadError {
                source: path.display().to_string(),
                message: "its name is not UTF-8".to_owned(),
                guest_stderr: String::new(),
            });
            continue;
        }
        // A regular file (not a link) is identified by its own metadata, one call; a link is
        // followed only as far as the directory (and opened without waiting on it) to learn
        // what it leads to.
        let checked = match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() <= MAX_COMPONENT_BYTES => Ok(meta),
            _ => open_component_file(&root, &path).map(|(_, meta)| meta),
        };
        match checked {
            Ok(meta) => {
                let identity = file_identity(&meta);
                files.push((path, identity));
            }
            Err(message) => refused.push(LoadError {
                source: path.display().to_string(),
                message,
                guest_stderr: String::new(),
            }),
        }
    }
    Ok((files, refused))
}

/// The component file at `path` in the tools directory `root` (canonical), opened, with its
/// metadata; or why it is not read.
fn open_component_file(
    root: &Path,
    path: &Path,
) -> Result<(std::fs::File, std::fs::Metadata), String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let real = path
        .canonicalize()
        .map_err(|error| format!("cannot be read: {error}"))?;
    if !real.starts_with(root) {
        return Err(format!(
            "it is a link out of the tools directory (to {}); it is not followed",
            real.display()
        ));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&real)
        .map_err(|error| format!("cannot be read: {error}"))?;
    let meta = file
        .metadata()
        .map_err(|error| format!("cannot be read: {error}"))?;
    if !meta.is_file() {
        return Err("it is not a regular file".to_owned());
    }
    if meta.len() > MAX_COMPONENT_BYTES {
        return Err(format!(
            "it is {} bytes; a component may be at most {MAX_COMPONENT_BYTES}",
            meta.len()
        ));
    }
    Ok((file, meta))
}

/// The bytes of the component file at `path` in the tools directory `root` (canonical), or why
/// it is not read.
pub(crate) fn read_component_file(root: &Path, path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let (file, meta) = open_component_file(root, path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_COMPONENT_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|error| format!("cannot be read: {error}"))?;
    Ok(bytes)
}
