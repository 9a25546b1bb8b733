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
        ("a/ro.txt", "a/rw.txt", "hooks"),
        ("top.txt", "top.txt", "hooks"),
        ("top.txt", "top.txt", "settings"),
        ("a/ro.txt", "a/rw.txt", "escape_link"),
        ("a/ro.txt", "a/rw.txt", "swap_link"),
        ("top.txt", "new.txt", "hooks"),
        ("a/ro.txt", "a/rw.txt", "link_read"),
    ] {
        let response = prowl(&runtime, read, write, attack);
        if attack == "sibling" || attack.contains("link") {
            assert!(response.is_error(), "{attack}: {response:?}");
        }
        assert_eq!(
            snapshot(&ws),
            before,
            "{attack} ({read}, {write}) changed the workspace"
        );
    }
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
    let leftovers = std::fs::read_dir(ws.join(".toolcell/grants"))
        .expect("grants dir")
        .count();
    assert_eq!(
        leftovers, 0,
        "every staging directory is removed after its call"
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

/// `.git`, `.toolcell` and the files a host protects are never granted for writing, whatever
/// the policy says; nor is a directory that holds them.
#[test]
fn protected_paths_are_never_granted_for_writing() {
    let (temp, ws) = workspace();
    let policy_file = ws.join("toolcell.toml");
    std::fs::write(&policy_file, ALLOW_ALL).expect("write");
    let audit_file = ws.join("audit.jsonl");
    let runtime = crate::support::builder()
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
        "deploy",
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
