//! The file systems that show the host itself, not files: procfs (`/proc/self` is the host's
//! own process: its environment, command line, memory map, open files), sysfs, devfs and the
//! kernel's other views (cgroups, debugfs, tracefs, bpf, securityfs, efivars, ...). No path
//! grant reaches them, whatever a policy says, and a workspace may not be one.
//!
//! Decided by the file system an *opened* file lies on (`fstatfs`), never by a path's name: a
//! bind mount of `/proc` under the workspace, a symlink to `/proc/self`, or a workspace of `/`
//! are caught alike. devfs is `tmpfs` to `statfs`, so it is told by its device instead: the
//! device of the file system mounted at `/dev`, read once.

use std::os::fd::AsFd;
use std::sync::LazyLock;

/// The kernel's views of the host, by `statfs` magic (`linux/magic.h`), with their names.
const HOST_VIEWS: &[(u32, &str)] = &[
    (0x9fa0, "procfs"),
    (0x6265_6572, "sysfs"),
    (0x1cd1, "devpts"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0x0027_e0eb, "cgroupfs"),
    (0x6367_7270, "cgroup2fs"),
    (0xcafe_4a11, "bpffs"),
    (0x6165_676c, "pstorefs"),
    (0xde5e_81e4, "efivarfs"),
    (0x6265_6570, "configfs"),
    (0x6573_5543, "fusectl"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x4341_5d53, "smackfs"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x1980_0202, "mqueue"),
    (0x6e73_6673, "nsfs"),
];

/// The device of the file system mounted at `/dev` (devtmpfs, or a container's tmpfs), when
/// `/dev` is a mount of its own; `None` when it is a plain directory of the root file system.
static DEV_DEVICE: LazyLock<Option<u64>> = LazyLock::new(|| {
    use std::os::unix::fs::MetadataExt as _;
    let dev = std::fs::metadata("/dev").ok()?.dev();
    let root = std::fs::metadata("/").ok()?.dev();
    (dev != root).then_some(dev)
});

/// The name of the host's view `file` lies on ("procfs", "sysfs", "devfs", ...), or `None` for a
/// file system that holds files. A file whose file system cannot be told is taken for a view
/// (refused): what cannot be checked is not handed over.
pub fn host_view(file: impl AsFd) -> Option<&'static str> {
    let Ok(stat) = rustix::fs::fstatfs(&file) else {
        return Some("an unknown file system");
    };
    // The magic is 32 bits, held in a word whose width and sign vary by architecture.
    #[allow(clippy::unnecessary_cast, clippy::cast_possible_truncation)]
    let magic = stat.f_type as i64 as u32;
    if let Some((_, name)) = HOST_VIEWS.iter().find(|(known, _)| *known == magic) {
        return Some(name);
    }
    if let Some(dev) = *DEV_DEVICE
        && let Ok(meta) = rustix::fs::fstat(&file)
        && meta.st_dev == dev
    {
        return Some("devfs");
    }
    None
}

/// The view the path `name` (relative to `dir`, its last part not followed) lies on, if it
/// exists and is one; `None` when it does not exist or is plain files. Opened `O_PATH` (nothing
/// is read, a FIFO is not waited on) to ask the kernel what it lies on.
pub(crate) fn host_view_at(dir: impl AsFd, name: &std::path::Path) -> Option<&'static str> {
    use rustix::fs::{Mode, OFlags};
    match rustix::fs::openat(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(opened) => host_view(&opened),
        Err(_) => None,
    }
}

/// The view the absolute `path` (links followed) lies on, if it exists and is one.
pub(crate) fn host_view_of_path(path: &std::path::Path) -> Option<&'static str> {
    use rustix::fs::{Mode, OFlags};
    rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .ok()
        .and_then(|opened| host_view(&opened))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_views_are_told_from_files() {
        let open = |path: &str| std::fs::File::open(path).expect(path);
        assert_eq!(host_view(open("/proc")), Some("procfs"));
        assert_eq!(host_view(open("/proc/self")), Some("procfs"));
        assert_eq!(host_view(open("/sys")), Some("sysfs"));
        if DEV_DEVICE.is_some() {
            assert_eq!(host_view(open("/dev")), Some("devfs"));
        }
        let temp = tempfile::tempdir().expect("temp dir");
        assert_eq!(host_view(open(&temp.path().to_string_lossy())), None);
        assert_eq!(host_view(open(env!("CARGO_MANIFEST_DIR"))), None);
        // By what a path leads to, not its name: a link to /proc/self.
        std::os::unix::fs::symlink("/proc/self", temp.path().join("innocent")).expect("link");
        assert_eq!(
            host_view(open(&temp.path().join("innocent").to_string_lossy())),
            Some("procfs")
        );
        let root = open("/");
        assert_eq!(
            host_view_at(&root, std::path::Path::new("proc")),
            Some("procfs")
        );
        assert_eq!(
            host_view_at(&root, std::path::Path::new("no-such-entry")),
            None
        );
    }
}
