//! The audit file as a hash chain: how lines are linked, where the chain's head is kept, how a
//! file is rotated, and how a file (or a rotated series) is checked.
//!
//! Past the house's 700 lines only by its unit tests (the chain's attacks), kept beside the code
//! they test.
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
//! - **A lease on the head.** A writer keeps the head's lock after its record while records
//!   keep coming, and lets go once none came for [`AUDIT_LEASE_IDLE`] (a thread of its own
//!   watches) or, at its next record, once it has held it for [`AUDIT_LEASE_MAX`]. While it
//!   holds it no one else can write, so the head it wrote last is the head: a record under the
//!   lease takes no lock, reads no head and checks only that the head file at the path is still
//!   the one it holds (one `statx`; a head removed and made again by another writer ends the
//!   lease, and the record goes on from the new head). The head is still rewritten after every
//!   record, so what `audit verify` checks is the same. Another process's record waits for the
//!   lease to end: at most [`AUDIT_LEASE_IDLE`] after this one's last record, or
//!   [`AUDIT_LEASE_MAX`] while it keeps writing; then for [`AUDIT_LEASE_IDLE`] this one takes
//!   and lets go of the lock for each record, as it did before leases, so the other gets a turn
//!   (`flock` does not queue fairly: under sustained load from both it may wait more than one).
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
use crate::audit::files::*;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a writer keeps the head's lock after its last record: long enough to span the gap
/// between one call's record and the next on a busy server (microseconds to a millisecond),
/// short enough that another process's record hardly waits for an idle one.
pub const AUDIT_LEASE_IDLE: Duration = Duration::from_millis(2);

/// The longest a writer keeps the head's lock while its records keep coming, before it lets go
/// (at its next record) so another process appending to the same file gets a turn: what that
/// process's record may wait. Taking the lock again every 5 ms costs a busy writer nothing
/// measurable (a few system calls in hundreds of records).
pub const AUDIT_LEASE_MAX: Duration = Duration::from_millis(5);

/// An append-only, hash-chained audit file (see the module docs).
#[derive(Debug)]
pub struct Audit {
    path: PathBuf,
    head_path: PathBuf,
    rotate_at: Option<u64>,
    /// The host's own files, where the files it makes are registered (`hostfs`).
    own: Option<crate::hostfs::OwnFiles>,
    /// The open files, shared with the thread that ends an idle lease.
    shared: Arc<Shared>,
    /// Records waiting to be written, and what became of those a batch took (module docs).
    queue: Mutex<Queue>,
    /// The thread that ends an idle lease, started with the first lease.
    keeper: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What a writer and its lease keeper share.
#[derive(Debug)]
struct Shared {
    files: Mutex<Files>,
    /// Signalled when a lease starts and when the audit closes.
    leased: Condvar,
    closing: AtomicBool,
}

/// This handle holds the head's lock between records (module docs).
#[derive(Debug)]
struct Lease {
    /// When it was taken: it is let go at the first record past [`AUDIT_LEASE_MAX`].
    since: Instant,
    /// When its last record was written: it is let go [`AUDIT_LEASE_IDLE`] after.
    last: Instant,
    /// The head file's length as last written.
    head_len: usize,
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

#[derive(Debug)]
struct Files {
    log: File,
    head: File,
    /// The open head file's device and inode: what the file at the head's path must be.
    head_identity: (u64, u64),
    /// The head this handle wrote last.
    written: Option<Head>,
    /// How many batches this handle has written (group commit; its tests read it).
    batches: u64,
    /// Held between records: the head's lock is this handle's.
    lease: Option<Lease>,
    /// After a lease held for [`AUDIT_LEASE_MAX`], none is taken until then: each record
    /// takes and lets go of the lock, so a waiting process gets its turn.
    no_lease_until: Option<Instant>,
}

impl Files {
    /// End the lease, if there is one: the head's lock is let go.
    fn release(&mut self) {
        if self.lease.take().is_some() {
            let _ = rustix::fs::flock(&self.head, rustix::fs::FlockOperation::Unlock);
        }
    }
}

/// The lease keeper: ends a lease once no record came for [`AUDIT_LEASE_IDLE`], and the last
/// one when the audit closes.
fn keep_lease(shared: &Shared) {
    let mut files = crate::sync::lock(&shared.files);
    loop {
        if shared.closing.load(Ordering::Acquire) {
            files.release();
            return;
        }
        let wait = match &files.lease {
            None => None,
            Some(lease) => {
                let idle = lease.last.elapsed();
                if idle >= AUDIT_LEASE_IDLE {
                    files.release();
                    continue;
                }
                Some(AUDIT_LEASE_IDLE - idle)
            }
        };
        files = match wait {
            None => shared
                .leased
                .wait(files)
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
            Some(wait) => {
                shared
                    .leased
                    .wait_timeout(files, wait)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0
            }
        };
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        {
            // Told holding the files, so the keeper is either waiting (and woken) or has yet to
            // look (and sees it).
            let _files = crate::sync::lock(&self.shared.files);
            self.shared.closing.store(true, Ordering::Release);
            self.shared.leased.notify_all();
        }
        let keeper = crate::sync::lock(&self.keeper).take();
        match keeper {
            Some(keeper) => {
                let _ = keeper.join();
            }
            None => crate::sync::lock(&self.shared.files).release(),
        }
    }
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
        let head_identity = identity(&head)?;
        Ok(Audit {
            path: path.to_owned(),
            head_path: head_path(path),
            rotate_at: None,
            own: None,
            shared: Arc::new(Shared {
                files: Mutex::new(Files {
                    log,
                    head,
                    head_identity,
                    written: None,
                    batches: 0,
                    lease: None,
                    no_lease_until: None,
                }),
                leased: Condvar::new(),
                closing: AtomicBool::new(false),
            }),
            queue: Mutex::new(Queue::default()),
            keeper: Mutex::new(None),
        })
    }

    /// This audit, rotating its file before a record would take it past `bytes` (see the
    /// module docs). A file is never left empty: a record longer than the limit goes into a
    /// file of its own.
    pub fn rotate_at(mut self, bytes: u64) -> Audit {
        self.rotate_at = Some(bytes);
        self
    }

    /// This audit, registering its files among the host's own in `own` (no tool reads or
    /// writes them, by any name: `hostfs`), now and as rotation makes new ones. A runtime's
    /// [`with_audit`](crate::Runtime::with_audit) does this with its own registry.
    pub fn registering(mut self, own: crate::hostfs::OwnFiles) -> Audit {
        own.register(&self.path);
        own.register(&self.head_path);
        // Its companions already there (rotated copies and their heads from earlier runs, a
        // signed head): by identity too, so a hard link to one made before is that file.
        own.register_companions(&self.path);
        self.own = Some(own);
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
            let mut queue = crate::sync::lock(&self.queue);
            let ticket = queue.next_ticket;
            queue.next_ticket = queue.next_ticket.wrapping_add(1);
            queue.waiting.push((ticket, record));
            ticket
        };
        let mut files = crate::sync::lock(&self.shared.files);
        // Whoever held the files before may have written this record in its batch; if not,
        // it is still waiting, and this thread writes every waiting record.
        let batch = {
            let mut queue = crate::sync::lock(&self.queue);
            if let Some(done) = queue.done.remove(&ticket) {
                return done.map_err(Failed::error);
            }
            std::mem::take(&mut queue.waiting)
        };
        let leased = files.lease.is_some();
        let mut outcomes = self.write_batch(&mut files, batch);
        if !leased && files.lease.is_some() {
            // A lease began: its keeper starts timing it (and is started with the first).
            if self.start_keeper() {
                self.shared.leased.notify_all();
            } else {
                files.release();
            }
        }
        let mine = outcomes.remove(&ticket);
        // The others' outcomes are left before the files are let go: each finds its own as
        // soon as it holds them.
        crate::sync::lock(&self.queue).done.extend(
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

    /// Start the lease keeper, once; false if it could not be (then a lease could not end
    /// while idle, so the caller holds none).
    fn start_keeper(&self) -> bool {
        let mut keeper = crate::sync::lock(&self.keeper);
        if keeper.is_some() {
            return true;
        }
        let shared = Arc::clone(&self.shared);
        match std::thread::Builder::new()
            .name("toolcell-audit-lease".to_owned())
            .spawn(move || keep_lease(&shared))
        {
            Ok(handle) => {
                *keeper = Some(handle);
                true
            }
            Err(error) => {
                tracing::warn!("the audit's lease keeper could not start: {error}");
                false
            }
        }
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
            // Whatever the failure left, the next record starts from the files as they are.
            files.release();
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
        let now = Instant::now();
        // A lease is let go when it has been held long enough for others to get a turn, or
        // when the head file at the path is no longer the one it locks (another writer made
        // the head again): then this record takes the lock as any would.
        if let Some(lease) = &files.lease {
            if now.duration_since(lease.since) >= AUDIT_LEASE_MAX {
                files.release();
                files.no_lease_until = Some(now + AUDIT_LEASE_IDLE);
            } else if identity_at(&self.head_path) != Some(files.head_identity) {
                files.release();
            }
        }
        let (head, head_len) = match &files.lease {
            // Held since this handle's last record: the head is the one it wrote.
            Some(lease) => (files.written.clone(), lease.head_len),
            None => {
                let mut reopened = 0;
                loop {
                    // The lock is taken on a head file that is at the head's path once held.
                    rustix::fs::flock(&files.head, rustix::fs::FlockOperation::LockExclusive)?;
                    if identity_at(&self.head_path) == Some(files.head_identity) {
                        break;
                    }
                    let _ = rustix::fs::flock(&files.head, rustix::fs::FlockOperation::Unlock);
                    reopened += 1;
                    if reopened > MAX_HEAD_REOPENS {
                        return Err(std::io::Error::other(format!(
                            "{} keeps being replaced: the audit record was not written",
                            self.head_path.display()
                        )));
                    }
                    files.head = open_head(&self.path)?;
                    files.head_identity = identity(&files.head)?;
                }
                // Held from here: a failure below ends the lease (and lets the lock go).
                files.lease = Some(Lease {
                    since: now,
                    last: now,
                    head_len: 0,
                });
                let (head, head_len) = read_head_sized(&files.head)?;
                // A file is rotated only by a record: if the head is still the one this
                // handle wrote last, no one else has written, so the open file is still the
                // one at the path.
                if (head.is_none() || head != files.written) && !same_file(&files.log, &self.path) {
                    // Another process rotated the file (or it was removed): write where the
                    // path is now.
                    files.log = open_regular(&self.path, true)?;
                }
                (head, head_len)
            }
        };
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
        let mut head_len = head_len;
        if let Some(head) = &current
            && !pending.is_empty()
        {
            head_len = write_head_over(&files.head, head, Some(head_len))?;
            files.written = Some(head.clone());
        }
        // The lock is kept (the lease) until the keeper or a later record lets it go, unless
        // this handle just held one for its longest.
        if files.no_lease_until.is_some_and(|until| now < until) {
            files.release();
        } else if let Some(lease) = &mut files.lease {
            lease.last = Instant::now();
            lease.head_len = head_len;
        }
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
            if let Some(own) = &self.own {
                // The new file is a new inode: the host's own too, by identity.
                own.register(&self.path);
                own.register(&head_path(&rotated));
                own.register(&rotated);
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{Broken, Verified, VerifyOptions, verify};
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
            let held = crate::sync::lock(&audit.shared.files);
            let writers: Vec<_> = (1..=WRITERS)
                .map(|n| {
                    let audit = &audit;
                    scope.spawn(move || audit.record(record(n)).expect("record"))
                })
                .collect();
            while crate::sync::lock(&audit.queue).waiting.len() < WRITERS {
                std::thread::yield_now();
            }
            drop(held);
            writers
                .into_iter()
                .map(|writer| writer.join().expect("the writer"))
                .collect::<Vec<Head>>()
        });
        assert_eq!(
            crate::sync::lock(&audit.shared.files).batches,
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

    /// Whether some other open file description could take the head's lock now.
    fn head_is_free(path: &Path) -> bool {
        let head = File::open(head_path(path)).expect("open the head");
        rustix::fs::flock(&head, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
    }

    #[test]
    fn a_lease_keeps_the_lock_between_records_and_ends_when_idle() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let audit = Audit::open(&path).expect("open");
        // Right after a record the lease holds the lock (looked at under the files' mutex, so
        // the keeper cannot end it meanwhile; tried a few times on a machine slow enough for
        // the keeper to end it between the record and the look).
        let mut held = false;
        for n in 0..50 {
            audit.record(record(n)).expect("record");
            let files = crate::sync::lock(&audit.shared.files);
            if files.lease.is_some() {
                held = !head_is_free(&path);
                if held {
                    break;
                }
            }
        }
        assert!(held, "a record leaves the head's lock held");
        let batches = crate::sync::lock(&audit.shared.files).batches;
        // Idle, the lease ends and the lock is free for another writer, which writes.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !head_is_free(&path) {
            assert!(Instant::now() < deadline, "the idle lease never ended");
            std::thread::sleep(AUDIT_LEASE_IDLE);
        }
        let other = Audit::open(&path).expect("another writer");
        other.record(record(100)).expect("record");
        drop(other);
        // The first writer, its lease over, goes on from the other's head: one chain.
        audit.record(record(101)).expect("record");
        assert!(crate::sync::lock(&audit.shared.files).batches > batches);
        let verified = check(&path).expect("one chain");
        assert_eq!(verified.last.map(|head| head.seq), Some(verified.lines - 1));
        // Dropped, the audit lets the lock go at once.
        drop(audit);
        assert!(head_is_free(&path), "a dropped audit holds no lock");
    }

    #[test]
    fn a_writer_that_keeps_writing_lets_another_have_a_turn() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let (busy, other) = (
            Audit::open(&path).expect("busy"),
            Audit::open(&path).expect("other"),
        );
        let done = AtomicBool::new(false);
        let written = std::thread::scope(|scope| {
            let writing = scope.spawn(|| {
                // Records back to back, never idle, until the other has written (or for far
                // longer than a lease: then the other never got its turn).
                let give_up = Instant::now() + Duration::from_secs(60);
                let mut n = 0;
                while !done.load(Ordering::Acquire) && Instant::now() < give_up {
                    busy.record(record(n)).expect("record");
                    n += 1;
                }
                done.load(Ordering::Acquire)
            });
            other.record(record(1_000_000)).expect("record");
            done.store(true, Ordering::Release);
            writing.join().expect("the busy writer")
        });
        assert!(written, "the other writer's record waited out the busy one");
        let verified = check(&path).expect("one chain");
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
