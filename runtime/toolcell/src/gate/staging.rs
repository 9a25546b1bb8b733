//! Exact file grants: a call granted one file gets a private directory that holds just that
//! file, never the directory the file lives in.
//!
//! Past the house's 700 lines only by its unit tests, kept beside the code they test.
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
//! Nothing else is in the staging directory, and it is emptied when the call's grants are
//! dropped. Links the tool creates there are never carried over (and `wasm/guest_fs.rs` refuses to
//! let a guest create one at all).
//!
//! An emptied staging directory is kept, still locked, for a later call of the same workspace
//! ([`StagingPool`]): making and removing a directory costs a journalling file system several
//! times what emptying one does (66 µs a pair on this machine's ext4, against a few for a link
//! and its removal; BENCHMARKS.md). Nothing of the earlier call is in it: every entry is removed
//! (and found gone) before it is kept, one that grew past a fresh directory's size is removed
//! instead (a large directory would tell a later call that an earlier one made many files),
//! and a reused one gets the current time as its times, as a new one has (and a guest is
//! never shown a directory's birth time, which would still be the first call's:
//! `wasm/guest_fs.rs`). It is kept only when
//! nothing else holds it (no preopen of it outlives the call that had it); at most
//! [`POOLED_STAGING_DIRS`] are kept, and they are removed with the workspace.
//!
//! A process killed mid-call cannot remove its staging directories, and they hold hard links to
//! real files. So each is locked (`flock`, on the directory itself) from before anything is put
//! in it until it is removed; the kernel drops the lock with the process however it ends. When a
//! workspace is opened, [`sweep`] removes every staging directory no process holds locked. The
//! lock, unlike a pid in the name, cannot be fooled by a pid used again.

use cap_std::fs::MetadataExt as _;
use cap_std::fs::{Dir, Metadata};
use std::ffi::{OsStr, OsString};
use std::io;
use std::sync::{Arc, Mutex};

/// Where staging directories live, relative to the workspace.
pub const GRANTS_DIR: &str = ".toolcell/grants";

/// How many random bytes name a staging directory (in hex, twice as many characters): enough
/// that two calls never pick one name. [`sweep`] looks at nothing not named this way.
const NAME_BYTES: usize = 12;

/// How many names [`Staging::new`] tries before it gives up. A name already taken, or a fresh
/// directory a concurrent sweep took before it was locked, costs one try; a run of them means
/// something other than chance is at work.
const NAME_ATTEMPTS: usize = 16;

/// How many emptied staging directories a workspace keeps for later calls: about as many as
/// calls with file grants run at once on a large host; one more is removed, as every one was
/// before they were kept.
pub(crate) const POOLED_STAGING_DIRS: usize = 16;

/// The most a directory may measure (its `st_size`) to be kept for reuse: an empty one on ext4
/// (one block; tmpfs says less). One that grew past it held many entries.
const FRESH_DIR_BYTES: u64 = 4096;

/// A workspace's `.toolcell/grants`, and the staging directories calls emptied, kept locked for
/// later calls (see the module docs).
#[derive(Debug)]
pub(crate) struct StagingPool {
    /// `.toolcell/grants` in the workspace.
    grants: Dir,
    /// Emptied staging directories, by name, each still locked.
    free: Mutex<Vec<(String, Arc<Dir>)>>,
}

impl StagingPool {
    /// The pool of `grants` (`.toolcell/grants`, opened by the caller without following links),
    /// holding none yet.
    pub(crate) fn new(grants: Dir) -> StagingPool {
        StagingPool {
            grants,
            free: Mutex::new(Vec::new()),
        }
    }

    fn take(&self) -> Option<(String, Arc<Dir>)> {
        crate::sync::lock(&self.free).pop()
    }

    /// Keep `dir` (named `name`, emptied, locked) for a later call, or remove it if the pool is
    /// full.
    fn keep(&self, name: String, dir: Arc<Dir>) {
        let mut free = crate::sync::lock(&self.free);
        if free.len() < POOLED_STAGING_DIRS {
            free.push((name, dir));
            return;
        }
        drop(free);
        let _ = remove_tree(&self.grants, OsStr::new(&name));
    }

    /// How many emptied staging directories are kept.
    #[cfg(test)]
    fn kept(&self) -> usize {
        crate::sync::lock(&self.free).len()
    }
}

impl Drop for StagingPool {
    fn drop(&mut self) {
        // Removed while still locked; a failure leaves an empty directory the next
        // `Workspace::open` sweeps.
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (name, _dir) in free {
            let _ = remove_tree(&self.grants, OsStr::new(&name));
        }
    }
}

/// Remove everything in `dir` ([`clear`]), and check that it is no bigger than a fresh
/// directory.
fn empty(dir: &Dir) -> io::Result<()> {
    clear(dir)?;
    if dir.dir_metadata()?.len() > FRESH_DIR_BYTES {
        return Err(io::Error::other("it grew past a fresh directory's size"));
    }
    Ok(())
}

/// Remove the directory `name` of `parent` and everything in it ([`clear`]).
fn remove_tree(parent: &Dir, name: &OsStr) -> io::Result<()> {
    clear(&open_dir_nofollow(parent, name)?)?;
    parent.remove_dir(name)
}

/// Remove every entry of `dir`, never following a link, with no recursion and two directories
/// open at a time however deep the tree: a subdirectory's entries are moved up into `dir` under
/// fresh names and the emptied subdirectory removed, pass after pass, until a pass finds
/// nothing. A tool can make a tree tens of thousands of levels deep with short paths (rename a
/// directory into a new one, over and over); a recursive removal (a stack frame and an open
/// directory a level, as cap-std's `remove_dir_all`) overflowed the thread's stack on it.
/// Each entry is moved at most once per level above it.
fn clear(dir: &Dir) -> io::Result<()> {
    let mut fresh: u64 = 0;
    loop {
        let mut found = false;
        for entry in dir.entries()? {
            let entry = entry?;
            let name = entry.file_name();
            found = true;
            if !entry.file_type()?.is_dir() {
                dir.remove_file(&name)?;
                continue;
            }
            let sub = open_dir_nofollow(dir, &name)?;
            for inner in sub.entries()? {
                let inner = inner?.file_name();
                loop {
                    fresh = fresh.wrapping_add(1);
                    let up = format!(".toolcell-clear-{fresh}");
                    match rustix::fs::renameat_with(
                        &sub,
                        &inner,
                        dir,
                        &up,
                        rustix::fs::RenameFlags::NOREPLACE,
                    ) {
                        Ok(()) => break,
                        // A name the tool left there: the next one.
                        Err(rustix::io::Errno::EXIST) => {}
                        Err(error) => return Err(error.into()),
                    }
                }
            }
            dir.remove_dir(&name)?;
        }
        if !found {
            return Ok(());
        }
    }
}

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
    /// `.toolcell/grants` in the workspace, and the directories kept for reuse.
    pool: Arc<StagingPool>,
    /// This staging directory's name under it.
    name: String,
    /// The staging directory: what the guest gets as a preopen.
    pub(crate) dir: Arc<Dir>,
    /// The real directory the granted files live in, opened (contained) by the gate.
    target: Dir,
    files: Vec<StagedFile>,
}

impl Staging {
    /// An empty staging directory under `pool`'s `.toolcell/grants` for files of `target`: one
    /// an earlier call emptied, or a new one.
    ///
    /// The directory is locked before it is handed back, and stays locked while this value (or
    /// a preopen of it) lives, and while it is kept for reuse: a [`sweep`] leaves it alone.
    pub(crate) fn new(pool: &Arc<StagingPool>, target: Dir) -> io::Result<Staging> {
        if let Some((name, dir)) = pool.take() {
            // The times a new directory would have: nothing tells when it was last used.
            let now = rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_NOW,
            };
            let times = rustix::fs::Timestamps {
                last_access: now,
                last_modification: now,
            };
            if rustix::fs::futimens(&*dir, &times).is_ok() {
                return Ok(Staging {
                    pool: Arc::clone(pool),
                    name,
                    dir,
                    target,
                    files: Vec::new(),
                });
            }
            // Its times could not be reset: not reused, removed (while still locked).
            let _ = remove_tree(&pool.grants, OsStr::new(&name));
        }
        let grants = &pool.grants;
        for _ in 0..NAME_ATTEMPTS {
            let name = crate::digest::hex(&crate::digest::random::<NAME_BYTES>()?);
            match grants.create_dir(&name) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            }
            // Until it is locked, a sweep may take it (it looks like a dead process's): then
            // it is gone, or not the directory made, and another name is tried.
            let dir = match lock_dir(grants, OsStr::new(&name)) {
                Ok(Some(dir)) => dir,
                Ok(None) => continue,
                Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
                Err(error) => return Err(error),
            };
            return Ok(Staging {
                pool: Arc::clone(pool),
                name,
                dir: Arc::new(dir),
                target,
                files: Vec::new(),
            });
        }
        Err(io::Error::other(format!(
            "no staging directory could be made in {NAME_ATTEMPTS} tries"
        )))
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
        // Emptied and kept for a later call when nothing else holds it; otherwise removed with
        // whatever the call left in it. A failure leaves a directory that the next
        // `Workspace::open` clears.
        if Arc::strong_count(&self.dir) == 1 && empty(&self.dir).is_ok() {
            self.pool
                .keep(std::mem::take(&mut self.name), Arc::clone(&self.dir));
            return;
        }
        let _ = remove_tree(&self.pool.grants, OsStr::new(&self.name));
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

/// True when `name` is one [`Staging::new`] gives: lowercase hex of [`NAME_BYTES`] bytes, so
/// a single path part.
fn is_staging_name(name: &OsStr) -> bool {
    name.len() == NAME_BYTES * 2
        && name
            .as_encoded_bytes()
            .iter()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
}

/// The directory `name` (one path part) of `parent`, opened without following a link.
fn open_dir_nofollow(parent: &Dir, name: &OsStr) -> io::Result<Dir> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    Ok(Dir::from_std_file(std::fs::File::from(fd)))
}

/// The staging directory `name` of `grants`, opened and locked: `None` when another holder has
/// it locked, or the directory by that name is no longer the one locked (a sweep removed it
/// meanwhile).
fn lock_dir(grants: &Dir, name: &OsStr) -> io::Result<Option<Dir>> {
    let dir = open_dir_nofollow(grants, name)?;
    match rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
        Err(error) => return Err(error.into()),
    }
    let named = match grants.symlink_metadata(name) {
        Ok(named) => named,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let same = named.is_dir() && identity(&named) == identity(&dir.dir_metadata()?);
    Ok(same.then_some(dir))
}

/// Remove the staging directories in `root`'s `.toolcell/grants` that no process holds
/// locked: what processes killed mid-call left behind, hard links to real files included.
/// Returns how many it removed.
///
/// Only directories named as [`Staging::new`] names them are touched; no link is followed (not
/// to reach `.toolcell/grants`, not to open an entry, not inside one: [`clear`] removes
/// links, never what they lead to); a directory a live process holds
/// locked, this one included, is left alone. A workspace without `.toolcell/grants` has none.
pub(crate) fn sweep(root: &Dir) -> io::Result<usize> {
    let mut grants = root.try_clone()?;
    for part in GRANTS_DIR.split('/') {
        grants = match open_dir_nofollow(&grants, OsStr::new(part)) {
            Ok(dir) => dir,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(error) => return Err(error),
        };
    }
    let mut removed = 0;
    // One that cannot be removed does not keep the others; the first failure is reported.
    let mut failed = None;
    for entry in grants.entries()? {
        let name = entry?.file_name();
        if !is_staging_name(&name) {
            continue;
        }
        // Held while it is removed, so no process can take it up meanwhile. Not a directory,
        // a link, gone already (an error): not ours to remove.
        let Some(_held) = lock_dir(&grants, &name).unwrap_or_default() else {
            continue;
        };
        match remove_tree(&grants, &name) {
            Ok(()) => removed += 1,
            Err(error) => {
                failed.get_or_insert(error);
            }
        }
    }
    match failed {
        Some(error) => Err(error),
        None => Ok(removed),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    /// A sweep removes the staging directories no process holds, and nothing else: not one held
    /// locked, not an entry of another name or kind, not what a link in one leads to.
    #[test]
    fn a_sweep_removes_only_staging_directories_no_one_holds() {
        let temp = tempfile::tempdir().expect("temp dir");
        let ws = temp.path().join("ws");
        let outside = temp.path().join("outside");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::create_dir_all(&outside).expect("mkdir");
        std::fs::write(outside.join("keep.txt"), "outside").expect("write");
        std::fs::write(ws.join("real.txt"), "real").expect("write");
        let root = Dir::open_ambient_dir(&ws, ambient_authority()).expect("open");
        assert_eq!(sweep(&root).expect("no grants dir yet"), 0);
        let pool = Arc::new(StagingPool::new(
            open_grants_dir(&root).expect("grants dir"),
        ));
        let live = Staging::new(&pool, root.try_clone().expect("clone")).expect("staging");

        // What a killed process leaves: unlocked, a hard link to a real file and a link out in it.
        let on_disk = ws.join(GRANTS_DIR);
        let dead = on_disk.join("0123456789abcdef01234567");
        std::fs::create_dir_all(dead.join("sub")).expect("mkdir");
        std::fs::hard_link(ws.join("real.txt"), dead.join("real.txt")).expect("hard link");
        std::os::unix::fs::symlink(&outside, dead.join("sub/out")).expect("symlink");
        // Not staging directories: another name, a file and a link by a staging name.
        std::fs::create_dir(on_disk.join("keep-me")).expect("mkdir");
        std::fs::write(on_disk.join("fedcba9876543210fedcba98"), "file").expect("write");
        std::os::unix::fs::symlink(&outside, on_disk.join("aaaaaaaaaaaaaaaaaaaaaaaa"))
            .expect("symlink");

        assert_eq!(sweep(&root).expect("sweep"), 1, "the dead one only");
        assert!(!dead.exists(), "the dead process's directory is gone");
        assert!(on_disk.join(&live.name).is_dir(), "the live one is kept");
        for kept in [
            "keep-me",
            "fedcba9876543210fedcba98",
            "aaaaaaaaaaaaaaaaaaaaaaaa",
        ] {
            assert!(on_disk.join(kept).symlink_metadata().is_ok(), "{kept}");
        }
        assert_eq!(
            std::fs::read_to_string(outside.join("keep.txt")).expect("read"),
            "outside"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("real.txt")).expect("read"),
            "real"
        );

        let name = live.name.clone();
        drop(live);
        assert_eq!(pool.kept(), 1, "a call's own is kept for the next call");
        assert_eq!(
            sweep(&root).expect("sweep"),
            0,
            "a kept one is still locked"
        );
        drop(pool);
        assert!(
            !on_disk.join(name).exists(),
            "a kept one is removed with its workspace"
        );
    }

    /// What a call left in its staging directory is gone before the directory serves another
    /// call, and a directory something else still holds, or past the pool's size, is removed.
    #[test]
    fn a_staging_directory_is_reused_only_when_emptied_and_unheld() {
        let temp = tempfile::tempdir().expect("temp dir");
        let ws = temp.path().join("ws");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::write(ws.join("real.txt"), "real").expect("write");
        let root = Dir::open_ambient_dir(&ws, ambient_authority()).expect("open");
        let pool = Arc::new(StagingPool::new(
            open_grants_dir(&root).expect("grants dir"),
        ));
        let on_disk = ws.join(GRANTS_DIR);
        let target = || root.try_clone().expect("clone");

        let mut first = Staging::new(&pool, target()).expect("staging");
        first.add(OsStr::new("real.txt"), true);
        first.finish().expect("staged");
        // What a tool may leave: a new file, a directory of files, the granted file.
        first.dir.write("left.txt", "left").expect("write");
        first.dir.create_dir_all("sub/deeper").expect("mkdir");
        first.dir.write("sub/deeper/f", "f").expect("write");
        let name = first.name.clone();
        let before = std::time::SystemTime::now();
        drop(first);
        assert_eq!(pool.kept(), 1);
        assert_eq!(
            std::fs::read_dir(on_disk.join(&name))
                .expect("kept")
                .count(),
            0,
            "emptied"
        );
        assert_eq!(
            std::fs::read_to_string(ws.join("real.txt")).expect("read"),
            "real"
        );

        let second = Staging::new(&pool, target()).expect("staging");
        assert_eq!(second.name, name, "the emptied one serves the next call");
        assert_eq!(pool.kept(), 0);
        let modified = second
            .dir
            .dir_metadata()
            .expect("stat")
            .modified()
            .expect("mtime");
        assert!(
            modified.into_std() >= before,
            "a reused directory has the time of its reuse"
        );

        // Held by something else when its call ends (a preopen that outlived it): removed.
        let held = Arc::clone(&second.dir);
        drop(second);
        assert_eq!(pool.kept(), 0);
        assert!(!on_disk.join(&name).exists(), "removed, not kept");
        drop(held);

        // One that grew past a fresh directory's size is not kept (on ext4 a directory keeps
        // its blocks when emptied; tmpfs gives them back, and then it may be kept).
        let big = Staging::new(&pool, target()).expect("staging");
        for i in 0..400 {
            big.dir
                .write(format!("a-rather-long-file-name-to-fill-blocks-{i:04}"), "")
                .expect("write");
        }
        let name = big.name.clone();
        drop(big);
        let kept = on_disk.join(&name);
        match pool.kept() {
            0 => assert!(!kept.exists(), "not kept: removed"),
            _ => assert!(
                std::fs::metadata(&kept).expect("kept").len() <= FRESH_DIR_BYTES,
                "kept only at a fresh directory's size"
            ),
        }

        // At most POOLED_STAGING_DIRS are kept; the rest are removed.
        let many: Vec<Staging> = (0..POOLED_STAGING_DIRS + 2)
            .map(|_| Staging::new(&pool, target()).expect("staging"))
            .collect();
        drop(many);
        assert_eq!(pool.kept(), POOLED_STAGING_DIRS);
        assert_eq!(
            std::fs::read_dir(&on_disk).expect("grants").count(),
            POOLED_STAGING_DIRS
        );
        drop(pool);
        assert_eq!(std::fs::read_dir(&on_disk).expect("grants").count(), 0);
    }

    /// A tree far deeper than a recursive removal survives (made as a tool can: short paths,
    /// a directory renamed into a new one over and over) is removed on a small stack.
    #[test]
    fn a_tree_ten_thousand_levels_deep_is_removed_on_a_small_stack() {
        const LEVELS: usize = 10_000;
        let temp = tempfile::tempdir().expect("temp dir");
        let root = Dir::open_ambient_dir(temp.path(), ambient_authority()).expect("open");
        root.create_dir("t").expect("mkdir");
        let tree = root.open_dir("t").expect("open");
        tree.create_dir("a").expect("mkdir");
        tree.write("a/leaf.txt", "leaf").expect("write");
        for _ in 0..LEVELS {
            tree.create_dir("n").expect("mkdir");
            tree.rename("a", &tree, "n/a").expect("rename down");
            tree.rename("n", &tree, "a").expect("rename up");
        }
        drop(tree);
        // 64 KiB of stack: a frame a level would need several megabytes.
        let removed = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || remove_tree(&root, OsStr::new("t")))
            .expect("a thread")
            .join()
            .expect("no overflow");
        removed.expect("removed");
        assert_eq!(std::fs::read_dir(temp.path()).expect("read").count(), 0);
    }

    #[test]
    fn only_names_staging_gives_are_staging_names() {
        for (name, expected) in [
            ("0123456789abcdef01234567", true),
            ("0123456789ABCDEF01234567", false),
            ("0123456789abcdef0123456", false),
            ("0123456789abcdef012345678", false),
            ("0123456789abcdef0123456g", false),
            ("../../../../../../../etc", false),
        ] {
            assert_eq!(is_staging_name(OsStr::new(name)), expected, "{name}");
        }
        let made = crate::digest::hex(&crate::digest::random::<NAME_BYTES>().expect("random"));
        assert!(is_staging_name(OsStr::new(&made)));
    }
}
