//! The stages of one call, in the order the module docs give (dispatch, validate, gate,
//! execute, check the output, cap, audit): `impl Runtime` continued, apart from the runtime's
//! construction and accessors (`pipeline/mod.rs`).
//!
//! This file is the overview: the call's span, dispatch, and [`Runtime::decide_and_run`], which
//! takes the call through its steps in order. Each step is in the sibling module of its stage:
//! [`validation`] (stage 2), [`gating`] (stage 3, and the write locks), [`execution`] (stage 4,
//! and the checks of what the tool answered), [`capping`] (stage 5), [`auditing`] (stage 6);
//! [`call`] is the call as those steps see it, and [`answers`] the host's own answers that end
//! a call early.

mod answers;
mod auditing;
mod call;
mod capping;
mod execution;
mod gating;
mod validation;

use crate::call::dispatch::{Routed, route};
use crate::call::limits::{CallOptions, Limits};
use crate::call::proto::ToolResponse;
use crate::call::report::{CallReport, GateDecision};
use crate::pipeline::catalog::Catalog;
use crate::pipeline::context::CallContext;
use crate::pipeline::{CALL_SPAN_TARGET, Namespace, Runtime, record_micros};
use answers::{millis, refused, too_long, unknown_tool};
use call::{Call, found};
use execution::{allowed, commit_staged};
use std::borrow::Cow;
use std::time::Instant;
use tracing::Instrument as _;

impl Runtime {
    /// [`Runtime::run`], from the call's parts, inside the call's span (see
    /// [`CALL_SPAN_TARGET`]).
    pub(super) async fn run_in(
        &self,
        id: &str,
        (name, namespace): (&str, Namespace),
        arguments: &str,
        context: &CallContext,
        options: &CallOptions,
    ) -> CallReport {
        // The tools as they stand now: this call runs with these, whatever a reload does.
        let catalog = self.catalog();
        self.run_on(&catalog, id, (name, namespace), arguments, context, options)
            .await
    }

    /// [`Runtime::run_in`] with the `catalog` the caller already holds (an offer resolved in
    /// it runs in it, whatever a reload swaps in meanwhile).
    pub(super) async fn run_on(
        &self,
        catalog: &Catalog,
        id: &str,
        (name, namespace): (&str, Namespace),
        arguments: &str,
        context: &CallContext,
        options: &CallOptions,
    ) -> CallReport {
        let span = tracing::info_span!(
            target: CALL_SPAN_TARGET,
            "call",
            tool = name,
            agent = context.agent(),
            call.id = id,
            tool.digest = tracing::field::Empty,
            deadline_ms = tracing::field::Empty,
            gate = tracing::field::Empty,
            outcome = tracing::field::Empty,
            fuel = tracing::field::Empty,
            memory_bytes = tracing::field::Empty,
            dispatch_us = tracing::field::Empty,
            validate_us = tracing::field::Empty,
            cap_us = tracing::field::Empty,
            audit_us = tracing::field::Empty,
        );
        // Boxed: the stages' future is kilobytes, and every layer above (`run_in`, a
        // `block_on`, a front end's task) would otherwise copy it as it is moved in; one
        // allocation costs less than those copies.
        let report =
            Box::pin(self.run_spanned(catalog, id, (name, namespace), arguments, context, options))
                .instrument(span.clone())
                .await;
        if !span.is_disabled() {
            if let Some(digest) = catalog.any(&report.tool).and_then(|t| t.digest.as_ref()) {
                span.record("tool.digest", digest.as_str());
            }
            if report.tool != name {
                span.record("tool", report.tool.as_str());
            }
            span.record("gate", report.gate.as_str());
            span.record("outcome", report.response.outcome());
            if let Some(fuel) = report.cost.fuel {
                span.record("fuel", fuel);
            }
            if let Some(memory) = report.cost.memory_bytes {
                span.record("memory_bytes", memory);
            }
        }
        report
    }

    /// The stages of one call: the quick ones timed on the call's span (one clock read each),
    /// the others each in a child span of the call's.
    pub(super) async fn run_spanned(
        &self,
        catalog: &Catalog,
        id: &str,
        (name, namespace): (&str, Namespace),
        arguments: &str,
        context: &CallContext,
        options: &CallOptions,
    ) -> CallReport {
        let started = Instant::now();
        let call_span = tracing::Span::current();
        // The quick stages are timed only for a span that records them: a clock read each
        // is a visible share of a small call.
        let timed = !call_span.is_disabled();
        // The arguments of what ran, as the audit record keeps them.
        let mut audited = None;
        let dispatched = match namespace {
            Namespace::Tools => route(&catalog.registry, name, arguments),
            // An offer is asked for by its key, never through the loop's tools.
            Namespace::Offers => Routed::Port {
                tool: Cow::Borrowed(name),
                arguments: Cow::Borrowed(arguments),
            },
        };
        if timed {
            record_micros(&call_span, "dispatch_us", started);
        }
        let mut report = match dispatched {
            Routed::Local(text) => CallReport {
                tool: name.to_owned(),
                ..CallReport::host_answer(ToolResponse::text(text))
            },
            Routed::Port {
                tool,
                arguments: routed,
            } => {
                let mut report = self
                    .decide_and_run(
                        catalog,
                        (id, &call_span),
                        (&tool, namespace),
                        &routed,
                        context,
                        options,
                    )
                    .await;
                if tool != name {
                    report.via = Some(name.to_owned());
                }
                report.tool = tool.into_owned();
                audited = Some(routed);
                report
            }
        };
        id.clone_into(&mut report.call_id);
        context.agent().clone_into(&mut report.agent);
        report.workspace = context
            .workspace()
            .map(|workspace| workspace.root().to_owned());
        let capping = timed.then(Instant::now);
        report.response = self.cap(report.response);
        if !matches!(report.response, ToolResponse::Result { .. }) {
            report.parts.clear();
        }
        if let Some(capping) = capping {
            record_micros(&call_span, "cap_us", capping);
        }
        if self.audit.is_some() {
            let auditing = Instant::now();
            self.audit(
                catalog,
                audited.as_deref().unwrap_or(arguments),
                &report,
                started,
            );
            record_micros(&call_span, "audit_us", auditing);
        }
        report
    }

    /// Stages 2 to 4 for the tool (or offer) `name`, of the call `id` whose span is `span`:
    /// validate, gate, execute. Each step either passes the call on or ends it with its report.
    pub(super) async fn decide_and_run(
        &self,
        catalog: &Catalog,
        (id, span): (&str, &tracing::Span),
        (name, namespace): (&str, Namespace),
        arguments: &str,
        context: &CallContext,
        options: &CallOptions,
    ) -> CallReport {
        let Some(tool) = found(catalog, (name, namespace)) else {
            return unknown_tool(catalog, name);
        };
        if let Some(report) = too_long(arguments) {
            return report;
        }
        let call = Call {
            id,
            span,
            name,
            tool,
            context,
            options,
        };
        let tool_policy = call.policy();
        if let Some(report) = call.pin_broken(&tool_policy) {
            return report;
        }
        let limits = tool_policy.limits.overridden_by(options);
        if let Some(report) = self.unmetered(&limits) {
            return report;
        }
        // The call's deadline starts here: validation is its first stage. What validation
        // spends, execution no longer has (waiting for a person's approval is not counted).
        let limit_ms = millis(limits.timeout);
        if !span.is_disabled() {
            span.record("deadline_ms", limit_ms);
        }
        let validating = Instant::now();
        let (schemas, mut checked) =
            match self.validate(&call, arguments, &limits, validating).await {
                Ok(validated) => validated,
                Err(report) => return *report,
            };
        let limits = Limits {
            timeout: limits.timeout.saturating_sub(validating.elapsed()),
            ..limits
        };
        if let Some(report) = call.client_lacks() {
            return report;
        }
        let (mut grants, granted) = match self
            .gate_for(&call, &tool_policy, &limits, &mut checked)
            .await
        {
            Ok(decided) => decided,
            Err(report) => return *report,
        };
        self.hand_client(&call, &mut grants, &limits);
        let _exclusive = match self.exclusive_unless_safe(&call, &granted, &limits).await {
            Ok(guards) => guards,
            Err(response) => {
                return CallReport {
                    gate: GateDecision::Allow,
                    granted,
                    ..CallReport::host_answer(response)
                };
            }
        };
        if let Err(refusal) = crate::gate::finish_staging(&mut grants) {
            return refused(refusal);
        }
        let staged = grants.staged.clone();
        let mut report = self.execute(&call, &mut grants, &limits, checked).await;
        self.check_result(&call, &mut report, schemas, &limits)
            .await;
        commit_staged(&mut report, staged);
        allowed(&call, report, limit_ms, granted, &tool_policy)
    }
}
