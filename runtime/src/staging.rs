//! Exact file grants: a call granted one file gets a private directory that holds just that
//! file, never the directory the file lives in.
//!
//! WASI hands a guest directories (preopens), not files. Preopening a granted file's parent
//! would hand over every sibling too (a `secret.txt` beside `config.json`, `.git/hooks` beside
//! `notes.txt` at the workspace's top). So for each directory that holds granted files the gate
//! makes a *staging* directory under `.toolcell/grants/` in the workspace and puts in it, under
//! their own names, only the granted files:
//!
//! - a file the call may write is a hard link to the real file, so writes in place reach it
//!   directly (a copy if the file has other names: a write must not reach them); whatever else the tool does in the staging directory (create the file, replace it
//!   by renaming a temporary file over it, remove it) is carried over to the real directory by
//!   [`Staging::commit`] after the call, for the granted names only, and only for regular files;
//! - a file the call may only read is a hard link in a read-only staging directory, or a copy
//!   when the same staging directory also holds a file it may write (a hard link there would
//!   make the read grant writable);
//! - where a hard link cannot be made (another file system, another user's file under
//!   `protected_hardlinks`), the file is copied in, and a written copy renamed back.
//!
//! Nothing else is in the staging directory, and it is removed when the call's grants are
//! dropped. Links the tool creates there are never carried over (and `wasm.rs` refuses to let a
//! guest create one at all).

use cap_std::fs::MetadataExt as _;
use cap_std::fs::{Dir, Metadata};
use std::ffi::{OsStr, OsString};
use std::io;
use std::sync::Arc;

/// Where staging directories live, relative to the workspace.
pub const GRANTS_DIR: &str = ".toolcell/grants";

/// One file in a staging directory.
#[derive(Debug)]
struct StagedFile {
    name: OsString,
    writable: bool,
    /// The real file's identity (device, inode) when it was staged; `None` if it did not exist.
    original: Option<(u64, u64)>,
    /// The real file's permissions, which a replacement keeps.
    permissions: Option<cap_std::fs::Permissions>,
    /// A staged copy's fingerprint when it was made: unchanged after the call, it is not
    /// carried back.
    copied: Option<Fingerprint>,
}

/// The staging directory of one real directory, for one call.
#[derive(Debug)]
pub(crate) struct Staging {
    /// `.toolcell/grants` in the workspace.
    grants: Dir,
    /// This staging directory's name under it.
    name: String,
    /// The staging directory: what the guest gets as a preopen.
    pub(crate) dir: Arc<Dir>,
    /// The real directory the granted files live in, opened (contained) by the gate.
    target: Dir,
    files: Vec<StagedFile>,
}

impl Staging {
    /// A new, empty staging directory under `grants` (`.toolcell/grants`, opened by the
    /// caller without following links) for files of `target`.
    pub(crate) fn new(grants: &Dir, target: Dir) -> io::Result<Staging> {
        let grants = grants.try_clone()?;
        let name = loop {
            let name = crate::cache::hex(&crate::cache::random::<12>()?);
            match grants.create_dir(&name) {
                Ok(()) => break name,
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
        };
        let dir = Arc::new(grants.open_dir(&name)?);
        Ok(Staging {
            grants,
            name,
            dir,
            target,
            files: Vec::new(),
        })
    }

    /// Grant `name` (a file of the target directory, or a name for one the call may create),
    /// for writing or only reading. A name staged twice keeps the wider grant.
    pub(crate) fn add(&mut self, name: &OsStr, writable: bool) {
        match self.files.iter_mut().find(|file| file.name == name) {
            Some(file) => file.writable |= writable,
            None => self.files.push(StagedFile {
                name: name.to_owned(),
                writable,
                original: None,
                permissions: None,
                copied: None,
            }),
        }
    }

    /// True when the guest may write in the staging directory: it holds a writable file.
    pub(crate) fn writable(&self) -> bool {
        self.files.iter().any(|file| file.writable)
    }

    /// Put every granted file that exists in place: a hard link, or a copy (see the module
    /// docs). A name that is not a regular file of the target directory (a link planted since
    /// the gate resolved it, a directory) is refused.
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let writable = self.writable();
        for file in &mut self.files {
            let meta = match self.target.symlink_metadata(&file.name) {
                Ok(meta) => meta,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            if !meta.is_file() {
                return Err(io::Error::other(format!(
                    "{} is not a regular file",
                    file.name.to_string_lossy()
                )));
            }
            file.original = Some(identity(&meta));
            file.permissions = Some(meta.permissions());
            // A hard link, unless it would let a read-only file be written (a writable staging
            // directory), or let a write reach the file's other names (a file already linked
            // elsewhere, perhaps to `.git/config`).
            let link = (if file.writable {
                meta.nlink() == 1
            } else {
                !writable
            }) && self
                .target
                .hard_link(&file.name, &self.dir, &file.name)
                .is_ok();
            if !link {
                copy(&self.target, &file.name, &self.dir, &file.name)?;
                file.copied = Some(fingerprint(&self.dir.symlink_metadata(&file.name)?));
            }
        }
        Ok(())
    }

    /// Carry what the call did to its writable files over to the real directory: a file it
    /// created or replaced is renamed (or, across file systems, copied) into place; a file it
    /// removed is removed, if the real one is still the file that was staged. Anything that is
    /// not a regular file is left behind, and is an error.
    pub(crate) fn commit(&self) -> io::Result<()> {
        for file in self.files.iter().filter(|file| file.writable) {
            let staged = match self.dir.symlink_metadata(&file.name) {
                Ok(meta) => meta,
                Err(error) if error.kind() == io::ErrorKind::NotFound => {
                    if let Some(original) = file.original
                        && let Ok(real) = self.target.symlink_metadata(&file.name)
                        && identity(&real) == original
                    {
                        self.target.remove_file(&file.name)?;
                    }
                    continue;
                }
                Err(error) => return Err(error),
            };
            if !staged.is_file() {
                return Err(io::Error::other(format!(
                    "the tool left {} as something other than a regular file; it was not kept",
                    file.name.to_string_lossy()
                )));
            }
            if file.original == Some(identity(&staged)) {
                // Still the real file itself (a hard link): any write already landed.
                continue;
            }
            if file.copied == Some(fingerprint(&staged)) {
                // A copy the call did not change.
                continue;
            }
            if staged.nlink() > 1 {
                // A hard link the tool made to another granted file: kept, it would let a later
                // grant of one name write the other.
                return Err(io::Error::other(format!(
                    "the tool left {} as a file with other names; it was not kept",
                    file.name.to_string_lossy()
                )));
            }
            if let Some(permissions) = &file.permissions {
                // A replacement keeps the mode of the file it replaces (not 0644 from a new
                // temporary file: a private file stays private, a script stays executable).
                self.dir.set_permissions(&file.name, permissions.clone())?;
            }
            match self.dir.rename(&file.name, &self.target, &file.name) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::CrossesDevices => {
                    let temp = temporary_name(&file.name);
                    copy(&self.dir, &file.name, &self.target, &temp)?;
                    self.target.rename(&temp, &self.target, &file.name)?;
                }
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Whatever the call left in it goes with it; a failure leaves a directory that the
        // next `Workspace::open` clears.
        let _ = self.grants.remove_dir_all(&self.name);
    }
}

/// A file's identity, length and modification time: what tells whether a call changed it.
type Fingerprint = ((u64, u64), u64, Option<std::time::SystemTime>);

fn fingerprint(meta: &Metadata) -> Fingerprint {
    (
        identity(meta),
        meta.len(),
        meta.modified()
            .ok()
            .map(cap_std::time::SystemTime::into_std),
    )
}

/// What identifies a file: its device and inode.
fn identity(meta: &Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// A name for a temporary file beside `name`.
fn temporary_name(name: &OsStr) -> OsString {
    let mut temp = OsString::from(".");
    temp.push(name);
    temp.push(".toolcell-commit.tmp");
    temp
}

/// Copy the regular file `from_name` of `from` to a new file `to_name` in `to`.
fn copy(from: &Dir, from_name: &OsStr, to: &Dir, to_name: &OsStr) -> io::Result<()> {
    let mut source = from.open(from_name)?;
    let mut options = cap_std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    let mut destination = to.open_with(to_name, &options)?;
    io::copy(&mut source, &mut destination)?;
    destination.sync_all()
}

/// `.toolcell/grants` in `root`, made if missing (0700), never through a symlink.
pub(crate) fn open_grants_dir(root: &Dir) -> io::Result<Dir> {
    let mut builder = cap_std::fs::DirBuilder::new();
    cap_std::fs::DirBuilderExt::mode(&mut builder, 0o700);
    let mut dir = root.try_clone()?;
    for part in GRANTS_DIR.split('/') {
        match dir.symlink_metadata(part) {
            Ok(meta) if meta.is_dir() && !meta.is_symlink() => {}
            Ok(_) => {
                return Err(io::Error::other(format!(
                    "{part} in the workspace is not a plain directory"
                )));
            }
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                match dir.create_dir_with(part, &builder) {
                    Ok(()) => {}
                    Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(error) => return Err(error),
                }
            }
            Err(error) => return Err(error),
        }
        // Checked above to be no link; cap-std keeps even a link swapped in since inside the
        // workspace.
        dir = dir.open_dir(part)?;
    }
    Ok(dir)
}
