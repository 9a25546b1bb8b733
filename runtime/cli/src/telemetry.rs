//! Logs to stderr, and, when the operator names a collector, every call's spans as
//! OpenTelemetry traces sent with OTLP (protobuf over HTTP).
//!
//! Off by default: without `--otlp-endpoint` (or `$TOOLCELL_OTLP_ENDPOINT`) no exporter,
//! propagator or OpenTelemetry layer is made, and the call spans (INFO, see
//! [`toolcell::CALL_SPAN_TARGET`]) are enabled by no subscriber, which costs a call almost
//! nothing (BENCHMARKS.md, "Traces"). With it, the spans of `toolcell::call` and
//! `toolcell_mcp::trace` go to the collector in batches (the SDK's batch processor, its own
//! thread; `$OTEL_BSP_*` tune it), a call joins its caller's W3C trace, and what is still
//! queued is sent before the process exits.
//!
//! **Sampling is the operator's.** By default every call is sampled (`always_on`), whatever
//! the caller's `traceparent` says: a caller that flags its trace not-sampled (`-00`) joins its
//! spans to that trace but cannot hide its calls from the operator's traces. The operator
//! chooses otherwise with `--otlp-sampler` or the standard `$OTEL_TRACES_SAMPLER` (and
//! `$OTEL_TRACES_SAMPLER_ARG` for a ratio): `always_on`, `always_off`, `traceidratio`, or a
//! `parentbased_` one of these, which lets callers decide (see [`sampler`]). A name this
//! version does not know stops the start, rather than sampling otherwise than asked.

#[cfg(feature = "otel")]
use opentelemetry::trace::TracerProvider as _;
#[cfg(feature = "otel")]
use opentelemetry_otlp::WithExportConfig as _;
#[cfg(feature = "otel")]
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::time::Duration;
#[cfg(feature = "otel")]
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// The variable that names the collector when `--otlp-endpoint` does not.
pub const OTLP_ENDPOINT_ENV: &str = "TOOLCELL_OTLP_ENDPOINT";

/// How long one export may take before it is given up: a collector that does not answer must
/// not hold the batch thread (nor the process's exit) for long.
pub const OTLP_EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The variables the OpenTelemetry specification names for the sampler, read when
/// `--otlp-sampler` is not given.
pub const SAMPLER_ENV: &str = "OTEL_TRACES_SAMPLER";
/// The sampler's argument (a ratio from 0 to 1), for the ratio samplers.
pub const SAMPLER_ARG_ENV: &str = "OTEL_TRACES_SAMPLER_ARG";

/// The sampler when neither `--otlp-sampler` nor [`SAMPLER_ENV`] names one: every call, so
/// that no caller can keep its calls out of the operator's traces.
pub const DEFAULT_SAMPLER: &str = "always_on";

/// The service name the traces carry.
pub const SERVICE_NAME: &str = "toolcell";

/// The log filter when `$TOOLCELL_LOG` sets none: warnings, but not rmcp's, which warns of
/// every error response it sends (an unknown tool, bad arguments) and of a client that hung
/// up: the protocol's normal course, which the client already hears about.
pub const DEFAULT_LOG_FILTER: &str = "warn,rmcp=error";

/// What must be done before the process exits: send the spans still queued.
#[derive(Debug)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Send what is queued and stop the exporter (a failure is said on stderr).
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider
            && let Err(error) = provider.shutdown_with_timeout(OTLP_EXPORT_TIMEOUT)
        {
            eprintln!("toolcell: not every trace could be sent: {error}");
        }
    }
}

/// The sampler named `name` (the names of `$OTEL_TRACES_SAMPLER`), with `arg` the ratio of a
/// ratio sampler (default 1). `parentbased_*` samplers follow the caller's sampled flag where
/// a call joins a trace, and the named sampler for calls that start one.
#[cfg(feature = "otel")]
pub fn sampler(name: &str, arg: Option<&str>) -> Result<opentelemetry_sdk::trace::Sampler, String> {
    use opentelemetry_sdk::trace::Sampler;
    let ratio = || -> Result<f64, String> {
        match arg {
            None => Ok(1.0),
            Some(arg) => arg
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|ratio| (0.0..=1.0).contains(ratio))
                .ok_or_else(|| {
                    format!("the sampler's argument {arg:?} is not a ratio from 0 to 1")
                }),
        }
    };
    Ok(match name.trim() {
        "always_on" => Sampler::AlwaysOn,
        "always_off" => Sampler::AlwaysOff,
        "traceidratio" => Sampler::TraceIdRatioBased(ratio()?),
        "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
        "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
        "parentbased_traceidratio" => {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio()?)))
        }
        other => {
            return Err(format!(
                "unknown trace sampler {other:?}: use always_on, always_off, traceidratio, \
                 parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
            ));
        }
    })
}

/// The sampler the operator chose: `flag` (`--otlp-sampler`), else [`SAMPLER_ENV`], else
/// [`DEFAULT_SAMPLER`]; its ratio from [`SAMPLER_ARG_ENV`].
#[cfg(feature = "otel")]
fn chosen_sampler(flag: Option<&str>) -> Result<opentelemetry_sdk::trace::Sampler, String> {
    let from_env = std::env::var(SAMPLER_ENV)
        .ok()
        .filter(|name| !name.is_empty());
    let name = flag.map(str::to_owned).or(from_env);
    let arg = std::env::var(SAMPLER_ARG_ENV).ok();
    sampler(name.as_deref().unwrap_or(DEFAULT_SAMPLER), arg.as_deref())
}

/// Install the process's subscriber: logs to stderr filtered by `$TOOLCELL_LOG` (default
/// [`DEFAULT_LOG_FILTER`]), and, if `endpoint` (an OTLP/HTTP base URL such as
/// `http://127.0.0.1:4318`; `/v1/traces` is added unless given) is set, the traces, sampled as
/// `sampler` (`--otlp-sampler`) or the environment says ([`chosen_sampler`]).
pub fn init(endpoint: Option<&str>, sampler: Option<&str>) -> Result<Telemetry, String> {
    let filter = EnvFilter::try_from_env("TOOLCELL_LOG")
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG_FILTER));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(filter);
    let Some(endpoint) = endpoint else {
        tracing_subscriber::registry().with(logs).init();
        return Ok(Telemetry {
            #[cfg(feature = "otel")]
            provider: None,
        });
    };
    #[cfg(not(feature = "otel"))]
    {
        let _ = (endpoint, sampler, logs);
        Err(
            "traces (--otlp-endpoint) are the `otel` feature of toolcell-cli: cargo run \
             --release --features otel -- ... (or --features full)"
                .to_owned(),
        )
    }
    #[cfg(feature = "otel")]
    traces(endpoint, sampler, logs)
}

/// Install the logs and the traces sent to `endpoint`.
#[cfg(feature = "otel")]
fn traces(
    endpoint: &str,
    sampler: Option<&str>,
    logs: impl tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync + 'static,
) -> Result<Telemetry, String> {
    let url = traces_url(endpoint)?;
    let sampler = chosen_sampler(sampler)?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_timeout(OTLP_EXPORT_TIMEOUT)
        .build()
        .map_err(|error| format!("the OTLP exporter: {error}"))?;
    let provider = SdkTracerProvider::builder()
        .with_sampler(sampler)
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
    let traces =
        lean_layer(tracing_opentelemetry::layer().with_tracer(provider.tracer(SERVICE_NAME)))
            .with_filter(spans);
    tracing_subscriber::registry()
        .with(logs)
        .with(traces)
        .init();
    Ok(Telemetry {
        provider: Some(provider),
    })
}

/// The OpenTelemetry layer without the attributes `tracing-opentelemetry` adds to every span
/// by default: the source location (`code.filepath`, `code.lineno`, `code.namespace`), the
/// thread (`thread.id`, `thread.name`), the `target` (always [`toolcell::CALL_SPAN_TARGET`] or
/// the MCP server's), and the busy and idle times (taken at every poll of the call's future).
/// None of them tells an operator anything about a call that the span's own fields and its
/// start and end do not, and together they were about a fifth of what a traced call added
/// (BENCHMARKS.md, "Traces on").
#[cfg(feature = "otel")]
pub fn lean_layer<S, T>(
    layer: tracing_opentelemetry::OpenTelemetryLayer<S, T>,
) -> tracing_opentelemetry::OpenTelemetryLayer<S, T>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    T: opentelemetry::trace::Tracer + 'static,
    T::Span: Send + Sync,
{
    layer
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
}

/// The traces URL of an OTLP/HTTP endpoint: `BASE/v1/traces`, as `$OTEL_EXPORTER_OTLP_ENDPOINT`
/// is read, unless it already ends so.
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
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

    #[cfg(feature = "otel")]
    #[test]
    fn samplers_are_the_specifications_names_and_unknown_ones_are_refused() {
        use opentelemetry_sdk::trace::Sampler;
        assert!(matches!(sampler("always_on", None), Ok(Sampler::AlwaysOn)));
        assert!(matches!(
            sampler("parentbased_traceidratio", Some("0.25")),
            Ok(Sampler::ParentBased(_))
        ));
        assert!(matches!(
            sampler("traceidratio", Some("0.5")),
            Ok(Sampler::TraceIdRatioBased(ratio)) if ratio == 0.5
        ));
        assert!(sampler("traceidratio", Some("2")).is_err());
        assert!(sampler("jaeger_remote", None).is_err());
        assert!(matches!(
            sampler(DEFAULT_SAMPLER, None),
            Ok(Sampler::AlwaysOn)
        ));
    }
}
