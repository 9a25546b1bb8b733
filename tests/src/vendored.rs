//! The vendored wasmtime (`vendor/wasmtime`) is the published crate plus `toolcell.patch`, and
//! nothing else: the patch is the one statement of what toolcell changed in it.
//!
//! Checked against two digests of the crate as crates.io publishes wasmtime 48.0.8 (facts about
//! the published crate, not a second statement of the change): the patched file taken back
//! through the patch (`git apply -R`) must be the published file, and every other file of the
//! directory must be as published. A change to the vendored source that the patch does not
//! carry fails one or the other; so does a patch that no longer describes the source.

use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};

/// The one file the patch changes, relative to the crate.
const PATCHED: &str = "src/runtime/vm/sys/unix/pagemap.rs";

/// What the directory holds besides the crate: the patch, and what it says.
const OURS: [&str; 2] = ["toolcell.patch", "TOOLCELL-PATCH.md"];

/// sha256 of `src/runtime/vm/sys/unix/pagemap.rs` in the published wasmtime 48.0.8.
const PUBLISHED_PATCHED_FILE: &str =
    "914aee8494ef6684dd485d6cb99f55b576bcdd36c7761cb490135b2aed77db00";

/// The published wasmtime 48.0.8's other files (without `.cargo-ok` and its `Cargo.lock`):
/// sha256 over each path, in order, with the sha256 of its bytes ([`tree_digest`]).
const PUBLISHED_REST: &str = "16cfa846cea449ceba858aa0772fbfb5c25130abd42f5e6a809533cad51fb354";

fn vendored() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .join("vendor/wasmtime")
}

fn hex_sha256(bytes: &[u8]) -> String {
    toolcell::digest::hex(&Sha256::digest(bytes))
}

/// Every file under `dir`, relative to `root`.
fn files(root: &Path, dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).expect("read the vendored crate") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            files(root, &path, found);
        } else {
            let relative = path.strip_prefix(root).expect("under the root");
            found.push(relative.to_string_lossy().into_owned());
        }
    }
}

/// The digest of the crate's files but the patched one and ours: sha256 over
/// `path \0 sha256(bytes) \n`, paths in byte order.
fn tree_digest(root: &Path) -> String {
    let mut found = Vec::new();
    files(root, root, &mut found);
    found.retain(|path| path != PATCHED && !OURS.contains(&path.as_str()));
    found.sort();
    let mut hasher = Sha256::new();
    for path in &found {
        let bytes = std::fs::read(root.join(path)).expect("read a vendored file");
        hasher.update(path.as_bytes());
        hasher.update(b"\0");
        hasher.update(hex_sha256(&bytes).as_bytes());
        hasher.update(b"\n");
    }
    toolcell::digest::hex(&hasher.finalize())
}

/// The patched file with the patch taken back out (`git apply -R` in a scratch copy).
fn unpatched(root: &Path) -> Result<Vec<u8>, String> {
    let scratch = tempfile::tempdir().map_err(|error| error.to_string())?;
    let target = scratch.path().join(PATCHED);
    std::fs::create_dir_all(target.parent().expect("a parent")).map_err(|e| e.to_string())?;
    std::fs::copy(root.join(PATCHED), &target).map_err(|error| error.to_string())?;
    let out = std::process::Command::new("git")
        .args(["apply", "-R", "--whitespace=nowarn"])
        .arg(root.join("toolcell.patch"))
        .current_dir(scratch.path())
        .output()
        .map_err(|error| format!("git apply: {error}"))?;
    if !out.status.success() {
        return Err(format!(
            "the patch does not come back out of the vendored file: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::read(&target).map_err(|error| error.to_string())
}

#[test]
fn the_vendored_wasmtime_is_the_published_crate_and_the_patch() {
    let root = vendored();
    let published = unpatched(&root).unwrap_or_else(|why| panic!("{why}"));
    assert_eq!(
        hex_sha256(&published),
        PUBLISHED_PATCHED_FILE,
        "{PATCHED} is changed beyond what toolcell.patch says (or the patch changed without it)"
    );
    assert_eq!(
        tree_digest(&root),
        PUBLISHED_REST,
        "a file of vendor/wasmtime other than {PATCHED} differs from the published crate: \
         make the change in toolcell.patch's file, and say it there"
    );
}

#[test]
fn a_change_the_patch_does_not_carry_is_caught() {
    // A copy of the vendored crate with one line of the patched file changed outside the
    // patch, and one with a published file changed: each must be seen.
    let scratch = tempfile::tempdir().expect("scratch");
    let copy = scratch.path().join("wasmtime");
    let status = std::process::Command::new("cp")
        .args(["-r"])
        .arg(vendored())
        .arg(&copy)
        .status()
        .expect("cp");
    assert!(status.success());
    let patched = copy.join(PATCHED);
    let text = std::fs::read_to_string(&patched).expect("read");
    let edited = text.replacen(
        "const MAX_REGIONS: usize = 32;",
        "const MAX_REGIONS: usize = 33;",
        1,
    );
    assert_ne!(text, edited, "the line to change is there");
    std::fs::write(&patched, edited).expect("write");
    let taken_back = unpatched(&copy);
    assert!(
        taken_back.is_err()
            || taken_back.is_ok_and(|bytes| hex_sha256(&bytes) != PUBLISHED_PATCHED_FILE),
        "an edit outside the patch went unseen"
    );
    std::fs::write(&patched, text).expect("restore");
    let readme = copy.join("README.md");
    let mut bytes = std::fs::read(&readme).expect("README");
    bytes.extend_from_slice(b"\nedited\n");
    std::fs::write(&readme, bytes).expect("write");
    assert_ne!(
        tree_digest(&copy),
        PUBLISHED_REST,
        "an edit of a published file went unseen"
    );
}
