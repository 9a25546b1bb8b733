//! The in-process cases of `just bench` under divan: per case its fastest, slowest, median and
//! mean, with divan's filters (`cargo bench -p toolcell-tests --bench micro -- port`) and its
//! thread contention runs. The side-by-side table with p99, the process model, cold starts and
//! the ratios between cases is `calls.rs`, which divan cannot print.

use divan::{Bencher, black_box};
use std::sync::LazyLock;
use toolcell::{FakeTools, Runtime, ToolPort, ToolRequest, ToolResponse};

fn main() {
    // Load the tools before anything is timed.
    LazyLock::force(&PIPELINE);
    divan::main();
}

/// The bench's 20 MB compute job, as in `calls.rs`.
const CORPUS_BYTES: usize = 20_000_000;

static ECHO: LazyLock<ToolRequest> =
    LazyLock::new(|| ToolRequest::new("bench", "echo", r#"{"text":"hello"}"#));

/// The built-in tools and the compute guest, loaded once for every case.
static PORT: LazyLock<Runtime> = LazyLock::new(|| {
    let port = Runtime::builder()
        .component("bench:compute", toolcell_tests::guests::COMPUTE)
        .build()
        .expect("port");
    // A failing echo would read as a speed-up.
    assert_eq!(port.call(&ECHO), ToolResponse::text("hello"));
    port
});

/// Where the pipeline's audit lines go, for as long as the bench runs.
static AUDIT_DIR: LazyLock<tempfile::TempDir> =
    LazyLock::new(|| tempfile::tempdir().expect("temp dir"));

/// The same tools, writing an audit line per call.
static PIPELINE: LazyLock<Runtime> = LazyLock::new(|| {
    let audit = toolcell::audit::Audit::open(&AUDIT_DIR.path().join("audit.jsonl")).expect("audit");
    let runtime = Runtime::builder()
        .build()
        .expect("runtime")
        .with_audit(audit);
    let answer = runtime.call(&toolcell::ToolRequest::new(
        "bench",
        "call_tool",
        r#"{"name":"echo","arguments":{"text":"hello"}}"#,
    ));
    assert_eq!(answer, ToolResponse::text("hello"));
    runtime
});

/// The floor: a native in-process call.
#[divan::bench]
fn native_in_process_call(bencher: Bencher) {
    let fake = FakeTools::new();
    bencher.bench_local(|| fake.call(black_box(&ECHO)));
}

/// Echo in a fresh instance through the runtime as a `ToolPort` (validation, gate, cap; no
/// audit), on one thread and on two at once.
#[divan::bench(threads = [1, 2])]
fn echo_through_the_port() -> ToolResponse {
    PORT.call(black_box(&ECHO))
}

/// Echo through `call_tool`: dispatch, validation, the gate, the port, the cap, the audit.
#[divan::bench]
fn echo_through_the_pipeline() -> ToolResponse {
    PIPELINE.call(&toolcell::ToolRequest::new(
        "bench",
        "call_tool",
        black_box(r#"{"name":"echo","arguments":{"text":"hello"}}"#),
    ))
}

/// Generate 20 MB of text and count the lines with a needle, in wasm.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn compute_in_wasm(bencher: Bencher) {
    let request = ToolRequest::new(
        "bench",
        "compute",
        format!(r#"{{"seed":7,"bytes":{CORPUS_BYTES},"needle":"needle haystack"}}"#),
    );
    bencher.bench(|| {
        let response = PORT.call(&request);
        assert!(!response.is_error(), "{response:?}");
        response
    });
}

/// The same job, the same Rust, compiled natively.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn compute_native() -> usize {
    grep_kernel::run(7, black_box(CORPUS_BYTES), black_box("needle haystack"))
}
