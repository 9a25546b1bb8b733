//! The file systems that show the host itself, not files: procfs (`/proc/self` is the host's
//! own process: its environment, command line, memory map, open files), sysfs, devfs and the
//! kernel's other views (cgroups, debugfs, tracefs, bpf, securityfs, efivars, ...). No path
//! grant reaches them, whatever a policy says, and a workspace may not be one.
//!
//! Decided by the file system an *opened* file lies on (`fstatfs`), never by a path's name: a
//! bind mount of `/proc` under the workspace, a symlink to `/proc/self`, or a workspace of `/`
//! are caught alike. devfs is `tmpfs` to `statfs`, so it is told by its device instead: the
//! devices of the file systems mounted at `/dev` and under it (`/dev/shm`), read once.

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

/// The devices of the file systems mounted at `/dev` and under it (devtmpfs, a container's
/// tmpfs, `/dev/shm` with other processes' shared memory, `/dev/hugepages`, `/dev/mqueue`),
/// read once from `/proc/self/mountinfo`; and `/dev`'s own device when it is a mount of its
/// own and mountinfo cannot be read. Empty when `/dev` is a plain directory of the root file
/// system and nothing is mounted under it.
static DEV_DEVICES: LazyLock<Vec<u64>> = LazyLock::new(|| {
    use std::os::unix::fs::MetadataExt as _;
    let mut devices: Vec<u64> = std::fs::read_to_string("/proc/self/mountinfo")
        .map(|text| devices_under_dev(&text))
        .unwrap_or_default();
    if let (Ok(dev), Ok(root)) = (std::fs::metadata("/dev"), std::fs::metadata("/"))
        && dev.dev() != root.dev()
        && !devices.contains(&dev.dev())
    {
        devices.push(dev.dev());
    }
    devices
});

/// The devices (`major:minor`, the third field) of the mounts in a `mountinfo` text whose
/// mount point (the fifth) is `/dev` or under it.
fn devices_under_dev(mountinfo: &str) -> Vec<u64> {
    let mut devices = Vec::new();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(device), Some(point)) = (fields.get(2), fields.get(4)) else {
            continue;
        };
        if !(*point == "/dev" || point.starts_with("/dev/")) {
            continue;
        }
        let Some((major, minor)) = device.split_once(':') else {
            continue;
        };
        if let (Ok(major), Ok(minor)) = (major.parse::<u32>(), minor.parse::<u32>()) {
            let device = rustix::fs::makedev(major, minor);
            if !devices.contains(&device) {
                devices.push(device);
            }
        }
    }
    devices
}

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
    if !DEV_DEVICES.is_empty()
        && let Ok(meta) = rustix::fs::fstat(&file)
        && DEV_DEVICES.contains(&meta.st_dev)
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
        if !DEV_DEVICES.is_empty() {
            assert_eq!(host_view(open("/dev")), Some("devfs"));
        }
        // /dev/shm, a mount of its own under /dev (other processes' shared memory).
        if std::fs::metadata("/dev/shm").is_ok_and(|meta| meta.is_dir()) {
            assert_eq!(host_view(open("/dev/shm")), Some("devfs"));
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

    #[test]
    fn every_mount_under_dev_is_devfs() {
        let mountinfo = "\
22 1 8:1 / / rw - ext4 /dev/sda1 rw
24 22 0:6 / /dev rw - devtmpfs devtmpfs rw
25 24 0:23 / /dev/shm rw - tmpfs tmpfs rw
31 22 0:40 / /devices rw - tmpfs tmpfs rw
32 22 0:41 / /run rw - tmpfs tmpfs rw
";
        assert_eq!(
            devices_under_dev(mountinfo),
            vec![rustix::fs::makedev(0, 6), rustix::fs::makedev(0, 23)]
        );
    }
}
