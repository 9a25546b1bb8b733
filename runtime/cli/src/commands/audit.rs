//! `toolcell audit verify` and `toolcell audit sign`: check an audit file's hash chain (and,
//! with a public key, its signed head), and sign its head with a key `toolcell keygen` made.
//!
//! A signed head is kept in `FILE.head.sig` unless told otherwise: one JSON object with the
//! head line signed (`toolcell-audit-head 1 SEQ HASH`), the key's id and the signature
//! (base64). Keep a copy where whoever can write the audit file cannot: the signature is what
//! shows a cut tail even after the head file was rewritten.

use clap::Subcommand;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use toolcell::audit::{Head, VerifyOptions, verify};

/// The longest signed-head file read: one head, a key id and a signature are a few hundred
/// bytes.
#[cfg(feature = "oci")]
pub const MAX_SIGNED_HEAD_BYTES: u64 = 64 * 1024;

/// What is appended to an audit file's name for its signed head.
pub const SIGNED_HEAD_SUFFIX: &str = ".head.sig";

/// `toolcell audit …`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check an audit file's hash chain and name the first line that breaks: a rotated series
    /// is given oldest first (FILE.1 FILE.2 … FILE). Exit status 0: whole; 1: broken; 2: a
    /// file could not be read.
    Verify {
        /// The audit files, oldest first.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The hash the first file goes on from (the last hash of a rotated file that is no
        /// longer kept).
        #[arg(long, value_name = "SHA256")]
        start_after: Option<String>,
        /// Check the lines without the last file's head (a cut tail then goes unseen).
        #[arg(long)]
        without_head: bool,
        /// Also check the signed head (`toolcell audit sign`) with this public key: it must be
        /// this key's, and its line must be in the chain.
        #[arg(long, value_name = "FILE")]
        key: Option<PathBuf>,
        /// The signed head (default: the last file's name with .head.sig appended).
        #[arg(long, value_name = "FILE", requires = "key")]
        signed: Option<PathBuf>,
    },
    /// Sign an audit file's head (after checking its chain) with a private key (cosign's
    /// encrypted PEM, its password from $COSIGN_PASSWORD, or PKCS#8 PEM).
    Sign {
        /// The audit file (the live one of a series).
        file: PathBuf,
        /// The private key.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// Where to write the signed head (default: FILE.head.sig).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

/// A signed head, as its file holds it.
#[cfg_attr(not(feature = "oci"), allow(dead_code))]
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignedHead {
    /// The head line signed, without its newline.
    head: String,
    /// The signing key's id (`sha256:` of its public key).
    key: String,
    /// The signature of `head` (with its newline, as the head file holds it), base64.
    signature: String,
}

/// Run `toolcell audit …`.
pub fn run(command: &AuditCommand) -> ExitCode {
    match command {
        AuditCommand::Verify {
            files,
            start_after,
            without_head,
            key,
            signed,
        } => {
            let witness = match key {
                Some(key) => {
                    let last = files.last().cloned().unwrap_or_default();
                    let signed = signed.clone().unwrap_or_else(|| signed_path(&last));
                    match signed_head(&signed, key) {
                        Ok(head) => Some(head),
                        Err(why) => {
                            eprintln!("toolcell: {why}");
                            return ExitCode::from(1);
                        }
                    }
                }
                None => None,
            };
            let options = VerifyOptions {
                start_after: start_after.clone(),
                without_head: *without_head,
                witness,
                ..VerifyOptions::default()
            };
            match verify(files, &options) {
                Ok(verified) => {
                    let span = match (&verified.first_seq, &verified.last) {
                        (Some(first), Some(last)) => format!(" (seq {first} to {})", last.seq),
                        _ => String::new(),
                    };
                    let mut said = format!("ok: {} lines{span}", verified.lines);
                    if verified.head_checked {
                        said.push_str(", ending where the head says");
                    } else {
                        said.push_str(", not checked against a head: a cut tail would go unseen");
                    }
                    if let Some(witness) = &options.witness {
                        said.push_str(&format!(", holding the signed head (seq {})", witness.seq));
                    }
                    if let Some(last) = &verified.last {
                        said.push_str(&format!("; last hash {}", last.hash));
                    }
                    println!("{said}");
                    ExitCode::SUCCESS
                }
                Err(broken @ toolcell::audit::Broken::Unreadable { .. }) => {
                    eprintln!("toolcell: {broken}");
                    ExitCode::from(2)
                }
                Err(broken) => {
                    eprintln!("toolcell: the audit chain is broken: {broken}");
                    ExitCode::from(1)
                }
            }
        }
        AuditCommand::Sign { file, key, out } => match sign(file, key, out.as_deref()) {
            Ok(said) => {
                eprintln!("{said}");
                ExitCode::SUCCESS
            }
            Err(why) => {
                eprintln!("toolcell: {why}");
                ExitCode::from(1)
            }
        },
    }
}

/// Where the signed head of the audit file at `path` is kept by default.
pub fn signed_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(SIGNED_HEAD_SUFFIX);
    PathBuf::from(name)
}

/// Check `file`'s chain, then sign its head with `key` into `out` (default: FILE.head.sig).
fn sign(file: &Path, key: &Path, out: Option<&Path>) -> Result<String, String> {
    #[cfg(not(feature = "oci"))]
    {
        let _ = (file, key, out);
        Err(WITHOUT_KEYS.to_owned())
    }
    #[cfg(feature = "oci")]
    sign_with(file, key, out)
}

/// What `audit sign` and `audit verify --key` say in a build without keys.
#[cfg(not(feature = "oci"))]
const WITHOUT_KEYS: &str = "signed heads need keys, which are the `oci` feature of toolcell-cli \
    (cargo run --release --features oci -- ..., or --features full)";

#[cfg(feature = "oci")]
fn sign_with(file: &Path, key: &Path, out: Option<&Path>) -> Result<String, String> {
    let key = toolcell_oci::signing::SigningKey::read(key).map_err(|why| why.to_string())?;
    // A head is signed only over a chain that holds: a signature must not bless a broken one.
    // (The series before a rotated file is not checked here; its first line's link is.)
    let options = VerifyOptions {
        start_anywhere: true,
        ..VerifyOptions::default()
    };
    let verified = verify(&[file.to_owned()], &options)
        .map_err(|broken| format!("the audit chain is broken: {broken}"))?;
    let head = Head::read(&toolcell::audit::head_path(file))
        .map_err(|error| format!("{}: {error}", toolcell::audit::head_path(file).display()))?
        .ok_or_else(|| format!("{} has no head: it has no lines", file.display()))?;
    if verified.last.as_ref() != Some(&head) {
        return Err("the file changed while it was checked; sign again".to_owned());
    }
    let line = head.line();
    let signed = SignedHead {
        head: line.trim_end().to_owned(),
        key: key.id().map_err(|why| why.to_string())?,
        signature: key
            .sign_blob(line.as_bytes())
            .map_err(|why| why.to_string())?,
    };
    let out = out.map_or_else(|| signed_path(file), Path::to_owned);
    let text = serde_json::to_string_pretty(&signed).map_err(|error| error.to_string())? + "\n";
    let mut temporary = out.as_os_str().to_owned();
    temporary.push(".partial");
    let temporary = PathBuf::from(temporary);
    let written = {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        // Never through a symlink planted where the signature goes.
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o644)
            .custom_flags(no_follow())
            .open(&temporary)
            .and_then(|mut file| file.write_all(text.as_bytes()))
    };
    written
        .and_then(|()| std::fs::rename(&temporary, &out))
        .map_err(|error| format!("{}: {error}", out.display()))?;
    Ok(format!(
        "signed the head of {} (seq {}) with {} into {}",
        file.display(),
        head.seq,
        signed.key,
        out.display()
    ))
}

/// `O_NOFOLLOW`, as `open` takes it.
#[cfg(feature = "oci")]
fn no_follow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// The head signed in the file at `path`, if `key` (a public key file) made the signature.
fn signed_head(path: &Path, key: &Path) -> Result<Head, String> {
    #[cfg(not(feature = "oci"))]
    {
        let _ = (path, key);
        Err(WITHOUT_KEYS.to_owned())
    }
    #[cfg(feature = "oci")]
    signed_head_with(path, key)
}

#[cfg(feature = "oci")]
fn signed_head_with(path: &Path, key: &Path) -> Result<Head, String> {
    let key = toolcell_oci::signing::TrustedKey::read(key).map_err(|why| why.to_string())?;
    let why = |what: String| format!("the signed head {}: {what}", path.display());
    let mut text = String::new();
    {
        use std::io::Read as _;
        std::fs::File::open(path)
            .map_err(|error| why(error.to_string()))?
            .take(MAX_SIGNED_HEAD_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|error| why(error.to_string()))?;
    }
    if text.len() as u64 > MAX_SIGNED_HEAD_BYTES {
        return Err(why(format!("longer than {MAX_SIGNED_HEAD_BYTES} bytes")));
    }
    let signed: SignedHead = serde_json::from_str(&text).map_err(|error| why(error.to_string()))?;
    let line = format!("{}\n", signed.head);
    if !key.verifies_blob(line.as_bytes(), &signed.signature) {
        return Err(why(format!(
            "its signature is not by the key {} ({})",
            key.path.display(),
            key.id
        )));
    }
    Head::parse(&line).map_err(why)
}
