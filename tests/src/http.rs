//! `toolcell serve --http`: MCP over Streamable HTTP on loopback, driven by the Python `mcp`
//! client in both eras and by raw HTTP requests for what a client library would not send
//! (no token, a foreign Host or Origin, a closed stream, a SIGTERM mid-call).

use crate::mcp::python_with_mcp;
use crate::support::{exclusive, toolcell_command, tools_dir};
use serde_json::Value;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod fast_path;
mod front_edges;
mod idle;
mod one_reading;
mod quotas;
mod replicas;
pub(crate) mod rounds;
mod session_questions;
mod shares;
mod store_attacks;
pub(crate) mod task_tools;

/// A `toolcell serve --http 127.0.0.1:0` process, killed when dropped.
pub(crate) struct Server {
    child: Child,
    pub(crate) addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    pub(crate) fn start(args: &[&str]) -> Server {
        Server::start_with_env(args, &[])
    }

    fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = toolcell_command()
            .args(["serve", "--http", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start toolcell serve --http");
        let mut reader = BufReader::new(child.stderr.take().expect("stderr"));
        let mut seen = String::new();
        let addr = loop {
            let mut line = String::new();
            if reader.read_line(&mut line).expect("read stderr") == 0 {
                let _ = child.wait();
                panic!("the server ended before listening:\n{seen}");
            }
            seen.push_str(&line);
            if let Some(url) = line
                .trim_end()
                .strip_prefix("toolcell: serving MCP at http://")
            {
                break url
                    .trim_end_matches("/mcp")
                    .parse()
                    .expect("the address it listens on");
            }
        };
        let stderr = Arc::new(Mutex::new(seen));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut rest = String::new();
            for line in reader.lines().map_while(Result::ok) {
                rest.push_str(&line);
                rest.push('\n');
                sink.lock().expect("stderr").push_str(&format!("{line}\n"));
            }
        });
        Server {
            child,
            addr,
            stderr,
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr").clone()
    }

    /// The server's process id.
    pub(crate) fn child_id(&self) -> u32 {
        self.child.id()
    }

    /// Wait for the server to exit (after a signal), and what it logged.
    pub(crate) fn wait(mut self) -> String {
        let _ = self.child.wait();
        self.stderr()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response: status, headers (lower-cased names), body.
#[derive(Debug)]
pub(crate) struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|error| panic!("not JSON ({error}): {self:?}"))
    }
}

/// Send one request on a fresh connection (`Connection: close`) and read the whole answer.
/// A `Host` header is added unless `headers` has one.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    request_on(
        TcpStream::connect(addr).expect("connect"),
        addr,
        method,
        path,
        headers,
        body,
    )
}

/// A connection to `addr` from the loopback address `from` (`127.0.0.2`, ...): another peer.
pub(crate) fn connect_from(from: std::net::IpAddr, addr: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(from, 0).into())?;
    socket.connect(&addr.into())?;
    Ok(socket.into())
}

/// [`request`] on a connection already made.
fn request_on(
    mut stream: TcpStream,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send");
    stream.write_all(body.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the answer");
    parse_answer(&raw)
}

fn parse_answer(raw: &[u8]) -> Answer {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(name, value)| name == "transfer-encoding" && value.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Answer {
        status,
        headers,
        body,
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The headers of a stateless (2026-07-28) `tools/call` of `tool`, with `token` if given: the
/// era's `Mcp-Method` and `Mcp-Name` repeat the body's method and tool for routers.
fn mcp_headers(token: Option<&str>, tool: &str) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
        ("MCP-Protocol-Version", "2026-07-28".to_owned()),
        ("Mcp-Method", "tools/call".to_owned()),
        ("Mcp-Name", tool.to_owned()),
    ];
    if let Some(token) = token {
        headers.push(("Authorization", format!("Bearer {token}")));
    }
    headers
}

/// A stateless (2026-07-28) `tools/call` request: its `_meta` carries the protocol version
/// and the client's capabilities, as every request of that era does.
fn call_body(id: u64, tool: &str, arguments: Value) -> String {
    serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {
            "name": tool, "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string()
}

/// A stateless `tools/call` of `tool` with `arguments`, as `token`'s tenant.
fn call(addr: SocketAddr, token: Option<&str>, tool: &str, arguments: Value) -> Answer {
    call_with(addr, token, 1, tool, arguments, &[])
}

/// [`call`] with the request id `id`, and `extra` headers after the usual ones.
pub(crate) fn call_with(
    addr: SocketAddr,
    token: Option<&str>,
    id: u64,
    tool: &str,
    arguments: Value,
    extra: &[(&str, &str)],
) -> Answer {
    let headers = mcp_headers(token, tool);
    let mut headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    headers.extend_from_slice(extra);
    request(
        addr,
        "POST",
        "/mcp",
        &headers,
        &call_body(id, tool, arguments),
    )
}

/// The text of a `tools/call` answer, and whether it is an error.
pub(crate) fn call_text(answer: &Answer) -> (String, bool) {
    assert_eq!(answer.status, 200, "{answer:?}");
    let json = answer.json();
    let result = &json["result"];
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {json}"))
        .to_owned();
    (text, result["isError"].as_bool().unwrap_or(false))
}

/// A tokens file with one token per `(tenant, workspace)`, and the tokens.
fn tokens_file(
    dir: &std::path::Path,
    tenants: &[(&str, Option<&std::path::Path>)],
) -> (std::path::PathBuf, Vec<String>) {
    let mut text = String::new();
    let mut tokens = Vec::new();
    for (tenant, workspace) in tenants {
        let mut command = toolcell_command();
        command.args(["token", tenant]);
        if let Some(workspace) = workspace {
            command.arg("--dir").arg(workspace);
        }
        let output = command.output().expect("toolcell token");
        assert!(output.status.success(), "{output:?}");
        let printed = String::from_utf8(output.stdout).expect("UTF-8");
        let (token, table) = printed.split_once('\n').expect("token, then table");
        assert!(
            !table.contains(token),
            "the table holds the token's hash, not the token"
        );
        tokens.push(token.to_owned());
        text.push_str(table);
        text.push('\n');
    }
    let path = dir.join("tokens.toml");
    std::fs::write(&path, text).expect("tokens file");
    (path, tokens)
}

#[test]
fn the_python_mcp_client_calls_over_http_in_both_eras_with_a_token() {
    let _guard = exclusive();
    let python = python_with_mcp();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/http_client.py");
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let (file, tokens) = tokens_file(tools.path(), &[("team-a", None)]);
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
    ]);
    for mode in ["auto", "legacy"] {
        let (passed, said) =
            crate::mcp::run_client("http_client.py", [server.url().as_str(), &tokens[0], mode]);
        assert!(passed, "{mode}: {said}\nserver: {}", server.stderr());
    }
    // The same client without the token gets nowhere.
    let refused = Command::new(&python)
        .arg(&script)
        .arg(server.url())
        .arg("-")
        .arg("auto")
        .output()
        .expect("run the client");
    assert!(
        !refused.status.success(),
        "a client without a token connected"
    );
}

#[test]
fn without_a_known_token_every_request_gets_401_and_the_challenge() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", None)]);
    let server = Server::start(&["--tokens", &file.to_string_lossy()]);
    for token in [None, Some("not-a-token"), Some(&tokens[0][1..])] {
        let answer = call(
            server.addr,
            token,
            "echo",
            serde_json::json!({"text": "hi"}),
        );
        assert_eq!(answer.status, 401, "{token:?}: {answer:?}");
        let challenge = answer.header("www-authenticate").unwrap_or_default();
        assert!(challenge.starts_with("Bearer"), "{challenge}");
        assert_eq!(
            challenge.contains("invalid_token"),
            token.is_some(),
            "{challenge}"
        );
    }
    // The metrics are the operator's, and no operator token was given: nobody reads them.
    let metrics = request(server.addr, "GET", "/metrics", &[], "");
    assert_eq!(metrics.status, 403, "{metrics:?}");
    let bearer = format!("Bearer {}", tokens[0]);
    let metrics = request(
        server.addr,
        "GET",
        "/metrics",
        &[("Authorization", &bearer)],
        "",
    );
    assert_eq!(metrics.status, 403, "a tenant's token: {metrics:?}");
    // Two Authorization headers, one of them good: which one counts is not left to chance.
    let good = format!("Bearer {}", tokens[0]);
    let answer = call_with(
        server.addr,
        None,
        1,
        "echo",
        serde_json::json!({"text": "hi"}),
        &[("Authorization", "Bearer wrong"), ("Authorization", &good)],
    );
    assert_eq!(answer.status, 400, "{answer:?}");
    // The probes do not.
    assert_eq!(request(server.addr, "GET", "/healthz", &[], "").status, 200);
    assert_eq!(request(server.addr, "GET", "/readyz", &[], "").status, 200);
    let (text, error) = call_text(&call(
        server.addr,
        Some(&tokens[0]),
        "echo",
        serde_json::json!({"text": "in"}),
    ));
    assert_eq!((text.as_str(), error), ("in", false));
}

#[test]
fn a_foreign_host_or_origin_is_refused() {
    let server = Server::start(&[]);
    let with = |extra: &[(&str, &str)]| {
        call_with(
            server.addr,
            None,
            1,
            "echo",
            serde_json::json!({"text": "hi"}),
            extra,
        )
    };
    // A page at attacker.example whose name now resolves to 127.0.0.1 (DNS rebinding).
    let rebound = with(&[("Host", "attacker.example")]);
    assert_eq!(rebound.status, 403, "{rebound:?}");
    let foreign = with(&[("Origin", "http://attacker.example")]);
    assert_eq!(foreign.status, 403, "{foreign:?}");
    // The metrics too: a rebinding page cannot read them.
    let metrics = request(
        server.addr,
        "GET",
        "/metrics",
        &[("Host", "attacker.example")],
        "",
    );
    assert_eq!(metrics.status, 403, "{metrics:?}");
    assert_eq!(request(server.addr, "GET", "/metrics", &[], "").status, 200);
    // Forms a lax parser lets through: userinfo in Host, a second Origin after an allowed one,
    // an absolute-form target naming another host.
    let port = server.addr.port().to_string();
    let userinfo = with(&[("Host", &format!("evil.com@127.0.0.1:{port}"))]);
    assert_eq!(userinfo.status, 400, "{userinfo:?}");
    let two_origins = with(&[
        ("Origin", "http://localhost:3000"),
        ("Origin", "http://attacker.example"),
    ]);
    assert_eq!(two_origins.status, 403, "{two_origins:?}");
    let headers = mcp_headers(None, "echo");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let absolute = request(
        server.addr,
        "POST",
        "http://evil.com/mcp",
        &headers,
        &call_body(1, "echo", serde_json::json!({"text": "hi"})),
    );
    assert_eq!(absolute.status, 400, "{absolute:?}");
    // The same request from loopback, with and without a loopback Origin, is served.
    assert_eq!(call_text(&with(&[])).0, "hi");
    assert_eq!(
        call_text(&with(&[("Origin", "http://localhost:3000")])).0,
        "hi"
    );
}

#[test]
fn a_non_loopback_bind_without_authentication_is_refused_at_start() {
    for (args, why) in [
        (
            &["serve", "--http", "0.0.0.0:0"][..],
            "without authentication",
        ),
        (&["serve", "--http", "[::]:0"][..], "without authentication"),
        (
            &["serve", "--http", "0.0.0.0:0", "--tokens", "/nonexistent"][..],
            "--allow-host",
        ),
    ] {
        let started = Instant::now();
        let output = toolcell_command()
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("toolcell runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(why) && stderr.lines().count() == 1,
            "{args:?}: {stderr}"
        );
        // Refused before anything is loaded or bound.
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?}");
    }
}

#[test]
fn two_tenants_interleaved_never_touch_each_others_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (workspace, secret) in [(&a, "alpha secret"), (&b, "bravo secret")] {
        std::fs::create_dir(workspace).expect("workspace");
        std::fs::write(workspace.join("notes.txt"), secret).expect("file");
    }
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", Some(&a)), ("team-b", Some(&b))]);
    let audit = dir.path().join("audit.jsonl");
    let server = Server::start(&[
        "--tokens",
        &file.to_string_lossy(),
        "--audit",
        &audit.to_string_lossy(),
    ]);
    let b_file = b.canonicalize().expect("b").join("notes.txt");
    let a_file = a.canonicalize().expect("a").join("notes.txt");
    std::thread::scope(|scope| {
        for (token, own, other) in [
            (&tokens[0], "alpha", &b_file),
            (&tokens[1], "bravo", &a_file),
        ] {
            let addr = server.addr;
            scope.spawn(move || {
                for _ in 0..5 {
                    let (text, error) = call_text(&call(
                        addr,
                        Some(token),
                        "read_file",
                        serde_json::json!({"path": "notes.txt"}),
                    ));
                    assert!(
                        !error
                            && text.contains(own)
                            && !text.contains(if own == "alpha" { "bravo" } else { "alpha" }),
                        "{own}: {text}"
                    );
                    let (text, error) = call_text(&call(
                        addr,
                        Some(token),
                        "read_file",
                        serde_json::json!({"path": other.to_string_lossy()}),
                    ));
                    assert!(
                        error && !text.contains("secret"),
                        "{own} read the other tenant's file: {text}"
                    );
                }
            });
        }
    });
    let lines: Vec<Value> = std::fs::read_to_string(&audit)
        .expect("audit")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 20, "one line per call");
    // Both tenants' clients numbered their calls 1: the record's own ids tell every call apart,
    // and keep the client's beside them.
    let ids: std::collections::HashSet<&str> = lines
        .iter()
        .map(|line| line["id"].as_str().expect("the server's id"))
        .collect();
    assert_eq!(ids.len(), 20, "every call has its own id: {ids:?}");
    assert!(lines.iter().all(|line| line["call_id"] == "1"), "{lines:?}");
    for tenant in ["team-a", "team-b"] {
        let theirs: Vec<&Value> = lines
            .iter()
            .filter(|line| line["agent"] == tenant)
            .collect();
        assert_eq!(theirs.len(), 10, "{tenant}'s calls are audited as {tenant}");
        let workspace = if tenant == "team-a" { &a } else { &b };
        let root = workspace.canonicalize().expect("workspace");
        assert!(
            theirs
                .iter()
                .all(|line| line["workspace"] == root.to_string_lossy().as_ref()),
            "{tenant}: {theirs:?}"
        );
    }
}

/// Tenant A runs under a policy of its own (in its workspace, beside the tokens file): reads
/// only below `public/`, writes anywhere without asking, `echo` pinned to other bytes. Tenant B
/// has none and runs under the server's (the embedded default: reads anywhere in its
/// workspace, writes only with a person's approval, which no one can give here).
#[test]
fn each_tenant_is_decided_by_its_own_policy_and_neither_can_rewrite_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for workspace in [&a, &b] {
        std::fs::create_dir_all(workspace.join("public")).expect("workspace");
        std::fs::write(workspace.join("secret.txt"), "private").expect("file");
        std::fs::write(workspace.join("public/readme.txt"), "open").expect("file");
    }
    let policy = a.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[tools.read_file]\nfilesystem.read = {{ access = \"allow\", roots = [\"public\"] }}\n\
             [tools.write_file]\nfilesystem.write = {{ access = \"allow\", roots = [\".\"] }}\n\
             [tools.echo]\nsha256 = \"{}\"\n",
            "0".repeat(64)
        ),
    )
    .expect("policy");
    let (file, tokens) = tokens_file(&a, &[("team-a", Some(&a)), ("team-b", Some(&b))]);
    let text = std::fs::read_to_string(&file).expect("tokens");
    // The first table is team-a's: its policy, named relative to the tokens file.
    let text = text.replacen(
        "tenant = \"team-a\"\n",
        "tenant = \"team-a\"\npolicy = \"policy.toml\"\n",
        1,
    );
    std::fs::write(&file, &text).expect("tokens");
    let before = (
        std::fs::read(&policy).expect("policy"),
        std::fs::read(&file).expect("tokens"),
    );
    let server = Server::start(&["--tokens", &file.to_string_lossy()]);
    let (team_a, team_b) = (Some(tokens[0].as_str()), Some(tokens[1].as_str()));
    let ask = |token, tool: &str, args: Value| call_text(&call(server.addr, token, tool, args));

    // Reads: A only below public/, B anywhere in its workspace.
    let (text, error) = ask(
        team_a,
        "read_file",
        serde_json::json!({"path": "public/readme.txt"}),
    );
    assert!(!error && text.starts_with("open\n"), "{text}");
    let (text, error) = ask(
        team_a,
        "read_file",
        serde_json::json!({"path": "secret.txt"}),
    );
    assert!(
        error && text.contains("not allowed") && !text.contains("private"),
        "{text}"
    );
    let (text, error) = ask(
        team_b,
        "read_file",
        serde_json::json!({"path": "secret.txt"}),
    );
    assert!(!error && text.starts_with("private\n"), "{text}");
    // Writes: A's policy allows them, except to the files that decide what it may do; B's
    // (the server's) gates them and nobody can approve over HTTP.
    let write = |token, path: &str| {
        ask(
            token,
            "write_file",
            serde_json::json!({"path": path, "content": "rewritten"}),
        )
    };
    assert!(!write(team_a, "out.txt").1, "A's policy allows writes");
    assert_eq!(
        std::fs::read_to_string(a.join("out.txt")).expect("written"),
        "rewritten"
    );
    for protected in ["policy.toml", "tokens.toml"] {
        let (text, error) = write(team_a, protected);
        assert!(
            error && text.contains("no tool may write"),
            "{protected}: {text}"
        );
    }
    assert_eq!(
        (
            std::fs::read(&policy).expect("policy"),
            std::fs::read(&file).expect("tokens")
        ),
        before,
        "neither file changed"
    );
    let (text, error) = write(team_b, "out.txt");
    assert!(error && text.contains("approval"), "{text}");
    assert!(!b.join("out.txt").exists());
    // A's pin refuses the echo component for A alone.
    let (text, error) = ask(team_a, "echo", serde_json::json!({"text": "hi"}));
    assert!(error && text.contains("pins it to 0000"), "{text}");
    assert_eq!(
        ask(team_b, "echo", serde_json::json!({"text": "hi"})),
        ("hi".to_owned(), false)
    );
}

/// A tenant's policy that cannot be read, parsed or honoured stops the server at start, with
/// the tenant's name.
#[test]
fn a_tenant_policy_that_cannot_be_used_stops_the_server_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (policy, why) in [
        (None, "reading"),
        (Some("[tools.echo]\ncore = maybe\n"), "policy.toml"),
        (
            Some("[tools.echo]\nlimits = { fuel = 1000 }\n"),
            "does not meter fuel",
        ),
        // Signatures and sources are decided when tools load: per tenant they would be
        // silently ignored, so they are refused.
        (
            Some("[tools.echo]\nsigned_by = [\"team.pub\"]\n"),
            "decided once, when tools load",
        ),
    ] {
        let path = dir.path().join("policy.toml");
        match policy {
            Some(text) => std::fs::write(&path, text).expect("policy"),
            None => {
                let _ = std::fs::remove_file(&path);
            }
        }
        let (file, _) = tokens_file(dir.path(), &[("team-a", None)]);
        let text = std::fs::read_to_string(&file).expect("tokens").replace(
            "tenant = \"team-a\"\n",
            "tenant = \"team-a\"\npolicy = \"policy.toml\"\n",
        );
        std::fs::write(&file, text).expect("tokens");
        let output = toolcell_command()
            .args(["serve", "--http", "127.0.0.1:0", "--tokens"])
            .arg(&file)
            .stdin(Stdio::null())
            .output()
            .expect("toolcell serve");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains("team-a") && stderr.contains(why),
            "{why}: {output:?}"
        );
    }
}

/// A metrics token file in `dir`, and the token.
fn metrics_token(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let made = toolcell_command()
        .args(["token", "--metrics"])
        .output()
        .expect("toolcell token --metrics");
    assert!(made.status.success(), "{made:?}");
    let printed = String::from_utf8(made.stdout).expect("UTF-8");
    let (token, hash) = printed.split_once('\n').expect("token, then its hash");
    let file = dir.join("metrics.sha256");
    std::fs::write(&file, hash).expect("metrics token file");
    (file, token.to_owned())
}

/// Only an authenticated request keeps its connection open (the review's F1: clients without a
/// token held every connection with keep-alive probes): a probe, a refusal and a `404` are
/// answered `Connection: close` and the connection is closed; a tenant's call keeps it.
#[test]
fn only_an_authenticated_request_keeps_its_connection() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", None)]);
    let server = Server::start(&["--tokens", &file.to_string_lossy()]);
    let closes = |head: &str, body: &str| -> (String, bool) {
        let mut stream = TcpStream::connect(server.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        write!(
            stream,
            "{head}Host: 127.0.0.1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        // Read until the answer is whole; then whether the server closes.
        let closed = loop {
            match stream.read(&mut chunk) {
                Ok(0) => break true,
                Ok(read) => answer.extend_from_slice(&chunk[..read]),
                Err(_) => break false,
            }
            let text = String::from_utf8_lossy(&answer);
            if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|line| {
                        line.to_ascii_lowercase()
                            .strip_prefix("content-length: ")
                            .map(str::to_owned)
                    })
                    .and_then(|length| length.trim().parse().ok())
                    .unwrap_or(0);
                if rest.len() >= length {
                    stream
                        .set_read_timeout(Some(Duration::from_millis(500)))
                        .expect("timeout");
                    break matches!(stream.read(&mut chunk), Ok(0));
                }
            }
        };
        (String::from_utf8_lossy(&answer).into_owned(), closed)
    };
    for (what, head, body) in [
        ("a probe", "GET /healthz HTTP/1.1\r\n", ""),
        (
            "a request without a token",
            "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n",
            "{}",
        ),
        ("a 404", "GET /nothing HTTP/1.1\r\n", ""),
    ] {
        let (answer, closed) = closes(head, body);
        assert!(
            answer.to_ascii_lowercase().contains("connection: close") && closed,
            "{what}: {answer}"
        );
    }
    let body = call_body(1, "echo", serde_json::json!({ "text": "kept" }));
    let mut head = "POST /mcp HTTP/1.1\r\n".to_owned();
    for (name, value) in mcp_headers(Some(&tokens[0]), "echo") {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let (answer, closed) = closes(&head, &body);
    assert!(
        answer.contains("kept") && !closed,
        "a tenant's call: {answer}"
    );
}

#[test]
fn metrics_count_what_was_called() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", None), ("team-b", None)]);
    let (metrics_file, operator) = metrics_token(dir.path());
    let operator = operator.as_str();
    assert!(
        !std::fs::read_to_string(&metrics_file)
            .expect("metrics token file")
            .contains(operator),
        "the file holds the hash only"
    );
    let server = Server::start(&[
        "--tokens",
        &file.to_string_lossy(),
        "--metrics-token",
        &metrics_file.to_string_lossy(),
    ]);
    let token = Some(tokens[0].as_str());
    for text in ["a", "b", "c"] {
        assert_eq!(
            call_text(&call(
                server.addr,
                token,
                "echo",
                serde_json::json!({"text": text})
            ))
            .0,
            text
        );
    }
    let (_, error) = call_text(&call(
        server.addr,
        token,
        "echo",
        serde_json::json!({"text": 7}),
    ));
    assert!(error);
    assert_eq!(
        call(server.addr, None, "echo", serde_json::json!({"text": "x"})).status,
        401
    );
    let bearer = format!("Bearer {operator}");
    let metrics = request(
        server.addr,
        "GET",
        "/metrics",
        &[("Authorization", &bearer)],
        "",
    );
    assert_eq!(metrics.status, 200, "{metrics:?}");
    // A tenant reads nothing of them (they name every tenant's tools and outcomes), with its
    // own token or another's; without a token, 401.
    for token in &tokens {
        let tenant = format!("Bearer {token}");
        let refused = request(
            server.addr,
            "GET",
            "/metrics",
            &[("Authorization", &tenant)],
            "",
        );
        assert_eq!(refused.status, 403, "{refused:?}");
        assert!(
            !refused.body.contains("toolcell_calls_total"),
            "{refused:?}"
        );
    }
    let anonymous = request(server.addr, "GET", "/metrics", &[], "");
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    for line in [
        r#"toolcell_calls_total{tool="echo",outcome="result"} 3"#,
        r#"toolcell_calls_total{tool="echo",outcome="failed"} 1"#,
        r#"toolcell_http_refusals_total{reason="unauthenticated"} 1"#,
        r#"toolcell_call_duration_seconds_count{tool="echo"} 4"#,
        "toolcell_slots_in_use 0",
    ] {
        assert!(
            metrics.body.lines().any(|l| l == line),
            "no {line:?} in:\n{}",
            metrics.body
        );
    }
}

/// Wait until `/metrics` says `slots` calls hold a slot (a condition, not a duration).
fn wait_for_slots(addr: SocketAddr, bearer: Option<&str>, slots: usize) {
    let headers: Vec<(&str, &str)> = bearer
        .map(|b| vec![("Authorization", b)])
        .unwrap_or_default();
    let wanted = format!("toolcell_slots_in_use {slots}");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let metrics = request(addr, "GET", "/metrics", &headers, "");
        if metrics.body.lines().any(|line| line == wanted) {
            return;
        }
        std::thread::yield_now();
    }
    panic!("never reached {wanted}");
}

#[test]
fn sigterm_answers_every_call_in_flight_and_exits_0_within_the_grace_period() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let mut server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--grace-secs",
        "1",
    ]);
    let addr = server.addr;
    let answers = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(move || call(addr, None, "hostile", serde_json::json!({"do": "spin"})))
            })
            .collect();
        wait_for_slots(addr, None, 2);
        let sent = Command::new("kill")
            .args(["-TERM", &server.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(sent.success());
        let signalled = Instant::now();
        let answers: Vec<Answer> = calls
            .into_iter()
            .map(|call| call.join().expect("a call"))
            .collect();
        let status = server.child.wait().expect("the server exits");
        let exited = signalled.elapsed();
        assert_eq!(status.code(), Some(0), "{}", server.stderr());
        // 1 s of grace, then the calls are stopped and answered; the spinning guest's own
        // deadline (5 s) is never reached.
        assert!(
            exited < Duration::from_secs(4),
            "exited {exited:?} after SIGTERM"
        );
        answers
    });
    for answer in &answers {
        let (text, error) = call_text(answer);
        assert!(error && text.contains("Cancelled"), "{text}");
    }
}

#[test]
fn closing_a_calls_stream_stops_its_instance() {
    let _guard = exclusive();
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--pool-slots",
        "1",
    ]);
    // A call that spins until its 5 s deadline holds the one slot; its client goes away.
    let body = &call_body(1, "hostile", serde_json::json!({"do": "spin"}));
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    let headers: String = mcp_headers(None, "hostile")
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n{headers}\r\n{body}",
        server.addr,
        body.len()
    )
    .expect("send");
    wait_for_slots(server.addr, None, 1);
    drop(stream);
    // The next call needs that slot, and (on a one-slot server, whose fair share is one call
    // a client) the client's place: it is answered once the spinning instance has stopped,
    // refused with `429` while the stopping call still holds the place.
    let started = Instant::now();
    let answer = loop {
        let answer = call(
            server.addr,
            None,
            "echo",
            serde_json::json!({"text": "next"}),
        );
        if answer.status != 429 || started.elapsed() > Duration::from_secs(2) {
            break answer;
        }
        std::thread::yield_now();
    };
    let (text, error) = call_text(&answer);
    let took = started.elapsed();
    println!("the next call on a one-slot server answered {took:?} after the stream closed");
    assert_eq!((text.as_str(), error), ("next", false));
    assert!(
        took < Duration::from_secs(2),
        "the spinning call kept its slot: {took:?}"
    );
}

/// A P-256 signing key made for one test, its public half as a JWK Set, and tokens it signs.
pub(crate) struct Issuer {
    pkcs8: Vec<u8>,
    kid: String,
}

impl Issuer {
    pub(crate) fn new(kid: &str) -> Issuer {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = ring::signature::EcdsaKeyPair::generate_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &rng,
        )
        .expect("a key");
        Issuer {
            pkcs8: pkcs8.as_ref().to_vec(),
            kid: kid.to_owned(),
        }
    }

    pub(crate) fn jwks(&self) -> Value {
        use base64::Engine as _;
        use ring::signature::KeyPair as _;
        let rng = ring::rand::SystemRandom::new();
        let pair = ring::signature::EcdsaKeyPair::from_pkcs8(
            &ring::signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &self.pkcs8,
            &rng,
        )
        .expect("the key");
        // An uncompressed point: 0x04, then x and y.
        let point = pair.public_key().as_ref();
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        serde_json::json!({"keys": [{
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
            "x": b64(&point[1..33]), "y": b64(&point[33..65]),
        }]})
    }

    /// An access token (`typ` `at+jwt`, as RFC 9068 says) carrying `claims`.
    pub(crate) fn token(&self, claims: Value) -> String {
        self.token_typed(Some("at+jwt"), claims)
    }

    /// A token with exactly `header` as its JOSE header (members the library's `Header` cannot
    /// carry, such as `crit`), signed ES256.
    fn token_with_header(&self, header: Value, claims: Value) -> String {
        use base64::Engine as _;
        let b64 = |value: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string().as_bytes())
        };
        let message = format!("{}.{}", b64(&header), b64(&claims));
        let signature = jsonwebtoken::crypto::sign(
            message.as_bytes(),
            &jsonwebtoken::EncodingKey::from_ec_der(&self.pkcs8),
            jsonwebtoken::Algorithm::ES256,
        )
        .expect("a signature");
        format!("{message}.{signature}")
    }

    /// A token with the JOSE `typ` given (or none).
    fn token_typed(&self, typ: Option<&str>, claims: Value) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.typ = typ.map(str::to_owned);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_ec_der(&self.pkcs8),
        )
        .expect("a signed token")
    }
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// `toolcell serve --http --oauth CONFIG` stops at start, saying `why`.
fn assert_oauth_config_refused(config: &std::path::Path, why: &str) {
    let output = toolcell_command()
        .args(["serve", "--http", "127.0.0.1:0", "--oauth"])
        .arg(config)
        .stdin(Stdio::null())
        .output()
        .expect("toolcell serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success() && stderr.contains(why),
        "{}: {stderr}",
        config.display()
    );
}

/// A key set served over HTTP on loopback, as an issuer's `jwks_uri`; what it serves can be
/// changed while it runs (a key rotation). Counts the fetches.
struct KeyServer {
    addr: SocketAddr,
    served: Arc<Mutex<String>>,
    fetches: Arc<std::sync::atomic::AtomicUsize>,
}

impl KeyServer {
    fn start(jwks: &Value) -> KeyServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let served = Arc::new(Mutex::new(jwks.to_string()));
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (body, count) = (Arc::clone(&served), Arc::clone(&fetches));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head);
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let body = body.lock().expect("lock").clone();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        KeyServer {
            addr,
            served,
            fetches,
        }
    }

    fn serve(&self, jwks: &Value) {
        self.serve_raw(&jwks.to_string());
    }

    /// Answer `body` from now on, whatever it is.
    fn serve_raw(&self, body: &str) {
        *self.served.lock().expect("lock") = body.to_owned();
    }
}

#[test]
fn a_key_set_from_a_url_is_fetched_at_start_and_again_after_a_rotation() {
    const RESOURCE: &str = "https://tools.test/mcp";
    const ISSUER: &str = "https://auth.test";
    let dir = tempfile::tempdir().expect("temp dir");
    let (old, new) = (Issuer::new("old"), Issuer::new("new"));
    let keys = KeyServer::start(&old.jwks());
    std::fs::write(
        dir.path().join("oauth.toml"),
        format!(
            "resource = \"{RESOURCE}\"\nissuer = \"{ISSUER}\"\n\
             jwks_url = \"http://{}/jwks.json\"\njwks_allow_http = true\njwks_refresh_secs = 1\n\
             [tenants.team-a]\n",
            keys.addr
        ),
    )
    .expect("oauth config");
    // A proxy in the environment (nothing listens there) is not used for a loopback key set:
    // whoever ran it could hand over their own keys.
    let server = Server::start_with_env(
        &["--oauth", &dir.path().join("oauth.toml").to_string_lossy()],
        &[
            ("HTTP_PROXY", "http://127.0.0.1:9"),
            ("http_proxy", "http://127.0.0.1:9"),
        ],
    );
    let claims = serde_json::json!({
        "iss": ISSUER, "aud": RESOURCE, "sub": "team-a", "exp": now() + 300, "iat": now(),
    });
    let echo = |token: &str| {
        call(
            server.addr,
            Some(token),
            "echo",
            serde_json::json!({"text": "k"}),
        )
    };
    assert_eq!(echo(&old.token(claims.clone())).status, 200);
    assert_eq!(
        echo(&new.token(claims.clone())).status,
        401,
        "a key the issuer has not published yet"
    );
    // The issuer rotates: the next fetch brings the new key and drops the old one.
    keys.serve(&new.jwks());
    let fetched = keys.fetches.load(std::sync::atomic::Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(20);
    while echo(&new.token(claims.clone())).status != 200 {
        assert!(Instant::now() < deadline, "the new key was never fetched");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(keys.fetches.load(std::sync::atomic::Ordering::SeqCst) > fetched);
    assert_eq!(echo(&old.token(claims)).status, 401, "the old key is gone");
}

#[test]
fn keys_from_a_url_expire_when_refreshes_keep_failing() {
    const RESOURCE: &str = "https://tools.test/mcp";
    const ISSUER: &str = "https://auth.test";
    let dir = tempfile::tempdir().expect("temp dir");
    let issuer = Issuer::new("only");
    let keys = KeyServer::start(&issuer.jwks());
    let config = |max_age: u64| {
        format!(
            "resource = \"{RESOURCE}\"\nissuer = \"{ISSUER}\"\n\
             jwks_url = \"http://{}/jwks.json\"\njwks_allow_http = true\njwks_refresh_secs = 1\n\
             jwks_max_age_secs = {max_age}\n[tenants.team-a]\n",
            keys.addr
        )
    };
    // A maximum age that one failed refresh would already pass is refused at start.
    std::fs::write(dir.path().join("oauth.toml"), config(1)).expect("oauth config");
    assert_oauth_config_refused(&dir.path().join("oauth.toml"), "at least twice");

    std::fs::write(dir.path().join("oauth.toml"), config(3)).expect("oauth config");
    let server = Server::start(&["--oauth", &dir.path().join("oauth.toml").to_string_lossy()]);
    let token = issuer.token(serde_json::json!({
        "iss": ISSUER, "aud": RESOURCE, "sub": "team-a", "exp": now() + 300, "iat": now(),
    }));
    let echo = || {
        call(
            server.addr,
            Some(&token),
            "echo",
            serde_json::json!({"text": "k"}),
        )
    };
    assert_eq!(echo().status, 200);
    // The issuer's answers go bad: every refresh fails, and the keys age past their limit.
    keys.serve_raw("this is not a key set");
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let answer = echo();
        if answer.status != 200 {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "the keys were used long past their maximum age"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(refused.status, 401, "{refused:?}");
    let challenge = refused.header("www-authenticate").unwrap_or_default();
    assert!(challenge.contains("last fetched"), "{challenge}");
    // A good fetch again: the same token is accepted again.
    keys.serve(&issuer.jwks());
    let deadline = Instant::now() + Duration::from_secs(30);
    while echo().status != 200 {
        assert!(
            Instant::now() < deadline,
            "the keys were never fetched again"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_key_set_url_must_be_https_or_loopback_and_must_answer_at_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a port");
    // A local process squatting a loopback port with a key set of its own: a plain-HTTP
    // `jwks_url` to it is refused unless the operator says `jwks_allow_http`, and nothing is
    // fetched from it (it never becomes the source of the keys).
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").expect("a squatter");
    squatter.set_nonblocking(true).expect("non-blocking");
    let squatted = squatter.local_addr().expect("its port");
    // Nothing is fetched from the first two: they are refused before any connection.
    for (url, allow_http, why) in [
        ("http://auth.test/jwks.json", true, "must be https"),
        (
            &format!("http://{squatted}/jwks.json"),
            false,
            "jwks_allow_http",
        ),
        (
            &format!("http://{closed}/jwks.json"),
            true,
            "the key set at",
        ),
    ] {
        std::fs::write(
            dir.path().join("oauth.toml"),
            format!(
                "resource = \"https://tools.test/mcp\"\nissuer = \"https://auth.test\"\n\
                 jwks_url = \"{url}\"\njwks_allow_http = {allow_http}\n[tenants.team-a]\n"
            ),
        )
        .expect("oauth config");
        let output = toolcell_command()
            .args(["serve", "--http", "127.0.0.1:0", "--oauth"])
            .arg(dir.path().join("oauth.toml"))
            .stdin(Stdio::null())
            .output()
            .expect("toolcell serve");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(why),
            "{url}: {stderr}"
        );
    }
    assert!(
        squatter.accept().is_err(),
        "the squatter was never connected to"
    );
}

#[test]
fn jwt_access_tokens_are_checked_as_the_mcp_authorization_spec_says() {
    const RESOURCE: &str = "https://tools.test/mcp";
    const ISSUER: &str = "https://auth.test";
    let dir = tempfile::tempdir().expect("temp dir");
    let workspace = dir.path().join("a");
    std::fs::create_dir(&workspace).expect("workspace");
    std::fs::write(workspace.join("notes.txt"), "alpha").expect("a file");
    let issuer = Issuer::new("test-1");
    // Another family's key, naming no algorithm and no key id, ahead of the issuer's: it must
    // not stop the search for the key that fits.
    let mut jwks = issuer.jwks();
    let keys = jwks["keys"].as_array_mut().expect("keys");
    // A key of a type this server cannot read (it must be skipped, not refuse the set), and a
    // key of the issuer's published for encryption only (it must verify nothing).
    keys.push(serde_json::json!({"kty": "AKP", "alg": "ML-DSA-44", "kid": "pq-1", "pub": "AAAA"}));
    let encrypting = Issuer::new("enc-1");
    let mut enc_key = encrypting.jwks()["keys"][0].clone();
    enc_key["use"] = serde_json::json!("enc");
    keys.push(enc_key);
    let ops_key = Issuer::new("ops-1");
    let mut ops_jwk = ops_key.jwks()["keys"][0].clone();
    ops_jwk["key_ops"] = serde_json::json!(["encrypt"]);
    ops_jwk.as_object_mut().expect("a key").remove("use");
    keys.push(ops_jwk);
    keys.insert(0, serde_json::json!({"kty": "RSA", "n": "sXchDaQebHnPiGvyDOAT4saGEUetSyo9MKLOoWFsueri23bOdgWp4Dy1WlUzewbgBHod5pcM9H95GQRV3JDXboIRROSBigeC5yjU1hGzHHyXss8UDprecbAYxknTcQkhslANGRUZmdTOQ5qTRsLAt6BTYuyvVRdhS8exSZEy_c4gs_7svlJJQ4H9_NxsiIoLwAEk7-Q3UXERGYw_75IDrGA84-lA_-Ct4eTlXHBIY2EaV7t7LjJaynVJCpkv4LKjTTAumiGUIuQhrNhZLuF_RJLqHpM2kgWFLU7-VTdL1VbC2tejvcI2BlMkEpk1BzBZI0KQB0GaDWFLN-aEAw3vRw", "e": "AQAB"}));
    std::fs::write(dir.path().join("jwks.json"), jwks.to_string()).expect("jwks");
    std::fs::write(
        dir.path().join("oauth.toml"),
        format!(
            "resource = \"{RESOURCE}\"\nissuer = \"{ISSUER}\"\njwks_file = \"jwks.json\"\n\
             scope = \"mcp:tools\"\n[tool_scopes]\nread_file = \"files:read\"\necho = \"echo:use\"\n\
             [tenants.team-a]\nworkspace = \"{}\"\n",
            workspace.display()
        ),
    )
    .expect("oauth config");
    let server = Server::start(&["--oauth", &dir.path().join("oauth.toml").to_string_lossy()]);
    let claims = |changes: Value| {
        let mut claims = serde_json::json!({
            "iss": ISSUER, "aud": RESOURCE, "sub": "team-a",
            "exp": now() + 300, "iat": now(), "scope": "mcp:tools",
        });
        for (key, value) in changes.as_object().expect("an object") {
            claims[key] = value.clone();
        }
        claims
    };
    let metadata_url = "https://tools.test/.well-known/oauth-protected-resource/mcp";

    // The protected-resource metadata (RFC 9728), at the path the challenge names.
    let metadata = request(
        server.addr,
        "GET",
        "/.well-known/oauth-protected-resource/mcp",
        &[],
        "",
    );
    assert_eq!(metadata.status, 200, "{metadata:?}");
    let metadata = metadata.json();
    assert_eq!(metadata["resource"], RESOURCE);
    assert_eq!(
        metadata["authorization_servers"],
        serde_json::json!([ISSUER])
    );

    // No token: 401, and where to learn how to get one.
    let answer = call(server.addr, None, "echo", serde_json::json!({"text": "hi"}));
    assert_eq!(answer.status, 401);
    assert_eq!(
        answer.header("www-authenticate"),
        Some(format!(r#"Bearer resource_metadata="{metadata_url}""#).as_str())
    );

    // A good token, for a tool that needs no scope of its own.
    let good = issuer.token(claims(serde_json::json!({})));
    let (_, error) = call_text(&call(
        server.addr,
        Some(&good),
        "clock",
        serde_json::json!({}),
    ));
    assert!(!error);

    // Refused as invalid tokens, each with its reason.
    let stranger = Issuer::new("test-1");
    for (token, why) in [
        (
            issuer.token(claims(serde_json::json!({"aud": "https://other.test/mcp"}))),
            "not for",
        ),
        (
            issuer.token(claims(serde_json::json!({"exp": now() - 3600}))),
            "expired",
        ),
        (
            issuer.token(claims(serde_json::json!({"iss": "https://evil.test"}))),
            "not from",
        ),
        (
            issuer.token(claims(serde_json::json!({"sub": "team-b"}))),
            "not a tenant",
        ),
        (stranger.token(claims(serde_json::json!({}))), "signature"),
        ("not.a.jwt".to_owned(), "not a JWT"),
        // Signed by the issuer's key, but not access tokens (an ID token is typ JWT).
        (
            issuer.token_typed(Some("JWT"), claims(serde_json::json!({}))),
            "not an access token",
        ),
        (
            issuer.token_typed(None, claims(serde_json::json!({}))),
            "not an access token",
        ),
        // Signed by keys the set publishes, but not for verifying signatures.
        (encrypting.token(claims(serde_json::json!({}))), "no key"),
        (ops_key.token(claims(serde_json::json!({}))), "no key"),
        // What the JWT library would let through.
        (
            issuer.token(claims(
                serde_json::json!({"iss": ["https://evil.test", ISSUER]}),
            )),
            "not from",
        ),
        (
            issuer.token(claims(serde_json::json!({"nbf": "tomorrow"}))),
            "nbf",
        ),
        (
            issuer.token(claims(
                serde_json::json!({"cnf": {"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}),
            )),
            "bound to a key",
        ),
        (
            issuer.token_with_header(
                serde_json::json!({"alg": "ES256", "typ": "at+jwt", "kid": "test-1",
                                   "crit": ["exp-policy"], "exp-policy": 1}),
                claims(serde_json::json!({})),
            ),
            "crit",
        ),
    ] {
        let answer = call(
            server.addr,
            Some(&token),
            "echo",
            serde_json::json!({"text": "hi"}),
        );
        assert_eq!(answer.status, 401, "{why}: {answer:?}");
        let challenge = answer.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains(r#"error="invalid_token""#)
                && challenge.contains(why)
                && challenge.contains(metadata_url),
            "{why}: {challenge}"
        );
    }

    // A token without a tool's scope: 403 insufficient_scope, naming the scope, whether the
    // tool is called by name or through call_tool; with it, the call runs (in the tenant's
    // workspace).
    for (tool, arguments, scope, answer) in [
        (
            "read_file",
            serde_json::json!({"path": "notes.txt"}),
            "files:read",
            "alpha",
        ),
        (
            "echo",
            serde_json::json!({"text": "direct"}),
            "echo:use",
            "direct",
        ),
        (
            "call_tool",
            serde_json::json!({"name": "echo", "arguments": {"text": "via"}}),
            "echo:use",
            "via",
        ),
    ] {
        let refused = call(server.addr, Some(&good), tool, arguments.clone());
        assert_eq!(refused.status, 403, "{tool}: {refused:?}");
        let challenge = refused.header("www-authenticate").unwrap_or_default();
        assert!(
            challenge.contains(r#"error="insufficient_scope""#)
                && challenge.contains(&format!(r#"scope="{scope}""#))
                && challenge.contains(metadata_url),
            "{challenge}"
        );
        let scoped = issuer.token(claims(
            serde_json::json!({"scope": format!("mcp:tools {scope}")}),
        ));
        let (text, error) = call_text(&call(server.addr, Some(&scoped), tool, arguments));
        assert!(!error && text.contains(answer), "{tool}: {text}");
    }
    // Without the server's own scope, nothing.
    let unscoped = issuer.token(claims(serde_json::json!({"scope": "files:read"})));
    assert_eq!(
        call(server.addr, Some(&unscoped), "clock", serde_json::json!({})).status,
        403
    );
    // The same header built by hand, without `crit`, is accepted: the refusal above was the
    // `crit` member's.
    let by_hand = issuer.token_with_header(
        serde_json::json!({"alg": "ES256", "typ": "at+jwt", "kid": "test-1"}),
        claims(serde_json::json!({})),
    );
    assert_eq!(
        call(server.addr, Some(&by_hand), "clock", serde_json::json!({})).status,
        200
    );

    // A scope for a name no tool has (a typo) stops the server at start.
    std::fs::write(
        dir.path().join("typo.toml"),
        format!(
            "resource = \"{RESOURCE}\"\nissuer = \"{ISSUER}\"\njwks_file = \"jwks.json\"\n\
             [tool_scopes]\nRead_File = \"files:read\"\n[tenants.team-a]\n"
        ),
    )
    .expect("oauth config");
    assert_oauth_config_refused(&dir.path().join("typo.toml"), "no tool of this server");
}

/// The audit lines of a file, parsed.
fn audit_lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect()
}

/// nginx from the distribution's packages (`.ci/run` installs it).
/// nginx, installed on first use if it is missing (`system.rs`).
fn nginx() -> std::path::PathBuf {
    crate::system::require(&crate::system::NGINX)
}

/// A free loopback port (a listener's, released; nothing else on this machine picks ports
/// from the ephemeral range's low end in the moment between).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

#[test]
fn two_replicas_behind_nginx_serve_as_one_and_survive_losing_one() {
    let _guard = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let audits = [
        dir.path().join("audit-1.jsonl"),
        dir.path().join("audit-2.jsonl"),
    ];
    let mut replicas: Vec<Option<Server>> = audits
        .iter()
        .map(|audit| Some(Server::start(&["--audit", &audit.to_string_lossy()])))
        .collect();
    let upstreams: String = replicas
        .iter()
        .flatten()
        .map(|replica| format!("server {} max_fails=1 fail_timeout=60s;\n", replica.addr))
        .collect();
    let port = free_port();
    let prefix = dir.path();
    for temp in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        std::fs::create_dir(prefix.join(temp)).expect("nginx temp dir");
    }
    let config = format!(
        "daemon off;\nmaster_process off;\npid {p}/nginx.pid;\nerror_log {p}/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n access_log off;\n client_body_temp_path {p}/body;\n proxy_temp_path {p}/proxy;\n\
         fastcgi_temp_path {p}/fastcgi;\n uwsgi_temp_path {p}/uwsgi;\n scgi_temp_path {p}/scgi;\n\
         upstream toolcell {{\n{upstreams}}}\n\
         server {{\n listen 127.0.0.1:{port};\n location / {{\n  proxy_pass http://toolcell;\n\
           proxy_set_header Host 127.0.0.1;\n  proxy_buffering off;\n\
           proxy_next_upstream error timeout;\n }}\n }}\n}}\n",
        p = prefix.display()
    );
    std::fs::write(prefix.join("nginx.conf"), config).expect("nginx.conf");
    let mut nginx = Command::new(nginx())
        .arg("-p")
        .arg(prefix)
        .arg("-c")
        .arg(prefix.join("nginx.conf"))
        .arg("-e")
        .arg(prefix.join("error.log"))
        .stdin(Stdio::null())
        .spawn()
        .expect("start nginx");
    struct Kill<'a>(&'a mut Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _nginx = Kill(&mut nginx);
    let front: SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
    let started = Instant::now();
    while TcpStream::connect(front).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nginx did not listen"
        );
        std::thread::yield_now();
    }

    const CALLS: u64 = 200;
    let mut seen_before_kill = [0, 0];
    for id in 0..CALLS {
        if id == CALLS / 2 {
            for (seen, audit) in seen_before_kill.iter_mut().zip(&audits) {
                *seen = audit_lines(audit).len();
            }
            // One replica dies mid-run; nginx finds it refusing connections and moves on.
            drop(replicas[0].take());
        }
        let text = format!("call {id}");
        let answer = call_with(
            front,
            None,
            id,
            "echo",
            serde_json::json!({"text": text}),
            &[],
        );
        let (answered, error) = call_text(&answer);
        assert_eq!(
            (answered.as_str(), error),
            (text.as_str(), false),
            "call {id}"
        );
        assert_eq!(answer.json()["id"], id, "call {id} answered as another");
    }
    assert!(
        seen_before_kill.iter().all(|&lines| lines > 0),
        "the calls before the kill were not spread over both replicas: {seen_before_kill:?}"
    );
    // Every call ran once, on one replica or the other.
    let mut ids: Vec<u64> = audits
        .iter()
        .flat_map(|audit| audit_lines(audit))
        .map(|line| {
            line["call_id"]
                .as_str()
                .and_then(|id| id.parse().ok())
                .expect("a call id")
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..CALLS).collect::<Vec<_>>(),
        "each call ran exactly once"
    );
}

/// A 2025-11-25 client's session id is what it declared at `initialize`, sealed: the server
/// keeps nothing (no stream to hold open, nothing to end), the id opens for that client only
/// and unaltered (anything else is `404`, as an ended session: the client initializes again),
/// and a 2026-07-28 request's session id is not read at all.
#[test]
fn a_session_id_is_what_the_client_declared_sealed_and_nothing_is_kept() {
    let server = Server::start(&[]);
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25",
                   "capabilities": {"sampling": {}, "elicitation": {"form": {}}},
                   "clientInfo": {"name": "test", "version": "0"}},
    });
    let json = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let answer = request(server.addr, "POST", "/mcp", &json, &initialize.to_string());
    assert_eq!(answer.status, 200, "{answer:?}");
    let id = answer
        .header("mcp-session-id")
        .expect("a session id")
        .to_owned();
    assert!(
        !id.contains("sampling") && !id.contains("elicitation"),
        "sealed, not readable: {id}"
    );
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let with = |session: &str, version: &'static str| {
        let mut headers = json.to_vec();
        headers.push(("MCP-Protocol-Version", version));
        headers.push(("Mcp-Session-Id", session));
        request(server.addr, "POST", "/mcp", &headers, &list)
    };
    let listed = with(&id, "2025-11-25");
    assert_eq!(listed.status, 200, "{listed:?}");
    // Altered, or another client's (another peer address, without tokens): not a session.
    let mut altered = id.clone().into_bytes();
    let at = altered.len() / 2;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).expect("text");
    let refused = with(&altered, "2025-11-25");
    assert_eq!(refused.status, 404, "{refused:?}");
    assert_eq!(refused.json()["error"]["code"], -32001, "{refused:?}");
    let mut headers = json.to_vec();
    headers.push(("MCP-Protocol-Version", "2025-11-25"));
    headers.push(("Mcp-Session-Id", &id));
    let elsewhere = request_on(
        connect_from("127.0.0.2".parse().expect("an address"), server.addr).expect("connect"),
        server.addr,
        "POST",
        "/mcp",
        &headers,
        &list,
    );
    assert_eq!(elsewhere.status, 404, "another client's id: {elsewhere:?}");
    // No stream to hold open, and nothing to end.
    let stream = request(
        server.addr,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &id)],
        "",
    );
    assert_eq!(stream.status, 405, "{stream:?}");
    let end = request(
        server.addr,
        "DELETE",
        "/mcp",
        &[
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Mcp-Session-Id", &id),
        ],
        "",
    );
    assert_eq!(end.status, 405, "{end:?}");
    let still = with(&id, "2025-11-25");
    assert_eq!(still.status, 200, "a DELETE ended nothing: {still:?}");
    // 2026-07-28 has no sessions: whatever id comes with one of its requests is not read.
    let discover = serde_json::json!({
        "jsonrpc": "2.0", "id": 2, "method": "server/discover",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}},
    })
    .to_string();
    let mut headers = json.to_vec();
    headers.push(("MCP-Protocol-Version", "2026-07-28"));
    headers.push(("Mcp-Method", "server/discover"));
    headers.push(("Mcp-Session-Id", "not-one-of-ours"));
    let stateless = request(server.addr, "POST", "/mcp", &headers, &discover);
    assert_eq!(stateless.status, 200, "{stateless:?}");
}

/// A server with the hostile guest and one pool slot, and its tools directory.
fn one_slot_hostile_server() -> (Server, tempfile::TempDir) {
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--pool-slots",
        "1",
    ]);
    (server, tools)
}

/// A call of the hostile guest's endless loop (its own deadline is 5 s), as request id 42.
fn spin_as_request_42(addr: SocketAddr) -> Answer {
    call_with(
        addr,
        None,
        42,
        "hostile",
        serde_json::json!({"do": "spin"}),
        &[],
    )
}

#[test]
fn a_refused_request_cancels_nothing() {
    let _guard = exclusive();
    let (server, _tools) = one_slot_hostile_server();
    let addr = server.addr;
    let cancel = serde_json::json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 42, "reason": "a page elsewhere says so"},
    })
    .to_string();
    let batch = format!("[{cancel},{cancel}]");
    let host = format!("127.0.0.1:{}", addr.port());
    let protocol = [
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "notifications/cancelled"),
    ];
    // Each a request a browser page could make to a loopback server (a "simple" POST needs no
    // preflight, and the page never reads the answer), or a malformed one.
    /// What the attempt is, its headers, its body, and the status it must get.
    type Attempt<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str, u16);
    let attempts: Vec<Attempt> = vec![
        (
            "a foreign Origin, text/plain",
            vec![
                ("Content-Type", "text/plain"),
                ("Origin", "http://attacker.example"),
            ],
            &cancel,
            403,
        ),
        (
            "a foreign Origin",
            vec![
                ("Content-Type", "application/json"),
                ("Origin", "http://attacker.example"),
            ],
            &cancel,
            403,
        ),
        (
            "a rebinding Host",
            vec![
                ("Content-Type", "application/json"),
                ("Host", "attacker.example"),
            ],
            &cancel,
            403,
        ),
        (
            "userinfo in Host",
            vec![
                ("Content-Type", "application/json"),
                ("Host", "attacker.example@127.0.0.1"),
            ],
            &cancel,
            400,
        ),
        (
            "text/plain from no page at all",
            vec![("Content-Type", "text/plain"), ("Host", &host)],
            &cancel,
            415,
        ),
        (
            "a batch",
            vec![("Content-Type", "application/json"), ("Host", &host)],
            &batch,
            // The front's answer to a body that is not one JSON-RPC message (issue 40).
            400,
        ),
    ];
    std::thread::scope(|scope| {
        let spinning = scope.spawn(move || spin_as_request_42(addr));
        wait_for_slots(addr, None, 1);
        for (what, mut headers, body, status) in attempts {
            headers.extend_from_slice(&protocol);
            let answer = request(addr, "POST", "/mcp", &headers, body);
            assert!(
                answer.status >= 400,
                "{what}: {answer:?} (expected {status})"
            );
            assert_eq!(answer.status, status, "{what}: {answer:?}");
        }
        // The call ran on to its own deadline: nothing above stopped it.
        let (text, error) = call_text(&spinning.join().expect("the spinning call"));
        assert!(error && text.contains("deadline"), "{text}");
        assert!(!text.contains("Cancelled"), "{text}");
    });
}

#[test]
fn a_cancel_notification_stops_the_call_it_names() {
    let _guard = exclusive();
    let (server, _tools) = one_slot_hostile_server();
    let addr = server.addr;
    std::thread::scope(|scope| {
        let spinning = scope.spawn(move || spin_as_request_42(addr));
        wait_for_slots(addr, None, 1);
        let cancel = serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 42, "reason": "the user moved on"},
        });
        let sent = Instant::now();
        let answer = request(
            addr,
            "POST",
            "/mcp",
            &[
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "notifications/cancelled"),
            ],
            &cancel.to_string(),
        );
        assert!(answer.status < 300, "{answer:?}");
        let spun = spinning.join().expect("the spinning call");
        let took = sent.elapsed();
        let (text, error) = call_text(&spun);
        assert!(error && text.contains("Cancelled"), "{text}");
        // The spinning guest's own deadline is 5 s.
        assert!(
            took < Duration::from_secs(2),
            "answered {took:?} after the cancel"
        );
    });
}

/// An attacker with a token of its own names another tenant's running call in a
/// `notifications/cancelled` (the request id is easy to guess: clients count from 1): the
/// call runs on to its own end; only its own client's cancel counts (the front keys running
/// calls by the client it authenticated, never by anything the request says).
#[test]
fn another_tenant_cannot_cancel_a_call_by_naming_its_id() {
    let _guard = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let tools = tools_dir(&[("hostile", crate::guests::HOSTILE)]);
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", None), ("team-b", None)]);
    let (metrics_file, metrics) = metrics_token(dir.path());
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
        "--metrics-token",
        &metrics_file.to_string_lossy(),
    ]);
    let addr = server.addr;
    let (a, b) = (tokens[0].clone(), tokens[1].clone());
    let operator = format!("Bearer {metrics}");
    std::thread::scope(|scope| {
        let spinning = scope.spawn(|| {
            call_with(
                addr,
                Some(&a),
                42,
                "hostile",
                serde_json::json!({"do": "spin"}),
                &[],
            )
        });
        wait_for_slots(addr, Some(&operator), 1);
        let cancel = serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 42, "reason": "someone else's call"},
        });
        let bearer = format!("Bearer {b}");
        let answer = request(
            addr,
            "POST",
            "/mcp",
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
                ("Accept", "application/json, text/event-stream"),
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", "notifications/cancelled"),
            ],
            &cancel.to_string(),
        );
        // Accepted, as any notification is: it just names no call of team-b's.
        assert!(answer.status < 300, "{answer:?}");
        let spun = spinning.join().expect("the spinning call");
        let (text, error) = call_text(&spun);
        assert!(error, "{text}");
        assert!(
            !text.contains("Cancelled"),
            "team-b stopped team-a's call: {text}"
        );
    });
}

/// Approvals over HTTP in the stateless era: each tenant's person answers for its own calls
/// (in its own workspace), an answer sent back with another tenant's handle is ignored, a
/// handle counts once; in the initialize era the person is asked on the call's stream through
/// the session the server gave, and a client that declared no elicitation is answered
/// approval_required.
#[test]
fn each_tenant_approves_its_own_gated_calls_over_http() {
    let _guard = exclusive();
    let dir = tempfile::tempdir().expect("temp dir");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir(&a).expect("a");
    std::fs::create_dir(&b).expect("b");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, crate::mcp::GATED_WRITES).expect("policy");
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", Some(&a)), ("team-b", Some(&b))]);
    let server = Server::start(&[
        "--policy",
        &policy.to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
    ]);
    let url = server.url();
    let (passed, said) = crate::mcp::run_client(
        "approvals.py",
        [
            "http".as_ref(),
            url.as_ref(),
            tokens[0].as_ref(),
            a.as_os_str(),
            tokens[1].as_ref(),
            b.as_os_str(),
        ],
    );
    assert!(passed, "{said}\nserver: {}", server.stderr());
    assert!(
        a.join(toolcell::approval::PERMISSIONS_FILE).exists()
            && !b.join(toolcell::approval::PERMISSIONS_FILE).exists(),
        "team-a's rule is saved in team-a's workspace only"
    );
}

/// A stateless request of `method` (the `Mcp-Name` header carries `name`) with `params`, whose
/// `_meta` declares the tasks extension, as `token`'s tenant.
fn stateless_with_tasks(
    addr: SocketAddr,
    token: &str,
    id: u64,
    method: &str,
    name: &str,
    mut params: Value,
) -> Value {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        },
    });
    let body =
        serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
    let bearer = format!("Bearer {token}");
    let answer = request(
        addr,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
            ("Mcp-Name", name),
            ("Authorization", &bearer),
        ],
        &body.to_string(),
    );
    assert_eq!(answer.status, 200, "{method}: {answer:?}");
    answer.json()
}

/// Over HTTP a long call becomes a task of its tenant's: the other tenant cannot see or
/// cancel it, its own client polls it to its (structured) result.
#[test]
fn a_task_over_http_is_its_tenants_own() {
    let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
    let (file, tokens) = tokens_file(tools.path(), &[("team-a", None), ("team-b", None)]);
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
    ]);
    let (a, b) = (tokens[0].as_str(), tokens[1].as_str());
    let created = stateless_with_tasks(
        server.addr,
        a,
        1,
        "tools/call",
        "structured",
        serde_json::json!({ "name": "structured", "arguments": { "a": 20, "b": 22, "sleep_ms": 1800 } }),
    );
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id: {created}"))
        .to_owned();
    let params = serde_json::json!({ "taskId": task });
    for (id, method) in [(2, "tasks/get"), (3, "tasks/cancel")] {
        let foreign = stateless_with_tasks(server.addr, b, id, method, &task, params.clone());
        assert_eq!(
            foreign["error"]["code"], -32602,
            "team-b's {method}: {foreign}"
        );
    }
    let mut id = 10;
    let done = loop {
        let state = stateless_with_tasks(server.addr, a, id, "tasks/get", &task, params.clone());
        id += 1;
        if state["result"]["status"] != "working" {
            break state;
        }
        assert!(id < 200, "the task never finished: {state}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["result"]["structuredContent"],
        serde_json::json!({ "sum": 42 }),
        "{done}"
    );
}

/// A 2026-07-28 client listening for the tool list's changes (`subscriptions/listen`) is
/// acknowledged with the filter toolcell accepts (the tool list only), and told when a tool is
/// added to the tools directory, on the same stream, tagged with its subscription.
#[test]
fn a_listening_client_is_told_when_the_tools_change() {
    use std::io::{Read as _, Write as _};
    let tools = tempfile::tempdir().expect("tools");
    let server = Server::start(&["--tools", &tools.path().to_string_lossy()]);
    let mut stream = std::net::TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
        "params": {
            "notifications": { "toolsListChanged": true, "promptsListChanged": true },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string();
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    // Read what has come so far until `wanted` is in it, for at most `within`.
    let mut seen = Vec::new();
    let mut read_until = |wanted: &str, within: Duration| -> String {
        let started = std::time::Instant::now();
        let mut buffer = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&seen).into_owned();
            if text.contains(wanted) {
                return text;
            }
            assert!(
                started.elapsed() < within,
                "no {wanted} within {within:?}: {text}"
            );
            match stream.read(&mut buffer) {
                Ok(0) => panic!("the stream ended before {wanted}: {text}"),
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
                Err(error)
                    if matches!(
                        error.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(error) => panic!("reading the stream: {error}"),
            }
        }
    };
    let acknowledged = read_until(
        "notifications/subscriptions/acknowledged",
        Duration::from_secs(10),
    );
    assert!(acknowledged.starts_with("HTTP/1.1 200"), "{acknowledged}");
    assert!(
        acknowledged.contains("\"toolsListChanged\":true"),
        "{acknowledged}"
    );
    assert!(
        !acknowledged.contains("promptsListChanged"),
        "{acknowledged}"
    );
    assert!(
        !acknowledged.contains("tools/list_changed"),
        "told before anything changed"
    );
    // A tool is added: within the reload's look (every second), the client is told.
    std::fs::write(tools.path().join("added.wasm"), crate::guests::TYPED_PROBE).expect("write");
    let told = read_until("notifications/tools/list_changed", Duration::from_secs(15));
    let event = told
        .split("notifications/tools/list_changed")
        .nth(1)
        .unwrap_or_default();
    let line = told
        .lines()
        .find(|line| line.contains("notifications/tools/list_changed"))
        .unwrap_or_default();
    assert!(
        line.contains("io.modelcontextprotocol/subscriptionId") || event.contains("subscriptionId"),
        "{line}"
    );
}

/// One client may listen on at most `MAX_LISTENERS_PER_CLIENT` streams at once (a listening
/// stream holds its connection for as long as the client wants): the next is refused, and
/// another client still listens.
#[test]
fn one_client_listens_on_a_bounded_number_of_streams() {
    use std::io::{Read as _, Write as _};
    let tools = tempfile::tempdir().expect("tools");
    let server = Server::start(&["--tools", &tools.path().to_string_lossy()]);
    let listen = |from: &str| -> (std::net::TcpStream, String) {
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
            "params": {
                "notifications": { "toolsListChanged": true },
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        })
        .to_string();
        let local: SocketAddr = format!("{from}:0").parse().expect("address");
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        socket.bind(&local.into()).expect("bind");
        socket.connect(&server.addr.into()).expect("connect");
        let mut stream: std::net::TcpStream = socket.into();
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
             Mcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .expect("send");
        let started = Instant::now();
        let mut seen = Vec::new();
        let mut buffer = [0u8; 4096];
        loop {
            let text = String::from_utf8_lossy(&seen).into_owned();
            if text.contains("too many streams") || text.contains("acknowledged") {
                // The ack comes first; a refusal follows it at once.
                std::thread::sleep(Duration::from_millis(300));
                if let Ok(n) = stream.read(&mut buffer) {
                    seen.extend_from_slice(&buffer[..n]);
                }
                return (stream, String::from_utf8_lossy(&seen).into_owned());
            }
            assert!(started.elapsed() < Duration::from_secs(10), "{text}");
            match stream.read(&mut buffer) {
                Ok(0) => return (stream, text),
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
                Err(_) => {}
            }
        }
    };
    let held: Vec<_> = (0..toolcell_mcp::MAX_LISTENERS_PER_CLIENT)
        .map(|_| listen("127.0.0.1"))
        .collect();
    for (_, answer) in &held {
        assert!(!answer.contains("too many streams"), "{answer}");
    }
    let (_, refused) = listen("127.0.0.1");
    assert!(refused.contains("too many streams"), "{refused}");
    // Another client (another loopback address) still listens.
    let (_, other) = listen("127.0.0.2");
    assert!(!other.contains("too many streams"), "{other}");
    assert!(other.contains("acknowledged"), "{other}");
}
