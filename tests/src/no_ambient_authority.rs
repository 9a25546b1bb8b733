//! A hostile guest tries everything a process could do; every attempt must fail.

use crate::support::{call, result_text};
use serde_json::Value;
use std::net::TcpListener;

fn denied(report: &Value, field: &str) {
    let got = report[field].as_str().unwrap_or_default();
    assert!(
        got.starts_with("denied: "),
        "{field}: the guest got {got:?}"
    );
}

/// The `snoop` guest reports one field per attempt; each is asserted on its own.
#[test]
pub(crate) fn snoop() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("listener");
    listener.set_nonblocking(true).expect("nonblocking");
    let port = listener.local_addr().expect("address").port();

    let text = result_text(call("snoop", &format!(r#"{{"port":{port}}}"#)));
    let report: Value = serde_json::from_str(&text).expect("the report is JSON");
    println!("{report:#}");

    denied(&report, "passwd");
    denied(&report, "root_dir");
    denied(&report, "cwd_dir");
    denied(&report, "write_file");
    assert_eq!(report["preopens"], 0, "no preopened directory");
    assert_eq!(report["env"], serde_json::json!([]), "no environment");
    assert_eq!(report["args"], serde_json::json!([]), "no arguments");
    denied(&report, "tcp_std");
    denied(&report, "tcp_raw");
    denied(&report, "udp_raw");
    denied(&report, "lookup");
    assert_eq!(report["stdin_bytes"], "GOT 0", "stdin is empty");
    assert_eq!(report["wall_clock_secs"], 0, "the wall clock is fixed");
    // The monotonic clock starts at zero with the instance: well under a second into a call
    // that does little, where the host's own monotonic clock reads its uptime.
    let monotonic = report["monotonic_ns"].as_u64().expect("monotonic_ns");
    assert!(
        monotonic < 1_000_000_000,
        "monotonic clock at {monotonic} ns"
    );
    assert_eq!(
        report["wasi_wall_clock_secs"], 0,
        "the WASI wall clock is fixed"
    );

    // The connection attempts reached nothing: the listener was never connected to.
    assert!(
        listener.accept().is_err(),
        "a guest connected to the host's listener"
    );
    assert!(
        !std::path::Path::new("pwned.txt").exists(),
        "the guest wrote into the host's working directory"
    );
}
