//! The command line's promises that need a hostile guest or a signal: each flag reaches the
//! call, and each exit status is the one the README gives.

use crate::support::{exclusive, toolcell_command, tools_dir};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `toolcell --tools DIR ARGS`, with the hostile guest in DIR.
fn with_hostile(args: &[&str]) -> (Output, Duration) {
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let started = Instant::now();
    let output = toolcell_command()
        .arg("--tools")
        .arg(tools.path())
        .args(args)
        .output()
        .expect("run toolcell");
    (output, started.elapsed())
}

#[test]
fn timeout_ms_sets_the_deadline_and_a_timeout_exits_4() {
    let _guard = exclusive();
    let (output, took) =
        with_hostile(&["call", "hostile", r#"{"do":"spin"}"#, "--timeout-ms", "150"]);
    assert_eq!(output.status.code(), Some(4), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("150 ms deadline"),
        "{}",
        stderr(&output)
    );
    // Well before the default deadline of 5 s: the flag, not the default, ended it.
    assert!(took < Duration::from_secs(4), "took {took:?}");
}

#[test]
fn ctrl_c_cancels_the_call_and_exits_5() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    // Compiled and cached first, so the call below starts (and listens for the signal) fast.
    let listed = toolcell_command()
        .arg("--tools")
        .arg(tools.path())
        .arg("list")
        .output()
        .expect("run toolcell");
    assert!(listed.status.success(), "{}", stderr(&listed));
    let child = toolcell_command()
        .arg("--tools")
        .arg(tools.path())
        .args([
            "call",
            "hostile",
            r#"{"do":"spin"}"#,
            "--timeout-ms",
            "60000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start toolcell");
    // Give it time to load and start spinning (this orders the test; it measures nothing).
    std::thread::sleep(Duration::from_millis(1500));
    let interrupted = Instant::now();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let output = child.wait_with_output().expect("wait");
    let after = interrupted.elapsed();
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    assert!(stderr(&output).contains("Cancelled"), "{}", stderr(&output));
    assert!(
        after < Duration::from_secs(2),
        "exited {after:?} after the signal"
    );
}

#[test]
fn diagnostics_show_the_guests_own_output_on_stderr_only() {
    let (output, _) = with_hostile(&["call", "hostile", r#"{"do":"flood"}"#, "--diagnostics"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "flooded\n");
    assert!(
        stderr(&output).contains("HOSTILE-FLOOD"),
        "{}",
        stderr(&output)
    );
    let (quiet, _) = with_hostile(&["call", "hostile", r#"{"do":"flood"}"#]);
    assert!(
        !stderr(&quiet).contains("HOSTILE-FLOOD"),
        "{}",
        stderr(&quiet)
    );
}

#[test]
fn no_cache_writes_nothing_to_the_cache() {
    let cache = tempfile::tempdir().expect("temp dir");
    let entries = cache.path().join("entries");
    let run = |extra: &[&str], command: &[&str]| {
        let output = toolcell_command()
            .env(toolcell::cache::CACHE_DIR_ENV, &entries)
            .env(
                toolcell::cache::CACHE_KEY_ENV,
                cache.path().join("cache.key"),
            )
            .args(extra)
            .args(command)
            .output()
            .expect("run toolcell");
        assert!(output.status.success(), "{}", stderr(&output));
    };
    let component = cache.path().join("hostile.wasm");
    std::fs::write(&component, crate::guests::HOSTILE).expect("write the component");
    let component = component.to_str().expect("path");
    let count = || std::fs::read_dir(&entries).map_or(0, |dir| dir.count());
    run(&["--no-cache"], &["call", "echo", r#"{"text":"x"}"#]);
    run(&["--no-cache"], &["describe", component]);
    assert_eq!(count(), 0, "--no-cache wrote to the cache");
    run(&[], &["describe", component]);
    assert_eq!(count(), 1, "describe caches its one component");
    run(&[], &["call", "echo", r#"{"text":"x"}"#]);
    assert!(count() > 1, "a call caches the built-in tools");
}

#[test]
fn a_policy_file_decides_and_policy_prints_the_default() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("notes.txt"), "hello").expect("write");
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[tools.read_file]\nfilesystem.read = { access = \"deny\", roots = [\".\"] }\n",
    )
    .expect("write the policy");
    let read = |policy: Option<&std::path::Path>| {
        let mut command = toolcell_command();
        command.arg("--workspace").arg(dir.path());
        if let Some(policy) = policy {
            command.arg("--policy").arg(policy);
        }
        command
            .args(["call", "read_file", r#"{"path":"notes.txt"}"#])
            .output()
            .expect("run toolcell")
    };
    let allowed = read(None);
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let denied = read(Some(&policy));
    assert_eq!(denied.status.code(), Some(3), "{}", stderr(&denied));
    assert!(
        stderr(&denied).contains("the policy denies it"),
        "{}",
        stderr(&denied)
    );

    let printed = toolcell_command()
        .arg("policy")
        .output()
        .expect("run toolcell");
    assert!(printed.status.success());
    let text = String::from_utf8(printed.stdout).expect("UTF-8");
    assert_eq!(text, toolcell::policy::DEFAULT_POLICY);
    toolcell::Policy::from_toml(&text).expect("the printed policy parses");
}
