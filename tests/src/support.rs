//! What the test modules share: a port loaded once with the built-in tools and every test
//! guest, because compiling components is the slow part of a test.

use std::sync::{LazyLock, Mutex, MutexGuard};
use toolcell::{CallOptions, CallReport, Runtime, ToolPort, ToolRequest, ToolResponse};

/// The compile cache the tests share, under the target directory, with its key beside it:
/// never the user's own (`~/.cache/toolcell`).
pub(crate) fn test_cache() -> (std::path::PathBuf, std::path::PathBuf) {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-cache");
    (base.join("entries"), base.join("cache.key"))
}

/// A runtime builder with the defaults, but the tests' own compile cache.
pub(crate) fn builder() -> toolcell::RuntimeBuilder {
    let (dir, key) = test_cache();
    Runtime::builder()
        .cache_dir(Some(dir))
        .cache_key_file(Some(key))
}

/// A port with the built-in tools, the test guests and the default policy.
pub(crate) fn port() -> &'static Runtime {
    static PORT: LazyLock<Runtime> = LazyLock::new(|| {
        let port = builder()
            .component("test:counter", crate::guests::COUNTER)
            .component("test:snoop", crate::guests::SNOOP)
            .component("test:hostile", crate::guests::HOSTILE)
            .build()
            .expect("the test port builds");
        assert_eq!(port.load_errors(), &[], "every test guest loads");
        port
    });
    &PORT
}

/// Call `tool` with `arguments` on the shared port.
pub(crate) fn call(tool: &str, arguments: &str) -> ToolResponse {
    port().call(&ToolRequest::new("test", tool, arguments))
}

/// The text of a result, or a panic that shows what came back instead.
pub(crate) fn result_text(response: ToolResponse) -> String {
    match response {
        ToolResponse::Result { text, .. } => text,
        other => panic!("expected a result, got {other:?}"),
    }
}

/// Call `tool` with `arguments` and `options` on the shared port, with the guest's output.
pub(crate) fn call_report(tool: &str, arguments: &str, options: &CallOptions) -> CallReport {
    port().call_with_report(&ToolRequest::new("test", tool, arguments), options)
}

/// Run a hostile attack with `options`.
pub(crate) fn attack(attack: &str, options: &CallOptions) -> CallReport {
    call_report("hostile", &format!(r#"{{"do":"{attack}"}}"#), options)
}

/// Echo still answers correctly: the port is unharmed by whatever came before.
pub(crate) fn assert_echo_still_works_on(runtime: &Runtime) {
    let report = runtime.run_blocking(&toolcell::Call::new(
        "x",
        "echo",
        r#"{"text":"still here"}"#,
    ));
    assert_eq!(result_text(report.response), "still here");
}

/// Echo still answers correctly on the shared port.
pub(crate) fn assert_echo_still_works() {
    assert_eq!(
        result_text(call("echo", r#"{"text":"still here"}"#)),
        "still here"
    );
}

/// Held by the tests that measure time or memory, and by the ones that load the machine, so
/// that a measurement is not taken while this very test binary saturates both cores.
pub(crate) fn exclusive() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The release `toolcell` binary. `cargo test --workspace` builds it (the runtime package's own
/// tests need it); this crate's tests find it beside their own executable.
pub(crate) fn toolcell_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let binary = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("toolcell"))
        .expect("target directory");
    assert!(
        binary.is_file(),
        "{} is missing: run the tests with `cargo test --release --workspace`, which builds it",
        binary.display()
    );
    binary
}

/// A command that runs the `toolcell` binary with the tests' compile cache.
pub(crate) fn toolcell_command() -> std::process::Command {
    let (cache, key) = test_cache();
    let mut command = std::process::Command::new(toolcell_binary());
    command
        .env(toolcell::cache::CACHE_DIR_ENV, cache)
        .env(toolcell::cache::CACHE_KEY_ENV, key);
    command
}

/// A temporary tools directory holding the named test guests.
pub(crate) fn tools_dir(guests: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, bytes) in guests {
        std::fs::write(dir.path().join(format!("{name}.wasm")), bytes).expect("write guest");
    }
    dir
}

/// The Python virtual environment `target/<name>`, made and given `requirement` with pip if
/// `works` (its check of what the tests use there) fails, as on first use; `.ci/run` makes it
/// up front. An interrupted install fails the check again and is repaired, not used.
pub(crate) fn python_venv(
    name: &str,
    requirement: &str,
    works: impl Fn(&std::path::Path) -> bool,
) -> std::path::PathBuf {
    crate::toolchains::python_venv(name, requirement, works)
}

/// The workspace as `cargo metadata --no-deps --offline` describes it (its packages, their
/// targets, the default members), read from the repository's root.
pub(crate) fn cargo_metadata() -> serde_json::Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent");
    let output = std::process::Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata");
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON")
}
