//! Stage 3, the gate: a tool's capabilities decided (asking a person where the policy says
//! so), the client handed to a tool that may talk to it, and the write locks of a tool that is
//! not concurrency-safe.

use crate::call::limits::{CallOptions, Limits};
use crate::call::proto::{FailureKind, ToolResponse};
use crate::call::report::{CallReport, Granted};
use crate::gate::grants::Grants;
use crate::gate::{Answers, Refusal, Scope};
use crate::pipeline::context::CallContext;
use crate::pipeline::stages::answers::refused;
use crate::pipeline::stages::call::Call;
use crate::pipeline::{CALL_SPAN_TARGET, Runtime, WriteKey};
use crate::policy::{Access, ToolPolicy};
use crate::tool::info::ToolInfo;
use serde_json::Value;
use std::sync::Arc;
use tracing::Instrument as _;

impl Runtime {
    /// Stage 3 for a tool that asks for capabilities ([`Runtime::decide`], in the gate's span):
    /// its grants and what they grant, or the report that ends the call. A tool that asks for
    /// none is granted nothing, and nothing is decided.
    pub(super) async fn gate_for(
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

    /// The request's client, for the ways of talking to it the gate granted (or will ask
    /// about): only a tool that may talk to it is handed the link, and who approves a gated
    /// way (the context's approver, else the runtime's).
    pub(super) fn hand_client(&self, call: &Call<'_>, grants: &mut Grants, limits: &Limits) {
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
    pub(super) async fn exclusive_unless_safe(
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
}
