//! Stage 4, execute: the decided call run (a component in a fresh instance, or a native tool),
//! what it answered held to the host's rules and its output schema, its staged file changes
//! kept, and the report of an allowed call as it ends.

use crate::call::content::{self, Part};
use crate::call::limits::{CallOptions, Limits};
use crate::call::proto::{FailureKind, ToolResponse};
use crate::call::report::{CallReport, GateDecision, Granted};
use crate::gate::grants::Grants;
use crate::gate::staging::Staging;
use crate::pipeline::catalog::{Executable, Schemas};
use crate::pipeline::native::ToolContext;
use crate::pipeline::stages::call::Call;
use crate::pipeline::{CALL_SPAN_TARGET, Runtime};
use crate::policy::ToolPolicy;
use crate::validate::{ArgumentSchema, Checked};
use crate::wasm::bindings::What;
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument as _;

impl Runtime {
    /// Stage 4, in the call's `execute` span: a component run with `grants` (borrowed: they
    /// go when the call's stages end), or a native tool handed them (taken).
    pub(super) async fn execute(
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
                // (`to_string` writes bytes straight into the text; `Display` would go through
                // the formatting machinery, a visible share of a small call. Writing a `Value`
                // cannot fail; were it to, the call fails and nothing runs.)
                let text = match serde_json::to_string(&checked) {
                    Ok(text) => text,
                    Err(error) => {
                        return CallReport::host_answer(ToolResponse::failed(
                            FailureKind::Internal,
                            format!("its arguments could not be written out again: {error}"),
                        ));
                    }
                };
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
    pub(super) async fn check_result(
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
}

/// What the tool wrote to granted files in their staging directories (`staged`) lands now,
/// and only if the call answered with a result; a failure to keep it fails the call.
pub(super) fn commit_staged(report: &mut CallReport, staged: Vec<Arc<Staging>>) {
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
pub(super) fn allowed(
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
