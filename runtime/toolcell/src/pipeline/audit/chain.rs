//! The audit file as a hash chain: how lines are linked, where the chain's head is kept, how a
//! file is rotated, and how a file (or a rotated series) is checked.
//!
//! - **Links.** Each line carries `seq` (0, 1, 2, …) and `prev`, the sha256 (hex) of the line
//!   before it exactly as written, without its newline; the first line's `prev` is
//!   [`GENESIS`]. A changed, removed, inserted or reordered line breaks the link of the line
//!   after it.
//! - **The head.** A chain cannot show that lines were cut from its end: what is left is still
//!   a chain. So beside `FILE` the writer keeps `FILE.head`, one line naming the last line's
//!   `seq` and hash (see [`Head`]), rewritten after every record. [`verify`] compares the file's
//!   end with it. Whoever can rewrite both files can still cut the tail and rewrite the head;
//!   against that, the head can be signed (`toolcell audit sign`, with the keys `toolcell sign`
//!   uses) and the signature kept elsewhere: a signed head is a witness no later rewrite can
//!   forge ([`VerifyOptions::witness`]).
//! - **Several writers.** Every record is written holding an exclusive `flock` on the head
//!   file, and takes its `seq` and `prev` from the head as it is then: two processes appending
//!   to one file (two `toolcell call`s) extend one chain, never fork it.
//! - **Group commit.** Within one process, records that arrive while another is being written
//!   wait for it and are then written together by one of them: one lock, one read of the head,
//!   their lines in one append, one rewrite of the head. Each [`Audit::record`] returns only
//!   once its own line is written (or with the error that kept it out), so a call is never
//!   answered before its line is in the file: a crash loses no answered call's line. A batch
//!   is at most the records of the threads waiting at that moment (each waits for its own).
//! - **Rotation.** With a size limit ([`Audit::rotate_at`]), a record that would take the file
//!   past it first renames `FILE` to `FILE.N` (one more than the highest N there is) and its
//!   head to `FILE.N.head`; the new `FILE` goes on from the last hash of the one before (its
//!   first line's `prev`, and `seq` counting on). `toolcell audit verify FILE.1 FILE.2 FILE`
//!   checks a series, oldest first.
//!
//! Each line is written with one `write` on a file opened for appending, so readers never see
//! half a line; if the disk fills mid-line, the file is cut back to its last whole line and the
//! failure is returned, never ignored. The files are created readable by their owner only.

use super::AuditRecord;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, Read as _, Seek as _, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

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

/// An append-only, hash-chained audit file (see the module docs).
#[derive(Debug)]
pub struct Audit {
    path: PathBuf,
    head_path: PathBuf,
    rotate_at: Option<u64>,
    files: Mutex<Files>,
    /// Records waiting to be written, and what became of those a batch took (module docs).
    queue: Mutex<Queue>,
}

/// The group commit's queue: records that arrived while a batch was being written, by ticket,
/// and the outcome of each record a batch wrote for a thread still waiting for the file lock.
#[derive(Debug, Default)]
struct Queue {
    next_ticket: u64,
    waiting: Vec<(u64, AuditRecord)>,
    done: HashMap<u64, Result<Head, Failed>>,
}

/// Why a record of a batch was not written, kept for the thread that waits for it (an
/// `io::Error` cannot be cloned; its kind and words can).
#[derive(Debug, Clone)]
struct Failed {
    kind: std::io::ErrorKind,
    message: String,
}

impl Failed {
    fn of(error: &std::io::Error) -> Failed {
        Failed {
            kind: error.kind(),
            message: error.to_string(),
        }
    }

    fn error(self) -> std::io::Error {
        std::io::Error::new(self.kind, self.message)
    }
}

/// A mutex's guard, whether or not a thread panicked holding it (the data is a queue and open
/// files, left consistent at every step).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Debug)]
struct Files {
    log: File,
    head: File,
    /// The head this handle wrote last.
    written: Option<Head>,
    /// How many batches this handle has written (group commit; its tests read it).
    batches: u64,
}

impl Audit {
    /// Open `path` for appending, creating it (mode 0600) if it does not exist, with its head
    /// beside it. Each file must be a regular file reached without a symlink at its last step:
    /// a link planted where the audit goes (perhaps by a tool that could write there) is
    /// refused, never followed, and a FIFO or a device is refused without waiting on it.
    ///
    /// A file that has lines but no head (it was removed) gets its head back from its last
    /// line, with a warning; a file written without a chain (by a toolcell before the chain) is
    /// refused: move it aside, and the new file starts a chain.
    pub fn open(path: &Path) -> std::io::Result<Audit> {
        let log = open_regular(path, true)?;
        let head = open_head(path)?;
        Ok(Audit {
            path: path.to_owned(),
            head_path: head_path(path),
            rotate_at: None,
            files: Mutex::new(Files {
                log,
                head,
                written: None,
                batches: 0,
            }),
            queue: Mutex::new(Queue::default()),
        })
    }

    /// This audit, rotating its file before a record would take it past `bytes` (see the
    /// module docs). A file is never left empty: a record longer than the limit goes into a
    /// file of its own.
    pub fn rotate_at(mut self, bytes: u64) -> Audit {
        self.rotate_at = Some(bytes);
        self
    }

    /// The audit file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append `record` as one line, linked to the chain (its `seq` and `prev` are set here),
    /// and move the head to it; returns once the line is written, perhaps together with other
    /// threads' records (group commit, see the module docs). On failure nothing partial is
    /// left behind (as far as the file system allows) and the error is returned.
    pub fn record(&self, record: AuditRecord) -> std::io::Result<Head> {
        let ticket = {
            let mut queue = lock(&self.queue);
            let ticket = queue.next_ticket;
            queue.next_ticket = queue.next_ticket.wrapping_add(1);
            queue.waiting.push((ticket, record));
            ticket
        };
        let mut files = lock(&self.files);
        // Whoever held the files before may have written this record in its batch; if not,
        // it is still waiting, and this thread writes every waiting record.
        let batch = {
            let mut queue = lock(&self.queue);
            if let Some(done) = queue.done.remove(&ticket) {
                return done.map_err(Failed::error);
            }
            std::mem::take(&mut queue.waiting)
        };
        let mut outcomes = self.write_batch(&mut files, batch);
        let mine = outcomes.remove(&ticket);
        // The others' outcomes are left before the files are let go: each finds its own as
        // soon as it holds them.
        lock(&self.queue).done.extend(
            outcomes
                .into_iter()
                .map(|(ticket, outcome)| (ticket, outcome.map_err(|error| Failed::of(&error)))),
        );
        drop(files);
        mine.unwrap_or_else(|| {
            Err(std::io::Error::other(
                "the audit record was lost from its batch",
            ))
        })
    }

    /// Write `batch` in order, holding the head's lock once: each record's outcome by ticket.
    fn write_batch(
        &self,
        files: &mut Files,
        batch: Vec<(u64, AuditRecord)>,
    ) -> HashMap<u64, std::io::Result<Head>> {
        let tickets: Vec<u64> = batch.iter().map(|(ticket, _)| *ticket).collect();
        let mut outcomes = HashMap::with_capacity(tickets.len());
        if let Err(error) = self.write_locked(files, batch, &mut outcomes) {
            let failed = Failed::of(&error);
            for ticket in tickets {
                outcomes
                    .entry(ticket)
                    .or_insert_with(|| Err(failed.clone().error()));
            }
        }
        outcomes
    }

    /// Link and append `batch` under the head's lock, rotating where the limit says, and
    /// rewrite the head once at the end (and before a rotation). Records written are put in
    /// `outcomes` as they are; an error leaves the rest to the caller.
    fn write_locked(
        &self,
        files: &mut Files,
        batch: Vec<(u64, AuditRecord)>,
        outcomes: &mut HashMap<u64, std::io::Result<Head>>,
    ) -> std::io::Result<()> {
        let mut reopened = 0;
        let locked = loop {
            // The lock is taken on a head file that is at the head's path once it is held.
            let locked = Locked::exclusive(&files.head)?;
            if same_file(&files.head, &self.head_path) {
                break locked;
            }
            drop(locked);
            reopened += 1;
            if reopened > MAX_HEAD_REOPENS {
                return Err(std::io::Error::other(format!(
                    "{} keeps being replaced: the audit record was not written",
                    self.head_path.display()
                )));
            }
            files.head = open_head(&self.path)?;
        };
        let (head, head_len) = read_head_sized(&files.head)?;
        // A file is rotated only by a record: if the head is still the one this handle wrote
        // last, no one else has written, so the open file is still the one at the path.
        if (head.is_none() || head != files.written) && !same_file(&files.log, &self.path) {
            // Another process rotated the file (or it was removed): write where the path is now.
            files.log = open_regular(&self.path, true)?;
        }
        files.batches = files.batches.saturating_add(1);
        let mut current = head;
        // The log's length matters only to rotation: read it only then.
        let mut before = match self.rotate_at {
            Some(_) => files.log.metadata()?.len(),
            None => 0,
        };
        let mut lines = Vec::new();
        let mut pending: Vec<(u64, Head)> = Vec::new();
        for (ticket, mut record) in batch {
            (record.seq, record.prev) = match &current {
                Some(head) => (head.seq.saturating_add(1), head.hash.clone()),
                None => (0, GENESIS.to_owned()),
            };
            let mut line = serde_json::to_vec(&record).map_err(std::io::Error::other)?;
            let next = Head {
                seq: record.seq,
                hash: crate::digest::sha256_hex(&line),
            };
            line.push(b'\n');
            let size = before.saturating_add(lines.len() as u64);
            if let (Some(limit), Some(head)) = (self.rotate_at, &current)
                && size > 0
                && size.saturating_add(line.len() as u64) > limit
            {
                // What is written so far goes into the file being rotated, with its head.
                append(&mut files.log, &lines)?;
                lines.clear();
                write_head(&files.head, head)?;
                files.written = Some(head.clone());
                outcomes.extend(pending.drain(..).map(|(ticket, head)| (ticket, Ok(head))));
                self.rotate(&mut files.log, head)?;
                before = 0;
            }
            lines.extend_from_slice(&line);
            pending.push((ticket, next.clone()));
            current = Some(next);
        }
        append(&mut files.log, &lines)?;
        if let Some(head) = &current
            && !pending.is_empty()
        {
            write_head_over(&files.head, head, Some(head_len))?;
            files.written = Some(head.clone());
        }
        drop(locked);
        outcomes.extend(pending.into_iter().map(|(ticket, head)| (ticket, Ok(head))));
        Ok(())
    }

    /// Rename the file to `FILE.N` and its head to `FILE.N.head` (the head as it stands), and
    /// open a new, empty `FILE`. Called holding the head's lock.
    fn rotate(&self, log: &mut File, head: &Head) -> std::io::Result<()> {
        let first = next_rotation(&self.path)?;
        for number in first..first.saturating_add(MAX_ROTATION_ATTEMPTS) {
            let mut rotated = self.path.as_os_str().to_owned();
            rotated.push(format!(".{number}"));
            let rotated = PathBuf::from(rotated);
            // Its head first: a rotated file is never without one. A name already taken (by
            // whatever put it there) is never overwritten: the next number is tried.
            let mut file = match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode_0600()
                .open(head_path(&rotated))
            {
                Ok(file) => file,
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => return Err(error),
            };
            file.write_all(head.line().as_bytes())?;
            match rustix::fs::renameat_with(
                rustix::fs::CWD,
                &self.path,
                rustix::fs::CWD,
                &rotated,
                rustix::fs::RenameFlags::NOREPLACE,
            ) {
                Ok(()) => {}
                Err(rustix::io::Errno::EXIST) => {
                    let _ = std::fs::remove_file(head_path(&rotated));
                    continue;
                }
                Err(error) => return Err(error.into()),
            }
            *log = open_regular(&self.path, true)?;
            tracing::info!(rotated = %rotated.display(), last_seq = head.seq,
                "the audit file was rotated");
            return Ok(());
        }
        Err(std::io::Error::other(format!(
            "{} could not be rotated: {MAX_ROTATION_ATTEMPTS} names after {}.{first} are taken",
            self.path.display(),
            self.path.display()
        )))
    }
}

/// What [`verify`] found: a whole, unbroken chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// How many lines were checked, in all the files.
    pub lines: u64,
    /// The `seq` of the first line checked, if there was one.
    pub first_seq: Option<u64>,
    /// The last line: what the head must say.
    pub last: Option<Head>,
    /// Whether the last file's head was there and matched its end.
    pub head_checked: bool,
    /// Whether the witness (a signed head) was found in the chain.
    pub witnessed: bool,
}

/// How [`verify`] checks.
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The hash the first file's first line must go on from, when the files before it (with
    /// the chain's start) are not given: its `prev`. Without it, the first line must be the
    /// chain's start ([`GENESIS`]).
    pub start_after: Option<String>,
    /// Take the first file's first line as where the checked chain starts, whatever its
    /// `prev` (a rotated file checked alone, before its head is signed).
    pub start_anywhere: bool,
    /// Check the files' ends without their head files (a file written by hand, say): a cut
    /// tail then goes unseen, and the result says so (`head_checked` is false).
    pub without_head: bool,
    /// A head known to be true (one whose signature was checked): the chain must hold a line
    /// with its `seq` and hash.
    pub witness: Option<Head>,
}

/// Why a chain does not verify: the first place it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Broken {
    /// A file could not be read.
    #[error("{file}: {why}")]
    Unreadable {
        /// The file.
        file: String,
        /// Why.
        why: String,
    },
    /// A line is not a record of the chain, or does not follow the line before.
    #[error("{file}:{line}{}: {why}", seq.map(|seq| format!(" (seq {seq})")).unwrap_or_default())]
    Line {
        /// The file.
        file: String,
        /// The line's number in its file, from 1.
        line: u64,
        /// Its `seq`, if it has one.
        seq: Option<u64>,
        /// What is wrong.
        why: String,
    },
    /// The file's end is not where its head, or the witness, says.
    #[error("{file}: {why}")]
    End {
        /// The file.
        file: String,
        /// What is wrong.
        why: String,
    },
}

/// Check the audit files `files` (a rotated series oldest first, or one file): every line is a
/// record whose `prev` is the hash of the line before and whose `seq` is one more; the first
/// starts the chain (or goes on from [`VerifyOptions::start_after`]); each file ends where its
/// head says; and the witness, if given, is in the chain. The error names the first line that
/// breaks.
pub fn verify(files: &[PathBuf], options: &VerifyOptions) -> Result<Verified, Broken> {
    let mut expected: Option<Head> = None;
    let mut verified = Verified {
        lines: 0,
        first_seq: None,
        last: None,
        head_checked: false,
        witnessed: false,
    };
    for (index, path) in files.iter().enumerate() {
        let name = path.display().to_string();
        let unreadable = |why: String| Broken::Unreadable {
            file: name.clone(),
            why,
        };
        let file = open_to_read(path, false).map_err(|error| unreadable(error.to_string()))?;
        let mut reader = std::io::BufReader::new(file);
        let mut number = 0u64;
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            let read = (&mut reader)
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut buffer)
                .map_err(|error| unreadable(error.to_string()))?;
            if read == 0 {
                break;
            }
            number += 1;
            let broken = |seq: Option<u64>, why: String| Broken::Line {
                file: name.clone(),
                line: number,
                seq,
                why,
            };
            let Some(line) = buffer.strip_suffix(b"\n") else {
                return Err(broken(
                    None,
                    if buffer.len() > MAX_LINE_BYTES {
                        format!("longer than {MAX_LINE_BYTES} bytes: not an audit record")
                    } else {
                        "the file ends in half a line".to_owned()
                    },
                ));
            };
            let (seq, prev) = link_of(line).map_err(|why| broken(None, why))?;
            let broken = |why: String| broken(Some(seq), why);
            match &expected {
                None if prev == GENESIS => {
                    if seq != 0 {
                        return Err(broken(format!(
                            "it starts the chain (its prev is the genesis hash), but its seq \
                             is {seq}, not 0"
                        )));
                    }
                }
                None if options.start_anywhere
                    || options.start_after.as_deref() == Some(prev.as_str()) => {}
                None => {
                    return Err(broken(format!(
                        "it goes on from a line that is not here (its prev is {prev}): give \
                         the rotated files before it, oldest first, or the hash it starts \
                         after (--start-after)"
                    )));
                }
                Some(before) => {
                    if prev != before.hash {
                        return Err(broken(format!(
                            "its prev is {prev}, but the line before it (seq {}) hashes to {}: \
                             a line was changed, removed, inserted or reordered here",
                            before.seq, before.hash
                        )));
                    }
                    if Some(seq) != before.seq.checked_add(1) {
                        return Err(broken(format!(
                            "its seq is {seq}, but the line before it is seq {}",
                            before.seq
                        )));
                    }
                }
            }
            let hash = crate::digest::sha256_hex(line);
            if let Some(witness) = &options.witness
                && witness.seq == seq
            {
                if witness.hash != hash {
                    return Err(broken(format!(
                        "the signed head says seq {seq} hashes to {}, but this line hashes \
                         to {hash}: it was changed after the head was signed",
                        witness.hash
                    )));
                }
                verified.witnessed = true;
            }
            verified.first_seq.get_or_insert(seq);
            verified.lines += 1;
            expected = Some(Head { seq, hash });
        }
        let end = Broken::End {
            file: name.clone(),
            why: String::new(),
        };
        let end = |why: String| match end.clone() {
            Broken::End { file, .. } => Broken::End { file, why },
            other => other,
        };
        let last_file = index + 1 == files.len();
        let head = Head::read(&head_path(path)).map_err(|error| end(error.to_string()))?;
        match head {
            None if last_file && !options.without_head => {
                return Err(end(format!(
                    "there is no head file ({}): without it a cut tail cannot be seen \
                     (--without-head checks the lines alone)",
                    head_path(path).display()
                )));
            }
            None => {}
            Some(head) => {
                check_end(&head, expected.as_ref(), number).map_err(end)?;
                if last_file {
                    verified.head_checked = true;
                }
            }
        }
    }
    if let Some(witness) = &options.witness
        && !verified.witnessed
    {
        let ends = expected.as_ref().map_or_else(
            || "has no lines".to_owned(),
            |last| format!("ends at seq {}", last.seq),
        );
        return Err(Broken::End {
            file: files
                .last()
                .map(|path| path.display().to_string())
                .unwrap_or_default(),
            why: format!(
                "the signed head is seq {}, but the chain {ends}: lines were cut",
                witness.seq
            ),
        });
    }
    verified.last = expected;
    Ok(verified)
}

/// Whether a file whose last line is `last` (of `lines` lines) ends where `head` says.
fn check_end(head: &Head, last: Option<&Head>, lines: u64) -> Result<(), String> {
    let Some(last) = last else {
        return Err(format!(
            "its head says the last line is seq {}, but the file has no lines: they were cut",
            head.seq
        ));
    };
    if head.seq > last.seq {
        return Err(format!(
            "its head says the last line is seq {}, but the file ends at seq {} (line {lines}): \
             lines were cut from its end",
            head.seq, last.seq
        ));
    }
    if head.seq < last.seq {
        return Err(format!(
            "its head says the last line is seq {}, but the file goes on to seq {} (line \
             {lines}): lines were added after the head",
            head.seq, last.seq
        ));
    }
    if head.hash != last.hash {
        return Err(format!(
            "its head says the last line (seq {}) hashes to {}, but it hashes to {}: it was \
             changed",
            head.seq, head.hash, last.hash
        ));
    }
    Ok(())
}

/// A line's `seq` and `prev`.
fn link_of(line: &[u8]) -> Result<(u64, String), String> {
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

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn truncate(text: &str, max: usize) -> &str {
    &text[..text.floor_char_boundary(max)]
}

/// Opening with mode 0600 (a shorthand for the two places files are created here).
trait Mode0600 {
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
fn open_regular(path: &Path, append: bool) -> std::io::Result<File> {
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
fn open_head(path: &Path) -> std::io::Result<File> {
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
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// An exclusive `flock` on a file, released when dropped.
struct Locked<'a>(&'a File);

impl<'a> Locked<'a> {
    fn exclusive(file: &'a File) -> std::io::Result<Locked<'a>> {
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
fn append(log: &mut File, lines: &[u8]) -> std::io::Result<()> {
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
fn cut_back(log: &File, written: usize) {
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
fn read_head(file: &File) -> std::io::Result<Option<Head>> {
    read_head_sized(file).map(|(head, _)| head)
}

/// [`read_head`], and the head file's length as read.
fn read_head_sized(file: &File) -> std::io::Result<(Option<Head>, usize)> {
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
fn write_head(file: &File, head: &Head) -> std::io::Result<()> {
    write_head_over(file, head, None)
}

/// [`write_head`] over a head file known to be `known` bytes long: when that is the line's
/// own width (every head this module writes), nothing is left to cut and its length is not
/// read again.
fn write_head_over(file: &File, head: &Head, known: Option<usize>) -> std::io::Result<()> {
    let line = head.line();
    file.write_all_at(line.as_bytes(), 0)?;
    if known == Some(line.len()) {
        return Ok(());
    }
    if file.metadata()?.len() != line.len() as u64 {
        file.set_len(line.len() as u64)?;
    }
    Ok(())
}

/// The file at `path`, opened to be read: never through a symlink at its last step when
/// `no_follow`, and only if it is a regular file (a FIFO or a device is refused, not waited
/// on).
fn open_to_read(path: &Path, no_follow: bool) -> std::io::Result<File> {
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
fn last_line_head(file: &File) -> Result<Head, String> {
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
fn next_rotation(path: &Path) -> std::io::Result<u64> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::proto::ToolResponse;
    use crate::call::report::CallReport;
    use std::time::Duration;

    fn record(n: usize) -> AuditRecord {
        let report = CallReport {
            call_id: n.to_string(),
            tool: "echo".to_owned(),
            ..CallReport::host_answer(ToolResponse::text("ok"))
        };
        AuditRecord::of(
            &format!(r#"{{"text":"{n}"}}"#),
            &[],
            None,
            &report,
            Duration::ZERO,
        )
    }

    fn written(lines: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(&path).expect("open");
        for n in 0..lines {
            audit.record(record(n)).expect("record");
        }
        (dir, path)
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .expect("read")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    fn rewrite(path: &Path, lines: &[String]) {
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(path, text).expect("write");
    }

    fn check(path: &Path) -> Result<Verified, Broken> {
        verify(&[path.to_owned()], &VerifyOptions::default())
    }

    fn broken_line(result: Result<Verified, Broken>) -> (u64, String) {
        match result {
            Err(Broken::Line { line, why, .. }) => (line, why),
            other => panic!("expected a broken line, got {other:?}"),
        }
    }

    #[test]
    fn a_written_chain_verifies_and_its_head_is_its_last_line() {
        let (_dir, path) = written(5);
        let verified = check(&path).expect("verifies");
        assert_eq!(verified.lines, 5);
        assert_eq!(verified.first_seq, Some(0));
        assert!(verified.head_checked);
        let head = Head::read(&head_path(&path))
            .expect("read")
            .expect("a head");
        assert_eq!(verified.last, Some(head.clone()));
        assert_eq!(head.seq, 4);
        let lines = lines(&path);
        assert_eq!(head.hash, crate::digest::sha256_hex(lines[4].as_bytes()));
        let first: serde_json::Value = serde_json::from_str(&lines[0]).expect("json");
        assert_eq!(first["prev"], GENESIS);
        let second: serde_json::Value = serde_json::from_str(&lines[1]).expect("json");
        assert_eq!(
            second["prev"],
            crate::digest::sha256_hex(lines[0].as_bytes())
        );
        assert_eq!(second["seq"], 1);
    }

    #[test]
    fn a_changed_line_breaks_the_link_after_it() {
        let (_dir, path) = written(5);
        let mut all = lines(&path);
        all[2] = all[2].replace(r#""call_id":"2""#, r#""call_id":"9""#);
        rewrite(&path, &all);
        let (line, why) = broken_line(check(&path));
        assert_eq!(line, 4, "{why}");
        assert!(
            why.contains("changed, removed, inserted or reordered"),
            "{why}"
        );
    }

    #[test]
    fn a_changed_last_line_disagrees_with_the_head() {
        let (_dir, path) = written(3);
        let mut all = lines(&path);
        all[2] = all[2].replace(r#""call_id":"2""#, r#""call_id":"9""#);
        rewrite(&path, &all);
        match check(&path) {
            Err(Broken::End { why, .. }) => assert!(why.contains("was changed"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_removed_line_and_a_reordered_pair_are_named() {
        let (_dir, path) = written(5);
        let all = lines(&path);
        let mut removed = all.clone();
        removed.remove(1);
        rewrite(&path, &removed);
        assert_eq!(broken_line(check(&path)).0, 2);

        let mut swapped = all.clone();
        swapped.swap(2, 3);
        rewrite(&path, &swapped);
        assert_eq!(broken_line(check(&path)).0, 3);

        let mut first_gone = all;
        first_gone.remove(0);
        rewrite(&path, &first_gone);
        let (line, why) = broken_line(check(&path));
        assert_eq!(line, 1);
        assert!(
            why.contains("goes on from a line that is not here"),
            "{why}"
        );
    }

    #[test]
    fn a_cut_tail_is_seen_through_the_head_and_the_witness() {
        let (_dir, path) = written(5);
        let head = Head::read(&head_path(&path)).expect("read").expect("head");
        let mut all = lines(&path);
        all.truncate(3);
        rewrite(&path, &all);
        match check(&path) {
            Err(Broken::End { why, .. }) => assert!(why.contains("lines were cut"), "{why}"),
            other => panic!("{other:?}"),
        }
        // Whoever cut it can write the head again; a signed head (a witness) still tells.
        std::fs::remove_file(head_path(&path)).expect("rm head");
        match check(&path) {
            Err(Broken::End { why, .. }) => assert!(why.contains("no head file"), "{why}"),
            other => panic!("{other:?}"),
        }
        let options = VerifyOptions {
            without_head: true,
            witness: Some(head),
            ..VerifyOptions::default()
        };
        match verify(std::slice::from_ref(&path), &options) {
            Err(Broken::End { why, .. }) => assert!(why.contains("signed head is seq 4"), "{why}"),
            other => panic!("{other:?}"),
        }
        let lines_alone = VerifyOptions {
            without_head: true,
            ..VerifyOptions::default()
        };
        let verified = verify(&[path], &lines_alone).expect("the lines alone are a chain");
        assert!(!verified.head_checked);
    }

    #[test]
    fn added_lines_past_the_head_are_seen() {
        let (_dir, path) = written(2);
        let head = Head::read(&head_path(&path)).expect("read").expect("head");
        let mut all = lines(&path);
        let forged = all[1].replace(r#""seq":1"#, r#""seq":2"#).replace(
            &format!(
                r#""prev":"{}""#,
                crate::digest::sha256_hex(all[0].as_bytes())
            ),
            &format!(r#""prev":"{}""#, head.hash),
        );
        all.push(forged);
        rewrite(&path, &all);
        match check(&path) {
            Err(Broken::End { why, .. }) => assert!(why.contains("added after the head"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn two_writers_on_one_file_extend_one_chain() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let (a, b) = (
            Audit::open(&path).expect("a"),
            Audit::open(&path).expect("b"),
        );
        std::thread::scope(|scope| {
            for audit in [&a, &b] {
                scope.spawn(move || {
                    for n in 0..50 {
                        audit.record(record(n)).expect("record");
                    }
                });
            }
        });
        let verified = check(&path).expect("one chain");
        assert_eq!(verified.lines, 100);
    }

    /// Records that arrive while another is being written wait, and are written together in
    /// one batch; each caller gets its own line's head, and the chain is whole.
    #[test]
    fn waiting_records_are_written_as_one_batch_and_each_gets_its_own_head() {
        const WRITERS: usize = 4;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(&path).expect("open");
        audit.record(record(0)).expect("the first record");
        let heads = std::thread::scope(|scope| {
            // A writer holds the files (as a slow batch would) while four records arrive.
            let held = lock(&audit.files);
            let writers: Vec<_> = (1..=WRITERS)
                .map(|n| {
                    let audit = &audit;
                    scope.spawn(move || audit.record(record(n)).expect("record"))
                })
                .collect();
            while lock(&audit.queue).waiting.len() < WRITERS {
                std::thread::yield_now();
            }
            drop(held);
            writers
                .into_iter()
                .map(|writer| writer.join().expect("the writer"))
                .collect::<Vec<Head>>()
        });
        assert_eq!(
            lock(&audit.files).batches,
            2,
            "the first record, then one batch"
        );
        let mut seqs: Vec<u64> = heads.iter().map(|head| head.seq).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, [1, 2, 3, 4]);
        let written = lines(&path);
        for head in &heads {
            let line = &written[usize::try_from(head.seq).expect("small")];
            assert_eq!(crate::digest::sha256_hex(line.as_bytes()), head.hash);
        }
        let verified = check(&path).expect("one chain");
        assert_eq!(verified.lines, 5);
        assert_eq!(
            verified.last.as_ref(),
            heads.iter().max_by_key(|head| head.seq)
        );
    }

    /// Many threads on one handle (group commit) and a second handle (another process's
    /// writer) extend one chain.
    #[test]
    fn concurrent_writers_on_one_handle_and_another_extend_one_chain() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let (shared, other) = (
            Audit::open(&path).expect("shared"),
            Audit::open(&path).expect("other"),
        );
        std::thread::scope(|scope| {
            for audit in [&shared, &shared, &shared, &other] {
                scope.spawn(move || {
                    for n in 0..100 {
                        audit.record(record(n)).expect("record");
                    }
                });
            }
        });
        let verified = check(&path).expect("one chain");
        assert_eq!(verified.lines, 400);
        assert!(verified.head_checked);
    }

    #[test]
    fn a_rotated_series_verifies_in_order_and_goes_on_from_the_one_before() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(&path).expect("open").rotate_at(1500);
        for n in 0..12 {
            audit.record(record(n)).expect("record");
        }
        let mut series: Vec<PathBuf> = (1..)
            .map(|n| dir.path().join(format!("audit.jsonl.{n}")))
            .take_while(|rotated| rotated.exists())
            .collect();
        assert!(series.len() >= 2, "rotated {} times", series.len());
        for rotated in &series {
            assert!(std::fs::metadata(rotated).expect("meta").len() <= 1500);
            assert!(head_path(rotated).exists(), "a rotated file keeps its head");
        }
        series.push(path.clone());
        let verified = verify(&series, &VerifyOptions::default()).expect("the series");
        assert_eq!((verified.lines, verified.first_seq), (12, Some(0)));

        // The live file alone goes on from the last hash of the one before.
        let before = Head::read(&head_path(&series[series.len() - 2]))
            .expect("read")
            .expect("head");
        let (line, why) = broken_line(check(&path));
        assert_eq!(line, 1, "{why}");
        let options = VerifyOptions {
            start_after: Some(before.hash),
            ..VerifyOptions::default()
        };
        let alone = verify(&[path], &options).expect("from the hash before");
        assert_eq!(alone.first_seq, Some(before.seq + 1));

        // Out of order, the series breaks where the second file does not follow the first.
        series.swap(0, 1);
        assert!(verify(&series, &VerifyOptions::default()).is_err());
    }

    #[test]
    fn a_lost_head_is_made_again_and_an_unchained_file_is_refused() {
        let (dir, path) = written(3);
        let head = Head::read(&head_path(&path)).expect("read").expect("head");
        std::fs::remove_file(head_path(&path)).expect("rm");
        let audit = Audit::open(&path).expect("reopens");
        assert_eq!(Head::read(&head_path(&path)).expect("read"), Some(head));
        audit.record(record(3)).expect("record");
        assert_eq!(check(&path).expect("verifies").lines, 4);

        let old = dir.path().join("old.jsonl");
        std::fs::write(&old, "{\"tool\":\"echo\"}\n").expect("write");
        let error = Audit::open(&old).expect_err("refused");
        assert!(error.to_string().contains("without a chain"), "{error}");
    }

    #[test]
    fn a_head_removed_under_a_writer_is_opened_again_and_the_chain_holds() {
        let (_dir, path) = written(2);
        let serving = Audit::open(&path).expect("a long-lived writer");
        serving.record(record(2)).expect("record");
        std::fs::remove_file(head_path(&path)).expect("rm head");
        // Another process makes the head again from the last line, and writes.
        Audit::open(&path)
            .expect("another writer")
            .record(record(3))
            .expect("record");
        serving.record(record(4)).expect("record");
        serving.record(record(5)).expect("record");
        let verified = check(&path).expect("one chain, one head");
        assert_eq!(
            (verified.lines, verified.last.map(|head| head.seq)),
            (6, Some(5))
        );
    }

    #[test]
    fn a_planted_rotated_name_moves_rotation_on_and_is_never_overwritten() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(&path).expect("open").rotate_at(1500);
        let first = dir.path().join("audit.jsonl.1");
        let mut written = 0;
        while !first.exists() {
            assert!(written < 20, "no rotation after {written} records");
            audit.record(record(written)).expect("record");
            written += 1;
        }
        // Whatever put these here, rotation goes past them and leaves them be.
        let planted = dir.path().join("audit.jsonl.2.head");
        std::fs::write(&planted, "planted").expect("plant");
        let next = dir.path().join("audit.jsonl.3");
        while !next.exists() {
            assert!(written < 40, "no second rotation after {written} records");
            audit
                .record(record(written))
                .expect("record past a planted name");
            written += 1;
        }
        assert_eq!(std::fs::read_to_string(&planted).expect("read"), "planted");
        assert!(!dir.path().join("audit.jsonl.2").exists(), "2 was skipped");
        let verified = verify(&[first, next, path], &VerifyOptions::default()).expect("a series");
        assert_eq!(verified.lines, written as u64);
    }

    #[test]
    fn a_fifo_is_refused_by_verify_and_never_waited_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("audit.jsonl");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .expect("mkfifo");
        match check(&fifo) {
            Err(Broken::Unreadable { why, .. }) => {
                assert!(why.contains("not a regular file"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        let (_dir, path) = written(1);
        std::fs::remove_file(head_path(&path)).expect("rm");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            head_path(&path),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .expect("mkfifo");
        assert!(matches!(check(&path), Err(Broken::End { .. })));
    }

    #[test]
    fn a_head_round_trips_and_junk_is_refused() {
        let head = Head {
            seq: 7,
            hash: "ab".repeat(32),
        };
        assert_eq!(Head::parse(&head.line()), Ok(head.clone()));
        assert_eq!(
            head.line().len(),
            Head {
                seq: u64::MAX,
                ..head
            }
            .line()
            .len()
        );
        for junk in [
            "",
            "toolcell-audit-head 1 x y",
            "toolcell-audit-head 2 0 00",
            "hello",
        ] {
            assert!(Head::parse(junk).is_err(), "{junk}");
        }
    }
}
