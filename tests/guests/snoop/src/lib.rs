//! A hostile tool: it tries every ambient authority a process would have and reports what it
//! got, as a JSON object with one field per attempt. Each field is `"denied: <error>"` when the
//! attempt failed, or what the attempt obtained.

use serde::Deserialize;
use std::io::Read as _;
use std::time::{SystemTime, UNIX_EPOCH};
use toolcell_guest::{Info, Tool, ToolError};
use wasi::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};

struct Snoop;

/// `port`: a TCP port on 127.0.0.1 the test listens on.
#[derive(Deserialize)]
struct Args {
    port: u16,
}

fn attempt<T: std::fmt::Debug, E: std::fmt::Debug>(result: Result<T, E>) -> String {
    match result {
        Ok(got) => format!("GOT {got:?}"),
        Err(error) => format!("denied: {error:?}"),
    }
}

impl Tool for Snoop {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::info(
            "snoop",
            "Tries to reach files, environment, arguments, network and clock, and reports.",
            serde_json::json!({
                "type": "object",
                "properties": { "port": { "type": "integer" } },
                "required": ["port"]
            }),
        )
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let network = wasi::sockets::instance_network::instance_network();
        let loopback = IpSocketAddress::Ipv4(Ipv4SocketAddress {
            port: args.port,
            address: (127, 0, 0, 1),
        });
        let raw_tcp = wasi::sockets::tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)
            .and_then(|socket| socket.start_connect(&network, loopback));
        let raw_udp = wasi::sockets::udp_create_socket::create_udp_socket(IpAddressFamily::Ipv4)
            .map(|_| "a udp socket");
        let lookup = wasi::sockets::ip_name_lookup::resolve_addresses(&network, "localhost")
            .and_then(|stream| {
                stream.subscribe().block();
                stream.resolve_next_address()
            });
        let mut stdin = Vec::new();
        let stdin_read = std::io::stdin()
            .read_to_end(&mut stdin)
            .map(|_| stdin.len());
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(u64::MAX);
        let report = serde_json::json!({
            "passwd": attempt(std::fs::read_to_string("/etc/passwd")),
            "root_dir": attempt(std::fs::read_dir("/").map(|d| d.count())),
            "cwd_dir": attempt(std::fs::read_dir(".").map(|d| d.count())),
            "write_file": attempt(std::fs::write("pwned.txt", "x")),
            "preopens": wasi::filesystem::preopens::get_directories().len(),
            "env": std::env::vars().collect::<Vec<_>>(),
            "args": std::env::args().collect::<Vec<_>>(),
            "tcp_std": attempt(std::net::TcpStream::connect(("127.0.0.1", args.port))),
            "tcp_raw": attempt(raw_tcp),
            "udp_raw": attempt(raw_udp),
            "lookup": attempt(lookup),
            "stdin_bytes": attempt(stdin_read),
            "wall_clock_secs": wall,
            "wasi_wall_clock_secs": wasi::clocks::wall_clock::now().seconds,
            // Nanoseconds since the monotonic clock's start: the instance's, not the host's.
            "monotonic_ns": wasi::clocks::monotonic_clock::now(),
        });
        Ok(report.to_string())
    }
}

toolcell_guest::export_tool!(Snoop);
