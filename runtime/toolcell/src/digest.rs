//! Random names and sha256 digests, as hex: the one leaf every stage may use (cache keys,
//! staging names, audit ids and argument digests).

use sha2::{Digest as _, Sha256};

/// `N` bytes from the operating system's random source.
pub(crate) fn random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|error| std::io::Error::other(error.to_string()))?;
    Ok(bytes)
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of `bytes`, as lowercase hex: a component's identity (cache keys, policy pins).
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}
