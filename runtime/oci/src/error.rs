//! Why a registry operation failed: [`OciError`], one variant per thing a caller acts on
//! differently (a limit, a digest that lies, credentials, a name the registry does not have,
//! a registry out of reach, an operation past its overall time, a moved tag), each with words
//! that name the reference.

use std::fmt;
use std::time::Duration;

/// A limit on what is read from a registry: the constant that sets it, by name, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The constant's name (`MAX_MANIFEST_BYTES`, say).
    pub name: &'static str,
    /// Its value, in bytes.
    pub bytes: u64,
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} bytes)", self.name, self.bytes)
    }
}

/// Why a registry operation ([`pull`](crate::pull), [`push`](crate::push),
/// [`sign`](crate::sign), [`attach`](crate::attach)) failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OciError {
    /// A body the registry or its token endpoint sent is longer than `limit`: it was read no
    /// further (its `Content-Length`, or the stream, passed the limit), and nothing was kept.
    TooLarge {
        /// The reference the operation was for.
        reference: String,
        /// What the body was ("the registry's manifest", say).
        what: &'static str,
        /// The limit it passed.
        limit: Limit,
    },
    /// The registry reports a digest for what was just pushed that is not the digest of the
    /// bytes pushed (sha256, computed here).
    DigestMismatch {
        /// The reference pushed to.
        reference: String,
        /// What was pushed ("the manifest", say).
        what: &'static str,
        /// The digest of the bytes pushed.
        computed: String,
        /// The digest the registry reported.
        reported: String,
    },
    /// The registry (or its token endpoint) refused the credentials given, or asked for some
    /// where none were found.
    Denied {
        /// The reference the operation was for.
        reference: String,
        /// What was given, what the registry said, and where credentials are looked for.
        why: String,
    },
    /// The registry has no such tag, manifest or repository.
    NotFound {
        /// The reference asked for.
        reference: String,
        /// What the registry said.
        why: String,
    },
    /// The registry could not be reached (the name, the connection, TLS), or stopped
    /// answering mid-transfer.
    Unreachable {
        /// The reference the operation was for.
        reference: String,
        /// What failed.
        why: String,
    },
    /// The whole operation took longer than its limit ([`PULL_TIMEOUT`](crate::PULL_TIMEOUT),
    /// [`PUSH_TIMEOUT`](crate::PUSH_TIMEOUT), [`SIGN_TIMEOUT`](crate::SIGN_TIMEOUT)): it was
    /// stopped, and nothing unchecked was kept.
    TimedOut {
        /// The reference the operation was for.
        reference: String,
        /// `pull`, `push` or `sign`.
        operation: &'static str,
        /// The limit it passed.
        limit: Duration,
    },
    /// The tag is locked to another digest than the registry now has: it moved.
    TagMoved {
        /// The tag.
        reference: String,
        /// The digest the lock file holds.
        locked: String,
        /// The digest the registry has now.
        now: String,
    },
    /// The text is not a tool reference toolcell reads (`oci://REGISTRY/REPOSITORY:TAG` or
    /// `...@sha256:HEX`), or a digest is not `sha256:` and 64 lowercase hex digits.
    InvalidReference {
        /// The text given.
        reference: String,
        /// What is wrong with it, and how to write one.
        why: String,
    },
    /// The registry answered with an error status that is neither a refusal of credentials
    /// nor "no such name" (a server error, a request it would not take).
    Refused {
        /// The reference the operation was for.
        reference: String,
        /// The HTTP status.
        status: u16,
        /// The status, the URL and what the registry's error said.
        why: String,
    },
    /// What the registry sent is not what it must be: a manifest whose bytes are not the
    /// digest it was asked for, an artifact that is not a wasm component, a signature that
    /// cannot be read, more signatures than are read. Nothing of it was kept.
    Invalid {
        /// The reference the operation was for.
        reference: String,
        /// What was wrong.
        why: String,
    },
    /// The store on this machine does not hold what the reference names (a tag not in the lock
    /// file, a manifest or component not stored, or stored bytes that are not their digest):
    /// `toolcell pull` it.
    NotPulled {
        /// The reference.
        reference: String,
        /// What is missing.
        why: String,
    },
    /// A file on this machine could not be read, written or understood: the store, the lock
    /// file, registry credentials, a signing key, a trust root.
    Local {
        /// The file (or what it is, where there is no one file).
        path: String,
        /// What failed.
        why: String,
    },
}

impl fmt::Display for OciError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OciError::TooLarge {
                reference,
                what,
                limit,
            } => write!(
                f,
                "{reference}: {what} is longer than {limit}: not read further; refused"
            ),
            OciError::DigestMismatch {
                reference,
                what,
                computed,
                reported,
            } => write!(
                f,
                "{reference}: the registry reports {reported} for {what} just pushed, but the \
                 bytes pushed are {computed}: refused"
            ),
            OciError::Denied { reference, why } => {
                write!(f, "{reference}: the registry denied access: {why}")
            }
            OciError::NotFound { reference, why } => {
                write!(f, "{reference}: not in the registry: {why}")
            }
            OciError::Unreachable { reference, why } => write!(f, "{reference}: {why}"),
            OciError::TimedOut {
                reference,
                operation,
                limit,
            } => write!(
                f,
                "{reference}: the {operation} took longer than {} s: stopped",
                limit.as_secs()
            ),
            OciError::TagMoved {
                reference,
                locked,
                now,
            } => write!(
                f,
                "{reference} is locked to {locked} in {}, but the registry now has it at \
                 {now}: the tag moved. Run `toolcell pull --update {reference}` to accept the \
                 new bytes",
                crate::LOCK_FILE
            ),
            OciError::InvalidReference { reference, why } => {
                write!(f, "{reference:?} is not a tool reference: {why}")
            }
            OciError::Refused { reference, why, .. } => write!(f, "{reference}: {why}"),
            OciError::Invalid { reference, why } => write!(f, "{reference}: {why}"),
            OciError::NotPulled { reference, why } => {
                write!(f, "{reference}: {why}; run `toolcell pull {reference}`")
            }
            OciError::Local { path, why } => write!(f, "{path}: {why}"),
        }
    }
}

impl std::error::Error for OciError {}

impl OciError {
    /// A file on this machine (`path`) that could not be read, written or understood.
    pub(crate) fn local(path: &std::path::Path, why: impl fmt::Display) -> OciError {
        OciError::Local {
            path: path.display().to_string(),
            why: why.to_string(),
        }
    }
}

/// For the registry code that still builds its messages as text.
impl From<OciError> for String {
    fn from(error: OciError) -> String {
        error.to_string()
    }
}
