//! The compiled-component cache: a warm cache is used; a corrupt, foreign, swapped or forged
//! entry is compiled again, never run; a directory or key others could change is not used.

use crate::support::result_text;
use std::path::{Path, PathBuf};
use toolcell::cache::CacheStats;
use toolcell::{Runtime, ToolPort, ToolRequest};

/// The key file of a cache at `cache`: beside it, not in it.
fn key_of(cache: &Path) -> PathBuf {
    cache.with_extension("key")
}

/// A runtime on `cache` that loads every tool's code at start (not on each tool's first call),
/// so every entry is read, and counted, by the build.
fn build(cache: &Path) -> Runtime {
    let port = Runtime::builder()
        .cache_dir(Some(cache.to_path_buf()))
        .cache_key_file(Some(key_of(cache)))
        .load_code_at_start(true)
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
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
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
            indexed: builtins(),
            ..CacheStats::default()
        }
    );
}

#[test]
fn a_corrupt_entry_is_compiled_again_and_replaced() {
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
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
            indexed: builtins(),
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
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    build(&cache);
    // An artifact compiled by an engine with other settings, with a valid digest in the old
    // entry format, put under our entry's name: it carries no MAC under our key.
    let foreign_engine = wasmtime::Engine::default();
    for (name, bytes) in toolcell::builtin_components() {
        let artifact = foreign_engine
            .precompile_component(bytes)
            .expect("foreign compile");
        let mut entry = sha2_digest(&artifact);
        entry.extend_from_slice(&artifact);
        std::fs::write(entry_for(&cache, bytes, name), entry).expect("plant it");
    }
    let port = build(&cache);
    assert_eq!(
        port.cache_stats(),
        CacheStats {
            replaced: builtins(),
            indexed: builtins(),
            ..CacheStats::default()
        }
    );
}

/// Another component's genuine entry, copied under this one's name, is never run in its place:
/// the MAC binds an entry to the component it was compiled from.
#[test]
fn an_entry_swapped_for_another_component_s_is_never_run() {
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    build(&cache);
    let component = |wanted: &str| {
        toolcell::builtin_components()
            .iter()
            .find(|(name, _)| *name == wanted)
            .map(|(name, bytes)| entry_for(&cache, bytes, name))
            .expect("built in")
    };
    let (echo, clock) = (component("echo"), component("clock"));
    std::fs::copy(&clock, &echo).expect("swap");
    // `build` calls echo and checks it echoes: the clock's code did not run as echo.
    let port = build(&cache);
    assert_eq!(port.cache_stats().replaced, 1);
    assert_ne!(
        std::fs::read(&echo).expect("read"),
        std::fs::read(&clock).expect("read")
    );
}

/// An entry patched by someone who cannot read the key, its MAC recomputed under a key of
/// their own (or its old-style digest fixed up), is refused and compiled again.
#[test]
fn an_entry_patched_with_a_recomputed_mac_is_never_run() {
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    use hmac::Mac as _;
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    build(&cache);
    let (name, bytes) = toolcell::builtin_components()[0];
    let path = entry_for(&cache, bytes, name);
    let entry = std::fs::read(&path).expect("read");
    let (magic, rest) = entry.split_at(8);
    let mut payload = rest[32..].to_vec();
    let middle = payload.len() / 2;
    payload[middle] ^= 0xCC;
    let mut forged_mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&[7u8; 32]).expect("key");
    forged_mac.update(&sha2_digest(bytes));
    forged_mac.update(&payload);
    let mut forged = magic.to_vec();
    forged.extend_from_slice(&forged_mac.finalize().into_bytes());
    forged.extend_from_slice(&payload);
    std::fs::write(&path, &forged).expect("plant it");
    let port = build(&cache);
    assert_eq!(port.cache_stats().replaced, 1, "{name}");
    assert_ne!(std::fs::read(&path).expect("read"), forged);
}

/// A cache directory others may write, or that another user owns, is not used at all; nor is
/// a key others may read.
#[test]
fn a_cache_others_could_change_is_not_used() {
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    use std::os::unix::fs::PermissionsExt as _;
    let uncached = || CacheStats {
        uncached: builtins(),
        ..CacheStats::default()
    };
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    build(&cache);
    let entries_before = entries(&cache);

    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    assert_eq!(build(&cache).cache_stats(), uncached(), "world-writable");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).expect("chmod");

    std::fs::set_permissions(key_of(&cache), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    assert_eq!(build(&cache).cache_stats(), uncached(), "a readable key");
    std::fs::set_permissions(key_of(&cache), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");

    // Another user's directory (the tests may run as root, which can give it away; if not,
    // this part cannot be shown and is skipped).
    if std::os::unix::fs::chown(&cache, Some(65534), None).is_ok() {
        assert_eq!(build(&cache).cache_stats(), uncached(), "another user's");
        std::os::unix::fs::chown(&cache, Some(my_uid()), None).expect("chown back");
    }
    // A link in place of the directory.
    let link = temp.path().join("link");
    std::os::unix::fs::symlink(&cache, &link).expect("symlink");
    assert_eq!(
        build(&link).cache_stats().hits,
        0,
        "a symlinked cache is not read"
    );

    assert_eq!(
        entries(&cache),
        entries_before,
        "nothing was written meanwhile"
    );
    assert_eq!(
        build(&cache).cache_stats().hits,
        builtins(),
        "and trusted again"
    );
}

/// A symlink planted where an entry will be written is replaced, never written through.
#[test]
fn a_link_planted_at_an_entry_is_not_followed() {
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
    let temp = tempfile::tempdir().expect("temp dir");
    let cache = temp.path().join("cache");
    build(&cache);
    let (name, bytes) = toolcell::builtin_components()[0];
    let path = entry_for(&cache, bytes, name);
    let victim = temp.path().join("victim.txt");
    std::fs::write(&victim, "untouched").expect("write");
    std::fs::remove_file(&path).expect("rm");
    std::os::unix::fs::symlink(&victim, &path).expect("plant");
    build(&cache);
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "untouched");
    assert!(
        !std::fs::symlink_metadata(&path)
            .expect("entry")
            .file_type()
            .is_symlink(),
        "the link was replaced by a real entry"
    );
}

fn my_uid() -> u32 {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").expect("proc").uid()
}

#[test]
fn no_cache_compiles_everything_and_writes_nothing() {
    // Compiles components: CPU-heavy, so not while a timing test measures.
    let _guard = crate::support::exclusive();
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

/// The entry of `component` in `cache` (entries are named `<sha256>-<engine>.cwasm`).
fn entry_for(cache: &Path, component: &[u8], name: &str) -> PathBuf {
    let hex: String = sha2_digest(component)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    entries(cache)
        .into_iter()
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(&hex))
        })
        .unwrap_or_else(|| panic!("no entry for {name}"))
}
