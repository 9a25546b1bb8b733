//! Checking a chain ([`verify`]): every line parses, is in order, names the hash of the line
//! before, across rotated files, and the head file agrees with the last line.

use crate::audit::files::*;
use std::io::{BufRead as _, Read as _};
use std::path::{Path, PathBuf};

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
    let mut chain = Chain {
        expected: None,
        verified: Verified {
            lines: 0,
            first_seq: None,
            last: None,
            head_checked: false,
            witnessed: false,
        },
    };
    for (index, path) in files.iter().enumerate() {
        let name = path.display().to_string();
        let lines = chain.file(path, &name, options)?;
        let last_file = index + 1 == files.len();
        chain.end(path, &name, (lines, last_file), options)?;
    }
    chain.witness_found(files, options)?;
    let Chain {
        expected,
        mut verified,
    } = chain;
    verified.last = expected;
    Ok(verified)
}

/// A chain as far as [`verify`] has checked it.
struct Chain {
    /// The last line checked: what the next one must go on from.
    expected: Option<Head>,
    /// What was found so far.
    verified: Verified,
}

impl Chain {
    /// Check every line of the file at `path` (called `name` in errors), each going on from
    /// the one before: how many lines it has.
    fn file(&mut self, path: &Path, name: &str, options: &VerifyOptions) -> Result<u64, Broken> {
        let unreadable = |why: String| Broken::Unreadable {
            file: name.to_owned(),
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
                return Ok(number);
            }
            number += 1;
            self.line(&buffer, options)
                .map_err(|(seq, why)| Broken::Line {
                    file: name.to_owned(),
                    line: number,
                    seq,
                    why,
                })?;
        }
    }

    /// Check one line as read (`buffer`, its newline included): a whole record that goes on
    /// from the line before, and, if it is the witness's, the line the witness signed. The
    /// error: the line's `seq` if it has one, and what is wrong.
    fn line(
        &mut self,
        buffer: &[u8],
        options: &VerifyOptions,
    ) -> Result<(), (Option<u64>, String)> {
        let Some(line) = buffer.strip_suffix(b"\n") else {
            return Err((
                None,
                if buffer.len() > MAX_LINE_BYTES {
                    format!("longer than {MAX_LINE_BYTES} bytes: not an audit record")
                } else {
                    "the file ends in half a line".to_owned()
                },
            ));
        };
        let (seq, prev) = link_of(line).map_err(|why| (None, why))?;
        let broken = |why: String| (Some(seq), why);
        goes_on(self.expected.as_ref(), (seq, &prev), options).map_err(broken)?;
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
            self.verified.witnessed = true;
        }
        self.verified.first_seq.get_or_insert(seq);
        self.verified.lines += 1;
        self.expected = Some(Head { seq, hash });
        Ok(())
    }

    /// Check that the file at `path` (called `name`, of `lines` lines) ends where its head
    /// file says. A head file may be missing only for a file before the last (`last_file`
    /// says which), or when the options check without heads.
    fn end(
        &mut self,
        path: &Path,
        name: &str,
        (lines, last_file): (u64, bool),
        options: &VerifyOptions,
    ) -> Result<(), Broken> {
        let end = |why: String| Broken::End {
            file: name.to_owned(),
            why,
        };
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
                check_end(&head, self.expected.as_ref(), lines).map_err(end)?;
                if last_file {
                    self.verified.head_checked = true;
                }
            }
        }
        Ok(())
    }

    /// Check that the witness, if one was given, was found in the chain (of `files`): if not,
    /// lines were cut before it.
    fn witness_found(&self, files: &[PathBuf], options: &VerifyOptions) -> Result<(), Broken> {
        if let Some(witness) = &options.witness
            && !self.verified.witnessed
        {
            let ends = self.expected.as_ref().map_or_else(
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
        Ok(())
    }
}

/// Check that a line of `seq` whose `prev` is given goes on from `before`, the line before it
/// (`None`: it is the first line checked, which starts the chain or goes on from where the
/// options say).
fn goes_on(
    before: Option<&Head>,
    (seq, prev): (u64, &str),
    options: &VerifyOptions,
) -> Result<(), String> {
    match before {
        None if prev == GENESIS => {
            if seq != 0 {
                return Err(format!(
                    "it starts the chain (its prev is the genesis hash), but its seq \
                     is {seq}, not 0"
                ));
            }
        }
        None if options.start_anywhere || options.start_after.as_deref() == Some(prev) => {}
        None => {
            return Err(format!(
                "it goes on from a line that is not here (its prev is {prev}): give \
                 the rotated files before it, oldest first, or the hash it starts \
                 after (--start-after)"
            ));
        }
        Some(before) => {
            if prev != before.hash {
                return Err(format!(
                    "its prev is {prev}, but the line before it (seq {}) hashes to {}: \
                     a line was changed, removed, inserted or reordered here",
                    before.seq, before.hash
                ));
            }
            if Some(seq) != before.seq.checked_add(1) {
                return Err(format!(
                    "its seq is {seq}, but the line before it is seq {}",
                    before.seq
                ));
            }
        }
    }
    Ok(())
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
