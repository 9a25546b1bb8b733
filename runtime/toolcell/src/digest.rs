//! Random bytes and sha256 digests, as hex: the one leaf every stage of the core may use
//! (cache keys, staging names, audit ids and argument digests), and the one home of these
//! helpers for toolcell's other crates (tokens, sealed approvals, replica names, the OCI store).

use sha2::{Digest as _, Sha256};

/// `N` bytes from the operating system's random source.
pub fn random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(bytes)
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of `bytes`, as lowercase hex: a component's identity (cache keys, policy pins).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
