//! The `toolcell` binary, end to end. These sit beside the binary because cargo hands its
//! path (`CARGO_BIN_EXE_toolcell`) only to its own package's tests; everything else is tested
//! in the workspace's `tests/` crate.

use std::process::{Command, Output};
use std::time::SystemTime;

fn toolcell(args: &[&str]) -> Output {
    command().args(args).output().expect("run toolcell")
}

/// The `toolcell` binary with the tests' own compile cache (never the user's).
fn command() -> Command {
    command_named(env!("CARGO_BIN_EXE_toolcell"))
}

/// `program`, with the tests' own compile cache in its environment.
fn command_named(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let base = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache");
    let mut command = Command::new(program);
    command
        .env(toolcell::cache::CACHE_DIR_ENV, base.join("entries"))
        .env(toolcell::cache::CACHE_KEY_ENV, base.join("cache.key"));
    command
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn call_echo_prints_the_text() {
    let output = toolcell(&["call", "echo", r#"{"text":"héllo"}"#]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), "héllo\n");
    assert_eq!(stderr(&output), "");
}

#[test]
fn call_clock_prints_now_in_utc() {
    let output = toolcell(&["call", "clock", "{}"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let then = humantime::parse_rfc3339(text.trim()).expect("RFC 3339");
    let skew = SystemTime::now()
        .duration_since(then)
        .unwrap_or_else(|e| e.duration());
    assert!(skew.as_secs() <= 5, "{text} is {skew:?} from now");
}

#[test]
fn find_prints_the_find_tool_text() {
    let output = toolcell(&["find", "ECHO"]);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout(&output);
    assert!(
        text.starts_with("1 tool(s) match:\n{\"name\":\"echo\""),
        "{text}"
    );
    assert!(text.ends_with("Call it with call_tool.\n"), "{text}");
}

#[test]
fn call_goes_through_dispatch_like_a_loop() {
    let output = toolcell(&["call", "find_tool", r#"{"query":"echo"}"#]);
    assert!(stdout(&output).starts_with("1 tool(s) match:"));
    let output = toolcell(&[
        "call",
        "call_tool",
        r#"{"name":"echo","arguments":{"text":"hi"}}"#,
    ]);
    assert_eq!(stdout(&output), "hi\n");
    let output = toolcell(&["call", "call_tool", r#"{"name":"clock","arguments":{}}"#]);
    assert!(stdout(&output).contains("core tool"), "{}", stdout(&output));
}

#[test]
fn json_prints_the_whole_response() {
    let output = toolcell(&[
        "call",
        "echo",
        r#"{"text":"abcdefghijklmnop"}"#,
        "--json",
        "--cap",
        "15",
    ]);
    assert_eq!(output.status.code(), Some(0));
    let response: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(
        response,
        serde_json::json!({
            "outcome": "result",
            "text": "abc\n[truncated]",
            "class": "public",
            "untrusted": false,
            "truncated": true
        })
    );
}

#[test]
fn exit_status_names_the_outcome() {
    // Failed: the arguments break the tool's schema; the reason is on stderr, stdout is empty.
    let output = toolcell(&["call", "echo", r#"{"txt":"x"}"#]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).contains("\"text\" is a required property"),
        "{}",
        stderr(&output)
    );

    // Not found: no such tool, and the nearest names (a typo is not a denial).
    let output = toolcell(&["call", "reed_file", r#"{"path":"x"}"#]);
    assert_eq!(output.status.code(), Some(7));
    assert!(
        stderr(&output).contains(r#"no tool named "reed_file"; did you mean read_file?"#),
        "{}",
        stderr(&output)
    );
    let output = toolcell(&["bench", "ecoh", r#"{"text":"x"}"#, "--calls", "1"]);
    assert_eq!(output.status.code(), Some(7));
    assert!(
        stderr(&output).contains("did you mean echo?"),
        "{}",
        stderr(&output)
    );
    // An unknown property is named, with the one it likely meant.
    let output = toolcell(&["call", "echo", r#"{"txt":"hi"}"#]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output)
            .contains(r#""text" is a required property; "txt" was given: did you mean "text"?"#),
        "{}",
        stderr(&output)
    );

    // Usage: an unknown flag, a missing tools directory.
    assert_eq!(
        toolcell(&["call", "echo", "--bogus"]).status.code(),
        Some(2)
    );
    assert_eq!(
        toolcell(&["list", "--tools", "/no/such/dir"]).status.code(),
        Some(2)
    );
}

#[test]
fn list_shows_every_tool_and_marks_core() {
    let output = toolcell(&["list"]);
    let text = stdout(&output);
    let lines: Vec<(&str, bool)> = text
        .lines()
        .map(|line| {
            let name = line.split_whitespace().next().unwrap_or_default();
            (name, line.contains(" core "))
        })
        .collect();
    // The built-in tools, sorted by name; core as the embedded default policy says.
    assert_eq!(
        lines,
        [
            ("clock", true),
            ("echo", false),
            ("edit_file", true),
            ("glob", true),
            ("grep", true),
            ("http_fetch", false),
            ("list_dir", true),
            ("read_file", true),
            ("write_file", true)
        ],
        "{text}"
    );

    let output = toolcell(&["list", "--json"]);
    let tools: Vec<serde_json::Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(tools.len(), 9);
    assert_eq!(tools[1]["name"], "echo");
    assert_eq!(tools[1]["source"], "builtin:echo");
    assert_eq!(tools[1]["info"]["read_only"], true);
}

#[test]
fn a_broken_component_is_named_and_the_rest_serve() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("broken.wasm"), b"\0asm garbage").expect("write");
    let tools = dir.path().to_str().expect("utf-8 path");
    let output = toolcell(&["call", "echo", r#"{"text":"ok"}"#, "--tools", tools]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout(&output), "ok\n");
    assert!(
        stderr(&output).contains("broken.wasm"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn describe_prints_what_a_component_says_or_why_it_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let echo = dir.path().join("echo.wasm");
    let bytes = toolcell::builtin_components()
        .iter()
        .find(|(name, _)| *name == "echo")
        .map(|(_, bytes)| *bytes)
        .expect("echo");
    std::fs::write(&echo, bytes).expect("write");
    let output = toolcell(&["describe", echo.to_str().expect("path")]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let info: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(info["name"], "echo");
    assert_eq!(
        info["input_schema"]["required"],
        serde_json::json!(["text"])
    );

    let broken = dir.path().join("broken.wasm");
    std::fs::write(&broken, b"nope").expect("write");
    let output = toolcell(&["describe", broken.to_str().expect("path")]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr(&output).contains("broken.wasm"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn limit_flags_reach_the_call() {
    let json = |args: &[&str]| -> serde_json::Value {
        let output = toolcell(args);
        serde_json::from_str(&stdout(&output)).expect("JSON")
    };
    let out_of_fuel = json(&["call", "echo", r#"{"text":"x"}"#, "--fuel", "1", "--json"]);
    assert_eq!(out_of_fuel["kind"], "out_of_fuel", "{out_of_fuel}");
    // Less memory than the component's own minimum: refused at instantiation.
    let out_of_memory = json(&[
        "call",
        "echo",
        r#"{"text":"x"}"#,
        "--memory-mib",
        "0",
        "--json",
    ]);
    assert_eq!(out_of_memory["kind"], "out_of_memory", "{out_of_memory}");
    let fine = json(&[
        "call",
        "echo",
        r#"{"text":"x"}"#,
        "--timeout-ms",
        "10000",
        "--json",
    ]);
    assert_eq!(fine["text"], "x");
    assert_eq!(
        toolcell(&["call", "echo", "{}", "--fuel", "1"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn the_audit_file_gets_one_whole_line_per_call_and_no_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    let path = audit.to_str().expect("path");
    let calls: &[&[&str]] = &[
        &[
            "call",
            "echo",
            r#"{"text":"a","token":"s3cr3t-value"}"#,
            "--audit",
            path,
        ],
        &["call", "echo", r#"{"text":7}"#, "--audit", path],
        &["call", "find_tool", r#"{"query":"echo"}"#, "--audit", path],
        &["call", "no_such_tool", "{}", "--audit", path],
    ];
    for args in calls {
        toolcell(args);
    }
    let text = std::fs::read_to_string(&audit).expect("audit file");
    assert!(
        !text.contains("s3cr3t-value"),
        "a secret reached the audit file"
    );
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|line| serde_json::from_str(line).expect("a whole JSON line"))
        .collect();
    assert_eq!(lines.len(), calls.len());
    let outcomes: Vec<&str> = lines
        .iter()
        .map(|line| line["outcome"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(outcomes, ["result", "failed", "result", "failed"]);
    assert_eq!(lines[3]["failure"], "unknown_tool", "{}", lines[3]);
    let first = r#"{"text":"a","token":"s3cr3t-value"}"#;
    assert_eq!(
        lines[0]["arguments"],
        serde_json::json!({
            "sha256": toolcell::audit::ArgumentDigest::of(first).sha256,
            "bytes": first.len()
        }),
        "arguments are kept as a digest"
    );
    let verified = toolcell(&["audit", "verify", path]);
    assert!(
        verified.status.success() && stdout(&verified).starts_with("ok: 4 lines"),
        "{}",
        stderr(&verified)
    );
    assert_eq!(lines[0]["bytes"], 1);
    assert_eq!(lines[1]["failure"], "invalid_input");
    // An unknown tool is refused before the gate: nothing was there to decide on.
    assert_eq!(lines[3]["gate"], "not_reached");
    for line in &lines {
        for field in ["time", "call_id", "tool", "duration_us", "truncated"] {
            assert!(!line[field].is_null(), "{field} missing from {line}");
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&audit)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}

/// A write that fails mid-line (here: the file-size limit, as a full disk would) leaves the
/// audit file at its last whole line, and the call says so (exit 6) but still prints its
/// result. The limit stops wasmtime too (its memory images are files), so the call is one the
/// loop answers itself (`find_tool`), which needs no tool loaded.
#[test]
fn a_failed_audit_write_is_cut_back_to_whole_lines_and_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    // 900 bytes of whole lines (one record of the chain, its call id padded to fit), under a
    // 1024-byte file-size limit the next line will cross.
    let record = |pad: usize| {
        let report = toolcell::CallReport {
            call_id: "p".repeat(pad),
            tool: "find_tool".to_owned(),
            ..toolcell::CallReport::host_answer(toolcell::ToolResponse::text("x"))
        };
        toolcell::audit::AuditRecord::of("{}", &[], None, &report, Default::default())
    };
    let scratch = dir.path().join("scratch.jsonl");
    toolcell::audit::Audit::open(&scratch)
        .expect("scratch")
        .record(record(0))
        .expect("record");
    let unpadded = std::fs::metadata(&scratch).expect("meta").len() as usize;
    toolcell::audit::Audit::open(&audit)
        .expect("audit")
        .record(record(900 - unpadded))
        .expect("record");
    let before = std::fs::read_to_string(&audit).expect("audit");
    assert_eq!(before.len(), 900);
    let script = format!(
        "trap '' XFSZ; ulimit -f 1; exec '{}' --no-cache call find_tool '{{\"query\":\"zzz\"}}' \
         --audit '{}'",
        env!("CARGO_BIN_EXE_toolcell"),
        audit.display()
    );
    let output = command_named("bash")
        .args(["-c", &script])
        .output()
        .expect("bash");
    assert_eq!(output.status.code(), Some(6), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "No tool matches.\n",
        "the result is still printed"
    );
    assert!(stderr(&output).contains("audit record could not be written"));
    assert_eq!(
        std::fs::read_to_string(&audit).expect("audit"),
        before,
        "the half-written line was cut off"
    );
    let verified = toolcell(&["audit", "verify", audit.to_str().expect("path")]);
    assert!(
        verified.status.success(),
        "the chain and its head still agree: {}",
        stderr(&verified)
    );
}

/// The audit file is never reached through a symlink, and a FIFO or device is refused at
/// once rather than waited on.
#[test]
fn the_audit_file_must_be_a_regular_file_reached_without_a_link() {
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("elsewhere.txt");
    std::fs::write(&target, "untouched").expect("write");
    let link = dir.path().join("audit.jsonl");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    for (path, why) in [(&link, "symlink"), (&fifo, "regular file")] {
        let path = path.to_str().expect("utf-8");
        let output = toolcell(&["call", "echo", r#"{"text":"x"}"#, "--audit", path]);
        assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
        assert!(stderr(&output).contains(why), "{}", stderr(&output));
    }
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "untouched");
}

/// Run toolcell with its stdin, stdout and stderr on a pseudo-terminal (util-linux `script`),
/// typing `input` at it, with `TOOLCELL_CACHE_DIR` set to `cache`. Returns the exit status and
/// everything the terminal showed.
fn on_a_terminal(args: &[&str], cache: &std::path::Path, input: &str) -> (Option<i32>, String) {
    on_a_terminal_then(args, "", cache, input)
}

/// [`on_a_terminal`], the command followed by the shell text `then` (` | cat >/dev/null`: its
/// stdout piped, its stderr still on the terminal).
fn on_a_terminal_then(
    args: &[&str],
    then: &str,
    cache: &std::path::Path,
    input: &str,
) -> (Option<i32>, String) {
    use std::io::Write as _;
    let quote = |arg: &str| format!("'{}'", arg.replace('\'', r"'\''"));
    let command = std::iter::once(env!("CARGO_BIN_EXE_toolcell"))
        .chain(args.iter().copied())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ")
        + then;
    let mut child = Command::new("script")
        // Quiet, flush as it goes, the child's exit status, no typescript file.
        .args(["-qefc", &command, "/dev/null"])
        .env(toolcell::cache::CACHE_DIR_ENV, cache)
        .env(toolcell::cache::CACHE_KEY_ENV, cache.with_extension("key"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("util-linux `script` runs a command on a pseudo-terminal");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("type the answer");
    let output = child.wait_with_output().expect("script ends");
    (output.status.code(), stdout(&output))
}

/// A gated capability is put to the person at the terminal; each answer does what it says.
#[test]
fn a_gated_write_asks_the_person_at_the_terminal() {
    let workspace = tempfile::tempdir().expect("workspace");
    let cache = tempfile::tempdir().expect("cache");
    let dir = workspace.path().to_str().expect("path");
    let write = |content: &str| {
        let arguments = format!(r#"{{"path":"note.txt","content":"{content}"}}"#);
        ["--workspace", dir, "call", "write_file"]
            .map(str::to_owned)
            .into_iter()
            .chain([arguments])
            .collect::<Vec<String>>()
    };
    // Write `content` at the terminal, answering the prompt with `answer`.
    let asked = |content: &str, answer: &str| {
        let args = write(content);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        on_a_terminal(&args, cache.path(), answer)
    };
    // Write `content` with no terminal: nobody can be asked.
    let headless = |content: &str| {
        let args = write(content);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        toolcell(&args)
    };
    let note = workspace.path().join("note.txt");
    let saved = workspace.path().join(".toolcell/permissions.toml");

    let (status, shown) = asked("no", "n\n");
    assert!(
        shown.contains(r#"write_file wants filesystem.write on "note.txt""#),
        "{shown}"
    );
    assert_eq!(status, Some(3), "denied: {shown}");
    assert!(!note.exists());

    let (status, shown) = asked("once", "y\n");
    assert_eq!(status, Some(0), "{shown}");
    assert_eq!(std::fs::read_to_string(&note).expect("written"), "once");
    assert!(!saved.exists(), "approving once saves no rule");
    let refused = headless("headless");
    assert_eq!(refused.status.code(), Some(3), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("approval"),
        "{}",
        stderr(&refused)
    );

    let (status, shown) = asked("always", "a\n");
    assert_eq!(status, Some(0), "{shown}");
    assert_eq!(std::fs::read_to_string(&note).expect("written"), "always");
    assert!(saved.is_file(), "approving always saves the rule");
    // The saved rule now answers for the person.
    let answered = headless("saved");
    assert_eq!(answered.status.code(), Some(0), "{}", stderr(&answered));
    assert_eq!(std::fs::read_to_string(&note).expect("written"), "saved");
}

/// Compiling with an empty cache shows a progress bar on a terminal, and nothing on a pipe.
#[test]
fn compiling_shows_progress_on_a_terminal_only() {
    let cache = tempfile::tempdir().expect("cache");
    let (status, shown) = on_a_terminal(&["list"], &cache.path().join("a"), "");
    assert_eq!(status, Some(0), "{shown}");
    assert!(shown.contains("compiling 0/"), "{shown}");
    assert!(shown.contains("builtin:echo"), "{shown}");
    assert!(
        shown.contains("Returns its text argument unchanged."),
        "the listing follows: {shown}"
    );

    let piped = command()
        .arg("list")
        .env(toolcell::cache::CACHE_DIR_ENV, cache.path().join("b"))
        .output()
        .expect("run toolcell");
    assert_eq!(piped.status.code(), Some(0));
    assert_eq!(stderr(&piped), "", "no progress bar on a pipe");
}

/// `bench` measures calls through the whole pipeline, and refuses to measure a call that does
/// not answer with a result, saying why as `call` would.
#[test]
fn bench_measures_a_tool_and_refuses_one_that_fails() {
    let output = toolcell(&[
        "bench",
        "echo",
        r#"{"text":"x"}"#,
        "--calls",
        "50",
        "--warmup",
        "5",
        "--threads",
        "2",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(report["tool"], "echo");
    assert_eq!(report["calls"], 50);
    assert_eq!(report["threads"], 2);
    assert_eq!(report["errors"], 0);
    let us = |field: &str| report[field].as_f64().expect(field);
    assert!(us("min_us") > 0.0, "{report}");
    assert!(
        us("min_us") <= us("p50_us") && us("p50_us") <= us("p99_us"),
        "{report}"
    );
    assert!(us("p99_us") <= us("max_us"), "{report}");
    assert!(us("calls_per_second") > 0.0, "{report}");

    let text = toolcell(&[
        "bench",
        "echo",
        r#"{"text":"x"}"#,
        "--calls",
        "10",
        "--keep-resident-mib",
        "8",
    ]);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    assert!(
        stdout(&text).starts_with("echo: 10 calls on 1 thread"),
        "{}",
        stdout(&text)
    );

    let gated = toolcell(&["bench", "write_file", r#"{"path":"x","content":"y"}"#]);
    assert_eq!(gated.status.code(), Some(3), "{}", stderr(&gated));
    assert!(stderr(&gated).contains("approval"), "{}", stderr(&gated));
    let invalid = toolcell(&["bench", "echo", "{}"]);
    assert_eq!(invalid.status.code(), Some(1), "{}", stderr(&invalid));
    assert!(stderr(&invalid).contains("text"), "{}", stderr(&invalid));
    assert_eq!(stdout(&invalid), "", "nothing measured");
}

/// The embedder's example (`runtime/toolcell/examples/embed.rs`, built by `cargo test`) runs, and each
/// of its calls ends as the book says (docs/embedding.md).
#[test]
fn the_embedding_example_runs_every_call_through_one_pipeline() {
    let example = std::path::Path::new(env!("CARGO_BIN_EXE_toolcell"))
        .parent()
        .map(|dir| dir.join("examples").join("embed"))
        .expect("target directory");
    // The example builds its runtime with the default cache directory: the environment points
    // that at the tests' own, as for the binary.
    let output = command_named(&example).output().expect("run the example");
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    let lines: Vec<&str> = text.lines().collect();
    for (agent, note) in [("alice", "buy milk"), ("bob", "fix the build")] {
        let expected = [
            format!("{agent:<5} read_note result: {note}"),
            format!("{agent:<5} read_file result: {note}"),
            format!("{agent:<5} read_note Denied: filesystem.read on \"../bob/notes.txt\""),
            format!("{agent:<5} echo      result: hi"),
            format!("{agent:<5} slow      Error: the tool ran past its 100 ms deadline"),
        ];
        for line in expected {
            assert!(
                lines.iter().any(|printed| printed.starts_with(&line)),
                "{line:?} missing from:\n{text}"
            );
        }
    }
    assert_eq!(lines.last(), Some(&"engines: 1"), "{text}");
}

/// A tool's text with terminal escapes (a window title, a screen clear, an OSC 52 clipboard
/// write, a carriage return) and reordering characters: on a terminal they are shown escaped,
/// never obeyed; piped, or with `--raw`, the text is as the tool wrote it.
#[test]
fn a_tools_text_cannot_drive_the_operators_terminal() {
    let cache = tempfile::tempdir().expect("cache");
    let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{1b}]52;c;ZXZpbA==\u{7}line\rover \u{202e}txt.exe";
    let arguments = serde_json::json!({ "text": hostile }).to_string();
    let (status, shown) = on_a_terminal(&["call", "echo", &arguments], cache.path(), "");
    assert_eq!(status, Some(0), "{shown}");
    // (toolcell's own progress bar draws with escapes of its own: the tool's are what count.)
    for raw in [
        "\u{1b}]0;owned",
        "\u{1b}[2J",
        "\u{1b}]52",
        "\u{7}",
        "\u{202e}",
    ] {
        assert!(
            !shown.contains(raw),
            "{raw:?} reached the terminal: {shown:?}"
        );
    }
    assert!(
        shown.contains(r"\u{1b}]52;c;ZXZpbA==\u{7}") && shown.contains(r"\u{202e}txt.exe"),
        "{shown:?}"
    );
    // `--raw` on a terminal, and a pipe: as written.
    let (_, raw) = on_a_terminal(&["call", "echo", &arguments, "--raw"], cache.path(), "");
    assert!(raw.contains("\u{1b}]52;c;ZXZpbA=="), "{raw:?}");
    let piped = toolcell(&["call", "echo", &arguments]);
    assert_eq!(stdout(&piped), format!("{hostile}\n"));

    // stdout piped (`call X | jq`), stderr still the operator's terminal: a failure's text,
    // which echoes what the caller or the tool wrote, is escaped there.
    let failing = serde_json::json!({ "path": hostile }).to_string();
    let (_, shown) = on_a_terminal_then(
        &["call", "read_file", &failing],
        " | cat >/dev/null",
        cache.path(),
        "",
    );
    assert!(shown.contains(r"Error: \u{1b}]0;owned"), "{shown:?}");
    assert!(!shown.contains("\u{1b}]0;owned"), "{shown:?}");

    // A component's file name, in the compile progress bar (a cold cache): escaped.
    let tools = tempfile::tempdir().expect("tools");
    let echo = toolcell::builtin_components()
        .iter()
        .find(|(name, _)| *name == "echo")
        .map(|(_, bytes)| *bytes)
        .expect("echo");
    std::fs::write(tools.path().join("x\u{1b}]0;named\u{7}.wasm"), echo).expect("write");
    let cold = tempfile::tempdir().expect("a cold cache");
    let dir = tools.path().to_str().expect("path");
    let (status, shown) = on_a_terminal(&["--no-builtin", "--tools", dir, "list"], cold.path(), "");
    assert_eq!(status, Some(0), "{shown}");
    assert!(shown.contains(r"x\u{1b}]0;named\u{7}.wasm"), "{shown:?}");
    assert!(!shown.contains("\u{1b}]0;named"), "{shown:?}");
}
