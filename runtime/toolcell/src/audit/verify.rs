//! Checking a chain ([`verify`]): every line parses, is in order, names the hash of the line
//! before, across rotated files, and the head file agrees with the last line.

use crate::audit::files::*;
use std::io::{BufRead as _, Read as _};
use std::path::PathBuf;

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
