//! Connections that never authenticate cannot lock anyone out (issue 56): 4 loopback
//! addresses × 256 half-sent requests fill the server's 1,024 connections, and a client from a
//! fifth address still gets every call answered; 256 half-sent requests from one address fill
//! that address's share, and an authenticated client sharing the address still gets in. The
//! oldest unproven connection gives its place up; a proven one never does; a connection that
//! sends nothing is closed within `FIRST_BYTE_TIMEOUT`.

use super::{Server, call_body, connect_from, mcp_headers, request_on, tokens_file};
use crate::support::{exclusive, tools_dir};
use serde_json::json;
use std::io::{Read as _, Write as _};
use std::net::{IpAddr, TcpStream};
use std::time::{Duration, Instant};
use toolcell_mcp::http::{MAX_CONNECTIONS, MAX_CONNECTIONS_PER_PEER};

/// A server with a token, and the token.
fn server() -> (Server, String, tempfile::TempDir) {
    let tools = tools_dir(&[]);
    let dir = tempfile::tempdir().expect("temp dir");
    let (file, tokens) = tokens_file(dir.path(), &[("team-a", None)]);
    let server = Server::start(&[
        "--tools",
        &tools.path().to_string_lossy(),
        "--tokens",
        &file.to_string_lossy(),
    ]);
    drop(tools);
    (server, tokens[0].clone(), dir)
}

/// `count` connections from `from`, each having sent half a request's head.
fn half_sent(server: &Server, from: IpAddr, count: usize) -> Vec<TcpStream> {
    (0..count)
        .map(|_| {
            let mut stream = connect_from(from, server.addr).expect("connect");
            stream
                .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .expect("half a head");
            stream
        })
        .collect()
}

/// An echo call from `from`, with the token: its status.
fn echo_from(server: &Server, from: IpAddr, token: &str, id: u64) -> u16 {
    let stream = connect_from(from, server.addr).expect("connect");
    let headers = mcp_headers(Some(token), "echo");
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    request_on(
        stream,
        server.addr,
        "POST",
        "/mcp",
        &headers,
        &call_body(id, "echo", json!({ "text": "through" })),
    )
    .status
}

/// How many of `streams` the server has closed (a read sees the end, or a reset); one still
/// open has nothing to read and times out.
fn closed(streams: &mut [TcpStream]) -> usize {
    streams
        .iter()
        .filter(|stream| {
            let mut stream: &TcpStream = stream;
            stream
                .set_read_timeout(Some(Duration::from_millis(50)))
                .expect("timeout");
            let mut byte = [0u8; 1];
            match stream.read(&mut byte) {
                Ok(0) => true,
                Ok(_) => false,
                Err(error) => !matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
            }
        })
        .count()
}

#[test]
fn idle_connections_from_other_addresses_lock_no_authenticated_client_out() {
    let _guard = exclusive();
    let (server, token, _dir) = server();
    let peers = MAX_CONNECTIONS / MAX_CONNECTIONS_PER_PEER;
    let mut held: Vec<TcpStream> = (0..peers)
        .flat_map(|n| {
            half_sent(
                &server,
                IpAddr::from([127, 0, 0, 2 + n as u8]),
                MAX_CONNECTIONS_PER_PEER,
            )
        })
        .collect();
    assert_eq!(held.len(), MAX_CONNECTIONS);
    // The server is full of unproven connections: a client from a fifth address still gets
    // every call answered, each taking the place of the oldest of them.
    let fifth = IpAddr::from([127, 0, 0, 20]);
    let started = Instant::now();
    for id in 0..8 {
        assert_eq!(echo_from(&server, fifth, &token, id), 200, "call {id}");
    }
    // Within the header timeout: these were evictions, not connections timing out.
    assert!(started.elapsed() < toolcell_mcp::http::HEADER_READ_TIMEOUT);
    let gone = closed(&mut held);
    assert!(
        gone >= 8,
        "the oldest unproven connections gave way: {gone}"
    );
    drop(held);
}

#[test]
fn half_sent_requests_from_one_address_lock_no_client_of_that_address_out() {
    let _guard = exclusive();
    let (server, token, _dir) = server();
    let shared = IpAddr::from([127, 0, 0, 30]);
    // An authenticated client's connection, proven by a call, kept open (keep-alive).
    let mut proven = connect_from(shared, server.addr).expect("connect");
    let body = call_body(1, "echo", json!({ "text": "kept" }));
    let head: String = mcp_headers(Some(&token), "echo")
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let send = |stream: &mut TcpStream| {
        write!(
            stream,
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n{head}\r\n{body}",
            body.len()
        )
        .expect("send");
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        let mut answer = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stream.read(&mut chunk) {
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&chunk[..n]);
        }
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    };
    send(&mut proven);
    // The address's whole share of half-sent requests.
    let mut held = half_sent(&server, shared, MAX_CONNECTIONS_PER_PEER);
    // A new client sharing the address gets in; the oldest half-sent request gave way.
    for id in 0..4 {
        assert_eq!(
            echo_from(&server, shared, &token, 10 + id),
            200,
            "call {id}"
        );
    }
    // The proven connection kept its place, and still answers (asked before the server's idle
    // keep-alive timeout, which is the header timeout).
    send(&mut proven);
    assert!(closed(&mut held) >= 4);
    drop(held);
}

#[test]
fn a_connection_that_sends_nothing_is_closed_soon() {
    let _guard = exclusive();
    let (server, _token, _dir) = server();
    let mut silent = TcpStream::connect(server.addr).expect("connect");
    silent
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let started = Instant::now();
    let mut byte = [0u8; 1];
    let read = silent.read(&mut byte);
    let took = started.elapsed();
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // A bound, not a measurement: closed at the first byte's deadline, well before the
    // header timeout.
    assert!(
        took >= toolcell_mcp::http::connections::FIRST_BYTE_TIMEOUT
            && took < toolcell_mcp::http::HEADER_READ_TIMEOUT,
        "{took:?}"
    );
}
