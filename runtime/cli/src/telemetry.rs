//! Logs to stderr, and, when the operator names a collector, every call's spans as
//! OpenTelemetry traces sent with OTLP (protobuf over HTTP).
//!
//! Off by default: without `--otlp-endpoint` (or `$TOOLCELL_OTLP_ENDPOINT`) no exporter,
//! propagator or OpenTelemetry layer is made, and the call spans (INFO, see
//! [`toolcell::CALL_SPAN_TARGET`]) are enabled by no subscriber, which costs a call almost
//! nothing (BENCHMARKS.md, "Traces"). With it, the spans of `toolcell::call` and
//! `toolcell_mcp::trace` go to the collector in batches (the SDK's batch processor, its own
//! thread; `$OTEL_BSP_*` tune it), callers' W3C trace context is honoured, and what is still
//! queued is sent before the process exits.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::time::Duration;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// The variable that names the collector when `--otlp-endpoint` does not.
pub const OTLP_ENDPOINT_ENV: &str = "TOOLCELL_OTLP_ENDPOINT";

/// How long one export may take before it is given up: a collector that does not answer must
/// not hold the batch thread (nor the process's exit) for long.
pub const OTLP_EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The service name the traces carry.
pub const SERVICE_NAME: &str = "toolcell";

/// The log filter when `$TOOLCELL_LOG` sets none: warnings, but not rmcp's, which warns of
/// every error response it sends (an unknown tool, bad arguments) and of a client that hung
/// up: the protocol's normal course, which the client already hears about.
pub const DEFAULT_LOG_FILTER: &str = "warn,rmcp=error";

/// What must be done before the process exits: send the spans still queued.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Send what is queued and stop the exporter (a failure is said on stderr).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown_with_timeout(OTLP_EXPORT_TIMEOUT)
        {
            eprintln!("toolcell: not every trace could be sent: {error}");
        }
    }
}

/// Install the process's subscriber: logs to stderr filtered by `$TOOLCELL_LOG` (default
/// [`DEFAULT_LOG_FILTER`]), and, if `endpoint` (an OTLP/HTTP base URL such as
/// `http://127.0.0.1:4318`; `/v1/traces` is added unless given) is set, the traces.
pub fn init(endpoint: Option<&str>) -> Result<Telemetry, String> {
    let filter = EnvFilter::try_from_env("TOOLCELL_LOG")
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    let Some(endpoint) = endpoint else {
        tracing_subscriber::registry().with(logs).init();
        return Ok(Telemetry { provider: None });
    };
    let url = traces_url(endpoint)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_timeout(OTLP_EXPORT_TIMEOUT)
        .build()
        .map_err(|error| format!("the OTLP exporter: {error}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(SERVICE_NAME)
                .build(),
        )
        .build();
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let spans = Targets::new()
        .with_target(toolcell::CALL_SPAN_TARGET, tracing::Level::INFO)
        .with_target(toolcell_mcp::trace::TRACE_TARGET, tracing::Level::INFO);
    let traces = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(SERVICE_NAME))
        .with_filter(spans);
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
    Ok(Telemetry {
        provider: Some(provider),
    })
}

/// The traces URL of an OTLP/HTTP endpoint: `BASE/v1/traces`, as `$OTEL_EXPORTER_OTLP_ENDPOINT`
/// is read, unless it already ends so.
fn traces_url(endpoint: &str) -> Result<String, String> {
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
        return Err(format!(
            "--otlp-endpoint {endpoint:?}: give an http:// or https:// URL (OTLP over HTTP)"
        ));
    }
    let base = endpoint.trim_end_matches('/');
    Ok(if base.ends_with("/v1/traces") {
        base.to_owned()
    } else {
        format!("{base}/v1/traces")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_traces_url_is_the_base_and_v1_traces() {
        assert_eq!(
            traces_url("http://127.0.0.1:4318").as_deref(),
            Ok("http://127.0.0.1:4318/v1/traces")
        );
        assert_eq!(
            traces_url("https://collector:4318/").as_deref(),
            Ok("https://collector:4318/v1/traces")
        );
        assert_eq!(
            traces_url("http://c/v1/traces").as_deref(),
            Ok("http://c/v1/traces")
        );
        assert!(traces_url("127.0.0.1:4317").is_err());
    }
}
