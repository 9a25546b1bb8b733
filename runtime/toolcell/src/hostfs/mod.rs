//! What of the host's own file system no tool reaches, whatever a grant says: the files the host
//! reads and writes for itself ([`OwnFiles`]: one registry, by path and by identity), and the
//! file systems that show the host itself rather than files ([`host_view`]: procfs, sysfs,
//! devfs and their kin), decided by what an opened file lies on, never by its name.
//!
//! Both are read by the gate (a grant that names one is refused, `gate/filesystem.rs`) and by
//! the wasm sandbox (inside a granted directory they are not there, `wasm/guest_fs.rs`). Every
//! file the command line, a server or an embedding reads for itself is read through
//! [`OwnFiles::read`], which registers it as it opens it: there is no second list to keep in
//! step.

pub(crate) mod own;
pub(crate) mod pseudo;
mod read;

pub use own::{OwnFile, OwnFiles};
pub use pseudo::host_view;
pub(crate) use pseudo::{host_view_at, host_view_of_path};
pub use read::{read_bounded, read_bounded_no_link, read_bounded_text};
