//! The stages of one call, in the order the module docs give (dispatch, validate, gate,
//! execute, check the output, cap, audit): `impl Runtime` continued, apart from the runtime's
//! construction and accessors (`mod.rs`) so that each file can be read whole.

use crate::audit::{Artifact, AuditRecord};
use crate::call::cap::cap_text;
use crate::call::content::{self, Part};
use crate::call::dispatch::{Dispatch, dispatch};
use crate::call::limits::{CallOptions, Limits, MAX_ARGUMENT_BYTES};
use crate::call::proto::{DenyReason, FailureKind, ToolResponse};
use crate::call::report::GateDecision;
use crate::call::report::{CallReport, Granted};
use crate::gate::grants::Grants;
use crate::gate::staging::Staging;
use crate::gate::{Answers, Refusal, Scope};
use crate::pipeline::catalog::{Catalog, Executable, Schemas, Tool};
use crate::pipeline::context::CallContext;
use crate::pipeline::native::ToolContext;
use crate::policy::{Access, ToolPolicy};
use crate::tool::info::{CapabilityKind, ResourceRef, ToolInfo};
use crate::validate::{ArgumentSchema, Checked};
use crate::wasm::bindings::What;
use serde_json::Value;
use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tracing::Instrument as _;

use crate::pipeline::{CALL_SPAN_TARGET, Namespace, Runtime, WriteKey, record_micros};

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
            Namespace::Tools => dispatch(&catalog.registry, name, arguments),
            // An offer is asked for by its key, never through the loop's tools.
            Namespace::Offers => Dispatch::Port {
                tool: name.to_owned(),
                arguments: arguments.to_owned(),
            },
        };
        if timed {
            record_micros(&call_span, "dispatch_us", started.elapsed());
        }
        let mut report = match dispatched {
            Dispatch::Local(text) => CallReport {
                tool: name.to_owned(),
                ..CallReport::host_answer(ToolResponse::text(text))
            },
            Dispatch::Port {
                tool,
                arguments: routed,
            } => {
                let mut report = self
                    .decide_and_run(catalog, id, (&tool, namespace), &routed, context, options)
                    .await;
                if tool != name {
                    report.via = Some(name.to_owned());
                }
                report.tool = tool;
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
            record_micros(&call_span, "cap_us", capping.elapsed());
        }
        if self.audit.is_some() {
            let auditing = Instant::now();
            self.audit(
                catalog,
                audited.as_deref().unwrap_or(arguments),
                &report,
                started,
            );
            record_micros(&call_span, "audit_us", auditing.elapsed());
        }
        report
    }

    /// Stages 2 to 4 for the tool (or offer) `name`: validate, gate, execute. Each step either
    /// passes the call on or ends it with its report.
    pub(super) async fn decide_and_run(
        &self,
        catalog: &Catalog,
        id: &str,
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
        tracing::Span::current().record("deadline_ms", limit_ms);
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

    /// The answer to a call that asks for a fuel limit this runtime cannot keep (it does not
    /// meter fuel), if it does.
    fn unmetered(&self, limits: &Limits) -> Option<CallReport> {
        if limits.fuel.is_some() && !self.wasm.meters_fuel() {
            return Some(CallReport::host_answer(ToolResponse::failed(
                FailureKind::Internal,
                "the call asks for a fuel limit, but this runtime does not meter fuel \
                 (build it with RuntimeBuilder::fuel_metering(true))",
            )));
        }
        None
    }

    /// Stage 2: the tool's schemas, and its arguments checked against its input schema within
    /// the call's deadline (from `validating`) and until its stop; else the report that ends
    /// the call.
    async fn validate<'t>(
        &self,
        call: &Call<'t>,
        arguments: &str,
        limits: &Limits,
        validating: Instant,
    ) -> Result<(&'t Schemas, Value), Box<CallReport>> {
        let schemas = match call.tool.schemas().await {
            Ok(schemas) => schemas,
            Err(why) => {
                return Err(Box::new(CallReport::host_answer(ToolResponse::failed(
                    FailureKind::Internal,
                    why,
                ))));
            }
        };
        let checked = schemas
            .input
            .check_within(
                self.io.handle(),
                call.name,
                arguments,
                validating + limits.timeout,
                call.options.stop.as_ref(),
            )
            .await;
        record_micros(
            &tracing::Span::current(),
            "validate_us",
            validating.elapsed(),
        );
        let response = match checked {
            Checked::Valid(checked) => return Ok((schemas, checked)),
            Checked::Invalid(why) => ToolResponse::failed(FailureKind::InvalidInput, why),
            Checked::TimedOut => ToolResponse::TimedOut {
                limit_ms: millis(limits.timeout),
            },
            Checked::Stopped => ToolResponse::Cancelled,
        };
        Err(Box::new(CallReport::host_answer(response)))
    }

    /// Stage 3 for a tool that asks for capabilities ([`Runtime::decide`], in the gate's span):
    /// its grants and what they grant, or the report that ends the call. A tool that asks for
    /// none is granted nothing, and nothing is decided.
    async fn gate_for(
        &self,
        call: &Call<'_>,
        tool_policy: &ToolPolicy,
        limits: &Limits,
        checked: &mut Value,
    ) -> Result<(Grants, Vec<Granted>), Box<CallReport>> {
        if call.tool.info.capabilities.is_empty() {
            return Ok((Grants::default(), Vec::new()));
        }
        self.decide(
            call.name,
            &call.tool.info,
            tool_policy,
            call.context,
            limits,
            call.options,
            checked,
        )
        .instrument(tracing::info_span!(target: CALL_SPAN_TARGET, "gate"))
        .await
    }

    /// The request's client, for the ways of talking to it the gate granted (or will ask
    /// about): only a tool that may talk to it is handed the link, and who approves a gated
    /// way (the context's approver, else the runtime's).
    fn hand_client(&self, call: &Call<'_>, grants: &mut Grants, limits: &Limits) {
        let context = call.context;
        if !grants.client.granted.is_empty() || !grants.client.gated.is_empty() {
            grants.client.tool = call.name.to_owned();
            grants.client.link = context.client().cloned();
        }
        grants.client.approval = context
            .approver()
            .or(self.gate.approver())
            .filter(|_| !grants.client.gated.is_empty())
            .map(|approver| crate::gate::grants::ClientApproval {
                approver: Arc::clone(approver),
                agent: context.agent().to_owned(),
                workspace: context.workspace().cloned(),
                wait: limits.timeout,
            });
    }

    /// A tool that is not concurrency-safe writes each path it was granted alone: two such
    /// calls on one file (a read-compare-write edit, say) run one after the other. Its write
    /// locks ([`Runtime::exclusive`]); none for a tool that is safe.
    async fn exclusive_unless_safe(
        &self,
        call: &Call<'_>,
        granted: &[Granted],
        limits: &Limits,
    ) -> Result<Vec<tokio::sync::OwnedMutexGuard<()>>, ToolResponse> {
        if call.tool.info.concurrency_safe {
            return Ok(Vec::new());
        }
        self.exclusive(call.context, granted, limits, call.options)
            .await
    }

    /// Stage 4, in the call's `execute` span: a component run with `grants` (borrowed: they
    /// go when the call's stages end), or a native tool handed them (taken).
    async fn execute(
        &self,
        call: &Call<'_>,
        grants: &mut Grants,
        limits: &Limits,
        checked: Value,
    ) -> CallReport {
        let executing = tracing::info_span!(target: CALL_SPAN_TARGET, "execute");
        match &call.tool.executable {
            Executable::Wasm(code) | Executable::Typed(code, _) | Executable::Offer(code, _) => {
                let what = match &call.tool.executable {
                    Executable::Typed(_, function) => What::Function(function),
                    Executable::Offer(_, offer) => What::Offer(&offer.operation),
                    _ => What::Call,
                };
                // The guest gets the arguments as validated (and as the gate rewrote their
                // paths), written out again from the checked value: never the caller's text,
                // which another parser could read differently (a duplicate key, a number
                // beyond f64) from the one that validated it.
                let text = checked.to_string();
                let stop = call.options.stop.as_ref();
                let grants = &*grants;
                async {
                    // Its code, loaded now if this is its first call (or it was dropped).
                    match self.wasm.prepare(code).await {
                        Ok(pre) => self.wasm.run(&pre, what, grants, limits, stop, &text).await,
                        Err(why) => CallReport::host_answer(ToolResponse::failed(
                            FailureKind::Internal,
                            format!("its code could not be loaded: {why}"),
                        )),
                    }
                }
                .instrument(executing)
                .await
            }
            Executable::Native(native) => {
                let context = call.context;
                let context = ToolContext {
                    call_id: call.id.to_owned(),
                    agent: context.agent().to_owned(),
                    workspace: context.workspace().map(|w| w.root().to_owned()),
                    cwd: context.cwd().to_owned(),
                    // Set when the call starts, by `native::run`.
                    deadline: Instant::now(),
                    stop: call.options.stop.clone().unwrap_or_default(),
                    grants: std::mem::take(grants),
                };
                crate::pipeline::native::run(native, checked, context, limits.timeout)
                    .instrument(executing)
                    .await
            }
        }
    }

    /// What the tool answered, held to the host's rules before anything of the call is kept:
    /// a result of parts to the parts' rules, every result to a declared output schema.
    async fn check_result(
        &self,
        call: &Call<'_>,
        report: &mut CallReport,
        schemas: &Schemas,
        limits: &Limits,
    ) {
        // A result of parts keeps the host's rules (media types true to their bytes, plain
        // URIs, the cap counted as the model receives it) or is a failure, checked before
        // anything of the call is kept.
        if !report.parts.is_empty()
            && let Err(why) = content::check(&report.parts, self.cap)
        {
            report.response = ToolResponse::failed(FailureKind::InvalidOutput, why);
            report.parts.clear();
        }
        // A declared output schema holds for every result, before anything of the call is
        // kept: a result that breaks it is a failure, and the tool's file changes are dropped.
        if let Some(output) = &schemas.output {
            let response = std::mem::replace(&mut report.response, ToolResponse::Cancelled);
            let (response, structured) = self
                .check_output(
                    call.name,
                    output,
                    response,
                    &report.parts,
                    limits,
                    call.options,
                )
                .await;
            report.response = response;
            report.structured = structured;
        }
    }

    /// Check a result of the tool `name` against its output schema: the response as it stands
    /// and the parsed result if it fits, else a failure ([`FailureKind::InvalidOutput`]). A
    /// structured result is never cut, so one larger than the result cap fails too. The check
    /// has the call's timeout again (the tool's run may have used all of it), and ends at the
    /// call's stop.
    pub(super) async fn check_output(
        &self,
        name: &str,
        schema: &ArgumentSchema,
        response: ToolResponse,
        parts: &[Part],
        limits: &Limits,
        options: &CallOptions,
    ) -> (ToolResponse, Option<Value>) {
        let ToolResponse::Result { text, .. } = &response else {
            return (response, None);
        };
        // A result of parts holds its JSON object as its one text part.
        let text = if parts.is_empty() {
            text.as_str()
        } else {
            let mut texts = parts.iter().filter_map(|part| match part {
                Part::Text { text } => Some(text.as_str()),
                _ => None,
            });
            match (texts.next(), texts.next()) {
                (Some(one), None) => one,
                _ => {
                    let failure = ToolResponse::failed(
                        FailureKind::InvalidOutput,
                        format!(
                            "{name} declares an output schema, so its result must hold its JSON \
                             object as one text part; this one has {}",
                            parts
                                .iter()
                                .filter(|part| matches!(part, Part::Text { .. }))
                                .count()
                        ),
                    );
                    return (failure, None);
                }
            }
        };
        if text.len() > self.cap {
            let failure = ToolResponse::failed(
                FailureKind::InvalidOutput,
                format!(
                    "the result of {name} is {} bytes, more than the result cap of {}; a \
                     structured result is never cut",
                    text.len(),
                    self.cap
                ),
            );
            return (failure, None);
        }
        let deadline = Instant::now() + limits.timeout;
        let checked = schema
            .check_within(
                self.io.handle(),
                name,
                text,
                deadline,
                options.stop.as_ref(),
            )
            .await;
        match checked {
            Checked::Valid(value) => (response, Some(value)),
            Checked::Invalid(why) => (ToolResponse::failed(FailureKind::InvalidOutput, why), None),
            Checked::TimedOut => {
                let limit_ms = u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX);
                (ToolResponse::TimedOut { limit_ms }, None)
            }
            Checked::Stopped => (ToolResponse::Cancelled, None),
        }
    }

    /// Stage 3, the gate, for the tool `name` in `context`: its grants, or the answer that ends
    /// the call. A gated resource is asked of the context's approver (else the runtime's), and
    /// the gate decides again with the answer, once per question at most. The wait ends when
    /// the call is stopped; how long a remote approver may take is the call's deadline
    /// ([`ApprovalRequest::timeout`](crate::approval::ApprovalRequest)).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn decide(
        &self,
        name: &str,
        info: &ToolInfo,
        tool_policy: &ToolPolicy,
        context: &CallContext,
        limits: &Limits,
        options: &CallOptions,
        checked: &mut Value,
    ) -> Result<(Grants, Vec<Granted>), Box<CallReport>> {
        let approver = context.approver().or(self.gate.approver());
        // The gate rewrites the path arguments it decides; a decision made again after an
        // answer starts from the arguments as validated.
        let gated = tool_policy
            .rules
            .values()
            .any(|rule| rule.access == Access::Gated)
            || info.required_client.iter().any(|kind| {
                tool_policy.rule(*kind).is_none()
                    && crate::policy::client_default(*kind) == Access::Gated
            });
        let validated = (approver.is_some() && gated).then(|| checked.clone());
        let mut answers: Answers = Vec::new();
        loop {
            let scope = Scope {
                agent: context.agent(),
                workspace: context.workspace().map(Arc::as_ref),
                cwd: context.cwd(),
                files: context.policy().map(|policy| policy.files()),
                answers: &answers,
                can_ask: approver.is_some(),
                wait: limits.timeout,
            };
            let refusal = match self.gate.decide(name, info, tool_policy, &scope, checked) {
                Ok(decided) => return Ok(decided),
                Err(refusal) => refusal,
            };
            let (Refusal::Ask(request), Some(approver), Some(validated)) =
                (&refusal, approver, &validated)
            else {
                return Err(Box::new(refused(refusal)));
            };
            // Each answer settles one question, and a tool has at most MAX_CAPABILITIES.
            if answers.len() >= crate::tool::info::MAX_CAPABILITIES {
                return Err(Box::new(CallReport::host_answer(ToolResponse::failed(
                    FailureKind::Internal,
                    "the gate asked more questions than the tool has capabilities",
                ))));
            }
            let stopped = async {
                match &options.stop {
                    Some(stop) => stop.stopped().await,
                    None => std::future::pending().await,
                }
            };
            let answer = tokio::select! {
                answer = approver.ask(request) => answer,
                () = stopped => return Err(Box::new(CallReport::host_answer(ToolResponse::Cancelled))),
            };
            let Refusal::Ask(request) = refusal else {
                return Err(Box::new(refused(refusal)));
            };
            answers.push((*request, answer));
            validated.clone_into(checked);
        }
    }

    /// The write locks of the paths in `granted` (in one order, so two calls never wait on
    /// each other), waited for no longer than the call's deadline and until its stop.
    pub(super) async fn exclusive(
        &self,
        context: &CallContext,
        granted: &[crate::call::report::Granted],
        limits: &crate::call::limits::Limits,
        options: &CallOptions,
    ) -> Result<Vec<tokio::sync::OwnedMutexGuard<()>>, ToolResponse> {
        let root = context
            .workspace()
            .map(|workspace| workspace.root().to_owned())
            .unwrap_or_default();
        let mut keys: Vec<WriteKey> = granted
            .iter()
            .filter(|grant| grant.capability == "filesystem.write")
            .map(|grant| (root.clone(), grant.resource.clone()))
            .collect();
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        keys.sort();
        keys.dedup();
        let locks: Vec<_> = {
            let mut table = crate::sync::lock(&self.write_locks);
            // Forget the locks no call holds or waits for.
            table.retain(|_, lock| Arc::strong_count(lock) > 1);
            keys.into_iter()
                .map(|key| Arc::clone(table.entry(key).or_default()))
                .collect()
        };
        let stop = options.stop.clone().unwrap_or_default();
        let all = async {
            let mut guards = Vec::with_capacity(locks.len());
            for lock in locks {
                guards.push(lock.lock_owned().await);
            }
            guards
        };
        let limit_ms = u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX);
        tokio::select! {
            guards = tokio::time::timeout(limits.timeout, all) => {
                guards.map_err(|_| ToolResponse::TimedOut { limit_ms })
            }
            () = stop.stopped() => Err(ToolResponse::Cancelled),
        }
    }

    /// Stage 5: every text in the response cut to the cap, marker included: the result, a
    /// failure's message, every free text of a denial (a tool's own refusal, a resource named
    /// by the arguments, the reason).
    pub(super) fn cap(&self, response: ToolResponse) -> ToolResponse {
        let fit = |text: String| self.fit(text);
        match response {
            ToolResponse::Result {
                text,
                class,
                untrusted,
                truncated,
            } => {
                let (text, cut) = if text.len() <= self.cap {
                    (text, false)
                } else {
                    cap_text(&text, self.cap)
                };
                ToolResponse::Result {
                    text,
                    class,
                    untrusted,
                    truncated: truncated || cut,
                }
            }
            ToolResponse::Failed { kind, message } => ToolResponse::Failed {
                kind,
                message: fit(message),
            },
            ToolResponse::Denied { reason } => ToolResponse::Denied {
                reason: match reason {
                    DenyReason::Tool { message } => DenyReason::Tool {
                        message: fit(message),
                    },
                    DenyReason::ApprovalRequired {
                        capability,
                        resource,
                    } => DenyReason::ApprovalRequired {
                        capability,
                        resource: fit(resource),
                    },
                    DenyReason::ByPerson {
                        capability,
                        resource,
                    } => DenyReason::ByPerson {
                        capability,
                        resource: fit(resource),
                    },
                    DenyReason::Unanswered {
                        capability,
                        resource,
                    } => DenyReason::Unanswered {
                        capability,
                        resource: fit(resource),
                    },
                    DenyReason::Capability {
                        capability,
                        resource,
                        why,
                    } => DenyReason::Capability {
                        capability,
                        resource: fit(resource),
                        why: fit(why),
                    },
                    DenyReason::NoGrant => DenyReason::NoGrant,
                    DenyReason::ClientLacks { capability } => {
                        DenyReason::ClientLacks { capability }
                    }
                },
            },
            other => other,
        }
    }

    /// The text a model reads for `response` (its result, or one line saying what went
    /// wrong), at most the cap, marker included, whatever the outcome. Every front end shows
    /// this.
    pub fn model_text(&self, response: &ToolResponse) -> String {
        self.fit(response.model_text())
    }

    /// `text` within the cap, marker included (untouched, not copied, when it fits).
    pub(super) fn fit(&self, text: String) -> String {
        if text.len() <= self.cap {
            text
        } else {
            cap_text(&text, self.cap).0
        }
    }

    /// The cap on what a model reads from one call, in bytes.
    pub fn cap_bytes(&self) -> usize {
        self.cap
    }

    /// Append the call's audit record, if the runtime keeps one.
    pub(super) fn audit(
        &self,
        catalog: &Catalog,
        arguments: &str,
        report: &CallReport,
        started: Instant,
    ) {
        let Some(audit) = &self.audit else {
            return;
        };
        let tool = catalog.any(&report.tool);
        let resources: Vec<(&str, CapabilityKind)> = tool
            .map(|tool| {
                tool.info
                    .capabilities
                    .iter()
                    .filter_map(|capability| match &capability.target {
                        ResourceRef::Argument(pointer) => Some((pointer.as_str(), capability.kind)),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        // The artifact the call was for (whether or not it got as far as running).
        let artifact = tool.and_then(|tool| {
            tool.digest.as_ref().map(|sha256| Artifact {
                sha256: sha256.clone(),
                manifest: tool.artifact.clone(),
                signers: tool.signers.clone(),
            })
        });
        let record = AuditRecord::of(arguments, &resources, artifact, report, started.elapsed());
        if let Err(error) = audit.record(record) {
            self.audit_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(call = %report.call_id, tool = %report.tool, %error,
                "the audit record could not be written");
        }
    }
}

/// The report of a call the gate refused before anything ran: a denial, or (when the host ran
/// out of descriptors carrying out what it had allowed so far) an internal failure, never
/// reported as a denial.
fn refused(refusal: Refusal) -> CallReport {
    match refusal {
        Refusal::Denied(reason) => CallReport {
            gate: GateDecision::Deny,
            ..CallReport::host_answer(ToolResponse::Denied { reason })
        },
        Refusal::Exhausted(why) => CallReport {
            gate: GateDecision::Allow,
            ..CallReport::host_answer(ToolResponse::failed(FailureKind::Internal, why))
        },
        // Only when someone can be asked, and then the pipeline asks: never here.
        Refusal::Ask(request) => refused(Refusal::Denied(DenyReason::ApprovalRequired {
            capability: request.capability,
            resource: request.resource,
        })),
    }
}

/// One call as stages 2 to 4 see it ([`Runtime::decide_and_run`]): what every step reads.
struct Call<'a> {
    /// The call's id.
    id: &'a str,
    /// The tool's (or offer's) name.
    name: &'a str,
    /// The tool it runs.
    tool: &'a Tool,
    /// Who calls, where, under which policy.
    context: &'a CallContext,
    /// The caller's limits and stop.
    options: &'a CallOptions,
}

impl Call<'_> {
    /// The call's own policy for the tool (a tenant's), or the runtime's.
    fn policy(&self) -> Cow<'_, ToolPolicy> {
        match self.context.policy() {
            Some(policy) => policy
                .entry(self.name)
                .map(Cow::Borrowed)
                .unwrap_or_default(),
            None => Cow::Borrowed(&self.tool.policy),
        }
    }

    /// The refusal of a tool whose component is not the one `tool_policy` pins (by sha256),
    /// if it is not.
    fn pin_broken(&self, tool_policy: &ToolPolicy) -> Option<CallReport> {
        let pin = tool_policy.sha256.as_ref()?;
        if self.tool.digest.as_ref() == Some(pin) {
            return None;
        }
        Some(refused(
            DenyReason::Capability {
                capability: "run".to_owned(),
                resource: self.name.to_owned(),
                why: match &self.tool.digest {
                    Some(digest) => format!(
                        "its component's sha256 is {digest}, but this call's policy pins \
                         it to {pin}"
                    ),
                    None => format!(
                        "this call's policy pins it to the sha256 {pin}, but it is a \
                         native tool"
                    ),
                },
            }
            .into(),
        ))
    }

    /// A tool that cannot work without a way of talking to its client that this request's
    /// client does not offer is refused before the gate asks anyone anything: that refusal,
    /// if it is one.
    fn client_lacks(&self) -> Option<CallReport> {
        let offered = self
            .context
            .client()
            .map(|link| link.offers())
            .unwrap_or_default();
        let kind = self
            .tool
            .info
            .required_client
            .iter()
            .find(|kind| !crate::gate::grants::offers(&offered, **kind))?;
        Some(CallReport {
            gate: GateDecision::Deny,
            ..CallReport::host_answer(ToolResponse::Denied {
                reason: DenyReason::ClientLacks {
                    capability: kind.name().to_owned(),
                },
            })
        })
    }
}

/// The tool (or offer) `name` in `catalog`, looked up in its namespace.
fn found<'c>(catalog: &'c Catalog, (name, namespace): (&str, Namespace)) -> Option<&'c Tool> {
    let found = match namespace {
        Namespace::Tools => catalog.tools.get(name),
        Namespace::Offers => catalog.offers.get(name),
    };
    found.map(Arc::as_ref)
}

/// The answer to a call of a tool the catalog does not have.
fn unknown_tool(catalog: &Catalog, name: &str) -> CallReport {
    CallReport::host_answer(ToolResponse::failed(
        FailureKind::UnknownTool,
        catalog.registry.unknown_tool(name),
    ))
}

/// The answer to arguments longer than a call may carry ([`MAX_ARGUMENT_BYTES`]), if they are.
fn too_long(arguments: &str) -> Option<CallReport> {
    if arguments.len() <= MAX_ARGUMENT_BYTES {
        return None;
    }
    Some(CallReport::host_answer(ToolResponse::failed(
        FailureKind::InvalidInput,
        format!(
            "the arguments are {} bytes; a call may carry at most {MAX_ARGUMENT_BYTES}",
            arguments.len()
        ),
    )))
}

/// What the tool wrote to granted files in their staging directories (`staged`) lands now,
/// and only if the call answered with a result; a failure to keep it fails the call.
fn commit_staged(report: &mut CallReport, staged: Vec<Arc<Staging>>) {
    if matches!(report.response, ToolResponse::Result { .. })
        && let Some(error) = staged.iter().find_map(|staging| staging.commit().err())
    {
        report.response = ToolResponse::failed(
            FailureKind::Tool,
            format!("the tool's changes to its granted files could not be kept: {error}"),
        );
    }
    drop(staged);
}

/// The report of a call the gate allowed, as it ends: its whole limit on a timeout, what was
/// granted, and a result's class and trust set by the policy and the tool's declaration.
fn allowed(
    call: &Call<'_>,
    mut report: CallReport,
    limit_ms: u64,
    granted: Vec<Granted>,
    tool_policy: &ToolPolicy,
) -> CallReport {
    if let ToolResponse::TimedOut { limit_ms: spent } = &mut report.response {
        // The executor had what validation left; the call's limit is the whole.
        *spent = limit_ms;
    }
    report.gate = GateDecision::Allow;
    report.granted = granted;
    if let ToolResponse::Result {
        class, untrusted, ..
    } = &mut report.response
    {
        // Set by the policy and by what the tool declares, never by the tool's answer:
        // text from the network is data, not instructions.
        *class = tool_policy.class;
        *untrusted = call.tool.info.uses_network();
    }
    report
}

/// `timeout` in whole milliseconds, as a timed-out call reports its limit.
fn millis(timeout: std::time::Duration) -> u64 {
    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)
}
