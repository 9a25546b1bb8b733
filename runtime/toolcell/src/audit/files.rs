//! The audit files on disk: the chain's constants and its head ([`Head`], beside the file),
//! and the careful ways both are opened (never through a link, created `0600`), locked,
//! appended to, cut back and read; shared by the writer (`chain.rs`) and the checker
//! (`verify.rs`).

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

/// The `prev` of a chain's first line: no line came before it.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What is appended to an audit file's name for its head file.
pub const HEAD_SUFFIX: &str = ".head";

/// The longest audit line read back (when checking a file, or recovering a lost head): far
/// longer than any record the runtime writes, whose longest parts (the resources) come from
/// arguments of at most [`MAX_ARGUMENT_BYTES`](crate::limits::MAX_ARGUMENT_BYTES).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// The most entries of an audit file's directory looked through for its rotated files: a
/// directory with more is refused, not scanned without end.
pub const MAX_DIRECTORY_ENTRIES: usize = 1_000_000;

/// How many times one record opens the head again when it finds it replaced under it: another
/// writer recreates a removed head once; a head that keeps changing is someone's attack.
pub const MAX_HEAD_REOPENS: usize = 8;

/// How many rotated names are tried when the next one is taken: a planted `FILE.N.head` moves
/// rotation on to the next N, a directory full of them fails the record.
pub const MAX_ROTATION_ATTEMPTS: u64 = 64;

/// The head file's first word and version.
const HEAD_MAGIC: &str = "toolcell-audit-head 1";

/// The last line of a chain: its `seq` and its sha256. Written as one fixed-width line,
/// `toolcell-audit-head 1 SEQ HASH` (SEQ as 20 digits), so it is rewritten in place with one
/// write; this line is also what `toolcell audit sign` signs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The last line's `seq`.
    pub seq: u64,
    /// The last line's sha256 (hex), as written, without its newline.
    pub hash: String,
}

impl Head {
    /// The head as its file holds it (one line, with its newline).
    pub fn line(&self) -> String {
        format!("{HEAD_MAGIC} {:020} {}\n", self.seq, self.hash)
    }

    /// The head in `text` (a head file's content, or the line a signature signs).
    pub fn parse(text: &str) -> Result<Head, String> {
        let damaged = || format!("not a toolcell audit head: {:?}", truncate(text, 120));
        let rest = text
            .trim_end_matches('\n')
            .strip_prefix(HEAD_MAGIC)
            .and_then(|rest| rest.strip_prefix(' '))
            .ok_or_else(damaged)?;
        let (seq, hash) = rest.split_once(' ').ok_or_else(damaged)?;
        let seq = seq.parse().map_err(|_| damaged())?;
        if !is_sha256_hex(hash) {
            return Err(damaged());
        }
        Ok(Head {
            seq,
            hash: hash.to_owned(),
        })
    }

    /// The head kept at `path`: `None` if there is no such file or it is empty. Anything but a
    /// regular file there (a FIFO, a device) is an error, never waited on.
    pub fn read(path: &Path) -> std::io::Result<Option<Head>> {
        match open_to_read(path, false) {
            Ok(file) => read_head(&file),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }
}

/// Where the head of the audit file at `path` is kept: `path` with [`HEAD_SUFFIX`] appended.
pub fn head_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(HEAD_SUFFIX);
    PathBuf::from(name)
}

pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(crate) fn truncate(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// Opening with mode 0600 (a shorthand for the two places files are created here).
pub(crate) trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}

impl Mode0600 for OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt as _;
        self.mode(0o600)
    }
}

/// `path`, opened for appending (`append`) or for reading and writing in place, created if
/// missing (mode 0600); refused if it is a symlink at its last step or not a regular file.
pub(crate) fn open_regular(path: &Path, append: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let not_regular = || std::io::Error::other(format!("{} is not a regular file", path.display()));
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && !meta.is_file()
        && !meta.is_symlink()
    {
        return Err(not_regular());
    }
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    let mut options = OpenOptions::new();
    if append {
        options.append(true);
    } else {
        options.read(true).write(true);
    }
    let file = options
        .create(true)
        .mode_0600()
        .custom_flags(flags.bits() as i32)
        .open(path)
        .map_err(|error| {
            if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                std::io::Error::other(format!(
                    "{} is a symlink; audit files are never followed",
                    path.display()
                ))
            } else {
                error
            }
        })?;
    if !file.metadata()?.is_file() {
        return Err(not_regular());
    }
    Ok(file)
}

/// The head of the audit file at `path`, opened (created if missing). A file that has lines
/// but no head gets its head back from its last line, with a warning; a file written without a
/// chain is refused.
pub(crate) fn open_head(path: &Path) -> std::io::Result<File> {
    let head = open_regular(&head_path(path), false)?;
    {
        let _locked = Locked::exclusive(&head)?;
        if read_head(&head)?.is_none() && std::fs::symlink_metadata(path)?.len() > 0 {
            let recovered = open_to_read(path, true)
                .map_err(|error| error.to_string())
                .and_then(|log| last_line_head(&log))
                .map_err(|why| {
                    std::io::Error::other(format!(
                        "{} has lines but no head file, and {why}",
                        path.display()
                    ))
                })?;
            tracing::warn!(file = %path.display(), seq = recovered.seq,
                "the audit file's head was missing; it was made again from its last line");
            write_head(&head, &recovered)?;
        }
    }
    Ok(head)
}

/// Whether `file` is still the file at `path`.
pub(crate) fn same_file(file: &File, path: &Path) -> bool {
    match (identity(file), identity_at(path)) {
        (Ok(open), Some(named)) => open == named,
        _ => false,
    }
}

/// The device and inode of an open file.
pub(crate) fn identity(file: &File) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino()))
}

/// The device and inode of what is at `path` (not following a link), if anything.
pub(crate) fn identity_at(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino()))
}

/// An exclusive `flock` on a file, released when dropped.
pub(crate) struct Locked<'a>(&'a File);

impl<'a> Locked<'a> {
    pub(crate) fn exclusive(file: &'a File) -> std::io::Result<Locked<'a>> {
        rustix::fs::flock(file, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(Locked(file))
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// Append `lines` (whole lines) to the log, in one write when the file system takes it whole.
/// A short write (a full disk) would leave part of a line: the file is cut back by what this
/// append wrote, to its last whole line. (Counting what was written, rather than reading the
/// length first, keeps a system call off every record.)
pub(crate) fn append(log: &mut File, lines: &[u8]) -> std::io::Result<()> {
    let mut done = 0;
    while done < lines.len() {
        match log.write(&lines[done..]) {
            Ok(0) => {
                cut_back(log, done);
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            Ok(written) => done += written,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(error) => {
                cut_back(log, done);
                return Err(error);
            }
        }
    }
    Ok(())
}

/// Cut `written` bytes (the part of a failed append that went in) off the end of the log.
pub(crate) fn cut_back(log: &File, written: usize) {
    if written == 0 {
        return;
    }
    if let Ok(meta) = log.metadata()
        && meta.is_file()
    {
        let _ = log.set_len(meta.len().saturating_sub(written as u64));
    }
}

/// The head in an open head file: `None` when it is empty.
pub(crate) fn read_head(file: &File) -> std::io::Result<Option<Head>> {
    read_head_sized(file).map(|(head, _)| head)
}

/// [`read_head`], and the head file's length as read.
pub(crate) fn read_head_sized(file: &File) -> std::io::Result<(Option<Head>, usize)> {
    let mut bytes = [0u8; 256];
    let mut filled = 0;
    while filled < bytes.len() {
        let read = file.read_at(&mut bytes[filled..], filled as u64)?;
        filled += read;
        // A regular file reads short only at its end: no second read to find it.
        if read == 0 || filled < bytes.len() {
            break;
        }
    }
    if filled == 0 {
        return Ok((None, 0));
    }
    let text = std::str::from_utf8(&bytes[..filled])
        .map_err(|_| std::io::Error::other("the audit head file is damaged (not text)"))?;
    Head::parse(text)
        .map(|head| (Some(head), filled))
        .map_err(|why| std::io::Error::other(format!("the audit head file is damaged: {why}")))
}

/// Rewrite an open head file with `head` (one write of a fixed-width line: the file is cut
/// only if it held something longer).
pub(crate) fn write_head(file: &File, head: &Head) -> std::io::Result<()> {
    write_head_over(file, head, None).map(|_| ())
}

/// [`write_head`] over a head file known to be `known` bytes long: when that is the line's
/// own width (every head this module writes), nothing is left to cut and its length is not
/// read again. Returns the head file's length now.
pub(crate) fn write_head_over(
    file: &File,
    head: &Head,
    known: Option<usize>,
) -> std::io::Result<usize> {
    let line = head.line();
    file.write_all_at(line.as_bytes(), 0)?;
    if known == Some(line.len()) {
        return Ok(line.len());
    }
    if file.metadata()?.len() != line.len() as u64 {
        file.set_len(line.len() as u64)?;
    }
    Ok(line.len())
}

/// The file at `path`, opened to be read: never through a symlink at its last step when
/// `no_follow`, and only if it is a regular file (a FIFO or a device is refused, not waited
/// on).
pub(crate) fn open_to_read(path: &Path, no_follow: bool) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut flags = rustix::fs::OFlags::NONBLOCK;
    if no_follow {
        flags |= rustix::fs::OFlags::NOFOLLOW;
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    Ok(file)
}

/// The head a file's last line makes: its `seq` and hash.
pub(crate) fn last_line_head(file: &File) -> Result<Head, String> {
    let length = file.metadata().map_err(|error| error.to_string())?.len();
    let mut reader = file;
    let start = length.saturating_sub(MAX_LINE_BYTES as u64 + 1);
    reader
        .seek(std::io::SeekFrom::Start(start))
        .map_err(|error| error.to_string())?;
    let mut tail = Vec::new();
    reader
        .take(MAX_LINE_BYTES as u64 + 1)
        .read_to_end(&mut tail)
        .map_err(|error| error.to_string())?;
    let Some(body) = tail.strip_suffix(b"\n") else {
        return Err("it ends in half a line".to_owned());
    };
    let line = match body.iter().rposition(|&b| b == b'\n') {
        Some(at) => &body[at + 1..],
        None if start == 0 => body,
        None => {
            return Err(format!(
                "its last line is longer than {MAX_LINE_BYTES} bytes"
            ));
        }
    };
    let (seq, _) = link_of(line).map_err(|why| {
        format!("its last line is {why}: it was written without a chain (by an older toolcell?); move it aside")
    })?;
    Ok(Head {
        seq,
        hash: crate::digest::sha256_hex(line),
    })
}

/// One more than the highest N of the rotated files `FILE.N` (or their heads, `FILE.N.head`)
/// beside `path` (1 if none).
pub(crate) fn next_rotation(path: &Path) -> std::io::Result<u64> {
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
        return Err(std::io::Error::other(
            "the audit file's name is not UTF-8: it cannot be rotated",
        ));
    };
    let prefix = format!("{name}.");
    let mut highest = 0u64;
    for (seen, entry) in std::fs::read_dir(directory)?.enumerate() {
        if seen >= MAX_DIRECTORY_ENTRIES {
            return Err(std::io::Error::other(format!(
                "the audit file's directory has more than {MAX_DIRECTORY_ENTRIES} entries"
            )));
        }
        let entry = entry?;
        let Some(number) = entry
            .file_name()
            .to_str()
            .and_then(|file| file.strip_prefix(&prefix))
            .map(|rest| rest.strip_suffix(HEAD_SUFFIX).unwrap_or(rest))
            .filter(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|rest| rest.parse::<u64>().ok())
        else {
            continue;
        };
        highest = highest.max(number);
    }
    Ok(highest.saturating_add(1))
}

/// A line's `seq` and `prev`.
pub(crate) fn link_of(line: &[u8]) -> Result<(u64, String), String> {
    #[derive(serde::Deserialize)]
    struct Link {
        seq: u64,
        prev: String,
    }
    let link: Link = serde_json::from_slice(line)
        .map_err(|error| format!("not an audit record of a chain ({error})"))?;
    if !is_sha256_hex(&link.prev) {
        return Err(format!(
            "its prev, {:?}, is not a sha256",
            truncate(&link.prev, 80)
        ));
    }
    Ok((link.seq, link.prev))
}
