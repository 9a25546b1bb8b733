//! A grant hands over exactly what was decided: a granted file comes alone (never its
//! directory), a tool may not write what decides or runs on the host (`.git`, `.toolcell`, the
//! policy and audit files), may not read what holds secrets, and may not leave a link behind.
//! The `prowler` guest attacks its own grants from inside; the built-in tools are asked for
//! what they must not do.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use toolcell::{DenyReason, Policy, Runtime, ToolPort, ToolRequest, ToolResponse};

/// A workspace: `a/ro.txt`, `a/rw.txt`, `a/secret.txt`, `top.txt`, `.git/config`,
/// `.git/hooks/README`, `.toolcell/permissions.toml`, `.env`, `keys/id_rsa`.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temp dir");
    let ws = temp.path().join("ws");
    for (path, text) in [
        ("a/ro.txt", "read me"),
        ("a/rw.txt", "old"),
        ("a/secret.txt", "secret"),
        ("top.txt", "top"),
        (".git/config", "[core]\n"),
        (".git/hooks/README", "hooks"),
        (".toolcell/permissions.toml", ""),
        (".env", "TOKEN=hunter2"),
        ("keys/id_rsa", "-----BEGIN KEY-----"),
    ] {
        let path = ws.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    (temp, ws)
}

const ALLOW_ALL: &str = r#"
[tools.prowler]
filesystem.read = { access = "allow", roots = ["."] }
filesystem.write = { access = "allow", roots = ["."] }
# deep_tree makes 36,000 file system calls: seconds on a loaded machine.
limits = { timeout_ms = 30000 }

[tools.read_file]
filesystem.read = { access = "allow", roots = ["."] }

[tools.write_file]
filesystem.write = { access = "allow", roots = ["."] }
"#;

fn runtime(ws: &Path, policy: &str) -> Runtime {
    crate::support::builder()
        .policy(Policy::from_toml(policy).expect("policy"))
        .workspace(ws)
        .component("test:prowler", crate::guests::PROWLER)
        .build()
        .expect("runtime")
}

fn call(runtime: &Runtime, tool: &str, arguments: Value) -> ToolResponse {
    runtime.call(&ToolRequest::new("t", tool, arguments.to_string()))
}

fn prowl(runtime: &Runtime, read: &str, write: &str, attack: &str) -> ToolResponse {
    call(
        runtime,
        "prowler",
        json!({ "read": read, "write": write, "do": attack }),
    )
}

/// Every file in `ws`, with its contents (links as `-> target`), to show nothing changed.
fn snapshot(ws: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    let mut stack = vec![ws.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)
            .expect("read dir")
            .filter_map(Result::ok)
        {
            let path = entry.path();
            let kind = entry.file_type().expect("type");
            let relative = path.strip_prefix(ws).expect("inside").to_path_buf();
            if relative.starts_with(".toolcell/grants") {
                continue;
            }
            if kind.is_symlink() {
                let target = std::fs::read_link(&path).expect("link");
                files.push((relative, format!("-> {}", target.display())));
            } else if kind.is_dir() {
                stack.push(path);
            } else {
                files.push((relative, std::fs::read_to_string(&path).unwrap_or_default()));
            }
        }
    }
    files.sort();
    files
}

/// The prowler's attacks on its own grants, each seen to fail with nothing changed, and its
/// own write seen to land.
#[test]
pub(crate) fn prowler() {
    let (_temp, ws) = workspace();
    let runtime = runtime(&ws, ALLOW_ALL);
    let before = snapshot(&ws);

    // The granted directory holds the granted files and nothing else.
    assert_eq!(
        prowl(&runtime, "a/ro.txt", "a/rw.txt", "list"),
        ToolResponse::text("ro.txt\nrw.txt")
    );
    assert_eq!(
        prowl(&runtime, "top.txt", "top.txt", "list"),
        ToolResponse::text("top.txt"),
        "a file at the top is not the whole workspace"
    );
    for (read, write, attack) in [
        ("a/ro.txt", "a/rw.txt", "sibling"),
        ("a/ro.txt", "a/rw.txt", "write_read"),
        ("a/ro.txt", "a/rw.txt", "write_handle"),
        ("a/ro.txt", "a/rw.txt", "hooks"),
        ("top.txt", "top.txt", "hooks"),
        ("top.txt", "top.txt", "settings"),
        ("a/ro.txt", "a/rw.txt", "escape_link"),
        ("a/ro.txt", "a/rw.txt", "swap_link"),
        ("top.txt", "new.txt", "hooks"),
        ("a/ro.txt", "a/rw.txt", "link_read"),
    ] {
        let response = prowl(&runtime, read, write, attack);
        assert!(
            !format!("{response:?}").contains("no attack named"),
            "the prowler guest knows {attack}"
        );
        if attack == "sibling" || attack.contains("link") || attack == "write_handle" {
            assert!(response.is_error(), "{attack}: {response:?}");
        }
        assert_eq!(
            snapshot(&ws),
            before,
            "{attack} ({read}, {write}) changed the workspace"
        );
    }
    // A tree deeper than a recursive removal survives, left in the staging directory: removed
    // when the call ends (a recursive removal overflowed the worker's stack and killed the
    // process here), and the workspace untouched.
    assert_eq!(
        prowl(&runtime, "a/ro.txt", "a/rw.txt", "deep_tree"),
        ToolResponse::text("grown")
    );
    assert_eq!(snapshot(&ws), before, "deep_tree changed the workspace");
    // Staging directories serve later calls (emptied): what the attacks above left in theirs
    // (`.git/hooks`, `.toolcell/permissions.toml`, links) is not there for the next call.
    assert_eq!(
        prowl(&runtime, "a/ro.txt", "a/rw.txt", "list"),
        ToolResponse::text("ro.txt\nrw.txt")
    );
    assert_eq!(
        prowl(&runtime, "top.txt", "top.txt", "list"),
        ToolResponse::text("top.txt")
    );
    // A read grant of a directory: the directory itself, read-only, and nothing beyond it.
    let outside = ws.parent().expect("temp").join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("secret.txt"), "OUTSIDE-SECRET").expect("write");
    std::os::unix::fs::symlink(&outside, ws.join("a/out")).expect("link out");
    let before_dir = snapshot(&ws);
    assert_eq!(
        prowl(&runtime, "a", "top.txt", "dir_read"),
        ToolResponse::text("read me"),
        "the positive control: the granted directory is readable"
    );
    for attack in ["dir_write", "dir_up", "dir_link_out"] {
        let response = prowl(&runtime, "a", "top.txt", attack);
        assert!(response.is_error(), "{attack}: {response:?}");
        assert!(
            !format!("{response:?}").contains("OUTSIDE-SECRET"),
            "{attack}"
        );
        assert!(!format!("{response:?}").contains("\"top\""), "{attack}");
        assert_eq!(snapshot(&ws), before_dir, "{attack} changed the workspace");
    }
    std::fs::remove_file(ws.join("a/out")).expect("unlink");

    // A FIFO no one writes, in the granted directory: an open of it would wait forever, on the
    // thread that runs the call (a call's file operations run there). It is refused at once,
    // not left to the deadline.
    let fifo = ws.join("a/pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", fifo.display());
    let runtime = std::sync::Arc::new(runtime);
    let (answered, answer) = std::sync::mpsc::channel();
    let prowling = std::sync::Arc::clone(&runtime);
    let prowling = std::thread::spawn(move || {
        let _ = answered.send(prowl(&prowling, "a", "top.txt", "dir_fifo"));
    });
    // Far past what the refusal takes; a call stuck in the open never answers at all.
    let response = answer
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the open of a FIFO was answered, not left waiting");
    assert!(
        matches!(&response, ToolResponse::Failed { message, .. }
            if message.contains("not permitted") || message.contains("Operation not permitted")),
        "{response:?}"
    );
    std::fs::remove_file(&fifo).expect("unlink the FIFO");
    prowling.join().expect("the prowling thread ends");

    // Not even inside the staging directory may a link be made.
    let linked = prowl(&runtime, "a/ro.txt", "a/rw.txt", "escape_link");
    assert!(
        matches!(&linked, ToolResponse::Failed { message, .. } if message.contains("not permitted") || message.contains("Operation not permitted")),
        "{linked:?}"
    );

    // The positive control: its own write lands, and nothing else changes.
    assert_eq!(
        prowl(&runtime, "a/ro.txt", "a/rw.txt", "write"),
        ToolResponse::text("wrote")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("a/rw.txt")).expect("read"),
        "written by the grant"
    );
    assert!(
        prowl(&runtime, "top.txt", "brand/new.txt", "write").is_error(),
        "a new file needs its directory to exist"
    );
    assert_eq!(
        prowl(&runtime, "top.txt", "new.txt", "write"),
        ToolResponse::text("wrote")
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("new.txt")).expect("created"),
        "written by the grant"
    );
    // Staging directories are kept for later calls, emptied: nothing of a call is left in one.
    let kept: Vec<_> = std::fs::read_dir(ws.join(".toolcell/grants"))
        .expect("grants dir")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert!(!kept.is_empty(), "an emptied staging directory is kept");
    for dir in &kept {
        assert_eq!(
            std::fs::read_dir(dir).expect("a directory").count(),
            0,
            "{} holds nothing after its call",
            dir.display()
        );
    }
    drop(runtime);
    let leftovers = std::fs::read_dir(ws.join(".toolcell/grants"))
        .expect("grants dir")
        .count();
    assert_eq!(
        leftovers, 0,
        "every staging directory is removed with the runtime"
    );
}

/// A policy root that names a file grants that file; a root that does not exist yet grants
/// nothing above it.
#[test]
fn a_root_that_names_a_file_or_nothing_yet_grants_no_more() {
    let (_temp, ws) = workspace();
    let runtime = runtime(
        &ws,
        r#"
[tools.prowler]
filesystem.read = { access = "allow", roots = ["a/ro.txt"] }
filesystem.write = { access = "allow", roots = ["out"] }
"#,
    );
    assert_eq!(
        prowl(&runtime, "a/ro.txt", "out", "list"),
        ToolResponse::text(""),
        "the write grant's directory holds only its own file, which does not exist yet"
    );
    let denied = prowl(&runtime, "a/secret.txt", "out", "list");
    assert!(
        matches!(&denied, ToolResponse::Denied { reason: DenyReason::Capability { why, .. } } if why.contains("outside")),
        "{denied:?}"
    );
    let before = snapshot(&ws);
    prowl(&runtime, "a/ro.txt", "out", "hooks");
    assert_eq!(snapshot(&ws), before);
}

/// `.git`, `.toolcell`, the files a host protects and its tools directories are never granted
/// for writing, whatever the policy says; nor is a directory that holds them.
#[test]
fn protected_paths_are_never_granted_for_writing() {
    let (temp, ws) = workspace();
    let policy_file = ws.join("toolcell.toml");
    std::fs::write(&policy_file, ALLOW_ALL).expect("write");
    let audit_file = ws.join("audit.jsonl");
    // A tools directory inside the workspace: a file written there would be a tool.
    let tools = ws.join("tools");
    std::fs::create_dir(&tools).expect("tools dir");
    let runtime = crate::support::builder()
        .tools_dir(&tools)
        .policy(
            Policy::from_toml(&format!("{ALLOW_ALL}\n[files]\nprotected = [\"deploy\"]\n"))
                .expect("policy"),
        )
        .workspace(&ws)
        .protect(&policy_file)
        .protect(&audit_file)
        .build()
        .expect("runtime");
    let before = snapshot(&ws);
    for path in [
        ".git/config",
        ".git/hooks/pre-commit",
        ".toolcell/permissions.toml",
        "toolcell.toml",
        "audit.jsonl",
        // The audit file's companions: its head, a rotated copy and its head, the signed head
        // and what `audit sign` writes first.
        "audit.jsonl.head",
        "audit.jsonl.3",
        "audit.jsonl.3.head",
        "audit.jsonl.head.sig",
        "audit.jsonl.head.sig.partial",
        "toolcell.toml.bak",
        "deploy",
        "tools/new_tool.wasm",
        "./tools/sneaky.wasm",
    ] {
        let response = call(
            &runtime,
            "write_file",
            json!({ "path": path, "content": "x" }),
        );
        assert!(
            matches!(&response, ToolResponse::Denied { reason: DenyReason::Capability { why, .. } } if why.contains("protected") || why.contains("no tool may write it")),
            "{path}: {response:?}"
        );
    }
    assert_eq!(snapshot(&ws), before, "nothing was written");
    for unrelated in [
        "audit.jsonl2",
        "audit.json",
        "my-audit.jsonl.1",
        "tools2.wasm",
    ] {
        let response = call(
            &runtime,
            "write_file",
            json!({ "path": unrelated, "content": "x" }),
        );
        assert!(!response.is_error(), "{unrelated}: {response:?}");
    }
    drop(temp);
}

/// `.env` files, private keys and files over the policy's maximum are not handed to a tool to
/// read.
#[test]
fn secrets_and_oversized_files_are_not_granted_for_reading() {
    let (_temp, ws) = workspace();
    std::fs::write(ws.join("big.txt"), "x".repeat(100)).expect("write");
    let runtime = runtime(&ws, &format!("{ALLOW_ALL}\n[files]\nmax_read_bytes = 50\n"));
    for path in [".env", "keys/id_rsa", "big.txt"] {
        let response = call(&runtime, "read_file", json!({ "path": path }));
        assert!(
            matches!(
                &response,
                ToolResponse::Denied {
                    reason: DenyReason::Capability { .. }
                }
            ),
            "{path}: {response:?}"
        );
    }
    assert!(
        !call(&runtime, "read_file", json!({ "path": "top.txt" })).is_error(),
        "an ordinary file still reads"
    );
}

/// What the hostile review found after the first cut, each seen refused: a write grant is a
/// way to read (so it obeys the read rules), a nested `.git` is a repository too, the policy's
/// own protected list is resolved as paths are, a replaced file keeps its mode, and a hard
/// link to a protected file is not written through.
#[test]
fn a_write_grant_is_held_to_the_read_rules_and_protection_goes_deep() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_temp, ws) = workspace();
    for (path, text) in [
        ("nested/.git/config", "[core]\n"),
        ("nested/.git/hooks/README", "hooks"),
        ("realconf/c", "conf"),
        ("deploy/run.sh", "#!/bin/sh\n"),
        ("creds.txt", "abc"),
        ("run.sh", "#!/bin/sh\necho abc\n"),
    ] {
        let path = ws.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    std::os::unix::fs::symlink("realconf", ws.join("conf")).expect("symlink");
    std::fs::hard_link(ws.join(".git/config"), ws.join("hardcfg")).expect("hard link");
    std::fs::set_permissions(ws.join("creds.txt"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let policy = format!(
        "{ALLOW_ALL}\n[tools.edit_file]\nfilesystem.write = {{ access = \"allow\", roots = [\".\"] }}\n\
         \n[files]\nprotected = [\"./deploy/\", \"conf\"]\n"
    );
    let runtime = runtime(&ws, &policy);
    let before = snapshot(&ws);

    // A write grant on a file no tool may read is refused: it would hand the file over.
    let response = prowl(&runtime, "top.txt", ".env", "list");
    assert!(
        matches!(&response, ToolResponse::Denied { reason: DenyReason::Capability { why, .. } } if why.contains("deny_read")),
        "{response:?}"
    );
    for path in [
        "nested/.git/hooks/pre-commit",
        "nested/.git/config",
        "a/.GIT/config",
        "deploy/run.sh",
        "conf/c",
    ] {
        let response = call(
            &runtime,
            "write_file",
            json!({ "path": path, "content": "pwned" }),
        );
        assert!(
            matches!(
                &response,
                ToolResponse::Denied {
                    reason: DenyReason::Capability { .. }
                }
            ),
            "{path}: {response:?}"
        );
    }
    assert_eq!(snapshot(&ws), before, "nothing was written");

    // Writing the name of a hard link to `.git/config` replaces that name, not the config.
    assert!(
        !call(
            &runtime,
            "write_file",
            json!({ "path": "hardcfg", "content": "x" })
        )
        .is_error()
    );
    assert_eq!(
        std::fs::read_to_string(ws.join(".git/config")).expect("read"),
        "[core]\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("hardcfg")).expect("read"),
        "x"
    );

    // A file an edit replaces keeps its mode.
    for (path, old, mode) in [("creds.txt", "abc", 0o600), ("run.sh", "abc", 0o755)] {
        let edited = call(
            &runtime,
            "edit_file",
            json!({ "path": path, "old": old, "new": "xyz" }),
        );
        assert!(!edited.is_error(), "{path}: {edited:?}");
        let now = std::fs::metadata(ws.join(path))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(now & 0o777, mode, "{path} kept its mode");
    }
}

/// The files the default deny-read list names, planted in `d` (and `d/sub`) with their
/// contents, which no seek may show.
const PLANTED: &[(&str, &str)] = &[
    ("d/.env", "SECRET-ENV"),
    ("d/key.pem", "SECRET-PEM"),
    ("d/.ssh/id_rsa", "SECRET-SSH-KEY"),
    ("d/.ssh/config", "SECRET-SSH-CONFIG"),
    ("d/sub/.env.local", "SECRET-ENV-LOCAL"),
];

/// A workspace whose directory `d` holds the planted secrets beside `notes.txt` and
/// `sub/readme` (each with `needle` in it), and links to them: `innocent -> .env`,
/// `keys -> .ssh`, `sub/up -> ../.ssh`.
fn seeker_workspace() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temp dir");
    let ws = temp.path().join("ws");
    let files = PLANTED
        .iter()
        .map(|(path, text)| (*path, format!("needle {text}")))
        .chain([
            ("d/notes.txt", "needle in the notes".to_owned()),
            ("d/sub/readme", "needle in the readme".to_owned()),
        ]);
    for (path, text) in files {
        let path = ws.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    for (target, at) in [
        (".env", "innocent"),
        (".ssh", "keys"),
        ("../.ssh", "sub/up"),
    ] {
        std::os::unix::fs::symlink(target, ws.join("d").join(at)).expect("symlink");
    }
    (temp, ws)
}

const SEEKER_POLICY: &str = r#"
[tools.seeker]
filesystem.read = { access = "allow", roots = ["."] }

[tools.list_dir]
filesystem.read = { access = "allow", roots = ["."] }

[tools.glob]
filesystem.read = { access = "allow", roots = ["."] }

[tools.grep]
filesystem.read = { access = "allow", roots = ["."] }
"#;

fn seeker_runtime(ws: &Path, policy: &str) -> Runtime {
    crate::support::builder()
        .policy(Policy::from_toml(policy).expect("policy"))
        .workspace(ws)
        .component("test:seeker", crate::guests::SEEKER)
        .build()
        .expect("runtime")
}

fn seek(runtime: &Runtime, attack: &str, name: &str) -> ToolResponse {
    call(
        runtime,
        "seeker",
        json!({ "path": "d", "do": attack, "name": name }),
    )
}

/// The text of a result, or a panic naming what came back instead.
fn text(response: ToolResponse) -> String {
    match response {
        ToolResponse::Result { text, .. } => text,
        other => panic!("expected a result, got {other:?}"),
    }
}

/// No planted secret's name or content is in `shown`.
fn assert_shows_no_secret(what: &str, shown: &str) {
    for (path, secret) in PLANTED {
        let name = Path::new(path).file_name().expect("name").to_string_lossy();
        assert!(!shown.contains(secret), "{what} showed {secret}: {shown}");
        assert!(
            !shown.contains(name.as_ref()),
            "{what} showed {name}: {shown}"
        );
    }
    assert!(!shown.contains(".ssh"), "{what} showed .ssh: {shown}");
}

/// Inside a directory granted to read, what the deny-read list names is not there: not
/// listed, not walked, `no-entry` to every `wasi:filesystem` method that takes its path
/// (written plainly, through `sub/..`, through a link), not found by `list_dir`, `glob` or
/// `grep`; while a normal file beside it reads, and a policy's own list is the one applied.
#[test]
pub(crate) fn seeker() {
    let (_temp, ws) = seeker_workspace();
    let runtime = seeker_runtime(&ws, SEEKER_POLICY);

    // The positive controls: the granted directory lists and reads.
    assert_eq!(
        text(seek(&runtime, "list", "")),
        "innocent\nkeys\nnotes.txt\nsub"
    );
    assert_eq!(
        text(seek(&runtime, "read", "notes.txt")),
        "needle in the notes"
    );
    assert_eq!(
        text(seek(&runtime, "read", "sub/readme")),
        "needle in the readme"
    );
    assert_eq!(text(seek(&runtime, "stat", "sub/../notes.txt")), "19 bytes");
    let walked = text(seek(&runtime, "walk", ""));
    assert_eq!(walked, "innocent\nkeys\nnotes.txt\nsub\nsub/readme\nsub/up");
    assert_shows_no_secret("walk", &walked);

    // By name, through `..`, through a link, inside a hidden directory: nothing is there.
    for name in [
        ".env",
        "./.env",
        "sub/../.env",
        "key.pem",
        ".ssh",
        ".ssh/id_rsa",
        ".ssh/config",
        "sub/.env.local",
        "innocent",
        "keys/id_rsa",
        "keys/config",
        "sub/up/config",
    ] {
        for attack in ["read", "stat"] {
            let response = seek(&runtime, attack, name);
            assert!(
                matches!(&response, ToolResponse::Failed { message, .. } if message.contains("No such file")),
                "{attack} {name}: {response:?}"
            );
            assert_shows_no_secret(&format!("{attack} {name}"), &format!("{response:?}"));
        }
    }

    // Every method that takes a path answers `no-entry` to a hidden one, before wasmtime-wasi
    // would answer anything else (the read-only directory's `not-permitted`, `invalid` for a
    // file that is no link).
    let methods = [
        "open-at",
        "open-at-nofollow",
        "open-at-directory",
        "stat-at",
        "stat-at-nofollow",
        "metadata-hash-at",
        "readlink-at",
        "set-times-at",
        "create-directory-at",
        "remove-directory-at",
        "unlink-file-at",
        "rename-at",
        "link-at",
    ];
    let raw = |name: &str| -> Value {
        serde_json::from_str(&text(seek(&runtime, "raw", name))).expect("raw answers JSON")
    };
    for name in [
        ".env",
        "sub/../.env",
        "key.pem",
        ".ssh",
        ".ssh/id_rsa",
        "keys/id_rsa",
    ] {
        let answers = raw(name);
        for method in methods {
            assert_eq!(answers[method], "no-entry", "{method} {name}: {answers}");
        }
    }
    // A link to a hidden file: followed, nothing there; as a link, there but unreadable.
    let innocent = raw("innocent");
    for method in ["open-at", "stat-at", "metadata-hash-at", "readlink-at"] {
        assert_eq!(
            innocent[method], "no-entry",
            "{method} innocent: {innocent}"
        );
    }
    assert_eq!(innocent["stat-at-nofollow"], "ok", "{innocent}");
    // The control: the same methods on a normal file answer as wasmtime-wasi does.
    let notes = raw("notes.txt");
    for method in ["open-at", "open-at-nofollow", "stat-at", "metadata-hash-at"] {
        assert_eq!(notes[method], "ok", "{method} notes.txt: {notes}");
    }
    for method in ["set-times-at", "unlink-file-at", "rename-at", "link-at"] {
        assert_ne!(notes[method], "no-entry", "{method} notes.txt: {notes}");
        assert_ne!(
            notes[method], "ok",
            "{method} notes.txt (read-only): {notes}"
        );
    }

    // The built-in tools see what the guest sees.
    let listed = text(call(&runtime, "list_dir", json!({ "path": "d" })));
    assert_eq!(listed, "innocent\nkeys\nnotes.txt\nsub/");
    let globbed = text(call(
        &runtime,
        "glob",
        json!({ "path": "d", "pattern": "**/*" }),
    ));
    assert!(globbed.contains("notes.txt"), "{globbed}");
    assert_shows_no_secret("glob", &globbed);
    let grepped = text(call(
        &runtime,
        "grep",
        json!({ "path": "d", "pattern": "needle" }),
    ));
    assert!(
        grepped.contains("needle in the notes") && grepped.contains("needle in the readme"),
        "{grepped}"
    );
    assert_shows_no_secret("grep", &grepped);
    let whole = text(call(
        &runtime,
        "grep",
        json!({ "path": ".", "pattern": "SECRET" }),
    ));
    assert_shows_no_secret("grep over the workspace", &whole);

    // A policy's own list replaces the default, for what is hidden too.
    let own = seeker_runtime(
        &ws,
        &format!("{SEEKER_POLICY}\n[files]\ndeny_read = [\"notes.txt\"]\n"),
    );
    assert_eq!(text(seek(&own, "read", ".env")), "needle SECRET-ENV");
    assert_eq!(
        text(seek(&own, "list", "")),
        ".env\n.ssh\ninnocent\nkey.pem\nkeys\nsub"
    );
    // The default list is made once and shared by every call in the process: a runtime with
    // an empty one, used first, leaves a default runtime made after it (and the first one)
    // hiding exactly what the default hides.
    let none = seeker_runtime(&ws, &format!("{SEEKER_POLICY}\n[files]\ndeny_read = []\n"));
    assert_eq!(text(seek(&none, "read", "key.pem")), "needle SECRET-PEM");
    for after in [seeker_runtime(&ws, SEEKER_POLICY), runtime] {
        let answers: Value =
            serde_json::from_str(&text(seek(&after, "raw", ".env"))).expect("raw answers JSON");
        assert_eq!(answers["open-at"], "no-entry", "{answers}");
        assert_eq!(
            text(seek(&after, "list", "")),
            "innocent\nkeys\nnotes.txt\nsub"
        );
    }
}

/// A process killed mid-call leaves its staging directory (hard links to real files in it);
/// the next open of the workspace removes it, and leaves a live call's alone.
#[test]
fn a_killed_process_s_staging_directory_is_swept_and_a_live_one_is_kept() {
    const CHILD: &str = "TOOLCELL_TEST_STAGING_CHILD";
    /// Longer than any test runs: the child's call ends when it is killed, the parent's when
    /// it is stopped.
    const HOLD: std::time::Duration = std::time::Duration::from_secs(600);
    let hold = |runtime: &Runtime, stop: Option<toolcell::StopToken>| {
        runtime.call_with_report(
            &ToolRequest::new(
                "t",
                "seeker",
                json!({ "path": "d/notes.txt", "do": "hold" }).to_string(),
            ),
            &toolcell::CallOptions {
                timeout: Some(HOLD),
                stop,
                ..toolcell::CallOptions::default()
            },
        )
    };
    if let Some(ws) = std::env::var_os(CHILD) {
        let report = hold(&seeker_runtime(Path::new(&ws), SEEKER_POLICY), None);
        panic!("the held call ended: {:?}", report.response);
    }

    let (_temp, ws) = seeker_workspace();
    let grants = ws.join(".toolcell/grants");
    let staged = || -> Vec<String> {
        std::fs::read_dir(&grants)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what} never came");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };

    let mut child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "grants::a_killed_process_s_staging_directory_is_swept_and_a_live_one_is_kept",
            "--nocapture",
        ])
        .env(CHILD, &ws)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run the child");
    wait_for("the child's staged file", &|| {
        staged()
            .iter()
            .any(|name| grants.join(name).join("notes.txt").exists())
    });
    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");
    let dead = staged();
    assert_eq!(
        dead.len(),
        1,
        "a killed process leaves its staging directory"
    );
    assert_eq!(
        std::fs::read_to_string(grants.join(&dead[0]).join("notes.txt")).expect("staged"),
        "needle in the notes",
        "holding the real file"
    );

    // Opening the workspace (this runtime's build does) removes it, and nothing else.
    let runtime = seeker_runtime(&ws, SEEKER_POLICY);
    assert_eq!(staged(), Vec::<String>::new(), "the next open removed it");
    assert_eq!(
        std::fs::read_to_string(ws.join("d/notes.txt")).expect("the real file"),
        "needle in the notes"
    );

    // A live call's staging directory survives another open of the workspace.
    /// Stops the held call when dropped, so a failed assertion ends the test rather than
    /// leaving the scope to wait out the call.
    struct StopOnDrop(toolcell::StopToken);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.stop();
        }
    }
    let stop = toolcell::StopToken::new();
    std::thread::scope(|scope| {
        let call = scope.spawn(|| hold(&runtime, Some(stop.clone())));
        let stopping = StopOnDrop(stop.clone());
        wait_for("the live call's staging directory", &|| staged().len() == 1);
        let live = staged();
        let reopened = toolcell::Workspace::open(&ws).expect("open the workspace again");
        assert_eq!(staged(), live, "a live call's staging directory is kept");
        drop(reopened);
        drop(stopping);
        let report = call.join().expect("the call thread");
        assert_eq!(report.response, ToolResponse::Cancelled);
    });
    // A call's own is emptied when it ends and kept for the next call, until the runtime goes.
    let kept = staged();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        std::fs::read_dir(grants.join(&kept[0]))
            .expect("kept")
            .count(),
        0,
        "emptied: no link to notes.txt left"
    );
    drop(runtime);
    assert_eq!(
        staged(),
        Vec::<String>::new(),
        "a call's own is removed with its runtime"
    );
}

/// The review's race (issue 40): another process swaps a name between a plain file and a link
/// to `.env`, over and over, while a guest with the directory granted reads the name as fast
/// as it can. The check before the open saw the plain file often enough that the review read
/// `.env` in under three seconds; the descriptor the open made is checked too now, so the
/// secret is never read, while the plain file is (the race was live) and `no-entry` is what
/// the swapped-in link gets.
#[test]
fn a_name_swapped_for_a_link_to_a_hidden_file_is_never_read_through() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let _guard = crate::support::exclusive();
    let (_temp, ws) = seeker_workspace();
    // Each call reads the name thousands of times: more than the default deadline may allow
    // on a loaded machine.
    let policy = SEEKER_POLICY.replace(
        "[tools.seeker]\n",
        "[tools.seeker]\nlimits = { timeout_ms = 60000 }\n",
    );
    let runtime = seeker_runtime(&ws, &policy);
    let d = ws.join("d");
    std::fs::write(d.join("plain.src"), "plain").expect("write");
    std::fs::copy(d.join("plain.src"), d.join("racy")).expect("copy");
    let (stop, swaps) = (AtomicBool::new(false), AtomicUsize::new(0));
    /// Stops the swapper however the reads end (a failed assertion included), so the scope
    /// can end.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let mut seen: std::collections::BTreeMap<String, u64> = Default::default();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            // Renames only (a hard link of a prepared file, a fresh symlink): no file data is
            // written, so the swaps cost the disk nothing.
            while !stop.load(Ordering::Relaxed) {
                let (link, plain) = (d.join("racy.lnk"), d.join("racy.tmp"));
                let _ = std::fs::remove_file(&link);
                let _ = std::fs::remove_file(&plain);
                std::os::unix::fs::symlink(".env", &link).expect("symlink");
                std::fs::rename(&link, d.join("racy")).expect("swap in the link");
                std::fs::hard_link(d.join("plain.src"), &plain).expect("hard link");
                std::fs::rename(&plain, d.join("racy")).expect("swap in the file");
                swaps.fetch_add(1, Ordering::Relaxed);
            }
        });
        let _stop = Stop(&stop);
        for _ in 0..8 {
            let counts: std::collections::BTreeMap<String, u64> =
                serde_json::from_str(&text(seek(&runtime, "race", "racy"))).expect("counts");
            for (outcome, count) in counts {
                *seen.entry(outcome).or_default() += count;
            }
        }
    });
    println!(
        "race: {} swaps, outcomes {seen:?}",
        swaps.load(Ordering::Relaxed)
    );
    assert!(
        seen.keys().all(|outcome| !outcome.contains("SECRET")),
        "read through the swapped link: {seen:?}"
    );
    assert!(
        seen.get("plain").copied().unwrap_or(0) > 0 && swaps.load(Ordering::Relaxed) > 0,
        "the race never ran: {seen:?}"
    );
}

/// The server's own files out of reach (issue 40): the compile cache's key, an audit file and
/// its head, a tokens file and the policy file, lying in the workspace, are refused to
/// `read_file` and are not there inside a granted directory, under a policy whose
/// `[files] deny_read = []` names none of them (so `*.key` is no longer denied by name).
#[test]
fn the_servers_own_files_are_unreadable_whatever_the_policy_says() {
    let (_temp, ws) = seeker_workspace();
    let policy = format!(
        "{SEEKER_POLICY}\n[tools.read_file]\nfilesystem.read = {{ access = \"allow\", roots = [\".\"] }}\n\
         [files]\ndeny_read = []\n"
    );
    let files = [
        "cache.key",
        "audit.jsonl",
        "audit.jsonl.head",
        "tokens.toml",
        "policy.toml",
    ];
    for file in files {
        std::fs::write(ws.join(file), format!("needle SECRET-{file}")).expect("write");
    }
    let runtime = crate::support::builder()
        .policy(Policy::from_toml(&policy).expect("policy"))
        .workspace(&ws)
        .component("test:seeker", crate::guests::SEEKER)
        .cache_key_file(Some(ws.join("cache.key")))
        .protect(ws.join("audit.jsonl"))
        .protect(ws.join("tokens.toml"))
        .protect(ws.join("policy.toml"))
        .build()
        .expect("runtime");
    // The controls: an ordinary file reads both ways, and with the default list gone, a file
    // it named reads too.
    assert!(!call(&runtime, "read_file", json!({ "path": "d/notes.txt" })).is_error());
    assert_eq!(
        text(call(
            &runtime,
            "seeker",
            json!({ "path": ".", "do": "read", "name": "d/.env" })
        )),
        "needle SECRET-ENV"
    );
    // A hard link to one under an innocent name is that file (the review's F4).
    std::fs::hard_link(ws.join("tokens.toml"), ws.join("innocent.txt")).expect("hard link");
    // Not listed where it lies, and not stat-able (the review's F3: an audit file's size told
    // other tenants' calls).
    let listed = text(call(
        &runtime,
        "seeker",
        json!({ "path": ".", "do": "list" }),
    ));
    for file in files {
        assert!(
            !listed.lines().any(|name| name == file),
            "{file} listed: {listed}"
        );
        let stat = call(
            &runtime,
            "seeker",
            json!({ "path": ".", "do": "stat", "name": file }),
        );
        assert!(
            matches!(&stat, ToolResponse::Failed { message, .. } if message.contains("No such file")),
            "{file} stat: {stat:?}"
        );
    }
    assert!(
        listed.lines().any(|name| name == "d"),
        "the control is listed: {listed}"
    );
    for file in files.iter().chain(&["innocent.txt"]) {
        let response = call(&runtime, "read_file", json!({ "path": file }));
        assert!(
            matches!(&response, ToolResponse::Denied { reason: DenyReason::Capability { why, .. } } if why.contains("no tool may read it")),
            "{file}: {response:?}"
        );
        let inside = call(
            &runtime,
            "seeker",
            json!({ "path": ".", "do": "read", "name": file }),
        );
        assert!(
            matches!(&inside, ToolResponse::Failed { message, .. } if message.contains("No such file")),
            "{file} inside the granted directory: {inside:?}"
        );
    }
}
