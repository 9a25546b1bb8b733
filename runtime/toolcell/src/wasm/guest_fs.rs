//! What a wasm guest's `wasi:filesystem` calls may do beyond staying inside their preopens: no
//! guest makes a symlink, and no guest sees a file its call's deny-read list names.
//!
//! Past the house's 700 lines: every shadowed `wasi:filesystem` function is here, each its own
//! named function, so that what a guest may reach through the file system is read in one place.
//!
//! wasmtime-wasi keeps every path a guest names inside the preopen it starts from. Two rules
//! are toolcell's own, linked in place of wasmtime-wasi's functions, which still do everything
//! these rules allow:
//!
//! - `descriptor.symlink-at` answers `not-permitted`. cap-std refuses an absolute target and
//!   never follows a link out of a preopen, but it lets a guest create a relative link such as
//!   `../../../etc/passwd`, which the user's editor, git or shell would follow later. No tool
//!   needs to create links, so none may.
//! - a path with a part that matches the call's deny-read patterns (`policy/files.rs`: `.env`,
//!   `*.pem`, `.ssh`, ...) is not there. Every `descriptor` method that takes a path answers
//!   `no-entry` for it before wasmtime-wasi sees it, and `directory-entry-stream` skips such
//!   names. A path is checked as written (`sub/../.env` names `.env`) and as it resolves in its
//!   directory (a link `notes -> .env`, a directory link into `.ssh`), by cap-std, which keeps
//!   to wasmtime-wasi's rules; a path that cannot be resolved for the check is refused too.
//!   `readlink-at` is refused when the link's own text names such a file.
//!
//! - a directory's `status-change-timestamp` is its data-modification time, not its birth time
//!   (which wasmtime-wasi reports there, and which would tell a call whether its staging
//!   directory served an earlier one: [`without_birth_time`]).
//! - a file's output stream writes where the call is (`wasm/guest_write.rs`), not on tokio's
//!   blocking pool: same permissions, one hand-off fewer.
//!
//! - the host's own files (its policy, audit, tokens, keys, password and compile-cache files,
//!   its tools directories: `hostfs/own.rs`) are not there either, whatever the deny-read list
//!   says: checked by what a path resolves to (and what a listed entry is), not by name, and by
//!   file identity after an open, so a hard link to one elsewhere is no way in.
//! - nothing on a file system that shows the host itself (procfs, sysfs, devfs:
//!   `hostfs/pseudo.rs`) is there, under a workspace of `/`, through a bind mount or a link:
//!   decided by what the kernel says the opened file lies on (after every `open-at`, and, for
//!   the calls that take a path without opening it, on the file the path leads to), and a
//!   listing leaves out the directories that are such mount points.
//!
//! A name can change between that check and the open it guards, by another process's hand
//! (a directory preopened for reading cannot be changed by the guest, and a writable preopen is
//! a staging directory holding only the files the gate granted by name, `gate/staging.rs`): a
//! name swapped for a link to `.env` just after the check. So `open-at` is checked twice: the
//! path before, and the descriptor it made after, by the path the kernel gives that
//! descriptor (`/proc/self/fd`), which no swap can change; a descriptor that turns out hidden
//! is closed and the guest told `no-entry`. What names cannot show: a hard link to a secret
//! under an innocent name is that file. A directory's link count (`nlink`, in `stat`) says how
//! many subdirectories it has, hidden ones included: that a hidden directory exists is told,
//! never its name or content (accepted: hiding it would mean faking every directory's stat).

use crate::policy::files::DenyRead;
use crate::wasm::sandbox::CallState;
use std::ffi::OsStr;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::Arc;
use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView as _};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntry, ErrorCode, HostDescriptor,
    HostDirectoryEntryStream, MetadataHashValue, NewTimestamp, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::{FsResult, ReaddirIterator};

/// The `wasi:filesystem` version wasmtime-wasi links (guests importing any 0.2.x reach it).
const WASI_FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// What a shadowed function returns to the guest: its WIT result, or a trap.
type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// Link toolcell's rules in place of wasmtime-wasi's `wasi:filesystem/types` functions that
/// take a path, make a link or list a directory. `linker` must already hold wasmtime-wasi's.
pub(crate) fn link(linker: &mut Linker<CallState>) -> anyhow::Result<()> {
    linker.allow_shadowing(true);
    let linked = shadow(linker);
    linker.allow_shadowing(false);
    linked
}

/// Each shadowed function, linked by its WIT name; the rest of `wasi:filesystem/types` stays
/// wasmtime-wasi's (and a file's output stream, `wasm/guest_write.rs`).
fn shadow(linker: &mut Linker<CallState>) -> anyhow::Result<()> {
    let mut types = linker.instance(WASI_FILESYSTEM_TYPES)?;
    types.func_wrap_async("[method]descriptor.symlink-at", symlink_at)?;
    types.func_wrap_async("[method]descriptor.open-at", open_at)?;
    types.func_wrap_async("[method]descriptor.stat-at", stat_at)?;
    types.func_wrap_async("[method]descriptor.stat", stat)?;
    types.func_wrap_async("[method]descriptor.metadata-hash-at", metadata_hash_at)?;
    types.func_wrap_async("[method]descriptor.set-times-at", set_times_at)?;
    types.func_wrap_async("[method]descriptor.readlink-at", readlink_at)?;
    types.func_wrap_async(
        "[method]descriptor.create-directory-at",
        create_directory_at,
    )?;
    types.func_wrap_async(
        "[method]descriptor.remove-directory-at",
        remove_directory_at,
    )?;
    types.func_wrap_async("[method]descriptor.unlink-file-at", unlink_file_at)?;
    types.func_wrap_async("[method]descriptor.rename-at", rename_at)?;
    types.func_wrap_async("[method]descriptor.link-at", link_at)?;
    types.func_wrap_async("[method]descriptor.read-directory", read_directory)?;
    types.func_wrap_async(
        "[method]directory-entry-stream.read-directory-entry",
        read_directory_entry,
    )?;
    crate::wasm::guest_write::link(&mut types)
}

/// A call's store, as a shadowed function receives it.
type Store<'a> = StoreContextMut<'a, CallState>;

/// What a shadowed function hands wasmtime: the future of its [`Answer`].
type Shadowed<'a, T> = Box<dyn Future<Output = Answer<T>> + Send + 'a>;

/// `descriptor.symlink-at`: refused (`not-permitted`), whatever the link.
fn symlink_at(
    _store: Store<'_>,
    (_fd, _target, _link): (Resource<Descriptor>, String, String),
) -> Shadowed<'_, ()> {
    Box::new(async { Ok((Err::<(), _>(ErrorCode::NotPermitted),)) })
}

/// `descriptor.open-at`: a hidden path is absent, something an open could wait on is refused,
/// and what the open made is checked again by the path the kernel gives it.
fn open_at(
    mut store: Store<'_>,
    (fd, path_flags, path, open_flags, flags): (
        Resource<Descriptor>,
        PathFlags,
        String,
        OpenFlags,
        DescriptorFlags,
    ),
) -> Shadowed<'_, Resource<Descriptor>> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &path, follows(path_flags)).await {
            return absent();
        }
        if would_block(store.data_mut(), &fd, &path, follows(path_flags)) {
            return Ok((Err(ErrorCode::NotPermitted),));
        }
        let opened_from = OpenedFrom::new(store.data_mut(), &fd);
        let mut view = store.data_mut().filesystem();
        let opened =
            HostDescriptor::open_at(&mut view, fd, path_flags, path, open_flags, flags).await;
        // What was opened, checked again now that it cannot change: a name swapped
        // for a link between the check above and the open is caught here.
        if let (Ok(new), Some(from)) = (&opened, opened_from)
            && from.hides(view.table.get(new).ok())
        {
            if let Ok(new) = opened {
                let _ = view.table.delete(new);
            }
            return absent();
        }
        answer(opened)
    })
}

/// `descriptor.stat-at`: a hidden path is absent; a directory's stat has no birth time.
fn stat_at(
    mut store: Store<'_>,
    (fd, path_flags, path): (Resource<Descriptor>, PathFlags, String),
) -> Shadowed<'_, DescriptorStat> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &path, follows(path_flags)).await {
            return absent::<DescriptorStat>();
        }
        let mut view = store.data_mut().filesystem();
        answer(
            HostDescriptor::stat_at(&mut view, fd, path_flags, path)
                .await
                .map(without_birth_time),
        )
    })
}

/// `descriptor.stat`: a directory's stat has no birth time.
fn stat(mut store: Store<'_>, (fd,): (Resource<Descriptor>,)) -> Shadowed<'_, DescriptorStat> {
    Box::new(async move {
        let mut view = store.data_mut().filesystem();
        answer(
            HostDescriptor::stat(&mut view, fd)
                .await
                .map(without_birth_time),
        )
    })
}

/// `descriptor.metadata-hash-at`: a hidden path is absent.
fn metadata_hash_at(
    mut store: Store<'_>,
    (fd, path_flags, path): (Resource<Descriptor>, PathFlags, String),
) -> Shadowed<'_, MetadataHashValue> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &path, follows(path_flags)).await {
            return absent::<MetadataHashValue>();
        }
        let mut view = store.data_mut().filesystem();
        answer(HostDescriptor::metadata_hash_at(&mut view, fd, path_flags, path).await)
    })
}

/// `descriptor.set-times-at`: a hidden path is absent.
fn set_times_at(
    mut store: Store<'_>,
    (fd, path_flags, path, accessed, modified): (
        Resource<Descriptor>,
        PathFlags,
        String,
        NewTimestamp,
        NewTimestamp,
    ),
) -> Shadowed<'_, ()> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &path, follows(path_flags)).await {
            return absent();
        }
        let mut view = store.data_mut().filesystem();
        answer(
            HostDescriptor::set_times_at(&mut view, fd, path_flags, path, accessed, modified).await,
        )
    })
}

/// `descriptor.readlink-at`: a hidden path is absent, and so is a link whose text names a
/// hidden file.
fn readlink_at(
    mut store: Store<'_>,
    (fd, path): (Resource<Descriptor>, String),
) -> Shadowed<'_, String> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &path, false).await {
            return absent::<String>();
        }
        let deny = store.data().deny_read.clone();
        let mut view = store.data_mut().filesystem();
        match HostDescriptor::readlink_at(&mut view, fd, path).await {
            // The link's text names a hidden file: it says one is there.
            Ok(target) if deny.part_matching(Path::new(&target)).is_some() => absent(),
            result => answer(result),
        }
    })
}

/// `descriptor.create-directory-at`: a hidden path is absent.
fn create_directory_at(
    mut store: Store<'_>,
    (fd, path): (Resource<Descriptor>, String),
) -> Shadowed<'_, ()> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &path, false).await {
            return absent();
        }
        let mut view = store.data_mut().filesystem();
        answer(HostDescriptor::create_directory_at(&mut view, fd, path).await)
    })
}

/// `descriptor.remove-directory-at`: a hidden path is absent.
fn remove_directory_at(
    mut store: Store<'_>,
    (fd, path): (Resource<Descriptor>, String),
) -> Shadowed<'_, ()> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &path, false).await {
            return absent();
        }
        let mut view = store.data_mut().filesystem();
        answer(HostDescriptor::remove_directory_at(&mut view, fd, path).await)
    })
}

/// `descriptor.unlink-file-at`: a hidden path is absent.
fn unlink_file_at(
    mut store: Store<'_>,
    (fd, path): (Resource<Descriptor>, String),
) -> Shadowed<'_, ()> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &path, false).await {
            return absent();
        }
        let mut view = store.data_mut().filesystem();
        answer(HostDescriptor::unlink_file_at(&mut view, fd, path).await)
    })
}

/// `descriptor.rename-at`: absent when either path is hidden (the old one checked first).
fn rename_at(
    mut store: Store<'_>,
    (fd, old_path, new_fd, new_path): (Resource<Descriptor>, String, Resource<Descriptor>, String),
) -> Shadowed<'_, ()> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &old_path, false).await
            || hidden(store.data_mut(), &new_fd, &new_path, false).await
        {
            return absent();
        }
        let mut view = store.data_mut().filesystem();
        answer(HostDescriptor::rename_at(&mut view, fd, old_path, new_fd, new_path).await)
    })
}

/// `descriptor.link-at`: absent when either path is hidden (the old one checked first).
fn link_at(
    mut store: Store<'_>,
    (fd, old_flags, old_path, new_fd, new_path): (
        Resource<Descriptor>,
        PathFlags,
        String,
        Resource<Descriptor>,
        String,
    ),
) -> Shadowed<'_, ()> {
    Box::new(async move {
        if hidden(store.data_mut(), &fd, &old_path, follows(old_flags)).await
            || hidden(store.data_mut(), &new_fd, &new_path, false).await
        {
            return absent();
        }
        let mut view = store.data_mut().filesystem();
        answer(HostDescriptor::link_at(&mut view, fd, old_flags, old_path, new_fd, new_path).await)
    })
}

/// `descriptor.read-directory`: the stream, with where the listed directory is noted for
/// [`read_directory_entry`].
fn read_directory(
    mut store: Store<'_>,
    (fd,): (Resource<Descriptor>,),
) -> Shadowed<'_, Resource<ReaddirIterator>> {
    Box::new(async move {
        // Where the listed directory is, for its entries to be checked against the
        // host's own files and views (by what they are, not by name).
        let listed = match store.data_mut().filesystem().table.get(&fd) {
            Ok(Descriptor::Dir(dir)) => fd_path(&dir.dir),
            _ => None,
        };
        let mut view = store.data_mut().filesystem();
        let stream = HostDescriptor::read_directory(&mut view, fd).await;
        if let Ok(stream) = &stream {
            // Keyed by the stream's slot: a slot reused by a later stream is
            // overwritten, so this holds at most one entry per live resource.
            let rep = stream.rep();
            let listings = &mut store.data_mut().listings;
            match listed {
                Some(path) => {
                    listings.insert(rep, path);
                }
                None => {
                    listings.remove(&rep);
                }
            }
        }
        answer(stream)
    })
}

/// `directory-entry-stream.read-directory-entry`: the next entry the call does not hide.
fn read_directory_entry(
    mut store: Store<'_>,
    (stream,): (Resource<ReaddirIterator>,),
) -> Shadowed<'_, Option<DirectoryEntry>> {
    Box::new(async move {
        let listing = Listing {
            deny: store.data().deny_read.clone(),
            protected: Arc::clone(&store.data().protected),
            credentials: Arc::clone(&store.data().credentials),
            listed: store.data().listings.get(&stream.rep()).cloned(),
        };
        let mut view = store.data_mut().filesystem();
        // Each hidden name is skipped: the stream holds a bounded list, read once.
        loop {
            let next = HostDirectoryEntryStream::read_directory_entry(
                &mut view,
                Resource::new_borrow(stream.rep()),
            )
            .await;
            match next {
                Ok(Some(entry)) if listing.hides(&entry) => {}
                next => return answer(next),
            }
        }
    })
}

/// What a directory listing hides, and where the listed directory is (`None` when unknown).
struct Listing {
    deny: DenyRead,
    protected: Arc<[crate::hostfs::OwnFile]>,
    credentials: crate::gate::secrets::Identities,
    listed: Option<std::path::PathBuf>,
}

impl Listing {
    /// Whether `entry` is hidden: by its name, or (where the listed directory is known) by its
    /// path, by being one of the host's own files, a host-view mount point or another name of
    /// a hidden file.
    fn hides(&self, entry: &DirectoryEntry) -> bool {
        let Listing {
            deny,
            protected,
            credentials,
            listed,
        } = self;
        deny.matching(OsStr::new(&entry.name)).is_some()
            || listed.as_ref().is_some_and(|dir| {
                let path = dir.join(&entry.name);
                deny.place_matching(&path).is_some()
                    || crate::hostfs::own::covers_path(protected, &path)
                    // A mount point of procfs, sysfs or devfs (under a
                    // workspace of `/`): a directory, asked of the kernel.
                    || (entry.type_ == DescriptorType::Directory
                        && crate::hostfs::host_view_of_path(&path).is_some())
                    // Another name (a hard link) of the host's own file
                    // or of a credential: by what it is.
                    || (entry.type_ == DescriptorType::RegularFile
                        && std::fs::symlink_metadata(&path).is_ok_and(|meta| {
                            other_name_of_hidden(&meta, protected, credentials)
                        }))
            })
    }
}

/// A directory's stat with its data-modification time where wasmtime-wasi puts its creation
/// (birth) time, as `status-change-timestamp`. A staging directory serves more than one call
/// (`gate/staging.rs`): its birth time is the first call's, and a later call comparing it with
/// the directory's other times could tell whether it was reused, which an earlier call can
/// decide (by growing it past reuse): one bit from call to call. No tool needs a directory's
/// birth time.
fn without_birth_time(mut stat: DescriptorStat) -> DescriptorStat {
    if stat.type_ == DescriptorType::Directory {
        stat.status_change_timestamp = stat.data_modification_timestamp;
    }
    stat
}

/// The directory an `open-at` starts from, and what its call hides: to check the descriptor the
/// open made, by the path it has (`/proc/self/fd`), once it is made.
struct OpenedFrom {
    dir: Arc<std::fs::File>,
    deny: DenyRead,
    protected: Arc<[crate::hostfs::OwnFile]>,
    credentials: crate::gate::secrets::Identities,
}

impl OpenedFrom {
    /// For an `open-at` from `fd` in `state`'s call; `None` when `fd` is not a directory (which
    /// wasmtime-wasi refuses).
    fn new(state: &mut CallState, fd: &Resource<Descriptor>) -> Option<OpenedFrom> {
        let (deny, protected) = (state.deny_read.clone(), Arc::clone(&state.protected));
        let credentials = Arc::clone(&state.credentials);
        match state.filesystem().table.get(fd) {
            Ok(Descriptor::Dir(dir)) => Some(OpenedFrom {
                dir: Arc::clone(&dir.dir),
                deny,
                protected,
                credentials,
            }),
            _ => None,
        }
    }

    /// Whether `opened` (the descriptor the open made) is a file the call hides: it lies on a
    /// file system that shows the host itself (procfs, sysfs, devfs: `hostfs::host_view`), the
    /// path the kernel gives it is one of the host's own files, or, relative to the directory
    /// the open started from, it has a part the deny-read list names. What cannot be told (no
    /// path, a path outside that directory, which a rename racing the open could make) is
    /// hidden too.
    fn hides(&self, opened: Option<&Descriptor>) -> bool {
        let file = match opened {
            Some(Descriptor::File(file)) => &file.file,
            Some(Descriptor::Dir(dir)) => &dir.dir,
            None => return true,
        };
        if crate::hostfs::host_view(&**file).is_some() {
            return true;
        }
        // Another name (a hard link) of one of the workspace's credential files.
        if !self.credentials.is_empty()
            && let Ok(meta) = file.metadata()
            && other_name_of_hidden(&meta, &[], &self.credentials)
        {
            return true;
        }
        if self.deny.is_empty() && self.protected.is_empty() {
            return false;
        }
        let (Some(from), Some(real)) = (fd_path(&self.dir), fd_path(file)) else {
            return true;
        };
        if crate::hostfs::own::covers_path(&self.protected, &real)
            || crate::hostfs::own::covers_file(&self.protected, file)
        {
            return true;
        }
        if self.deny.is_empty() {
            return false;
        }
        match real.strip_prefix(&from) {
            Ok(relative) => self.deny.hiding(relative, Some(&real)).is_some(),
            Err(_) => true,
        }
    }
}

/// Whether a file with metadata `meta` is, under another name (it has more than one: a hard
/// link), one of the host's own files (`protected`) or one of the workspace's credential files.
fn other_name_of_hidden(
    meta: &std::fs::Metadata,
    protected: &[crate::hostfs::OwnFile],
    credentials: &crate::gate::secrets::Credentials,
) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    meta.is_file()
        && meta.nlink() > 1
        && (crate::hostfs::own::covers_identity(protected, meta)
            || credentials.covers(meta.dev(), meta.ino()))
}

/// The path the kernel gives an open file (its `/proc/self/fd` link): where it is now, links
/// resolved. `None` if it cannot be read.
fn fd_path(file: &std::fs::File) -> Option<std::path::PathBuf> {
    use std::os::fd::AsRawFd as _;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

/// Whether a call with these flags follows a link in the last part of its path.
fn follows(flags: PathFlags) -> bool {
    flags.contains(PathFlags::SYMLINK_FOLLOW)
}

/// The answer to a path that names a hidden file: there is nothing there. Every refusal of a
/// hidden name comes through here.
#[cold]
fn absent<T>() -> Answer<T> {
    Ok((Err(ErrorCode::NoEntry),))
}

/// wasmtime-wasi's answer, as the guest receives it: its error code, or a trap.
fn answer<T>(result: FsResult<T>) -> Answer<T> {
    match result {
        Ok(value) => Ok((Ok(value),)),
        Err(error) => Ok((Err(error.downcast()?),)),
    }
}

/// Whether `path`, from the directory `fd` of `state`'s call, names or leads to a file its
/// deny-read list hides (the last part followed if `follow`). A descriptor that is not a
/// directory is left to wasmtime-wasi, which refuses it; an empty list hides nothing, and
/// resolves nothing.
fn hidden(
    state: &mut CallState,
    fd: &Resource<Descriptor>,
    path: &str,
    follow: bool,
) -> impl Future<Output = bool> + Send + 'static {
    let hides = Hides {
        deny: state.deny_read.clone(),
        protected: Arc::clone(&state.protected),
        credentials: Arc::clone(&state.credentials),
    };
    let named = hides.deny.part_matching(Path::new(path)).is_some();
    let dir = match state.filesystem().table.get(fd) {
        Ok(Descriptor::Dir(dir)) if !named => Some(Arc::clone(&dir.dir)),
        _ => None,
    };
    let path = path.to_owned();
    async move {
        if named {
            return true;
        }
        let Some(dir) = dir else {
            return false;
        };
        // Resolving walks the file system, on the calling thread, as every file operation of
        // a call does (`sandbox.rs`: `allow_blocking_current_thread`).
        (!hides.is_empty() && resolves_hidden(&dir, &path, follow, &hides))
            || hides.other_name(&dir, &path, follow)
            || on_host_view(&dir, &path, follow)
    }
}

/// Whether `path`, from the directory `dir`, leads onto a file system that shows the host itself
/// (procfs, sysfs, devfs: `hostfs::host_view`), through a mount point under a granted
/// directory (a workspace of `/`, a bind mount) or a link: asked of the kernel on the file the
/// path opens (`O_PATH`: nothing read, nothing waited on), resolved as wasmtime-wasi resolves
/// it (cap-std, inside the directory). What does not open is left to wasmtime-wasi.
fn on_host_view(dir: &std::fs::File, path: &str, follow: bool) -> bool {
    use cap_std::fs::OpenOptionsExt as _;
    use rustix::fs::OFlags;
    let Ok(dir) = dir.try_clone().map(cap_std::fs::Dir::from_std_file) else {
        return true;
    };
    let mut flags = OFlags::PATH;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let mut options = cap_std::fs::OpenOptions::new();
    options.read(true).custom_flags(flags.bits() as i32);
    dir.open_with(path, &options)
        .is_ok_and(|opened| crate::hostfs::host_view(&opened).is_some())
}

/// Whether `path`, from the directory `fd` of `state`'s call, names something an open could
/// wait on forever: anything but a regular file, a directory or (not followed) a symlink. A
/// call's file operations run on the thread that runs the call (`sandbox.rs`), where a FIFO
/// with no writer would hold that thread past the call's deadline; a tool has no use for one
/// (nor for a device or a socket), so `open-at` refuses them (`not-permitted`). A name that
/// does not resolve (absent, or a link out of the preopen) is left to wasmtime-wasi.
///
/// Checked before the open, so a FIFO put in place between this check and the open by
/// another process on the host would still be opened: the tool itself cannot make one (WASI
/// has no `mknod`), and neither can a caller (the file tools write regular files).
fn would_block(state: &mut CallState, fd: &Resource<Descriptor>, path: &str, follow: bool) -> bool {
    let Ok(Descriptor::Dir(dir)) = state.filesystem().table.get(fd) else {
        return false;
    };
    let Ok(dir) = dir.dir.try_clone().map(cap_std::fs::Dir::from_std_file) else {
        return false;
    };
    let metadata = if follow {
        dir.metadata(path)
    } else {
        dir.symlink_metadata(path)
    };
    metadata.is_ok_and(|meta| {
        let kind = meta.file_type();
        !(kind.is_file() || kind.is_dir() || kind.is_symlink())
    })
}

/// What a call hides in its preopens: names its deny-read list matches, and the runtime's
/// protected files (absolute paths).
#[derive(Clone)]
struct Hides {
    deny: DenyRead,
    protected: Arc<[crate::hostfs::OwnFile]>,
    credentials: crate::gate::secrets::Identities,
}

impl Hides {
    fn is_empty(&self) -> bool {
        self.deny.is_empty() && self.protected.is_empty()
    }

    /// Whether `path`, from the directory `dir` (its last part followed if `follow`), is a file
    /// with more than one name that is one of the host's own files or a credential file
    /// ([`other_name_of_hidden`]): a `stat-at` of a hard link to the audit says nothing of it.
    /// One `stat` inside the directory (cap-std); what does not resolve is left to the call.
    fn other_name(&self, dir: &std::fs::File, path: &str, follow: bool) -> bool {
        if self.protected.is_empty() && self.credentials.is_empty() {
            return false;
        }
        let Ok(dir) = dir.try_clone().map(cap_std::fs::Dir::from_std_file) else {
            return true;
        };
        let meta = if follow {
            dir.metadata(path)
        } else {
            dir.symlink_metadata(path)
        };
        let Ok(meta) = meta else {
            return false;
        };
        use cap_std::fs::MetadataExt as _;
        meta.is_file()
            && meta.nlink() > 1
            && (self
                .protected
                .iter()
                .any(|own| own.identity() == Some((meta.dev(), meta.ino())))
                || self.credentials.covers(meta.dev(), meta.ino()))
    }

    /// Whether the path `relative` (resolved, relative to the directory whose real path is
    /// `base`; `None` when that could not be read) is hidden.
    fn hide(&self, base: Option<&Path>, relative: &Path) -> bool {
        if self.deny.part_matching(relative).is_some() {
            return true;
        }
        if self.deny.has_places() {
            match base {
                Some(base) if self.deny.place_matching(&base.join(relative)).is_some() => {
                    return true;
                }
                Some(_) => {}
                None => return true,
            }
        }
        if self.protected.is_empty() {
            return false;
        }
        match base {
            Some(base) => crate::hostfs::own::covers_path(&self.protected, &base.join(relative)),
            None => true,
        }
    }
}

/// Whether `path` (no part of which is hidden as written), from the directory `dir`, resolves
/// to a path with a hidden part: through links in the directories above its last part, and in
/// its last part too if `follow` (or if it ends in `..`). What cannot be resolved for the check
/// is hidden, except what does not exist, which the call itself will not find. Blocking.
fn resolves_hidden(dir: &std::fs::File, path: &str, follow: bool, hides: &Hides) -> bool {
    let base = if hides.protected.is_empty() && !hides.deny.has_places() {
        None
    } else {
        fd_path(dir)
    };
    let Ok(dir) = dir.try_clone().map(cap_std::fs::Dir::from_std_file) else {
        return true;
    };
    // A path that ends in `/`, `/.` or `/..` has its last link followed by the kernel whatever
    // the call's flags say (`keys/` opens the directory `keys -> .ssh` points to), while
    // `Path` drops that ending (`Path::new("keys/").file_name()` is `keys`): such a path is
    // always resolved in full.
    let last = path.rsplit('/').next().unwrap_or_default();
    let follow = follow || matches!(last, "" | "." | "..");
    let path = Path::new(path);
    let hides = |resolved: io::Result<std::path::PathBuf>| match resolved {
        Ok(real) => Some(hides.hide(base.as_deref(), &real)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(_) => Some(true),
    };
    if follow || path.file_name().is_none() {
        match hides(dir.canonicalize(path)) {
            Some(hidden) => return hidden,
            // A link to nothing leads to a name this check cannot see: as good as absent.
            None if dir
                .symlink_metadata(path)
                .is_ok_and(|meta| meta.is_symlink()) =>
            {
                return true;
            }
            None => {}
        }
    }
    let parent = path
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    // The last part, unfollowed, where its parent resolves: a protected file is hidden by
    // what it is, not only by what its name matches.
    let last = path.file_name().map(Path::new);
    hides(dir.canonicalize(parent).map(|real| match last {
        Some(last) => real.join(last),
        None => real,
    }))
    .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths checked as they resolve: through links to hidden files and directories, and not
    /// through what merely lies beside them.
    #[test]
    fn a_path_is_hidden_as_it_resolves() {
        let temp = tempfile::tempdir().expect("temp dir");
        let root = temp.path();
        for (path, text) in [
            (".env", "TOKEN"),
            (".ssh/id_rsa", "KEY"),
            (".ssh/config", "Host x"),
            ("notes.txt", "notes"),
            ("sub/readme", "readme"),
        ] {
            std::fs::create_dir_all(root.join(path).parent().expect("parent")).expect("mkdir");
            std::fs::write(root.join(path), text).expect("write");
        }
        let link = |target: &str, at: &str| {
            std::os::unix::fs::symlink(target, root.join(at)).expect("symlink");
        };
        link(".env", "innocent");
        link(".ssh", "keys");
        link("../.ssh", "sub/up");
        link("nowhere", "dangling");
        link("notes.txt", "fine");
        let dir = std::fs::File::open(root).expect("open");
        let deny = Hides {
            deny: DenyRead::default(),
            protected: Arc::from(Vec::new()),
            credentials: Default::default(),
        };
        for (path, follow, expected) in [
            ("notes.txt", true, false),
            ("sub/readme", true, false),
            ("fine", true, false),
            ("innocent", true, true),
            ("innocent", false, false),
            ("keys/config", false, true),
            ("keys", true, true),
            ("keys", false, false),
            // The kernel follows a link whose name ends in `/` or `/.`, whatever the flags
            // (found by a hostile review: `keys/` opened `.ssh` and listed its other files).
            ("keys/", false, true),
            ("keys/.", false, true),
            ("sub/up/.", false, true),
            ("sub/up/", false, true),
            ("sub/", false, false),
            ("sub/.", false, false),
            ("sub/up/config", true, true),
            ("sub/..", true, false),
            ("dangling", true, true),
            ("dangling", false, false),
            ("new.txt", true, false),
            ("missing/new.txt", false, false),
            ("../outside", true, true),
        ] {
            assert_eq!(
                resolves_hidden(&dir, path, follow, &deny),
                expected,
                "{path} (follow: {follow})"
            );
        }
        // The runtime's protected files, by what they are: by name, through a link, and
        // unfollowed; a file beside them is not.
        std::fs::write(root.join("audit.jsonl"), "chain").expect("write");
        link("audit.jsonl", "trail");
        let real_root = std::fs::canonicalize(root).expect("canonical");
        let protect = Hides {
            deny: DenyRead::from(Vec::<String>::new()),
            protected: {
                let own = crate::hostfs::OwnFiles::new();
                own.register(&real_root.join("audit.jsonl"));
                own.snapshot()
            },
            credentials: Default::default(),
        };
        for (path, follow, expected) in [
            ("audit.jsonl", false, true),
            ("audit.jsonl", true, true),
            ("./audit.jsonl", false, true),
            ("sub/../audit.jsonl", false, true),
            ("trail", true, true),
            ("trail", false, false),
            ("notes.txt", true, false),
            (".env", true, false),
        ] {
            assert_eq!(
                resolves_hidden(&dir, path, follow, &protect),
                expected,
                "protected: {path} (follow: {follow})"
            );
        }
        // A hard link to it: another name of the same file, told by what it is (a `stat-at`
        // of it says nothing of the audit); a file with one name is not looked up.
        std::fs::hard_link(root.join("audit.jsonl"), root.join("hard")).expect("hard link");
        assert!(
            !resolves_hidden(&dir, "hard", false, &protect),
            "its name is innocent"
        );
        assert!(protect.other_name(&dir, "hard", false));
        assert!(protect.other_name(&dir, "audit.jsonl", true));
        assert!(!protect.other_name(&dir, "notes.txt", true));
        assert!(!deny.other_name(&dir, "hard", false), "nothing registered");
    }
}
