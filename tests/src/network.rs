//! `http_fetch` and the network allowlist, against small HTTP servers on loopback addresses
//! that this test starts: an allowed host works; another host, a redirect to another host, and
//! a private address reached through a wildcard are refused; none of the refused servers is
//! ever connected to. (Raw TCP and UDP stay denied for every call: `no_ambient_authority`.)

use crate::support::result_text;
use serde_json::json;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use toolcell::{DenyReason, Policy, Runtime, ToolPort, ToolRequest, ToolResponse};

/// How many connections a test server accepts before it stops by itself.
const MAX_CONNECTIONS: usize = 32;

/// A tiny HTTP/1.1 server on `ip`, answering by path, counting connections.
struct TestServer {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    /// The `Host` header of the last request.
    host: Arc<Mutex<Option<String>>>,
}

impl TestServer {
    fn start(ip: &str, redirect_to: Option<String>) -> TestServer {
        let listener = TcpListener::bind((ip, 0)).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&connections);
        let host = Arc::new(Mutex::new(None));
        let last_host = Arc::clone(&host);
        std::thread::spawn(move || {
            for stream in listener.incoming().take(MAX_CONNECTIONS) {
                let Ok(mut stream) = stream else { continue };
                counter.fetch_add(1, Ordering::SeqCst);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                // Read the headers to the blank line.
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("host")
                    {
                        *last_host.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(value.trim().to_owned());
                    }
                }
                let path = request_line
                    .split_whitespace()
                    .nth(1)
                    .unwrap_or("/")
                    .to_owned();
                let (status, location, body) = match path.as_str() {
                    "/hello" => ("200 OK", None, "hello from the test server".to_owned()),
                    "/redirect-in" => ("302 Found", Some("/hello".to_owned()), String::new()),
                    "/redirect-out" => ("302 Found", redirect_to.clone(), String::new()),
                    _ => ("404 Not Found", None, "no such page".to_owned()),
                };
                let mut response = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
                    body.len()
                );
                if let Some(location) = location {
                    response.push_str(&format!("location: {location}\r\n"));
                }
                response.push_str("\r\n");
                response.push_str(&body);
                let _ = stream.write_all(response.as_bytes());
            }
        });
        TestServer {
            addr,
            connections,
            host,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

fn port_allowing(hosts: &[String], access: &str) -> Runtime {
    let hosts: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
    let policy = Policy::from_toml(&format!(
        "[tools.http_fetch]\nnetwork = {{ access = \"{access}\", hosts = [{}] }}\n",
        hosts.join(", ")
    ))
    .expect("policy");
    crate::support::builder()
        .policy(policy)
        .build()
        .expect("port")
}

fn fetch(port: &Runtime, url: &str) -> ToolResponse {
    port.call(&ToolRequest::new(
        "t",
        "http_fetch",
        json!({ "url": url }).to_string(),
    ))
}

#[test]
fn an_allowed_host_is_fetched_and_marked_untrusted() {
    let server = TestServer::start("127.0.0.1", None);
    let port = port_allowing(&[format!("http://{}", server.addr)], "allow");
    match fetch(&port, &server.url("/hello")) {
        ToolResponse::Result {
            text, untrusted, ..
        } => {
            assert!(text.starts_with("status: 200\n"), "{text}");
            assert!(text.ends_with("hello from the test server"), "{text}");
            assert!(untrusted, "network results are untrusted");
        }
        other => panic!("expected a result, got {other:?}"),
    }
    let info = port.info("http_fetch").expect("http_fetch");
    assert_eq!(
        serde_json::to_value(&info.capabilities).expect("json"),
        json!([{ "kind": "network", "target": { "argument": "/url" } }])
    );
}

#[test]
fn another_host_is_denied_before_anything_connects() {
    let allowed = TestServer::start("127.0.0.1", None);
    let other = TestServer::start("127.0.0.2", None);
    let port = port_allowing(&[format!("http://{}", allowed.addr)], "allow");
    let response = fetch(&port, &other.url("/hello"));
    assert!(
        matches!(&response, ToolResponse::Denied { reason: DenyReason::Capability { why, .. } } if why.contains("outside")),
        "{response:?}"
    );
    assert_eq!(other.connections(), 0);
}

#[test]
fn a_redirect_to_a_denied_host_is_denied_and_never_followed() {
    let other = TestServer::start("127.0.0.2", None);
    let allowed = TestServer::start("127.0.0.1", Some(other.url("/hello")));
    let port = port_allowing(&[format!("http://{}", allowed.addr)], "allow");
    let response = fetch(&port, &allowed.url("/redirect-out"));
    match &response {
        ToolResponse::Denied {
            reason: DenyReason::Tool { message },
        } => {
            assert!(message.contains("not one this call may reach"), "{message}");
        }
        other => panic!("expected the tool's denial, got {other:?}"),
    }
    assert_eq!(allowed.connections(), 1, "the first request was made");
    assert_eq!(other.connections(), 0, "the redirect was not followed");
}

/// A host given by name is resolved once, checked, and connected to at the address that was
/// checked; the request still names the host (its `Host` header), as servers expect.
#[test]
fn a_host_by_name_is_reached_at_its_checked_address_and_keeps_its_name() {
    let server = TestServer::start("127.0.0.1", None);
    let named = format!("localhost:{}", server.addr.port());
    let port = port_allowing(&[format!("http://{named}")], "allow");
    let text = result_text(fetch(&port, &format!("http://{named}/hello")));
    assert!(text.ends_with("hello from the test server"), "{text}");
    let host = server
        .host
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    assert_eq!(host.as_deref(), Some(named.as_str()));
}

/// HTTPS is pinned too: the connection goes to the address the host checked (here a listener
/// that records what it is sent), and TLS carries the URL's name (SNI) to verify against. The
/// listener speaks no TLS, so the fetch then fails, as a typed failure, not a hang.
#[test]
fn https_goes_to_the_checked_address_and_verifies_the_name() {
    let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hello = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("the fetch connects");
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut first = vec![0; 2048];
        let read = stream.read(&mut first).unwrap_or(0);
        first.truncate(read);
        first
    });
    let named = format!("localhost:{}", addr.port());
    let port = port_allowing(&[format!("https://{named}")], "allow");
    let response = fetch(&port, &format!("https://{named}/hello"));
    let hello = hello.join().expect("listener");
    assert_eq!(
        hello.first(),
        Some(&0x16),
        "a TLS handshake record: {hello:?}"
    );
    assert!(
        hello.windows(b"localhost".len()).any(|w| w == b"localhost"),
        "the ClientHello names the host: {hello:?}"
    );
    match &response {
        ToolResponse::Failed { message, .. } => assert!(message.contains("localhost"), "{message}"),
        other => panic!("expected a failed TLS handshake, got {other:?}"),
    }
}

#[test]
fn a_redirect_within_the_allowlist_is_followed() {
    let server = TestServer::start("127.0.0.1", None);
    let port = port_allowing(&[format!("http://{}", server.addr)], "allow");
    let text = result_text(fetch(&port, &server.url("/redirect-in")));
    assert!(text.ends_with("hello from the test server"), "{text}");
    assert_eq!(server.connections(), 2);
}

#[test]
fn a_wildcard_does_not_reach_a_private_address() {
    let server = TestServer::start("127.0.0.1", None);
    let port = port_allowing(
        &[format!("http://*:{}", server.addr.port()), "*".to_owned()],
        "allow",
    );
    let response = fetch(&port, &server.url("/hello"));
    match &response {
        ToolResponse::Denied {
            reason: DenyReason::Tool { message },
        } => {
            assert!(message.contains("private or local address"), "{message}");
        }
        other => panic!("expected a denial, got {other:?}"),
    }
    assert_eq!(server.connections(), 0);
}

#[test]
fn no_rule_no_network_and_gated_is_asked_for() {
    let server = TestServer::start("127.0.0.1", None);
    let nothing = crate::support::builder().build().expect("port");
    let why = |response: ToolResponse| match response {
        ToolResponse::Denied { reason } => reason.to_string(),
        other => panic!("expected a denial, got {other:?}"),
    };
    let reason = why(fetch(&nothing, &server.url("/hello")));
    assert!(reason.contains("grants http_fetch no network"), "{reason}");
    let gated = port_allowing(&[format!("http://{}", server.addr)], "gated");
    assert!(matches!(
        fetch(&gated, &server.url("/hello")),
        ToolResponse::Denied {
            reason: DenyReason::ApprovalRequired { .. }
        }
    ));
    let bad = port_allowing(&["*".to_owned()], "allow");
    let reason = why(fetch(&bad, "ftp://example.org/"));
    assert!(reason.contains("not an http or https URL"), "{reason}");
    assert_eq!(server.connections(), 0);
}

/// A person who approves one destination of a gated rule approves that destination only: a
/// redirect to another host of the same rule is refused, and never connected to.
#[test]
fn an_approval_covers_the_approved_destination_only() {
    let other = TestServer::start("127.0.0.2", None);
    let approved = TestServer::start("127.0.0.1", Some(other.url("/hello")));
    let hosts = [
        format!("\"http://{}\"", approved.addr),
        format!("\"http://{}\"", other.addr),
    ];
    let policy = Policy::from_toml(&format!(
        "[tools.http_fetch]\nnetwork = {{ access = \"gated\", hosts = [{}] }}\n",
        hosts.join(", ")
    ))
    .expect("policy");
    let approver = Arc::new(toolcell::approval::FixedApprover::new(
        toolcell::approval::Approval::Once,
    ));
    let port = crate::support::builder()
        .policy(policy)
        .approver(approver.clone())
        .build()
        .expect("port");
    let response = fetch(&port, &approved.url("/redirect-out"));
    assert!(
        matches!(&response, ToolResponse::Denied { reason: DenyReason::Tool { message } }
            if message.contains("not one this call may reach")),
        "{response:?}"
    );
    assert_eq!(approved.connections(), 1, "the approved request was made");
    assert_eq!(other.connections(), 0, "the redirect was not followed");
    assert_eq!(
        approver.asked().len(),
        1,
        "one approval, for one destination"
    );
}
