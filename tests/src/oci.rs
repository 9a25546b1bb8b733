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

/// The registry binary `.ci/run` installs.
const REGISTRY_BINARY: &str = "docker-registry";

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
        let child = Command::new(REGISTRY_BINARY)
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!("{REGISTRY_BINARY}: {error} (install it: apt-get install docker-registry)")
            });
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
        toolcell_command()
            .env("TOOLCELL_STORE", self.path("store"))
            .env("DOCKER_CONFIG", self.path("docker"))
            .env_remove("TOOLCELL_REGISTRY_TOKEN")
            .env_remove("TOOLCELL_REGISTRY_USERNAME")
            .env_remove("TOOLCELL_REGISTRY_PASSWORD")
            .env("COSIGN_PASSWORD", "test password")
            .arg("--workspace")
            .arg(self.path("ws"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("toolcell runs")
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
        assert!(
            stderr
                .lines()
                .any(|line| line.contains(&format!("{tool} (sha256:")) && line.contains(why)),
            "{tool}: {stderr}"
        );
    }
    let mut call = args.clone();
    call.extend(["call", "echo", r#"{"text":"signed"}"#]);
    assert_eq!(home.ok(&call), "signed", "the rest serve");

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

    let stderr = home.fails(&["push", &home.builtin("echo").to_string_lossy(), &tag]);
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
    let stderr = home.fails(&["pull", &tag]);
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
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}
