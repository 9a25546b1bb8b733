//! The command line's promises that need a hostile guest or a signal: each flag reaches the
//! call, and each exit status is the one the book gives (docs/cli.md).

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

/// A listing of no tools is not an empty success: stderr says so, and the exit status is 7
/// (not found), with and without `--json`.
#[test]
fn listing_no_tools_says_so_and_exits_7() {
    let empty = tempfile::tempdir().expect("temp dir");
    for json in [false, true] {
        let mut command = toolcell_command();
        command
            .arg("--no-builtin")
            .arg("--tools")
            .arg(empty.path())
            .arg("list");
        if json {
            command.arg("--json");
        }
        let output = command.output().expect("run toolcell");
        assert_eq!(output.status.code(), Some(7), "{}", stderr(&output));
        assert!(output.stdout.is_empty(), "{output:?}");
        assert!(
            stderr(&output).contains("no tools are loaded"),
            "{}",
            stderr(&output)
        );
    }
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
    // Compiled entries; the cache also keeps indexes of descriptions (`index-*.json`).
    let count = || {
        std::fs::read_dir(&entries).map_or(0, |dir| {
            dir.filter_map(Result::ok)
                .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "cwasm"))
                .count()
        })
    };
    let everything = || std::fs::read_dir(&entries).map_or(0, |dir| dir.count());
    run(&["--no-cache"], &["call", "echo", r#"{"text":"x"}"#]);
    run(&["--no-cache"], &["describe", component]);
    assert_eq!(everything(), 0, "--no-cache wrote to the cache");
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

/// `toolcell audit verify` on a real run's file (each call its own process, all appending to
/// one chain), and on copies of it with one thing done to each: a changed line, a removed line,
/// a reordered pair, a cut tail (with and without the head rewritten to match, which only a
/// signed head still shows), and a rotated series.
#[test]
fn audit_verify_passes_a_real_run_and_names_the_first_line_each_tampering_breaks() {
    let _guard = exclusive();
    let dir = tempfile::tempdir().expect("tempdir");
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.to_string_lossy().into_owned();
    let toolcell = |args: &[&str]| {
        toolcell_command()
            .current_dir(dir.path())
            .args(args)
            .output()
            .expect("run toolcell")
    };
    let calls: [&[&str]; 5] = [
        &["call", "echo", r#"{"text":"one"}"#],
        &["call", "echo", r#"{"text":"two"}"#],
        &["call", "read_file", r#"{"path":"missing.txt"}"#],
        &[
            "call",
            "call_tool",
            r#"{"name":"echo","arguments":{"text":"three"}}"#,
        ],
        &["call", "nope", "{}"],
    ];
    for call in calls {
        let mut args = vec!["--audit", audit_arg.as_str()];
        args.extend_from_slice(call);
        toolcell(&args);
    }
    let verify = |files: &[&std::path::Path], extra: &[&str]| {
        let mut args = vec!["audit".to_owned(), "verify".to_owned()];
        args.extend(files.iter().map(|file| file.to_string_lossy().into_owned()));
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = toolcell(&args);
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned() + &stderr(&output),
        )
    };
    let (code, said) = verify(&[&audit], &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("ok: 5 lines (seq 0 to 4)"), "{said}");
    let lines: Vec<String> = std::fs::read_to_string(&audit)
        .expect("audit")
        .lines()
        .map(str::to_owned)
        .collect();
    let records: Vec<serde_json::Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).expect("json"))
        .collect();
    assert_eq!(records[3]["via"], "call_tool");
    assert!(
        records[0]["artifact"]["sha256"]
            .as_str()
            .is_some_and(|digest| digest.len() == 64),
        "the record names the component that ran: {}",
        lines[0]
    );
    assert_ne!(
        records[0]["arguments"]["sha256"], records[1]["arguments"]["sha256"],
        "different arguments, different digests"
    );
    assert!(
        !lines.concat().contains("\"one\""),
        "never the arguments' content"
    );

    let tampered = dir.path().join("tampered.jsonl");
    let head = toolcell::audit::head_path(&audit);
    let write = |lines: &[String]| {
        let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(&tampered, text).expect("write");
        std::fs::copy(&head, toolcell::audit::head_path(&tampered)).expect("head");
    };
    let mut changed = lines.clone();
    changed[1] = changed[1].replace("\"agent\":\"cli\"", "\"agent\":\"someone-else\"");
    assert_ne!(changed[1], lines[1]);
    let mut removed = lines.clone();
    removed.remove(2);
    let mut reordered = lines.clone();
    reordered.swap(1, 2);
    let mut cut = lines.clone();
    cut.truncate(3);
    for (what, lines, says) in [
        ("a changed line", &changed, "tampered.jsonl:3 (seq 2)"),
        ("a removed line", &removed, "tampered.jsonl:3 (seq 3)"),
        ("a reordered pair", &reordered, "tampered.jsonl:2 (seq 2)"),
        ("a cut tail", &cut, "lines were cut from its end"),
    ] {
        write(lines);
        let (code, said) = verify(&[&tampered], &[]);
        assert_eq!(code, Some(1), "{what}: {said}");
        assert!(said.contains(says), "{what}: {said}");
    }

    // Whoever cuts the tail may write the head again to match; a signed head still tells.
    let key = dir.path().join("auditor");
    assert!(
        toolcell(&["keygen", &key.to_string_lossy()])
            .status
            .success()
    );
    let (private, public) = (key.with_extension("key"), key.with_extension("pub"));
    let signed = toolcell(&[
        "audit",
        "sign",
        &audit_arg,
        "--key",
        &private.to_string_lossy(),
    ]);
    assert!(signed.status.success(), "{}", stderr(&signed));
    let signature = dir.path().join("audit.jsonl.head.sig");
    let public_arg = public.to_string_lossy().into_owned();
    let (code, said) = verify(&[&audit], &["--key", &public_arg]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("holding the signed head (seq 4)"), "{said}");
    write(&cut);
    let rewritten = toolcell::audit::Head {
        seq: 2,
        hash: toolcell_sha256(cut[2].as_bytes()),
    };
    std::fs::write(toolcell::audit::head_path(&tampered), rewritten.line()).expect("head");
    let (code, said) = verify(&[&tampered], &[]);
    assert_eq!(
        code,
        Some(0),
        "a cut tail and a rewritten head: a chain alone cannot tell"
    );
    let signature_arg = signature.to_string_lossy().into_owned();
    let (code, said_signed) = verify(
        &[&tampered],
        &["--key", &public_arg, "--signed", &signature_arg],
    );
    assert_eq!(code, Some(1), "{said} / {said_signed}");
    assert!(
        said_signed.contains("signed head is seq 4"),
        "{said_signed}"
    );
    // A signature by another key is refused.
    let other = dir.path().join("other");
    assert!(
        toolcell(&["keygen", &other.to_string_lossy()])
            .status
            .success()
    );
    let (code, said) = verify(
        &[&audit],
        &["--key", &other.with_extension("pub").to_string_lossy()],
    );
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("is not by the key"), "{said}");

    // A rotated series: each file goes on from the one before.
    let rotating = dir.path().join("rotating.jsonl");
    let rotating_arg = rotating.to_string_lossy().into_owned();
    for n in 0..6 {
        let text = format!(r#"{{"text":"{n}"}}"#);
        toolcell(&[
            "--audit",
            &rotating_arg,
            "--audit-rotate-bytes",
            "1200",
            "call",
            "echo",
            &text,
        ]);
    }
    let rotated: Vec<std::path::PathBuf> = (1..)
        .map(|n| dir.path().join(format!("rotating.jsonl.{n}")))
        .take_while(|path| path.exists())
        .collect();
    assert!(rotated.len() >= 2, "{rotated:?}");
    let mut series: Vec<&std::path::Path> = rotated.iter().map(|path| path.as_path()).collect();
    series.push(&rotating);
    let (code, said) = verify(&series, &[]);
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("ok: 6 lines (seq 0 to 5)"), "{said}");
    let (code, said) = verify(&[&rotating], &[]);
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("give the rotated files before it"), "{said}");
}

fn toolcell_sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
