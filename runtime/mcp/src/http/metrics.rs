//! What an HTTP server has done, for Prometheus (`GET /metrics`, text format 0.0.4).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `toolcell_calls_total` | counter | `tool`, `outcome` (`result`, `failed`, `denied`, `timed_out`, `cancelled`) |
//! | `toolcell_call_duration_seconds` | histogram | `tool` |
//! | `toolcell_denials_total` | counter | `tool` |
//! | `toolcell_http_refusals_total` | counter | `reason` (`unauthenticated`, `too_many_requests`, `body_too_large`, `foreign_request`, `unreadable`, `state_unavailable`: a call that needed the shared store when it could not be reached) |
//! | `toolcell_slots_in_use` | gauge | |
//! | `toolcell_http_fast_path_total` | counter | (none: `tools/call` requests the HTTP fast path answered, not rmcp) |
//! | `toolcell_quota_refusals_total` | counter | `tenant`, `quota` (`rate`, `in_flight`, `daily_ms`, `daily_fuel`), `scope` (`tenant`, `token`) |
//! | `toolcell_quota_in_flight` | gauge | `tenant` (tenants with a quota) |
//! | `toolcell_quota_used_ms_today` | gauge | `tenant`: running time charged this UTC day |
//! | `toolcell_quota_used_fuel_today` | gauge | `tenant`: fuel charged this UTC day |
//! | `toolcell_state_up` | gauge | (with `--state`: 1 while the shared store answers, 0 while it cannot be reached) |
//!
//! A `tool` label is a registered tool's name, `find_tool`, or `unknown`: a caller cannot make
//! up label values, so the number of series is bounded by the registry. A `tenant` label is a
//! tenant of the tokens or OAuth file (the quota gauges: of the file in use now; the refusals
//! counter keeps the tenants of files read before, the operator's names all).

use crate::http::quota::{Limiter, Refused};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;
use toolcell::{Runtime, ToolResponse};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabel {
    tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuotaLabels {
    tenant: String,
    quota: &'static str,
    scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TenantLabel {
    tenant: String,
}

/// Why the HTTP front refused a request before it reached MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token, or one the server does not know.
    Unauthenticated,
    /// The client already had as many requests in flight as it may.
    TooManyRequests,
    /// The body was longer than the server reads.
    BodyTooLarge,
    /// The target, `Host` or `Origin` was malformed or not allowed (a forged request).
    ForeignRequest,
    /// The body was not one MCP message (not JSON, a batch, `params` not an object).
    Unreadable,
    /// A call needed the shared store (`--state`: a quota, an approval answer), which could
    /// not be reached.
    StateUnavailable,
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Family<ToolLabel, Histogram>,
    denials: Family<ToolLabel, Counter>,
    refusals: Family<ReasonLabel, Counter>,
    slots: Gauge,
    fast_path: Counter,
    quota_refusals: Family<QuotaLabels, Counter>,
    quota_in_flight: Family<TenantLabel, Gauge>,
    quota_used_ms: Family<TenantLabel, Gauge>,
    quota_used_fuel: Family<TenantLabel, Gauge>,
    /// With a shared store: whether it answers, and the store, to ask.
    #[cfg(feature = "state")]
    state_up: Gauge,
    #[cfg(feature = "state")]
    state: Option<Arc<crate::state::Store>>,
}

/// The histogram's buckets: 50 µs (a Rust tool's fresh instance) to about 13 s (past the
/// default deadline), in steps of 4.
fn buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.000_05, 4.0, 10)
}

impl Default for Metrics {
    fn default() -> Self {
        let calls = Family::<CallLabels, Counter>::default();
        let durations =
            Family::<ToolLabel, Histogram>::new_with_constructor(|| Histogram::new(buckets()));
        let denials = Family::<ToolLabel, Counter>::default();
        let refusals = Family::<ReasonLabel, Counter>::default();
        let slots = Gauge::default();
        let fast_path = Counter::default();
        let quota_refusals = Family::<QuotaLabels, Counter>::default();
        let quota_in_flight = Family::<TenantLabel, Gauge>::default();
        let quota_used_ms = Family::<TenantLabel, Gauge>::default();
        let quota_used_fuel = Family::<TenantLabel, Gauge>::default();
        let mut registry = Registry::default();
        registry.register(
            "toolcell_quota_refusals",
            "Calls refused by a quota, by tenant, quota and scope",
            quota_refusals.clone(),
        );
        registry.register(
            "toolcell_quota_in_flight",
            "Calls in flight under each tenant's quota",
            quota_in_flight.clone(),
        );
        registry.register(
            "toolcell_quota_used_ms_today",
            "Tool running time charged to each tenant's quota this UTC day, in milliseconds",
            quota_used_ms.clone(),
        );
        registry.register(
            "toolcell_quota_used_fuel_today",
            "Fuel charged to each tenant's quota this UTC day",
            quota_used_fuel.clone(),
        );
        registry.register(
            "toolcell_calls",
            "Calls answered, by tool and outcome",
            calls.clone(),
        );
        registry.register(
            "toolcell_call_duration_seconds",
            "How long calls took, from request to answer",
            durations.clone(),
        );
        registry.register(
            "toolcell_denials",
            "Calls the gate or the tool denied",
            denials.clone(),
        );
        registry.register(
            "toolcell_http_refusals",
            "HTTP requests refused before MCP, by reason",
            refusals.clone(),
        );
        registry.register(
            "toolcell_http_fast_path",
            "tools/call requests the HTTP front answered itself, without rmcp's per-request service",
            fast_path.clone(),
        );
        registry.register(
            "toolcell_slots_in_use",
            "Calls holding an instance slot or running now",
            slots.clone(),
        );
        Metrics {
            #[cfg(feature = "state")]
            state_up: Gauge::default(),
            #[cfg(feature = "state")]
            state: None,
            registry,
            calls,
            durations,
            denials,
            refusals,
            slots,
            fast_path,
            quota_refusals,
            quota_in_flight,
            quota_used_ms,
            quota_used_fuel,
        }
    }
}

impl Metrics {
    /// The metrics of a replica sharing `store` with others: with `toolcell_state_up`.
    #[cfg(feature = "state")]
    pub fn sharing(store: Arc<crate::state::Store>) -> Metrics {
        let mut metrics = Metrics::default();
        metrics.registry.register(
            "toolcell_state_up",
            "Whether the shared store (--state) answered the last operation",
            metrics.state_up.clone(),
        );
        metrics.state = Some(store);
        metrics
    }

    /// Count one answered call to `tool` (as the model named it) that took `took`.
    pub fn call(&self, runtime: &Runtime, tool: &str, response: &ToolResponse, took: Duration) {
        let tool =
            if tool == toolcell::registry::FIND_TOOL || runtime.registry().get(tool).is_some() {
                tool.to_owned()
            } else {
                "unknown".to_owned()
            };
        let outcome = response.outcome();
        if outcome == "denied" {
            self.denials
                .get_or_create(&ToolLabel { tool: tool.clone() })
                .inc();
        }
        self.durations
            .get_or_create(&ToolLabel { tool: tool.clone() })
            .observe(took.as_secs_f64());
        self.calls
            .get_or_create(&CallLabels { tool, outcome })
            .inc();
    }

    /// Count one `tools/call` answered by the HTTP fast path.
    pub fn fast_path(&self) {
        self.fast_path.inc();
    }

    /// Count one request refused before MCP.
    pub fn refused(&self, why: Refusal) {
        let reason = match why {
            Refusal::Unauthenticated => "unauthenticated",
            Refusal::TooManyRequests => "too_many_requests",
            Refusal::BodyTooLarge => "body_too_large",
            Refusal::ForeignRequest => "foreign_request",
            Refusal::Unreadable => "unreadable",
            Refusal::StateUnavailable => "state_unavailable",
        };
        self.refusals.get_or_create(&ReasonLabel { reason }).inc();
    }

    /// Count one call refused by a quota.
    pub fn quota_refused(&self, refused: &Refused) {
        self.quota_refusals
            .get_or_create(&QuotaLabels {
                tenant: refused.tenant.clone(),
                quota: refused.kind.name(),
                scope: refused.scope.name(),
            })
            .inc();
    }

    /// The metrics in Prometheus's text format, with the slots in use and `usage`: each of the
    /// tenants' quotas of the file in use, with its calls in flight and the day's use, as its
    /// ledger keeps them ([`crate::http::quota::Ledger::usage`]).
    pub fn render(
        &self,
        runtime: &Runtime,
        usage: &[(Arc<Limiter>, crate::http::quota::Usage)],
    ) -> String {
        self.slots
            .set(i64::try_from(runtime.calls_in_flight()).unwrap_or(i64::MAX));
        // A tenant no longer in the file leaves no gauge behind.
        self.quota_in_flight.clear();
        self.quota_used_ms.clear();
        self.quota_used_fuel.clear();
        #[cfg(feature = "state")]
        if let Some(store) = &self.state {
            self.state_up.set(i64::from(store.is_up()));
        }
        for (quota, (in_flight, used_ms, used_fuel)) in usage {
            let (in_flight, used_ms, used_fuel) = (*in_flight, *used_ms, *used_fuel);
            let label = TenantLabel {
                tenant: quota.tenant().to_owned(),
            };
            self.quota_in_flight
                .get_or_create(&label)
                .set(i64::from(in_flight));
            self.quota_used_ms
                .get_or_create(&label)
                .set(i64::try_from(used_ms).unwrap_or(i64::MAX));
            self.quota_used_fuel
                .get_or_create(&label)
                .set(i64::try_from(used_fuel).unwrap_or(i64::MAX));
        }
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}
