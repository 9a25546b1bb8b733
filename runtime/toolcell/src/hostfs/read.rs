//! A file read whole, up to a bound: the one reader of every file the host reads for itself
//! (its own files, a registry's cache, a lock file), so that no file, however large or however
//! strange (a FIFO, a device), holds the host or its memory.

use std::io::{self, Read as _};
use std::path::Path;

/// The bytes of the regular file at `path`, at most `max` of them: a longer file is an error
/// (`longer than MAX bytes`), as is anything but a regular file (a FIFO or a device would
/// block or never end; it is opened without waiting and refused).
pub fn read_bounded(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    read_opened(open_regular(path)?, max)
}

/// [`read_bounded`], but a symbolic link at `path` itself is refused rather than followed: for
/// a directory others may write (the compile cache), where a planted link must not send the
/// read elsewhere.
pub fn read_bounded_no_link(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    read_opened(open_regular_with(path, rustix::fs::OFlags::NOFOLLOW)?, max)
}

/// [`read_bounded`], as UTF-8 text.
pub fn read_bounded_text(path: &Path, max: u64) -> io::Result<String> {
    String::from_utf8(read_bounded(path, max)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// `path` opened for reading, if it is a regular file. Opened without blocking (a FIFO with no
/// writer would otherwise wait forever in `open`), then checked by what was opened.
pub(crate) fn open_regular(path: &Path) -> io::Result<std::fs::File> {
    open_regular_with(path, rustix::fs::OFlags::empty())
}

/// [`open_regular`], with `flags` besides (`NOFOLLOW`).
fn open_regular_with(path: &Path, flags: rustix::fs::OFlags) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((rustix::fs::OFlags::NONBLOCK | flags).bits() as i32)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// At most `max` bytes of `file`; an error if it holds more.
pub(crate) fn read_opened(file: std::fs::File, max: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("longer than {max} bytes"),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_up_to_its_bound_and_nothing_strange_is_read() {
        let temp = tempfile::tempdir().expect("temp dir");
        let file = temp.path().join("f");
        std::fs::write(&file, "12345").expect("write");
        assert_eq!(read_bounded(&file, 5).expect("read"), b"12345");
        let long = read_bounded(&file, 4).expect_err("too long");
        assert_eq!(long.kind(), io::ErrorKind::FileTooLarge, "{long}");
        assert!(read_bounded(temp.path(), 10).is_err(), "a directory");
        // A FIFO with no writer: refused at once, not waited on.
        let fifo = temp.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        let refused = read_bounded(&fifo, 10).expect_err("a FIFO");
        assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");
        std::fs::write(&file, [0xff, 0xfe]).expect("write");
        assert!(read_bounded_text(&file, 10).is_err(), "not UTF-8");
    }
}
