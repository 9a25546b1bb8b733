//! The compiled-component cache: a warm cache is used, and a corrupt or foreign entry is
//! compiled again, never trusted.

use crate::support::result_text;
use std::path::{Path, PathBuf};
use toolcell::{CacheStats, Runtime, ToolPort, ToolRequest};

fn build(cache: &Path) -> Runtime {
    let port = Runtime::builder()
        .cache_dir(Some(cache.to_path_buf()))
        .build()
        .expect("port");
    assert_eq!(port.load_errors(), &[]);
    assert_eq!(
        result_text(port.call(&ToolRequest::new("t", "echo", r#"{"text":"ok"}"#))),
        "ok"
    );
    port
}

fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(cache)
        .expect("cache dir")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "cwasm"))
        .collect();
    entries.sort();
    entries
}

#[test]
fn a_warm_cache_is_read_instead_of_compiling() {
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    let cold = build(&cache);
    assert_eq!(
        cold.cache_stats(),
        CacheStats {
            misses: builtins(),
            ..CacheStats::default()
        }
    );
    assert_eq!(
        entries(&cache).len(),
        builtins(),
        "one entry per built-in tool"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&cache)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "the cache directory is private");
    }
    let warm = build(&cache);
    assert_eq!(
        warm.cache_stats(),
        CacheStats {
            hits: builtins(),
            ..CacheStats::default()
        }
    );
}

#[test]
fn a_corrupt_entry_is_compiled_again_and_replaced() {
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    build(&cache);
    let entry = entries(&cache).remove(0);
    let mut bytes = std::fs::read(&entry).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xFF;
    std::fs::write(&entry, &bytes).expect("corrupt it");
    // And truncate the other one to less than its digest.
    let other = entries(&cache).remove(1);
    std::fs::write(&other, b"short").expect("truncate it");

    let port = build(&cache);
    assert_eq!(
        port.cache_stats(),
        CacheStats {
            replaced: 2,
            hits: builtins() - 2,
            ..CacheStats::default()
        }
    );
    assert_ne!(std::fs::read(&entry).expect("read"), bytes, "rewritten");
    assert_eq!(
        build(&cache).cache_stats().hits,
        builtins(),
        "and good again"
    );
}

#[test]
fn an_entry_from_another_engine_is_refused_and_replaced() {
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    build(&cache);
    // An artifact compiled by an engine with other settings, given a valid digest and put
    // under our entry's name: wasmtime must refuse it.
    let foreign_engine = wasmtime::Engine::default();
    for (name, bytes) in toolcell::builtin_components() {
        let artifact = foreign_engine
            .precompile_component(bytes)
            .expect("foreign compile");
        let mut entry = sha2_digest(&artifact);
        entry.extend_from_slice(&artifact);
        let path = entries(&cache)
            .into_iter()
            .find(|path| entry_is_for(path, bytes))
            .unwrap_or_else(|| panic!("no entry for {name}"));
        std::fs::write(path, entry).expect("plant it");
    }
    let port = build(&cache);
    assert_eq!(
        port.cache_stats(),
        CacheStats {
            replaced: builtins(),
            ..CacheStats::default()
        }
    );
}

#[test]
fn no_cache_compiles_everything_and_writes_nothing() {
    let port = Runtime::builder().cache_dir(None).build().expect("port");
    assert_eq!(
        port.cache_stats(),
        CacheStats {
            uncached: builtins(),
            ..CacheStats::default()
        }
    );
}

/// How many tools ship built in (each has one cache entry).
fn builtins() -> usize {
    toolcell::builtin_components().len()
}

fn sha2_digest(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).to_vec()
}

/// Entries are named `<sha256 of the component>-<engine>.cwasm`.
fn entry_is_for(path: &Path, component: &[u8]) -> bool {
    let hex: String = sha2_digest(component)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with(&hex))
}
