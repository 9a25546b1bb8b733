//! Replicas that serve as one (issue 37): two or three `toolcell serve --http` sharing a real
//! `redis-server` (`--state`), on loopback, driven through nginx round-robin and directly.
//! Quotas hold once across them, a killed replica's places come back within a lease, an
//! approval asked by one replica is answered through another once, tasks are polled and
//! cancelled through any replica and end `failed` when theirs dies, and a store that goes
//! away is refused clearly and comes back by itself.

use super::{Answer, Server, audit_lines, call_with, free_port, mcp_headers, request, tokens_file};
use crate::support::{exclusive, tools_dir};
use serde_json::{Value, json};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` on a loopback port, with nothing saved to disk; stopped when dropped.
pub(super) struct Redis {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Redis {
    pub(super) fn start() -> Redis {
        let mut redis = Redis {
            child: None,
            port: free_port(),
            dir: tempfile::tempdir().expect("temp dir"),
        };
        redis.run();
        redis
    }

    /// Start the server (again, on the same port).
    pub(super) fn run(&mut self) {
        let child = Command::new(crate::system::require(&crate::system::REDIS))
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let started = Instant::now();
        while !self.answers() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server did not answer"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it answers `PING`.
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }

    /// Send one command (its words) and read the first line of the reply (`+OK`, `:1`, `$5`,
    /// `*3`, ...), or the whole reply when `whole`.
    pub(super) fn command(&self, words: &[&str]) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect to redis");
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        let mut request = format!("*{}\r\n", words.len());
        for word in words {
            request.push_str(&format!("${}\r\n{word}\r\n", word.len()));
        }
        stream.write_all(request.as_bytes()).expect("send");
        let mut reply = Vec::new();
        let mut chunk = [0u8; 65536];
        while let Ok(n) = stream.read(&mut chunk) {
            if n == 0 {
                break;
            }
            reply.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8_lossy(&reply).into_owned()
    }

    /// Stop it answering (SIGSTOP), with its data kept; [`Redis::resume`] lets it go on.
    pub(super) fn pause(&self) {
        signal(self.child.as_ref().map(Child::id), "-STOP");
    }

    /// Let a paused store go on (SIGCONT).
    pub(super) fn resume(&self) {
        signal(self.child.as_ref().map(Child::id), "-CONT");
    }

    /// Stop it (its data goes with it).
    pub(super) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(super) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// Send `signal` (`-STOP`, `-CONT`) to the process `pid`.
pub(super) fn signal(pid: Option<u32>, signal: &str) {
    let pid = pid.expect("a running process").to_string();
    let sent = Command::new("kill")
        .args([signal, &pid])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill {signal} {pid}");
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The policy of these tests: `structured` may run for a minute, `write_file` is gated.
const POLICY: &str = "[tools.echo]\ncore = true\n[tools.structured]\ncore = true\n\
    limits = { timeout_ms = 60000 }\n[tools.write_file]\ncore = true\n\
    filesystem.write = { access = \"gated\", roots = [\".\"] }\nlimits = { timeout_ms = 20000 }\n";

/// A directory with the `structured` guest, the policy, and a tokens file naming `tenants`
/// (each with its workspace under the directory), with `quotas` appended; the tokens.
pub(super) struct Rig {
    /// The tools directory (protected: nothing else in it).
    tools: tempfile::TempDir,
    /// The workspaces, the policy, the tokens and audit files.
    pub(super) dir: tempfile::TempDir,
    pub(super) tokens: Vec<String>,
    /// The operator's `/metrics` token.
    pub(super) operator: String,
}

impl Rig {
    pub(super) fn new(tenants: &[&str], quotas: &str) -> Rig {
        let tools = tools_dir(&[("structured", crate::guests::STRUCTURED)]);
        let dir = tempfile::tempdir().expect("temp dir");
        let workspaces: Vec<std::path::PathBuf> = tenants
            .iter()
            .map(|tenant| {
                let path = dir.path().join(format!("ws-{tenant}"));
                std::fs::create_dir(&path).expect("workspace");
                path
            })
            .collect();
        let named: Vec<(&str, Option<&std::path::Path>)> = tenants
            .iter()
            .zip(&workspaces)
            .map(|(tenant, workspace)| (*tenant, Some(workspace.as_path())))
            .collect();
        let (file, tokens) = tokens_file(dir.path(), &named);
        let text = std::fs::read_to_string(&file).expect("tokens");
        std::fs::write(&file, format!("{text}\n{quotas}")).expect("quotas");
        std::fs::write(dir.path().join("policy.toml"), POLICY).expect("policy");
        let (_, operator) = super::metrics_token(dir.path());
        // The operator's seal key, the same for every replica.
        std::fs::write(
            dir.path().join("seal.key"),
            format!(
                "{}\n",
                toolcell_mcp::seal::SealKey::random()
                    .expect("a key")
                    .to_hex()
            ),
        )
        .expect("seal key");
        Rig {
            tools,
            dir,
            tokens,
            operator: format!("Bearer {operator}"),
        }
    }

    /// A replica sharing `redis`, auditing to `audit-N.jsonl`.
    pub(super) fn replica(&self, redis: &Redis, n: usize) -> Server {
        self.replica_at(&redis.url(), n, &[])
    }

    /// A replica sharing the store at `url`, auditing to `audit-N.jsonl`, with `extra` flags
    /// (a later `--seal-key-file` replaces the rig's).
    pub(super) fn replica_at(&self, url: &str, n: usize, extra: &[&str]) -> Server {
        let path = |name: &str| self.dir.path().join(name).to_string_lossy().into_owned();
        let seal = if extra.contains(&"--seal-key-file") {
            Vec::new()
        } else {
            vec!["--seal-key-file".to_owned(), path("seal.key")]
        };
        let mut args: Vec<String> = vec![
            "--tools".to_owned(),
            self.tools.path().to_string_lossy().into_owned(),
            "--policy".to_owned(),
            path("policy.toml"),
            "--tokens".to_owned(),
            path("tokens.toml"),
            "--audit".to_owned(),
            path(&format!("audit-{n}.jsonl")),
            "--metrics-token".to_owned(),
            path("metrics.sha256"),
            "--state".to_owned(),
            url.to_owned(),
        ];
        args.extend(seal);
        args.extend(extra.iter().map(|arg| (*arg).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Server::start(&args)
    }

    pub(super) fn workspace(&self, tenant: &str) -> std::path::PathBuf {
        self.dir.path().join(format!("ws-{tenant}"))
    }
}

/// A `structured` call that sleeps `sleep_ms`, as `token`'s tenant: the answer.
pub(super) fn sum(addr: SocketAddr, token: &str, id: u64, sleep_ms: u64) -> Answer {
    call_with(
        addr,
        Some(token),
        id,
        "structured",
        json!({ "a": 1, "b": 2, "sleep_ms": sleep_ms }),
        &[],
    )
}

/// The quota a `429` names (`None` for a `200`); anything else fails the test.
pub(super) fn refused_by(answer: &Answer) -> Option<String> {
    match answer.status {
        200 => None,
        429 => Some(
            answer.json()["error"]["data"]["quota"]
                .as_str()
                .unwrap_or_else(|| panic!("a quota refusal: {answer:?}"))
                .to_owned(),
        ),
        _ => panic!("neither an answer nor a quota's refusal: {answer:?}"),
    }
}

/// Poll `check` until it gives `Some`, for at most `within`: how long it took, and the value.
pub(super) fn within<T>(within: Duration, mut check: impl FnMut() -> Option<T>) -> (Duration, T) {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return (started.elapsed(), value);
        }
        assert!(started.elapsed() < within, "not within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// nginx on a loopback port, round-robin over `replicas`; stopped when dropped.
struct Nginx {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Nginx {
    fn start(replicas: &[&Server]) -> Nginx {
        let dir = tempfile::tempdir().expect("temp dir");
        let prefix = dir.path();
        for temp in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            std::fs::create_dir(prefix.join(temp)).expect("nginx temp dir");
        }
        let upstreams: String = replicas
            .iter()
            .map(|replica| format!("server {};\n", replica.addr))
            .collect();
        let port = free_port();
        let config = format!(
            "daemon off;\nmaster_process off;\npid {p}/nginx.pid;\nerror_log {p}/error.log;\n\
             events {{ worker_connections 256; }}\n\
             http {{\n access_log off;\n client_body_temp_path {p}/body;\n proxy_temp_path {p}/proxy;\n\
             fastcgi_temp_path {p}/fastcgi;\n uwsgi_temp_path {p}/uwsgi;\n scgi_temp_path {p}/scgi;\n\
             upstream toolcell {{\n{upstreams}}}\n\
             server {{\n listen 127.0.0.1:{port};\n location / {{\n  proxy_pass http://toolcell;\n\
               proxy_set_header Host 127.0.0.1;\n  proxy_buffering off;\n }}\n }}\n}}\n",
            p = prefix.display()
        );
        std::fs::write(prefix.join("nginx.conf"), config).expect("nginx.conf");
        let child = Command::new(crate::system::require(&crate::system::NGINX))
            .arg("-p")
            .arg(prefix)
            .arg("-c")
            .arg(prefix.join("nginx.conf"))
            .arg("-e")
            .arg(prefix.join("error.log"))
            .stdin(Stdio::null())
            .spawn()
            .expect("start nginx");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("an address");
        within(Duration::from_secs(10), || TcpStream::connect(addr).ok());
        Nginx {
            child,
            addr,
            _dir: dir,
        }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rate, in-flight and daily quotas, each held once across two replicas: through nginx
/// round-robin the calls admitted fit one bucket's arithmetic for the time they took (two
/// replicas keeping their own would admit about twice as many); a call running on one replica
/// holds the tenant's one in-flight place on the other; a day's budget spent on one is spent
/// on the other.
#[test]
fn a_tenants_quotas_hold_once_across_replicas() {
    let _guard = exclusive();
    let redis = Redis::start();
    let rig = Rig::new(
        &["paced", "single", "budget"],
        "[quota.paced]\nrate = 2\nburst = 2\n[quota.single]\nin_flight = 1\n\
         [quota.budget]\ndaily_ms = 1\n",
    );
    let (one, two) = (rig.replica(&redis, 1), rig.replica(&redis, 2));
    let nginx = Nginx::start(&[&one, &two]);
    let (paced, single, budget) = (&rig.tokens[0], &rig.tokens[1], &rig.tokens[2]);

    // The rate: a call every 50 ms for 2.5 s, alternating over both replicas through nginx.
    let started = Instant::now();
    let mut outcomes: Vec<Option<String>> = Vec::new();
    while started.elapsed() < Duration::from_millis(2500) {
        outcomes.push(refused_by(&sum(
            nginx.addr,
            paced,
            outcomes.len() as u64,
            0,
        )));
        std::thread::sleep(Duration::from_millis(50));
    }
    let elapsed = started.elapsed().as_secs_f64();
    let admitted = outcomes.iter().filter(|outcome| outcome.is_none()).count();
    // One bucket: its burst, and what it refilled in the time the calls took (two buckets, one
    // per replica, would admit about twice as many).
    let (least, most) = (
        2 + (2.0 * (elapsed - 0.5)).floor().max(0.0) as usize,
        2 + (2.0 * elapsed).ceil() as usize,
    );
    println!(
        "rate: {admitted} of {} admitted in {elapsed:.2} s (one bucket: {least} to {most})",
        outcomes.len()
    );
    assert!(admitted >= least && admitted <= most, "{outcomes:?}");
    assert!(
        outcomes.iter().flatten().all(|quota| quota == "rate"),
        "{outcomes:?}"
    );

    // In flight: one call runs on replica one; replica two refuses the second, then admits
    // one once the first has ended.
    std::thread::scope(|scope| {
        let long = scope.spawn(|| sum(one.addr, single, 1, 1500));
        super::wait_for_slots(one.addr, Some(&rig.operator), 1);
        assert_eq!(
            refused_by(&sum(two.addr, single, 2, 0)).as_deref(),
            Some("in_flight")
        );
        assert_eq!(refused_by(&long.join().expect("the long call")), None);
    });
    let (_, ()) = within(Duration::from_secs(10), || {
        refused_by(&sum(two.addr, single, 3, 0))
            .is_none()
            .then_some(())
    });

    // The day's budget, spent on one replica, is spent on the other.
    assert_eq!(refused_by(&sum(one.addr, budget, 1, 20)), None);
    let (_, quota) = within(Duration::from_secs(10), || {
        refused_by(&sum(two.addr, budget, 2, 0))
    });
    assert_eq!(quota, "daily_ms");
}

/// A replica killed (SIGKILL) with a call in flight: the tenant's one place is held by the
/// dead replica's lease, so the other replica refuses, until the lease expires (within
/// `LEASE_TTL`), and then admits.
#[test]
fn a_killed_replica_gives_its_places_back_within_the_lease() {
    let _guard = exclusive();
    let redis = Redis::start();
    let rig = Rig::new(&["single"], "[quota.single]\nin_flight = 1\n");
    let mut one = Some(rig.replica(&redis, 1));
    let two = rig.replica(&redis, 2);
    let token = rig.tokens[0].clone();
    let addr = one.as_ref().map(|one| one.addr).expect("replica one");
    // The long call, on replica one; its replica dies under it: the connection breaks,
    // whatever it answers. What it answered, if it ended before.
    let long_call = move || {
        let token = token.clone();
        std::thread::spawn(move || {
            let mut stream = TcpStream::connect(addr).expect("connect");
            let body = super::call_body(
                1,
                "structured",
                json!({ "a": 1, "b": 2, "sleep_ms": 50_000 }),
            );
            let headers: String = mcp_headers(Some(&token), "structured")
                .iter()
                .map(|(name, value)| format!("{name}: {value}\r\n"))
                .collect();
            let _ = write!(
                stream,
                "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n{headers}\r\n{body}",
                body.len()
            );
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer);
            String::from_utf8_lossy(&answer).into_owned()
        })
    };
    // The call runs on replica one: replica two refuses the tenant's next. The probe is a call
    // of the tenant too, so it can take the one place first and have the long call refused
    // (429): then the long call is made again. (The first call compiles the tool, which a
    // loaded machine may take seconds over: hence the margin.)
    let mut caller = long_call();
    let mut last = None;
    let checked = Instant::now();
    while checked.elapsed() < Duration::from_secs(30) {
        let answer = sum(two.addr, &rig.tokens[0], 2, 0);
        if refused_by(&answer).as_deref() == Some("in_flight") {
            last = None;
            break;
        }
        last = Some(answer);
        if caller.is_finished() {
            let refused = caller.join().expect("the long call's thread");
            assert!(refused.starts_with("HTTP/1.1 429"), "{refused}");
            caller = long_call();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        last.is_none(),
        "replica two never saw replica one's call in flight: {last:?}"
    );
    drop(one.take());
    let killed = Instant::now();
    let _ = caller.join();
    let (took, ()) = within(
        toolcell_mcp::state::LEASE_TTL + Duration::from_secs(10),
        || {
            refused_by(&sum(two.addr, &rig.tokens[0], 3, 0))
                .is_none()
                .then_some(())
        },
    );
    let took = killed.elapsed().max(took);
    println!("the dead replica's place came back {took:?} after the kill");
    assert!(
        took <= toolcell_mcp::state::LEASE_TTL + Duration::from_secs(5),
        "{took:?}"
    );
}

/// A stateless `tools/call` of `write_file` from a client that can be asked, with `extra`
/// params (the token and the answer of a retry), as `token`'s tenant.
pub(super) fn write(addr: SocketAddr, token: &str, id: u64, content: &str, extra: Value) -> Value {
    let mut params = json!({
        "name": "write_file",
        "arguments": { "path": "note.txt", "content": content },
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": { "elicitation": { "form": {} } },
        },
    });
    if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
        params.extend(extra);
    }
    let body = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params });
    let headers = mcp_headers(Some(token), "write_file");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let answer = request(addr, "POST", "/mcp", &headers, &body.to_string());
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json()
}

/// The answer "approve once", sent with the question's token.
pub(super) fn approved(state: &str) -> Value {
    json!({
        "requestState": state,
        "inputResponses": {
            "toolcell/approval": { "action": "accept", "content": { "decision": "once" } }
        },
    })
}

/// An approval asked by replica one and answered through replica two runs the call once; the
/// same answer replayed through replica three is not taken (the call is asked afresh), nor is
/// a token altered by one byte, nor one sent by another tenant.
#[test]
fn an_approval_asked_by_one_replica_is_answered_through_another_once() {
    let _guard = exclusive();
    let redis = Redis::start();
    let rig = Rig::new(&["team-a", "team-b"], "");
    let replicas: Vec<Server> = (1..=3).map(|n| rig.replica(&redis, n)).collect();
    let (a, b) = (&rig.tokens[0], &rig.tokens[1]);
    let asked = write(replicas[0].addr, a, 1, "approved", json!({}));
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("a token: {asked}"))
        .to_owned();
    // Another tenant's answer with a's token, and a's token altered: asked afresh.
    let foreign = write(replicas[1].addr, b, 2, "approved", approved(&state));
    assert_eq!(
        foreign["result"]["resultType"], "input_required",
        "{foreign}"
    );
    let mut altered = state.clone().into_bytes();
    let at = altered.len() / 2;
    altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).expect("ASCII");
    let forged = write(replicas[1].addr, a, 3, "approved", approved(&altered));
    assert_eq!(forged["result"]["resultType"], "input_required", "{forged}");
    // The answer, through replica two: the call runs.
    let ran = write(replicas[1].addr, a, 4, "approved", approved(&state));
    assert_eq!(ran["result"]["isError"], false, "{ran}");
    assert_eq!(
        std::fs::read_to_string(rig.workspace("team-a").join("note.txt")).expect("written"),
        "approved"
    );
    std::fs::remove_file(rig.workspace("team-a").join("note.txt")).expect("remove");
    // Replayed through replica three: asked afresh, nothing written.
    let replayed = write(replicas[2].addr, a, 5, "approved", approved(&state));
    assert_eq!(
        replayed["result"]["resultType"], "input_required",
        "{replayed}"
    );
    assert!(!rig.workspace("team-a").join("note.txt").exists());
    // Every replica's audit together: the write ran once.
    let writes = (1..=3)
        .flat_map(|n| audit_lines(&rig.dir.path().join(format!("audit-{n}.jsonl"))))
        .filter(|line| line["tool"] == "write_file" && line["outcome"] == "result")
        .count();
    assert_eq!(writes, 1);
}

/// A stateless request of `method` with `params` and `_meta` declaring the tasks extension.
pub(super) fn with_tasks(
    addr: SocketAddr,
    token: &str,
    id: u64,
    method: &str,
    name: &str,
    params: Value,
) -> Value {
    super::stateless_with_tasks(addr, token, id, method, name, params)
}

/// Task `task`'s status, through the replica at `addr`.
pub(super) fn status(addr: SocketAddr, token: &str, id: u64, task: &str) -> Value {
    let got = with_tasks(
        addr,
        token,
        id,
        "tasks/get",
        task,
        json!({ "taskId": task }),
    );
    got["result"].clone()
}

/// A task made by replica one is polled and cancelled through replica two, and its instance
/// stops; a task whose replica is killed ends `failed` within the heartbeat's time and the
/// grace after it.
#[test]
fn tasks_are_answered_by_any_replica_and_outlive_none() {
    let _guard = exclusive();
    let redis = Redis::start();
    let rig = Rig::new(&["team-a"], "");
    let mut one = Some(rig.replica(&redis, 1));
    let two = rig.replica(&redis, 2);
    let token = &rig.tokens[0];
    let addr_one = one.as_ref().map(|one| one.addr).expect("replica one");
    let long = json!({ "name": "structured", "arguments": { "a": 1, "b": 2, "sleep_ms": 50_000 } });
    let created = with_tasks(addr_one, token, 1, "tools/call", "structured", long.clone());
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    assert_eq!(status(two.addr, token, 2, &task)["status"], "working");
    let cancelled = with_tasks(
        two.addr,
        token,
        3,
        "tasks/cancel",
        &task,
        json!({ "taskId": task }),
    );
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    let (took, ended) = within(Duration::from_secs(10), || {
        let now = status(two.addr, token, 4, &task);
        (now["status"] != "working").then_some(now)
    });
    println!("cancelled through replica two: ended {took:?} later");
    assert_eq!(ended["status"], "cancelled", "{ended}");
    // Its instance on replica one stopped (it would sleep 50 s).
    super::wait_for_slots(addr_one, Some(&rig.operator), 0);

    // A task on replica one, which is killed.
    let created = with_tasks(addr_one, token, 5, "tools/call", "structured", long);
    let task = created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    drop(one.take());
    let killed = Instant::now();
    // Heard from no more, then presumed lost after a grace in which it may still end.
    let bound = toolcell_mcp::state::HEARTBEAT_TTL
        + toolcell_mcp::state::TASK_PRESUMED_LOST_AFTER
        + Duration::from_secs(5);
    let (_, ended) = within(bound + Duration::from_secs(5), || {
        let now = status(two.addr, token, 6, &task);
        (now["status"] != "working").then_some(now)
    });
    let took = killed.elapsed();
    println!("a dead replica's task ended {took:?} after the kill: {ended}");
    assert_eq!(ended["status"], "failed", "{ended}");
    assert!(
        ended["statusMessage"]
            .as_str()
            .is_some_and(|message| message.contains("replica")),
        "{ended}"
    );
    assert!(took <= bound, "{took:?}");
}

/// `redis-server` stopped mid-run: a quota'd call is refused at once with `503` and a JSON-RPC
/// error naming the store, a call without a quota runs, and nothing hangs; started again,
/// quota'd calls are admitted again without restarting toolcell, and the outage is logged
/// once, with its end.
#[test]
fn a_store_that_goes_away_is_refused_clearly_and_comes_back() {
    let _guard = exclusive();
    let mut redis = Redis::start();
    let rig = Rig::new(&["quota", "free"], "[quota.quota]\nrate = 1000\n");
    let replica = rig.replica(&redis, 1);
    let (quota, free) = (&rig.tokens[0], &rig.tokens[1]);
    assert_eq!(sum(replica.addr, quota, 1, 0).status, 200);
    redis.stop();
    let started = Instant::now();
    let refused = sum(replica.addr, quota, 2, 0);
    let took = started.elapsed();
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.header("retry-after"), Some("1"), "{refused:?}");
    let error = &refused.json()["error"];
    assert_eq!(
        error["code"],
        toolcell_mcp::approval::STATE_UNAVAILABLE,
        "{error}"
    );
    assert!(
        error["message"]
            .as_str()
            .is_some_and(|message| message.contains("shared store")),
        "{error}"
    );
    assert!(
        refused.body.len() <= toolcell_mcp::http::quota::MAX_REFUSAL_BYTES,
        "{refused:?}"
    );
    // A bound, not a measurement: the refusal waits for the store at most its timeout.
    assert!(
        took < toolcell_mcp::state::STORE_TIMEOUT + Duration::from_secs(3),
        "{took:?}"
    );
    assert_eq!(
        sum(replica.addr, free, 3, 0).status,
        200,
        "no quota, no store needed"
    );
    redis.run();
    let (took, ()) = within(Duration::from_secs(20), || {
        (sum(replica.addr, quota, 4, 0).status == 200).then_some(())
    });
    println!("quota'd calls admitted again {took:?} after the store came back");
    // Written before that answer, but read from the server's stderr pipe by another thread:
    // waited for, not assumed already read (it was not once, with a build running beside).
    let (_, log) = within(Duration::from_secs(20), || {
        let log = replica.stderr();
        log.contains("is reachable again").then_some(log)
    });
    assert_eq!(log.matches("is unreachable").count(), 1, "{log}");
}

/// A real MCP client (PyPI `mcp`) in both eras, its requests dealt in turn to two replicas
/// sharing a store, as a round-robin balancer deals them (`tests/mcp/talking_replicas.py`):
/// a tool's question for the model is answered whichever replica the answer reaches (over
/// 2025-11-25 a POST of its own, over 2026-07-28 the call sent again); a gated question is
/// asked of the person first; a denied one is a typed error the tool reads; log messages and
/// progress arrive.
#[test]
fn a_real_client_talks_to_tools_through_two_replicas_in_both_eras() {
    let _guard = exclusive();
    let redis = Redis::start();
    let tools = tools_dir(&[
        ("talker", crate::guests::TALKER),
        ("test_sampling", crate::guests::TEST_SAMPLING),
    ]);
    let dir = tempfile::tempdir().expect("temp dir");
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", None)]);
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[tools.talker]\nclient.sample = { access = \"deny\" }\n\
         [tools.test_sampling]\nclient.sample = { access = \"allow\" }\n",
    )
    .expect("policy");
    let seal = dir.path().join("seal.key");
    let key = toolcell_mcp::seal::SealKey::random().expect("a key");
    std::fs::write(&seal, format!("{}\n", key.to_hex())).expect("seal key");
    let replica = || {
        Server::start(&[
            "--tools",
            &tools.path().to_string_lossy(),
            "--policy",
            &policy.to_string_lossy(),
            "--tokens",
            &file.to_string_lossy(),
            "--state",
            &redis.url(),
            "--seal-key-file",
            &seal.to_string_lossy(),
        ])
    };
    let (one, two) = (replica(), replica());
    let (passed, said) = crate::mcp::run_client(
        "talking_replicas.py",
        [one.url(), two.url(), tokens[0].clone()],
    );
    assert!(
        passed,
        "{said}\nreplica one:\n{}\nreplica two:\n{}",
        one.stderr(),
        two.stderr()
    );
}

/// A task whose tool asks its client waits `input_required` at every replica: made through
/// replica one, its questions are read and answered through replica two (another tenant is
/// told there is no such task, an answer to a question it did not ask is dropped), and the
/// tool, running on replica one, runs again with the answer and completes.
#[test]
fn a_tasks_questions_are_answered_through_another_replica() {
    use super::task_tools::{send, takes_tasks};
    let _guard = exclusive();
    let redis = Redis::start();
    let tools = tools_dir(&[("confirm_delete", crate::guests::CONFIRM_DELETE)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", None), ("team-b", None)]);
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        "[tools.confirm_delete]\ntask = { after_ms = 0 }\nclient.elicit = { access = \"allow\" }\n",
    )
    .expect("policy");
    let seal = dir.path().join("seal.key");
    let key = toolcell_mcp::seal::SealKey::random().expect("a key");
    std::fs::write(&seal, format!("{}\n", key.to_hex())).expect("seal key");
    let replica = || {
        Server::start(&[
            "--tools",
            &tools.path().to_string_lossy(),
            "--policy",
            &policy.to_string_lossy(),
            "--tokens",
            &file.to_string_lossy(),
            "--state",
            &redis.url(),
            "--seal-key-file",
            &seal.to_string_lossy(),
        ])
    };
    let (one, two) = (replica(), replica());
    let (a, b) = (&tokens[0], &tokens[1]);
    let created = send(
        one.addr,
        a,
        "tools/call",
        "confirm_delete",
        json!({ "name": "confirm_delete", "arguments": { "filename": "a.txt" } }),
        takes_tasks(),
    );
    let task = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let get = |addr: SocketAddr, token: &str| {
        send(
            addr,
            token,
            "tasks/get",
            &task,
            json!({ "taskId": task }),
            takes_tasks(),
        )
    };
    let (_, waiting) = within(Duration::from_secs(10), || {
        let now = get(two.addr, a);
        (now["result"]["status"] == "input_required").then_some(now)
    });
    assert_eq!(
        waiting["result"]["inputRequests"]["confirm"]["method"], "elicitation/create",
        "{waiting}"
    );
    let update = |addr: SocketAddr, token: &str, responses: Value| {
        send(
            addr,
            token,
            "tasks/update",
            &task,
            json!({ "taskId": task, "inputResponses": responses }),
            takes_tasks(),
        )
    };
    let yes = json!({ "action": "accept", "content": { "confirm": true } });
    let foreign = update(two.addr, b, json!({ "confirm": yes }));
    assert_eq!(foreign["error"]["code"], -32602, "{foreign}");
    let stray = update(two.addr, a, json!({ "other": yes }));
    assert!(stray.get("error").is_none(), "{stray}");
    assert_eq!(get(one.addr, a)["result"]["status"], "input_required");
    let answered = update(two.addr, a, json!({ "confirm": yes }));
    assert!(answered.get("error").is_none(), "{answered}");
    let (took, ended) = within(Duration::from_secs(10), || {
        let now = get(two.addr, a);
        let status = now["result"]["status"].clone();
        (status != "input_required" && status != "working").then_some(now)
    });
    println!("answered through replica two, completed {took:?} later");
    assert_eq!(ended["result"]["status"], "completed", "{ended}");
    assert_eq!(
        ended["result"]["result"]["content"][0]["text"], "Deleted.",
        "{ended}"
    );
    let late = update(one.addr, a, json!({ "confirm": yes }));
    assert_eq!(
        late["error"]["code"], -32602,
        "not waiting any more: {late}"
    );
}

/// With a shared store, an answer is relayed to the replica whose call asked only for a
/// question that call noted and no one answered yet: an answer repeated at the other replica
/// after the call took one, or after the call ended, is refused and nothing is kept for it
/// (an outsider's review filled the store at 90 MB/s with such late answers); an answer too
/// large for a tool is relayed as the error that says so, never whole.
#[test]
fn only_a_waiting_question_takes_a_relayed_answer() {
    use super::session_questions::{Asking, POLICY, answer, initialize};
    let _guard = exclusive();
    let redis = Redis::start();
    let tools = tools_dir(&[("talker", crate::guests::TALKER)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).expect("policy");
    let seal = dir.path().join("seal.key");
    let key = toolcell_mcp::seal::SealKey::random().expect("a key");
    std::fs::write(&seal, format!("{}\n", key.to_hex())).expect("seal key");
    let replica = || {
        Server::start(&[
            "--tools",
            &tools.path().to_string_lossy(),
            "--policy",
            &policy.to_string_lossy(),
            "--state",
            &redis.url(),
            "--seal-key-file",
            &seal.to_string_lossy(),
        ])
    };
    let (one, two) = (replica(), replica());
    let session = initialize(one.addr, "127.0.0.1", json!({ "elicitation": {} }));
    let form = |name: &str| json!({ "action": "accept", "content": { "name": name } });
    // Answered at the replica that asked: a second answer at the other is refused.
    let mut call = Asking::start(one.addr, &session);
    let (name, _) = call.question();
    let (status, body) = answer(one.addr, "127.0.0.1", &session, &json!(name), &form("A"));
    assert_eq!(status, 202, "{body}");
    assert_eq!(call.said()["answers"][0]["content"], json!({ "name": "A" }));
    let (status, body) = answer(two.addr, "127.0.0.1", &session, &json!(name), &form("B"));
    assert_eq!(status, 400, "a late answer at the other replica: {body}");
    // Answered at the other replica: relayed once, a second refused there and here.
    let mut call = Asking::start(one.addr, &session);
    let (name, _) = call.question();
    let (status, body) = answer(two.addr, "127.0.0.1", &session, &json!(name), &form("C"));
    assert_eq!(status, 202, "{body}");
    let (status, _) = answer(two.addr, "127.0.0.1", &session, &json!(name), &form("D"));
    assert_eq!(status, 400);
    assert_eq!(call.said()["answers"][0]["content"], json!({ "name": "C" }));
    // Too large for a tool: relayed as the error saying so.
    let mut call = Asking::start(one.addr, &session);
    let (name, _) = call.question();
    let big = json!({ "action": "accept",
                      "content": { "name": "x".repeat(toolcell::client::MAX_ANSWER_BYTES) } });
    let (status, body) = answer(two.addr, "127.0.0.1", &session, &json!(name), &big);
    assert_eq!(status, 202, "{body}");
    let said = call.said();
    assert!(said.get("ask_error").is_some(), "{said}");
    // Never answered, the call ended at its deadline: its question takes no answer after.
    let mut call = Asking::start(one.addr, &session);
    let (name, _) = call.question();
    let _ = call.until("deadline", Duration::from_secs(20));
    let (_, status) = within(Duration::from_secs(5), || {
        let (status, _) = answer(two.addr, "127.0.0.1", &session, &json!(name), &form("E"));
        (status == 400).then_some(status)
    });
    assert_eq!(status, 400);
    // Nothing is left in the store for answers no call will take.
    let kept = redis.command(&["KEYS", "toolcell:answer:*"]);
    assert!(kept.starts_with("*0"), "answers left in the store: {kept}");
}
