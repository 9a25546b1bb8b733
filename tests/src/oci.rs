//! Tools from OCI registries: push, pull by tag and digest, the lock, a corrupt registry, a
//! moved tag, signatures, and a private registry. Each test runs its own `docker-registry`
//! (distribution, from the distribution's packages; `.ci/run` installs it) on loopback, with
//! its storage in a temporary directory, and stops it when done.

use crate::support::toolcell_command;
use serde_json::Value;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a registry may take to start answering.
const REGISTRY_START: Duration = Duration::from_secs(20);

/// A `docker-registry` on a loopback port, storing in a temporary directory.
struct Registry {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl Registry {
    /// Start a registry; with `users` (name, password), only they may read or write it.
    fn start(users: &[(&str, &str)]) -> Registry {
        let dir = tempfile::tempdir().expect("temp dir");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n\
             storage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\n\
             http:\n  addr: {addr}\n",
            dir.path().join("data").display()
        );
        if !users.is_empty() {
            let htpasswd: String = users
                .iter()
                .map(|(user, password)| {
                    format!("{user}:{}\n", bcrypt::hash(password, 5).expect("bcrypt"))
                })
                .collect();
            let path = dir.path().join("htpasswd");
            std::fs::write(&path, htpasswd).expect("htpasswd");
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: toolcell-tests\n    path: {}\n",
                path.display()
            ));
        }
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("config");
        // Installed on first use if it is missing (`system.rs`).
        let binary = crate::system::require(&crate::system::DOCKER_REGISTRY);
        let child = Command::new(&binary)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("{}: {error}", binary.display()));
        let registry = Registry {
            addr,
            dir,
            child: Some(child),
        };
        let started = Instant::now();
        while http(addr, "GET", "/v2/", &[], None).is_none() {
            assert!(
                started.elapsed() < REGISTRY_START,
                "the registry did not answer"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        registry
    }

    /// `oci://127.0.0.1:PORT/{path}`.
    fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.addr)
    }

    /// Where the registry keeps the blob `digest`'s bytes.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.dir
            .path()
            .join("data/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One HTTP/1.1 request to `addr`: the status and body, or `None` if it could not be made.
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Option<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Content-Length: {}\r\n\r\n",
        body.map_or(0, <[u8]>::len)
    ));
    stream.write_all(request.as_bytes()).ok()?;
    if let Some(body) = body {
        stream.write_all(body).ok()?;
    }
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).ok()?;
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&answer[..split]).to_string();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    Some((status, answer[split + 4..].to_vec()))
}

const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";

/// The manifest `reference` (a tag or digest) of `repository`, as the registry has it.
fn manifest(registry: &Registry, repository: &str, reference: &str) -> (Vec<u8>, Value) {
    let (status, body) = http(
        registry.addr,
        "GET",
        &format!("/v2/{repository}/manifests/{reference}"),
        &[("Accept", MANIFEST_TYPE)],
        None,
    )
    .expect("the registry answers");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let json = serde_json::from_slice(&body).expect("a JSON manifest");
    (body, json)
}

/// A user's home for toolcell: its store, docker configuration and workspace, each empty.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let home = Home {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        for sub in ["store", "docker", "ws"] {
            std::fs::create_dir(home.path(sub)).expect("dir");
        }
        home
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    /// Run `toolcell` with this home's store, docker configuration and workspace.
    fn toolcell(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("toolcell runs")
    }

    /// `toolcell ARGS` with this home's store, docker configuration and workspace, not started.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = toolcell_command();
        command
            .env("TOOLCELL_STORE", self.path("store"))
            .env("DOCKER_CONFIG", self.path("docker"))
            .env_remove("TOOLCELL_REGISTRY")
            .env_remove("TOOLCELL_REGISTRY_TOKEN")
            .env_remove("TOOLCELL_REGISTRY_USERNAME")
            .env_remove("TOOLCELL_REGISTRY_PASSWORD")
            .env("COSIGN_PASSWORD", "test password")
            // A proxy nothing listens at: loopback registries must never go through one.
            .env("HTTP_PROXY", "http://127.0.0.1:9")
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .arg("--workspace")
            .arg(self.path("ws"))
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// `toolcell ARGS`, which must succeed; its stdout, trimmed.
    fn ok(&self, args: &[&str]) -> String {
        let output = self.toolcell(args);
        assert!(
            output.status.success(),
            "toolcell {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .expect("UTF-8")
            .trim()
            .to_owned()
    }

    /// `toolcell ARGS`, which must fail; its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let output = self.toolcell(args);
        assert!(
            !output.status.success(),
            "toolcell {args:?} succeeded: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8(output.stderr).expect("UTF-8")
    }

    /// Run toolcell, expecting it to exit with `code`; its stderr.
    fn fails_with(&self, args: &[&str], code: i32) -> String {
        let output = self.toolcell(args);
        let stderr = String::from_utf8(output.stderr).expect("UTF-8");
        assert_eq!(
            output.status.code(),
            Some(code),
            "toolcell {args:?}: {stderr}"
        );
        stderr
    }

    /// The lock file, parsed (empty if there is none).
    fn lock(&self) -> Vec<Value> {
        let path = self.path("ws").join("toolcell.lock");
        let Ok(text) = std::fs::read_to_string(path) else {
            return Vec::new();
        };
        let parsed: toml::Value = toml::from_str(&text).expect("the lock parses");
        let json = serde_json::to_value(parsed).expect("as JSON");
        json["tool"].as_array().cloned().unwrap_or_default()
    }

    /// The blobs in the store.
    fn stored_blobs(&self) -> Vec<String> {
        std::fs::read_dir(self.path("store").join("blobs/sha256"))
            .map(|entries| {
                entries
                    .map(|entry| {
                        entry
                            .expect("entry")
                            .file_name()
                            .to_string_lossy()
                            .into_owned()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A built-in tool's component, written to this home.
    fn builtin(&self, name: &str) -> PathBuf {
        let bytes = toolcell::builtin_components()
            .iter()
            .find(|(tool, _)| *tool == name)
            .map(|(_, bytes)| *bytes)
            .expect("a built-in tool");
        let path = self.path(&format!("{name}.wasm"));
        std::fs::write(&path, bytes).expect("write");
        path
    }

    /// Push the built-in `tool` to `reference`; the digest reference push prints.
    fn push(&self, tool: &str, reference: &str) -> String {
        let file = self.builtin(tool);
        self.ok(&["push", &file.to_string_lossy(), reference])
    }

    /// `toolcell --no-builtin --tools REF call echo {"text": text}`.
    fn call_echo(&self, reference: &str, text: &str) -> Output {
        self.toolcell(&[
            "--no-builtin",
            "--tools",
            reference,
            "call",
            "echo",
            &serde_json::json!({ "text": text }).to_string(),
        ])
    }
}

/// True if a line of `stderr` refuses `tool` (by name and digest) for a reason containing `why`.
fn refused_by_name(stderr: &str, tool: &str, why: &str) -> bool {
    stderr
        .lines()
        .any(|line| line.contains(&format!("{tool} (sha256:")) && line.contains(why))
}

fn digest_of(reference: &str) -> String {
    reference
        .rsplit_once('@')
        .map(|(_, digest)| digest.to_owned())
        .unwrap_or_else(|| panic!("{reference} names no digest"))
}

#[test]
fn a_pushed_tool_is_pulled_by_tag_and_digest_and_then_loads_without_the_network() {
    let mut registry = Registry::start(&[]);
    let home = Home::new();
    let tag = registry.reference("tools/echo:1.0");
    let pushed = home.push("echo", &tag);
    let digest = digest_of(&pushed);
    assert_eq!(
        home.push("echo", &tag),
        pushed,
        "the same bytes push to the same digest"
    );

    // By tag: the lock records the digest and the component's.
    assert_eq!(home.ok(&["pull", &tag]), pushed);
    let lock = home.lock();
    assert_eq!(lock.len(), 1, "{lock:?}");
    assert_eq!(lock[0]["digest"], digest.as_str());
    let echo_bytes = std::fs::read(home.builtin("echo")).expect("echo");
    let component = format!("sha256:{}", sha256_hex(&echo_bytes));
    assert_eq!(lock[0]["component"], component.as_str());
    assert!(
        home.stored_blobs()
            .contains(&component.trim_start_matches("sha256:").to_owned()),
        "the component is stored by its digest"
    );
    // By digest.
    assert_eq!(home.ok(&["pull", &pushed]), pushed);

    for reference in [&tag, &pushed] {
        let output = home.call_echo(reference, "from the registry");
        assert!(output.status.success(), "{output:?}");
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "from the registry"
        );
    }

    // The registry goes away: the locked tag and the digest still load, and pull says where
    // the bytes came from.
    registry.stop();
    for reference in [&tag, &pushed] {
        let output = home.call_echo(reference, "offline");
        assert!(output.status.success(), "{output:?}");
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "offline");
        assert_eq!(home.ok(&["pull", reference]), pushed);
    }
    // The policy's `source` loads it too (offline), and its entry is for that artifact: the
    // built-in echo, which calls itself the same, is refused it. A `sha256` pin holds for a
    // pulled tool as for any other.
    let policy = home.path("policy.toml");
    let policy_arg = policy.to_string_lossy().into_owned();
    std::fs::write(&policy, format!("[tools.echo]\nsource = \"{tag}\"\n")).expect("policy");
    let output = home.toolcell(&[
        "--policy",
        &policy_arg,
        "call",
        "echo",
        r#"{"text":"sourced"}"#,
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "sourced");
    assert!(
        stderr.contains(&format!("the policy loads echo from {tag}")),
        "the built-in echo does not get the entry: {stderr}"
    );
    std::fs::write(
        &policy,
        format!(
            "[tools.echo]\nsource = \"{tag}\"\nsha256 = \"{}\"\n",
            "0".repeat(64)
        ),
    )
    .expect("policy");
    let output = home.toolcell(&["--policy", &policy_arg, "--no-builtin", "list"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("but the policy pins echo to")
            && !String::from_utf8_lossy(&output.stdout).contains("echo"),
        "{output:?}"
    );

    // A tag that was never pulled names the fix.
    let never = registry.reference("tools/echo:2.0");
    let output = home.call_echo(&never, "x");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains("toolcell pull"),
        "{stderr}"
    );
}

#[test]
fn a_layer_that_does_not_match_its_digest_is_refused_and_nothing_is_kept() {
    let registry = Registry::start(&[]);
    let home = Home::new();
    let tag = registry.reference("tools/echo:1.0");
    home.push("echo", &tag);
    let (_, manifest) = manifest(&registry, "tools/echo", "1.0");
    let layer = manifest["layers"][0]["digest"]
        .as_str()
        .expect("a layer")
        .to_owned();
    // The registry's disk changes under it: the same length, other bytes.
    let file = registry.blob_file(&layer);
    let mut bytes = std::fs::read(&file).expect("the layer's file");
    for byte in bytes.iter_mut().skip(100).take(64) {
        *byte ^= 0x5a;
    }
    std::fs::write(&file, bytes).expect("corrupt");

    let stderr = home.fails(&["pull", &tag]);
    assert!(stderr.contains("tools/echo"), "{stderr}");
    assert!(
        stderr.contains(&layer) || stderr.to_lowercase().contains("digest"),
        "{stderr}"
    );
    assert_eq!(home.stored_blobs(), Vec::<String>::new(), "nothing stored");
    assert!(home.lock().is_empty(), "nothing locked");
    let output = home.call_echo(&tag, "x");
    assert!(!output.status.success());
}

#[test]
fn a_moved_tag_is_refused_while_locked_and_accepted_after_update() {
    let registry = Registry::start(&[]);
    let home = Home::new();
    let tag = registry.reference("tools/echo:stable");
    let first = home.push("echo", &tag);
    home.ok(&["pull", &tag]);
    // The tag moves to other bytes (another tool).
    let second = home.push("clock", &tag);
    assert_ne!(first, second);

    let stderr = home.fails(&["pull", &tag]);
    assert!(
        stderr.contains("moved")
            && stderr.contains("--update")
            && stderr.contains(&digest_of(&first)),
        "{stderr}"
    );
    assert_eq!(home.lock()[0]["digest"], digest_of(&first).as_str());
    // What loads is still what was locked.
    let output = home.call_echo(&tag, "still echo");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "still echo");

    assert_eq!(home.ok(&["pull", "--update", &tag]), second);
    assert_eq!(home.lock()[0]["digest"], digest_of(&second).as_str());
    let listed = home.ok(&["--no-builtin", "--tools", &tag, "list"]);
    assert!(
        listed.starts_with("clock") && !listed.contains("echo"),
        "{listed}"
    );
}

#[test]
fn a_required_signature_admits_the_signed_tool_and_refuses_the_others_by_name() {
    let registry = Registry::start(&[]);
    let home = Home::new();
    let ours = home.path("ours");
    let theirs = home.path("theirs");
    for prefix in [&ours, &theirs] {
        home.ok(&["keygen", &prefix.to_string_lossy()]);
    }
    let key = |prefix: &Path| prefix.with_extension("key").to_string_lossy().into_owned();
    // echo: signed by our key. clock: unsigned. list_dir: signed by theirs. glob: carries a
    // signature by our key, but over echo's digest (copied to glob's signature tag).
    let echo = registry.reference("tools/x:echo");
    let clock = registry.reference("tools/clock:1");
    let list_dir = registry.reference("tools/list_dir:1");
    let glob = registry.reference("tools/x:glob");
    let echo_at = home.push("echo", &echo);
    home.push("clock", &clock);
    home.push("list_dir", &list_dir);
    let glob_at = home.push("glob", &glob);
    assert_eq!(home.ok(&["sign", "--key", &key(&ours), &echo]), echo_at);
    home.ok(&["sign", "--key", &key(&theirs), &list_dir]);
    let sig_tag = |at: &str| digest_of(at).replacen(':', "-", 1) + ".sig";
    let (copied, _) = manifest(&registry, "tools/x", &sig_tag(&echo_at));
    let (status, body) = http(
        registry.addr,
        "PUT",
        &format!("/v2/tools/x/manifests/{}", sig_tag(&glob_at)),
        &[("Content-Type", MANIFEST_TYPE)],
        Some(&copied),
    )
    .expect("the registry answers");
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));

    let policy = home.path("policy.toml");
    std::fs::write(
        &policy,
        "[registry]\nsigned_by = [\"ours.pub\"]\n\n[tools.echo]\n[tools.clock]\nclock = { access = \"allow\" }\n",
    )
    .expect("policy");
    let policy_arg = policy.to_string_lossy().into_owned();
    let mut args = vec!["--policy", policy_arg.as_str(), "--no-builtin"];
    for reference in [&echo, &clock, &list_dir, &glob] {
        let pulled = home.toolcell(&["--policy", &policy_arg, "pull", reference]);
        assert!(pulled.status.success(), "{pulled:?}");
        args.extend(["--tools", reference.as_str()]);
    }
    assert_eq!(
        home.lock()
            .iter()
            .find(|entry| entry["reference"]
                .as_str()
                .is_some_and(|r| r.ends_with(":echo")))
            .map(|entry| entry["signers"].as_array().map_or(0, Vec::len)),
        Some(1),
        "the lock names echo's signer"
    );

    let mut list = args.clone();
    list.push("list");
    let output = home.toolcell(&list);
    assert!(output.status.success(), "{output:?}");
    let listed = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        listed
            .lines()
            .map(|line| line.split(' ').next().unwrap_or_default())
            .collect::<Vec<_>>(),
        ["echo"],
        "only the signed tool loads; {stderr}"
    );
    for (tool, why) in [
        ("clock", "it is not signed"),
        ("list_dir", "none of its 1 signature(s)"),
        ("glob", "none of its 1 signature(s)"),
    ] {
        assert!(refused_by_name(&stderr, tool, why), "{tool}: {stderr}");
    }
    let audit = home.path("audit.jsonl");
    let audit_arg = audit.to_string_lossy().into_owned();
    let mut call = args.clone();
    call.extend([
        "--audit",
        &audit_arg,
        "call",
        "echo",
        r#"{"text":"signed"}"#,
    ]);
    assert_eq!(home.ok(&call), "signed", "the rest serve");
    // The audit record names the artifact that ran and who signed it.
    let record: Value = serde_json::from_str(
        std::fs::read_to_string(&audit)
            .expect("audit")
            .lines()
            .last()
            .expect("a line"),
    )
    .expect("json");
    let echo_entry = home
        .lock()
        .into_iter()
        .find(|entry| {
            entry["reference"]
                .as_str()
                .is_some_and(|r| r.ends_with(":echo"))
        })
        .expect("echo's lock entry");
    assert_eq!(
        record["artifact"]["manifest"],
        digest_of(&echo_at),
        "{record}"
    );
    assert_eq!(
        record["artifact"]["signers"], echo_entry["signers"],
        "{record}"
    );
    assert!(
        record["artifact"]["signers"][0]
            .as_str()
            .is_some_and(|id| id.starts_with("sha256:")),
        "{record}"
    );
    assert_eq!(home.ok(&["audit", "verify", &audit_arg]).lines().count(), 1);

    // Both lists apply, each on its own: the registry's (ours) and a tool's own (theirs). A
    // tool signed by only one of the two is refused, naming the list it failed.
    std::fs::write(
        &policy,
        "[registry]\nsigned_by = [\"ours.pub\"]\n\n[tools.echo]\nsigned_by = [\"theirs.pub\"]\n\
         [tools.list_dir]\nsigned_by = [\"theirs.pub\"]\n",
    )
    .expect("policy");
    let mut list = args.clone();
    list.push("list");
    let output = home.toolcell(&list);
    let stderr = String::from_utf8_lossy(&output.stderr);
    for (tool, list) in [
        ("echo", "its policy's signed_by"),
        ("list_dir", "[registry] signed_by"),
    ] {
        assert!(refused_by_name(&stderr, tool, list), "{tool}: {stderr}");
    }
    assert!(
        String::from_utf8_lossy(&output.stdout).trim().is_empty(),
        "{output:?}"
    );

    // A signature required of a tool that was not pulled: refused, by name.
    std::fs::write(&policy, "[tools.echo]\nsigned_by = [\"ours.pub\"]\n").expect("policy");
    let output = home.toolcell(&["--policy", &policy_arg, "list"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("echo must be signed")
            && !String::from_utf8_lossy(&output.stdout).contains("echo "),
        "{stderr}"
    );
}

/// A tool signed keyless (by a fake Fulcio and Rekor, `keyless.rs`) is pulled with its
/// certificate and log promise, and loads under a policy naming that identity and the trust
/// root, offline; under a policy naming another identity it is refused by name.
#[test]
fn a_keyless_signed_tool_loads_for_the_identity_the_policy_names_against_a_trust_root_file() {
    use crate::keyless::{ISSUER, SUBJECT, Signing, Sigstore};
    let mut registry = Registry::start(&[]);
    let home = Home::new();
    let (echo, clock) = (
        registry.reference("tools/echo:keyless"),
        registry.reference("tools/clock:keyless"),
    );
    let echo_at = home.push("echo", &echo);
    home.push("clock", &clock);
    let sigstore = Sigstore::new();
    let digest = digest_of(&echo_at);
    let signature = sigstore.sign(&Signing {
        digest: &digest,
        ..Signing::default()
    });
    let at = toolcell_oci::ToolRef::parse(&echo_at).expect("a reference");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio");
    runtime
        .block_on(toolcell_oci::attach(&at, &digest, &signature, &[]))
        .expect("the signature is attached");

    std::fs::write(home.path("trusted_root.json"), sigstore.trusted_root()).expect("root");
    let policy = home.path("policy.toml");
    let write_policy = |subject: &str| {
        std::fs::write(
            &policy,
            format!(
                "[registry]\ntrust_root = \"trusted_root.json\"\n\
                 signed_by = [{{ issuer = \"{ISSUER}\", subject = \"{subject}\" }}]\n\n\
                 [tools.echo]\n[tools.clock]\n"
            ),
        )
        .expect("policy")
    };
    write_policy(SUBJECT);
    let policy_arg = policy.to_string_lossy().into_owned();
    for reference in [&echo, &clock] {
        home.ok(&["--policy", &policy_arg, "pull", reference]);
    }
    assert_eq!(
        home.lock()
            .iter()
            .find(|entry| entry["digest"] == digest.as_str())
            .map(|entry| entry["signers"].clone()),
        Some(serde_json::json!([format!("{SUBJECT} (issuer {ISSUER})")])),
        "the lock names the keyless signer"
    );
    registry.stop();

    let args = |extra: &[&str]| -> Vec<String> {
        [
            "--policy",
            &policy_arg,
            "--no-builtin",
            "--tools",
            &echo,
            "--tools",
            &clock,
        ]
        .iter()
        .chain(extra)
        .map(|arg| (*arg).to_owned())
        .collect()
    };
    let run = |extra: &[&str]| {
        let args = args(extra);
        home.toolcell(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let output = run(&["call", "echo", r#"{"text":"keyless"}"#]);
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "keyless");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("clock (sha256:") && stderr.contains("it is not signed"),
        "the unsigned tool is refused by name: {stderr}"
    );

    write_policy("mallory@example.org");
    let output = run(&["list"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("echo ({digest}) is refused"))
            && stderr.contains(&format!("signed by {SUBJECT} (issuer {ISSUER})")),
        "{stderr}"
    );
    assert!(!String::from_utf8_lossy(&output.stdout).contains("echo "));
}

/// The files that decide what loads, the keys a policy trusts, its trust root and the lock,
/// are no tool's to write, even with a write grant on the whole workspace.
#[test]
fn no_tool_may_write_the_keys_the_trust_root_or_the_lock() {
    let home = Home::new();
    let workspace = home.path("ws");
    std::fs::create_dir(workspace.join("keys")).expect("dir");
    home.ok(&["keygen", &workspace.join("keys/team").to_string_lossy()]);
    std::fs::write(workspace.join("trusted_root.json"), "{}").expect("root");
    let policy = workspace.join("toolcell.toml");
    std::fs::write(
        &policy,
        "[registry]\nsigned_by = [\"keys/team.pub\"]\ntrust_root = \"trusted_root.json\"\n\n\
         [tools.write_file]\nfilesystem.write = { access = \"allow\", roots = [\".\"] }\n",
    )
    .expect("policy");
    let policy = policy.to_string_lossy().into_owned();
    for path in [
        "keys/team.pub",
        "trusted_root.json",
        "toolcell.lock",
        "notes.txt",
    ] {
        let output = home.toolcell(&[
            "--policy",
            &policy,
            "call",
            "write_file",
            &serde_json::json!({ "path": path, "content": "forged" }).to_string(),
        ]);
        let written = std::fs::read_to_string(workspace.join(path)).unwrap_or_default();
        if path == "notes.txt" {
            assert!(output.status.success(), "the grant works: {output:?}");
            assert_eq!(written, "forged");
        } else {
            assert!(!output.status.success(), "{path}: {output:?}");
            assert_ne!(written, "forged", "{path}");
        }
    }
}

/// A registry's failures are typed (issue 40), and the CLI says which by its exit status: a tag
/// the registry does not have is 7, a registry nothing answers at is 8, a moved tag stays 1.
#[test]
fn a_missing_tag_and_an_unreachable_registry_have_their_own_exit_statuses() {
    let registry = Registry::start(&[]);
    let home = Home::new();
    let stderr = home.fails_with(&["pull", &registry.reference("tools/none:1")], 7);
    assert!(stderr.contains("not in the registry"), "{stderr}");
    // A loopback port nothing listens on (bound, then closed).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr");
    let stderr = home.fails_with(&["pull", &format!("oci://{closed}/tools/echo:1")], 8);
    assert!(stderr.contains("cannot be reached"), "{stderr}");
    let stderr = home.fails_with(
        &[
            "push",
            &home.builtin("echo").to_string_lossy(),
            &format!("oci://{closed}/tools/echo:1"),
        ],
        8,
    );
    assert!(stderr.contains("cannot be reached"), "{stderr}");
}

#[test]
fn a_private_registry_is_pulled_with_docker_credentials_and_refused_without() {
    let registry = Registry::start(&[("ci", "s3cret")]);
    let home = Home::new();
    let tag = registry.reference("private/echo:1");
    let config = home.path("docker").join("config.json");
    let auth = |user: &str, password: &str| {
        use base64::Engine as _;
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        serde_json::json!({ "auths": { registry.addr.to_string(): { "auth": encoded } } })
            .to_string()
    };

    // Denied: exit 3, as a denied call.
    let stderr = home.fails_with(&["push", &home.builtin("echo").to_string_lossy(), &tag], 3);
    assert!(
        stderr.contains("denied access") && stderr.contains("no credentials"),
        "{stderr}"
    );

    std::fs::write(&config, auth("ci", "s3cret")).expect("config");
    let pushed = home.push("echo", &tag);
    assert_eq!(home.ok(&["pull", &tag]), pushed);

    // A digest in the store needs no registry, whatever the credentials; a tag asks it.
    std::fs::write(&config, auth("ci", "wrong")).expect("config");
    assert_eq!(home.ok(&["pull", &pushed]), pushed);
    let stderr = home.fails_with(&["pull", &tag], 3);
    assert!(
        stderr.contains("denied access") && stderr.contains("refused"),
        "{stderr}"
    );

    std::fs::remove_file(&config).expect("remove");
    let other = registry.reference("private/echo:2");
    let stderr = home.fails(&["pull", &other]);
    assert!(
        stderr.contains("denied access")
            && stderr.contains("no credentials")
            && stderr.contains("private/echo"),
        "{stderr}"
    );

    // Credentials in the environment go only to the registry $TOOLCELL_REGISTRY names.
    let with_env = |named: &str| {
        let mut command = toolcell_command();
        command
            .env("TOOLCELL_STORE", home.path("store"))
            .env("DOCKER_CONFIG", home.path("docker"))
            .env("TOOLCELL_REGISTRY", named)
            .env("TOOLCELL_REGISTRY_USERNAME", "ci")
            .env("TOOLCELL_REGISTRY_PASSWORD", "s3cret")
            .env_remove("TOOLCELL_REGISTRY_TOKEN")
            .arg("--workspace")
            .arg(home.path("ws"))
            .args(["pull", &tag])
            .stdin(Stdio::null())
            .output()
            .expect("toolcell runs")
    };
    let elsewhere = with_env("registry.example:5000");
    let stderr = String::from_utf8_lossy(&elsewhere.stderr);
    assert!(
        !elsewhere.status.success() && stderr.contains("not sent to it"),
        "{stderr}"
    );
    let here = with_env(&registry.addr.to_string());
    assert!(here.status.success(), "{here:?}");
    assert_eq!(String::from_utf8_lossy(&here.stdout).trim(), pushed);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

// A registry that misbehaves: a fake one, written here, on a loopback port.

/// How much of an endless body a fake registry sends at most, if the client keeps reading:
/// enough to grow a client that reads bodies whole far past [`MAX_GROWTH_KIB`].
const ENDLESS_CAP: u64 = 1 << 30;

/// How much more than the same binary doing a trivial pull a `toolcell pull` that is sent an
/// endless body may grow (its peak resident set, KiB).
const MAX_GROWTH_KIB: u64 = 64 << 10;

/// How long a measured `toolcell` run may take before it is killed.
const MEASURED_RUN_LIMIT: Duration = Duration::from_secs(120);

/// A request as a fake registry received it.
struct Seen {
    method: String,
    /// The path and query.
    path: String,
    body: Vec<u8>,
}

/// A fake registry's answer.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    /// `None`: `Transfer-Encoding: chunked` and no end, written until the client goes away or
    /// [`ENDLESS_CAP`] bytes are out.
    body: Option<Vec<u8>>,
}

impl Answer {
    fn new(status: u16) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: Some(Vec::new()),
        }
    }

    fn header(mut self, name: &str, value: &str) -> Answer {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    fn body(mut self, bytes: &[u8]) -> Answer {
        self.body = Some(bytes.to_vec());
        self
    }

    fn endless(mut self) -> Answer {
        self.body = None;
        self
    }
}

type Handler = dyn Fn(SocketAddr, &Seen) -> Answer + Send + Sync;

/// A fake registry on a loopback port (plain HTTP/1.1, one request per connection), answering
/// each request as its handler says, and keeping what it was sent.
struct FakeRegistry {
    addr: SocketAddr,
    seen: std::sync::Arc<std::sync::Mutex<Vec<Seen>>>,
    /// The most bytes of an endless body one connection got out before the client went away.
    endless_sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeRegistry {
    fn start(handler: impl Fn(SocketAddr, &Seen) -> Answer + Send + Sync + 'static) -> Self {
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let addr = listener.local_addr().expect("address");
        let handler: Arc<Handler> = Arc::new(handler);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let endless_sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let (seen, endless_sent, stop) = (seen.clone(), endless_sent.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let (handler, seen, endless_sent) =
                        (handler.clone(), seen.clone(), endless_sent.clone());
                    std::thread::spawn(move || {
                        serve_one(stream, addr, &*handler, &seen, &endless_sent)
                    });
                }
            })
        };
        FakeRegistry {
            addr,
            seen,
            endless_sent,
            stop,
            thread: Some(thread),
        }
    }

    /// `oci://127.0.0.1:PORT/{path}`.
    fn reference(&self, path: &str) -> String {
        format!("oci://{}/{path}", self.addr)
    }

    /// The most bytes of an endless body sent on one connection.
    fn endless_sent(&self) -> u64 {
        self.endless_sent.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Read one request from `stream`, answer it as `handler` says, and close.
fn serve_one(
    mut stream: TcpStream,
    addr: SocketAddr,
    handler: &Handler,
    seen: &std::sync::Mutex<Vec<Seen>>,
    endless_sent: &std::sync::atomic::AtomicU64,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
    let mut received = Vec::new();
    let mut buffer = [0u8; 16 << 10];
    let head_end = loop {
        if let Some(at) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => received.extend_from_slice(&buffer[..read]),
        }
        if received.len() > 64 << 10 {
            return;
        }
    };
    let head = String::from_utf8_lossy(&received[..head_end]).into_owned();
    let mut lines = head.lines();
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let length: usize = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0);
    let mut body = received[head_end + 4..].to_vec();
    while body.len() < length {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(read) => body.extend_from_slice(&buffer[..read]),
        }
    }
    let request = Seen { method, path, body };
    let answer = handler(addr, &request);
    let head_only = request.method == "HEAD";
    seen.lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .push(request);
    let mut head = format!("HTTP/1.1 {} Fake\r\nConnection: close\r\n", answer.status);
    for (name, value) in &answer.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match &answer.body {
        Some(bytes) => head.push_str(&format!("Content-Length: {}\r\n\r\n", bytes.len())),
        None => head.push_str("Transfer-Encoding: chunked\r\n\r\n"),
    }
    if stream.write_all(head.as_bytes()).is_err() || head_only {
        return;
    }
    match answer.body {
        Some(bytes) => {
            let _ = stream.write_all(&bytes);
        }
        None => {
            let chunk = vec![b'x'; 64 << 10];
            let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
            framed.extend_from_slice(&chunk);
            framed.extend_from_slice(b"\r\n");
            let mut sent = 0u64;
            while sent < ENDLESS_CAP {
                if stream.write_all(&framed).is_err() {
                    return;
                }
                sent += chunk.len() as u64;
                endless_sent.fetch_max(sent, std::sync::atomic::Ordering::SeqCst);
            }
            let _ = stream.write_all(b"0\r\n\r\n");
        }
    }
}

/// A `toolcell` run whose peak resident set was watched.
struct Measured {
    output: Output,
    /// Its peak resident set (VmHWM), KiB, as last seen before it exited.
    peak_kib: u64,
}

impl Measured {
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

impl Home {
    /// `toolcell ARGS`, its peak resident set (`VmHWM` in `/proc/PID/status`) read every
    /// millisecond while it runs; stdout and stderr are kept up to 1 MiB each (drained beyond).
    fn measured(&self, args: &[&str]) -> Measured {
        fn drain(
            mut from: impl std::io::Read + Send + 'static,
        ) -> std::thread::JoinHandle<Vec<u8>> {
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                let mut buffer = [0u8; 16 << 10];
                while let Ok(read @ 1..) = from.read(&mut buffer) {
                    let room = (1usize << 20).saturating_sub(kept.len());
                    kept.extend_from_slice(&buffer[..read.min(room)]);
                }
                kept
            })
        }
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("toolcell starts");
        let stdout = drain(child.stdout.take().expect("stdout"));
        let stderr = drain(child.stderr.take().expect("stderr"));
        let status_file = format!("/proc/{}/status", child.id());
        let started = Instant::now();
        let mut peak_kib = 0;
        let status = loop {
            // Read before reaping: a process that has exited has no memory left to show.
            if let Some(kib) = std::fs::read_to_string(&status_file)
                .ok()
                .and_then(|status| {
                    status
                        .lines()
                        .find_map(|line| line.strip_prefix("VmHWM:"))
                        .and_then(|rest| {
                            rest.trim()
                                .trim_end_matches("kB")
                                .trim()
                                .parse::<u64>()
                                .ok()
                        })
                })
            {
                peak_kib = kib.max(peak_kib);
            }
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if started.elapsed() > MEASURED_RUN_LIMIT {
                let _ = child.kill();
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        Measured {
            output: Output {
                status,
                stdout: stdout.join().expect("stdout"),
                stderr: stderr.join().expect("stderr"),
            },
            peak_kib,
        }
    }

    /// The peak resident set of a trivial pull: `oci://…/tools/missing@DIGEST` on `fake`,
    /// whose handler must answer it (slowly, so that the peak is seen) with an error.
    fn baseline_kib(&self, fake: &FakeRegistry) -> u64 {
        let run = self.measured(&[
            "pull",
            &fake.reference(&format!("tools/missing@{}", zero_digest())),
        ]);
        assert!(!run.output.status.success(), "{}", run.stderr());
        assert!(run.peak_kib > 0, "its memory was seen: {}", run.stderr());
        run.peak_kib
    }
}

fn zero_digest() -> String {
    format!("sha256:{}", "0".repeat(64))
}

/// What the fake registries in these tests answer in common: `/v2/` as a registry without
/// authentication, the baseline's `tools/missing` a slow 404, and anything else `None`.
fn common_answer(request: &Seen) -> Option<Answer> {
    if request.path == "/v2/" {
        return Some(
            Answer::new(200)
                .header("Content-Type", "application/json")
                .body(b"{}"),
        );
    }
    if request.path.starts_with("/v2/tools/missing/") {
        std::thread::sleep(Duration::from_millis(300));
        return Some(
            Answer::new(404)
                .header("Content-Type", "application/json")
                .body(br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}"#),
        );
    }
    None
}

/// `run` was refused naming `limit`, grew no more than [`MAX_GROWTH_KIB`] past `baseline`, and
/// the fake registry sent far less than its endless body.
fn assert_cut_at(run: &Measured, what: &str, limit: &str, baseline: u64, fake: &FakeRegistry) {
    let stderr = run.stderr();
    eprintln!(
        "{what}: peak {} KiB, baseline {baseline} KiB, the registry sent {} bytes: {:.300}",
        run.peak_kib,
        fake.endless_sent(),
        stderr.trim()
    );
    assert!(!run.output.status.success(), "{what}: {stderr}");
    assert!(
        stderr.contains(limit),
        "{what}: the limit is named: {stderr:.2000}"
    );
    assert!(
        run.peak_kib.saturating_sub(baseline) < MAX_GROWTH_KIB,
        "{what}: toolcell grew to {} KiB, {} KiB past a trivial pull",
        run.peak_kib,
        run.peak_kib.saturating_sub(baseline)
    );
    assert!(
        fake.endless_sent() < 64 << 20,
        "{what}: it read {} bytes of an endless body",
        fake.endless_sent()
    );
}

/// A manifest that never ends (`Transfer-Encoding: chunked`, no length), by digest and by tag
/// (a `HEAD` without a digest, then the `GET`), and an endless signature manifest after a good
/// manifest and component: each refused naming `MAX_MANIFEST_BYTES`, and `toolcell pull` stays
/// within 64 MiB of a trivial pull.
#[test]
fn an_endless_manifest_is_refused_at_its_limit_and_pull_stays_small() {
    let _measuring = crate::support::exclusive();
    let home = Home::new();
    let echo = std::fs::read(home.builtin("echo")).expect("echo");
    let layer = format!("sha256:{}", sha256_hex(&echo));
    let config = b"{}";
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {
            "mediaType": "application/vnd.wasm.config.v0+json",
            "digest": format!("sha256:{}", sha256_hex(config)),
            "size": config.len(),
        },
        "layers": [{ "mediaType": "application/wasm", "digest": layer, "size": echo.len() }],
    }))
    .expect("manifest");
    let signed = format!("sha256:{}", sha256_hex(&manifest));
    let fake = {
        let (signed, layer) = (signed.clone(), layer.clone());
        FakeRegistry::start(move |_, request| {
            if let Some(answer) = common_answer(request) {
                return answer;
            }
            let path = request.path.as_str();
            if path.starts_with("/v2/tools/endless/manifests/") {
                // No digest header: a client must read the manifest to learn it.
                return Answer::new(200)
                    .header("Content-Type", MANIFEST_TYPE)
                    .endless();
            }
            if path == format!("/v2/tools/signed/manifests/{signed}") {
                return Answer::new(200)
                    .header("Content-Type", MANIFEST_TYPE)
                    .body(&manifest);
            }
            if path == format!("/v2/tools/signed/blobs/{layer}") {
                return Answer::new(200).body(&echo);
            }
            if path.starts_with("/v2/tools/signed/manifests/sha256-") {
                return Answer::new(200)
                    .header("Content-Type", MANIFEST_TYPE)
                    .endless();
            }
            Answer::new(404)
        })
    };
    let baseline = home.baseline_kib(&fake);
    for (what, reference) in [
        (
            "a manifest by digest",
            format!("tools/endless@{}", zero_digest()),
        ),
        ("a manifest by tag", "tools/endless:1.0".to_owned()),
        ("a signature manifest", format!("tools/signed@{signed}")),
    ] {
        let run = home.measured(&["pull", &fake.reference(&reference)]);
        assert_cut_at(&run, what, "MAX_MANIFEST_BYTES", baseline, &fake);
        assert!(home.lock().is_empty(), "{what}: nothing locked");
    }
}

/// A token endpoint (the `realm` of a registry's bearer challenge) whose answer never ends:
/// refused naming `MAX_TOKEN_BYTES`, within 64 MiB of a trivial pull.
#[test]
fn an_endless_token_answer_is_refused_at_its_limit() {
    let _measuring = crate::support::exclusive();
    let home = Home::new();
    let fake = FakeRegistry::start(|addr, request| {
        if request.path.starts_with("/token") {
            return Answer::new(200)
                .header("Content-Type", "application/json")
                .endless();
        }
        if request.path.starts_with("/v2/tools/missing/") {
            return common_answer(request).unwrap_or_else(|| Answer::new(404));
        }
        Answer::new(401).header(
            "WWW-Authenticate",
            &format!(r#"Bearer realm="http://{addr}/token",service="fake""#),
        )
    });
    // The baseline: the same binary's trivial pull, from a registry without authentication.
    let baseline = {
        let fake = FakeRegistry::start(|_, request| {
            common_answer(request).unwrap_or_else(|| Answer::new(404))
        });
        home.baseline_kib(&fake)
    };
    let run = home.measured(&[
        "pull",
        &fake.reference(&format!("tools/private@{}", zero_digest())),
    ]);
    assert_cut_at(&run, "a token answer", "MAX_TOKEN_BYTES", baseline, &fake);
}

/// An error answer (500) whose body never ends: refused with its status, the body cut at
/// `MAX_ERROR_BODY_BYTES`, within 64 MiB of a trivial pull.
#[test]
fn an_endless_error_body_is_cut_at_its_limit() {
    let _measuring = crate::support::exclusive();
    let home = Home::new();
    let fake = FakeRegistry::start(|_, request| {
        common_answer(request).unwrap_or_else(|| {
            Answer::new(500)
                .header("Content-Type", "text/plain")
                .endless()
        })
    });
    let baseline = home.baseline_kib(&fake);
    let run = home.measured(&[
        "pull",
        &fake.reference(&format!("tools/broken@{}", zero_digest())),
    ]);
    assert_cut_at(
        &run,
        "an error body",
        "MAX_ERROR_BODY_BYTES",
        baseline,
        &fake,
    );
    assert!(run.stderr().contains("500"), "{}", run.stderr());
}

/// A registry that reports another digest for the manifest just pushed (on the `PUT`, and on a
/// `HEAD` of the tag after): the push is refused, naming both the digest of the bytes sent and
/// the one reported, and prints no reference.
#[test]
fn a_push_whose_manifest_digest_the_registry_misreports_is_refused() {
    let home = Home::new();
    let wrong = format!("sha256:{}", "e".repeat(64));
    let fake = {
        let wrong = wrong.clone();
        FakeRegistry::start(move |_, request| {
            if let Some(answer) = common_answer(request) {
                return answer;
            }
            let (method, path) = (request.method.as_str(), request.path.as_str());
            let upload = "/v2/tools/echo/blobs/uploads/1";
            match method {
                "POST" if path.starts_with("/v2/tools/echo/blobs/uploads/") => {
                    Answer::new(202).header("Location", upload)
                }
                "PATCH" if path.starts_with(upload) => {
                    Answer::new(202).header("Location", upload).header(
                        "Range",
                        &format!("0-{}", request.body.len().saturating_sub(1)),
                    )
                }
                "PUT" if path.starts_with(upload) => {
                    let digest = path.split("digest=").nth(1).unwrap_or_default();
                    Answer::new(201)
                        .header("Location", &format!("/v2/tools/echo/blobs/{digest}"))
                        .header("Docker-Content-Digest", &digest.replace("%3A", ":"))
                }
                "PUT" | "HEAD" if path.starts_with("/v2/tools/echo/manifests/") => {
                    Answer::new(if method == "PUT" { 201 } else { 200 })
                        .header("Location", &format!("/v2/tools/echo/manifests/{wrong}"))
                        .header("Content-Type", MANIFEST_TYPE)
                        .header("Docker-Content-Digest", &wrong)
                }
                _ => Answer::new(404),
            }
        })
    };
    let file = home.builtin("echo");
    let output = home.toolcell(&[
        "push",
        &file.to_string_lossy(),
        &fake.reference("tools/echo:1.0"),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "pushed: {output:?}");
    assert!(output.stdout.is_empty(), "{output:?}");
    let sent = fake
        .seen
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .iter()
        .find(|request| request.method == "PUT" && request.path.contains("/manifests/"))
        .map(|request| format!("sha256:{}", sha256_hex(&request.body)))
        .expect("a manifest was pushed");
    assert!(
        stderr.contains(&wrong) && stderr.contains(&sent),
        "the refusal names both digests ({sent} sent): {stderr}"
    );
}

/// Upload `bytes` as a blob of `repository` (a monolithic upload: POST, then PUT with the
/// digest); its `sha256:` digest.
fn upload_blob(registry: &Registry, repository: &str, bytes: &[u8]) -> String {
    let digest = format!("sha256:{}", sha256_hex(bytes));
    let mut stream =
        TcpStream::connect_timeout(&registry.addr, Duration::from_secs(2)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write!(
        stream,
        "POST /v2/{repository}/blobs/uploads/ HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\
         Content-Length: 0\r\n\r\n",
        registry.addr
    )
    .expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let location = answer
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("location")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no upload location: {answer}"));
    let path = location
        .strip_prefix(&format!("http://{}", registry.addr))
        .unwrap_or(&location);
    let separator = if path.contains('?') { '&' } else { '?' };
    let (status, body) = http(
        registry.addr,
        "PUT",
        &format!("{path}{separator}digest={digest}"),
        &[("Content-Type", "application/octet-stream")],
        Some(bytes),
    )
    .expect("the registry answers");
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    digest
}

/// A typed component (no toolcell contract) pushed as `wkg oci push` pushes it (the wasm OCI
/// artifact layout: a `application/vnd.wasm.config.v0+json` config describing the component,
/// one `application/wasm` layer titled with its file name, annotations on the manifest) is
/// pulled and served, every function a tool, with the grants of the `policy.yaml` the policy
/// names for it.
#[test]
fn a_typed_component_pushed_as_wkg_pushes_it_is_pulled_and_served() {
    let registry = Registry::start(&[]);
    let home = Home::new();
    let repository = "example/files";
    let component = crate::guests::FILES_RS;
    let layer = upload_blob(&registry, repository, component);
    let config = serde_json::json!({
        "created": "2026-12-04T00:00:00Z",
        "author": "example",
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer],
        "component": {
            "exports": ["read-file", "list-directory", "write-file"],
            "imports": ["wasi:filesystem/types@0.2.6", "wasi:filesystem/preopens@0.2.6"],
            "target": null
        }
    })
    .to_string();
    let config_digest = upload_blob(&registry, repository, config.as_bytes());
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {
            "mediaType": "application/vnd.wasm.config.v0+json",
            "digest": config_digest,
            "size": config.len()
        },
        "layers": [{
            "mediaType": "application/wasm",
            "digest": layer,
            "size": component.len(),
            "annotations": { "org.opencontainers.image.title": "files_rs.wasm" }
        }],
        "annotations": {
            "org.opencontainers.image.version": "0.1.0",
            "org.opencontainers.image.description": "Reads, lists and writes files"
        }
    })
    .to_string();
    let (status, body) = http(
        registry.addr,
        "PUT",
        &format!("/v2/{repository}/manifests/0.1.0"),
        &[("Content-Type", MANIFEST_TYPE)],
        Some(manifest.as_bytes()),
    )
    .expect("the registry answers");
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));

    let tag = registry.reference(&format!("{repository}:0.1.0"));
    let pulled = home.ok(&["pull", &tag]);
    assert!(pulled.contains("@sha256:"), "{pulled}");
    std::fs::create_dir_all(home.path("ws/docs")).expect("docs");
    std::fs::write(home.path("ws/docs/a.txt"), "from a registry").expect("a");
    std::fs::write(home.path("ws/secret.txt"), "SECRET").expect("secret");
    let yaml = home.path("files.policy.yaml");
    std::fs::write(
        &yaml,
        "version: \"1.0\"\npermissions:\n  storage:\n    allow:\n      - uri: \"fs://docs\"\n        \
         access: [\"read\"]\n",
    )
    .expect("yaml");
    let policy = home.path("policy.toml");
    std::fs::write(
        &policy,
        "[tools.read-file]\npolicy_yaml = \"files.policy.yaml\"\n",
    )
    .expect("policy");
    let policy = policy.to_string_lossy().into_owned();
    let read = |path: &str| {
        home.toolcell(&[
            "--policy",
            &policy,
            "--no-builtin",
            "--tools",
            &tag,
            "call",
            "read-file",
            &serde_json::json!({ "path": path }).to_string(),
        ])
    };
    let output = read("docs/a.txt");
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "from a registry\n");
    let output = read("secret.txt");
    assert!(!output.status.success(), "{output:?}");
    assert!(!String::from_utf8_lossy(&output.stdout).contains("SECRET"));
}
