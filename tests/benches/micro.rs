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
    LazyLock::force(&TYPED);
    divan::main();
}

/// The instance pool's slots for every runtime here and the floor's engine: toolcell's
/// default, or `TOOLCELL_BENCH_POOL_SLOTS` (valgrind cannot reserve the address space of the
/// default pool: `tests/bench-instructions.sh` counts instructions with one slot).
fn pool_slots() -> u32 {
    std::env::var("TOOLCELL_BENCH_POOL_SLOTS")
        .ok()
        .and_then(|slots| slots.parse().ok())
        .unwrap_or(toolcell::limits::POOL_SLOTS)
}

/// The bench's 20 MB compute job, as in `calls.rs`.
const CORPUS_BYTES: usize = 20_000_000;

static ECHO: LazyLock<ToolRequest> =
    LazyLock::new(|| ToolRequest::new("bench", "echo", r#"{"text":"hello"}"#));

/// The built-in tools and the compute guest, loaded once for every case.
static PORT: LazyLock<Runtime> = LazyLock::new(|| {
    let port = Runtime::builder()
        .pool_slots(pool_slots())
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
        .pool_slots(pool_slots())
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

/// The typed probe's `echo: func(text: string) -> string` (a component of plain typed exports,
/// no toolcell contract), loaded once.
static TYPED: LazyLock<Runtime> = LazyLock::new(|| {
    let port = Runtime::builder()
        .pool_slots(pool_slots())
        .builtin_tools(false)
        .component("bench:typed_probe", toolcell_tests::guests::TYPED_PROBE)
        .build()
        .expect("typed port");
    assert_eq!(port.call(&ECHO), ToolResponse::text("hello"));
    port
});

/// What every call of the echo must do whatever the pipeline around it: its arguments parsed,
/// checked against its input schema (depth, then the compiled validator) and written out again
/// from the checked value for the guest (never the caller's text: BENCHMARKS, "The call"),
/// the value dropped. No instance, gate, cap or report: the part of
/// `echo_through_the_port`'s share over `wasmtime_alone_echo` that no restructuring removes.
#[divan::bench]
fn echo_arguments_checked_and_written_alone(bencher: Bencher) {
    let info = PORT.info("echo").expect("the built-in echo");
    let schema = toolcell::fuzzing::compile_schema_text(&info.input_schema.to_string())
        .expect("the echo's schema compiles");
    let once = || {
        let checked = schema
            .check("echo", black_box(r#"{"text":"hello"}"#))
            .expect("valid");
        serde_json::to_string(&checked).expect("a value writes")
    };
    assert_eq!(once(), r#"{"text":"hello"}"#);
    bencher.bench_local(once);
}

/// The same echo as `echo_through_the_port`, from a component read by its types: the JSON
/// lowered to a `string`, the function called by its `Val`s, the answer lifted to JSON.
/// Issue 50's target: within 1.2x of the contract's echo.
#[divan::bench]
fn typed_echo_through_the_port() -> ToolResponse {
    TYPED.call(black_box(&ECHO))
}

/// `wide-identity`'s 20-field record (integers, strings, bools, floats, an option, bytes, an
/// enum, flags and a tuple), parsed already as validation parses a call's arguments, made
/// component values and JSON again, with no instance: the conversion both ways alone. Issue
/// 50's target: under 2 µs.
#[divan::bench]
fn typed_conversion_of_twenty_fields(bencher: Bencher) {
    let conversion = toolcell::fuzzing::TypedConversion::of(
        toolcell_tests::guests::TYPED_PROBE,
        "probe_typed_shapes_0_1_0_wide-identity",
    )
    .expect("the wide function");
    let back = conversion.round_trip(&WIDE).expect("fits");
    assert_eq!(back, *WIDE);
    bencher.bench_local(|| conversion.round_trip(black_box(&WIDE)));
}

/// The wide record, as the model writes it.
#[allow(non_snake_case)]
fn WIDE_VALUE() -> serde_json::Value {
    serde_json::json!({
        "f1": 1, "f2": 2, "f3": 3, "f4": 4, "f5": 4_000_000_000u32,
        "f6": "six", "f7": "seven", "f8": "eight", "f9": "nine", "f10": "ten",
        "f11": true, "f12": false, "f13": 13.5, "f14": -14.25, "f15": -15,
        "f16": "sixteen", "f17": [1, 7, 255], "f18": "green", "f19": ["read", "write"],
        "f20": [2, 0]
    })
}

/// The arguments of a `wide-identity` call.
static WIDE: LazyLock<serde_json::Value> =
    LazyLock::new(|| serde_json::json!({ "value": WIDE_VALUE() }));

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

/// An exporter that drops what it is given: the cost of making and batching the spans, with
/// none of sending them.
#[derive(Debug)]
struct Dropped;

impl opentelemetry_sdk::trace::SpanExporter for Dropped {
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

/// The subscriber `toolcell` installs without `--otlp-endpoint`: logs at `warn`, to nowhere
/// here. The call spans are enabled by nothing.
fn logs_only()
-> impl tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span> + Send + Sync
{
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::sink)
            .with_filter(tracing_subscriber::EnvFilter::new("warn,rmcp=error")),
    )
}

/// Traces off, no subscriber at all: echo through the pipeline (as `echo_through_the_pipeline`,
/// without the audit).
#[divan::bench]
fn traces_off_no_subscriber(bencher: Bencher) {
    bencher.bench_local(|| PORT.call(black_box(&ECHO)));
}

/// Traces off, with the logs-only subscriber the CLI installs: what "off" costs.
#[divan::bench]
fn traces_off_logs_only(bencher: Bencher) {
    tracing::subscriber::with_default(logs_only(), || {
        bencher.bench_local(|| PORT.call(black_box(&ECHO)));
    });
}

/// Traces on: the CLI's subscriber with the OpenTelemetry layer over the call spans, into a
/// batch processor whose exporter drops them.
#[divan::bench]
fn traces_on(bencher: Bencher) {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(Dropped)
        .build();
    let spans = tracing_subscriber::filter::Targets::new()
        .with_target(toolcell::CALL_SPAN_TARGET, tracing::Level::INFO);
    let subscriber = logs_only().with(
        toolcell_cli::telemetry::lean_layer(
            tracing_opentelemetry::layer().with_tracer(provider.tracer("bench")),
        )
        .with_filter(spans),
    );
    tracing::subscriber::with_default(subscriber, || {
        bencher.bench_local(|| PORT.call(black_box(&ECHO)));
    });
    let _ = provider.shutdown();
}

/// The audit record of an echo call, as the pipeline makes one.
fn echo_record() -> toolcell::audit::AuditRecord {
    let report = toolcell::CallReport {
        tool: "echo".to_owned(),
        ..toolcell::CallReport::host_answer(ToolResponse::text("hello"))
    };
    toolcell::audit::AuditRecord::of(
        r#"{"text":"hello"}"#,
        &[],
        None,
        &report,
        std::time::Duration::ZERO,
    )
}

/// One audit record, chained: the lock on the head, its read, the line's hash, the append and
/// the head's rewrite; from 1, 2 and 4 threads on one handle (group commit: records that
/// arrive while one is written go together in one append and one head rewrite).
#[divan::bench(threads = [1, 2, 4])]
fn audit_record_chained(bencher: Bencher) {
    let audit =
        toolcell::audit::Audit::open(&AUDIT_DIR.path().join("chained.jsonl")).expect("audit");
    bencher.bench(|| audit.record(black_box(echo_record())).expect("record"));
}

/// The same record as one plain appended line, as the audit wrote it before the chain (one
/// lock around the file, as a shared writer needs): the floor `audit_record_chained` is
/// compared with.
#[divan::bench(threads = [1, 2, 4])]
fn audit_record_plain_append(bencher: Bencher) {
    use std::io::Write as _;
    let file = std::sync::Mutex::new(
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(AUDIT_DIR.path().join("plain.jsonl"))
            .expect("file"),
    );
    bencher.bench(|| {
        let mut line = serde_json::to_vec(black_box(&echo_record())).expect("json");
        line.push(b'\n');
        file.lock()
            .expect("the file")
            .write_all(&line)
            .expect("write");
    });
}

/// wasmtime alone, the floor under `echo_through_the_port`: the built-in echo component
/// instantiated from an `InstancePre` in a fresh store from a pooling engine configured as
/// toolcell's is (`toolcell::wasm` engine: epoch interruption, copy-on-write images, the same
/// pool sizes and resident sizes, dirty-page reset), `call` run once, the store dropped. No
/// WASI context (echo calls none of its imports; they are linked as traps), no limiter, no
/// validation, gate, cap or pipeline. What is above this in `echo_through_the_port` is ours.
#[divan::bench]
fn wasmtime_alone_echo(bencher: Bencher) {
    use wasmtime::component::{Component, Linker, Val};
    let mut pool = wasmtime::PoolingAllocationConfig::new();
    let slots = pool_slots();
    let per = |n: usize| u32::try_from(n).expect("small");
    pool.total_component_instances(slots)
        .total_core_instances(slots * per(toolcell::limits::MAX_INSTANCES))
        .total_memories(slots * per(toolcell::limits::MAX_MEMORIES))
        .total_tables(slots * per(toolcell::limits::MAX_TABLES))
        .total_stacks(slots)
        .max_core_instances_per_component(per(toolcell::limits::MAX_INSTANCES))
        .max_memories_per_component(per(toolcell::limits::MAX_MEMORIES))
        .max_tables_per_component(per(toolcell::limits::MAX_TABLES))
        .max_memory_size(toolcell::limits::POOL_MAX_MEMORY_BYTES)
        .table_elements(toolcell::limits::MAX_TABLE_ELEMENTS)
        .linear_memory_keep_resident(toolcell::limits::KEEP_RESIDENT_BYTES)
        .table_keep_resident(toolcell::limits::KEEP_RESIDENT_BYTES)
        .async_stack_keep_resident(toolcell::limits::STACK_KEEP_RESIDENT_BYTES)
        .pagemap_scan(wasmtime::Enabled::Auto);
    let mut config = wasmtime::Config::new();
    config
        .epoch_interruption(true)
        .wasm_backtrace_max_frames(None)
        .wasm_component_model(true)
        .memory_init_cow(true)
        .allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    let engine = wasmtime::Engine::new(&config).expect("engine");
    let (_, bytes) = toolcell::builtin_components()
        .iter()
        .find(|(name, _)| *name == "echo")
        .expect("the built-in echo");
    let component = Component::new(&engine, bytes).expect("component");
    let mut linker = Linker::<()>::new(&engine);
    linker
        .define_unknown_imports_as_traps(&component)
        .expect("imports");
    let pre = linker.instantiate_pre(&component).expect("pre");
    let interface = component
        .get_export_index(None, "toolcell:tool/tool@0.4.0")
        .expect("the tool interface");
    let call = component
        .get_export_index(Some(&interface), "call")
        .expect("call");
    let executor = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("executor");
    let arguments = Val::String(r#"{"text":"hello"}"#.to_owned());
    let once = || {
        executor.block_on(async {
            let mut store = wasmtime::Store::new(&engine, ());
            store.set_epoch_deadline(1);
            let instance = pre.instantiate_async(&mut store).await.expect("instance");
            let func = instance.get_func(&mut store, call).expect("call func");
            let mut results = [Val::Bool(false)];
            func.call_async(&mut store, std::slice::from_ref(&arguments), &mut results)
                .await
                .expect("call");
            matches!(&results[0], Val::Result(Ok(_)))
        })
    };
    // A failing echo would read as a speed-up.
    assert!(once(), "echo answered an error");
    bencher.bench_local(once);
}
