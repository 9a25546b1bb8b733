//! One call as the steps of stages 2 to 4 see it ([`Call`]): its tool and the policy it runs
//! under, and the refusals it meets before anything is validated or gated.

use crate::call::limits::CallOptions;
use crate::call::proto::{DenyReason, ToolResponse};
use crate::call::report::{CallReport, GateDecision};
use crate::pipeline::Namespace;
use crate::pipeline::catalog::{Catalog, Tool};
use crate::pipeline::context::CallContext;
use crate::pipeline::stages::answers::refused;
use crate::policy::ToolPolicy;
use std::borrow::Cow;
use std::sync::Arc;

/// One call as stages 2 to 4 see it ([`Runtime::decide_and_run`]): what every step reads.
pub(super) struct Call<'a> {
    /// The call's id.
    pub(super) id: &'a str,
    /// The call's span (see [`CALL_SPAN_TARGET`](crate::pipeline::CALL_SPAN_TARGET)).
    pub(super) span: &'a tracing::Span,
    /// The tool's (or offer's) name.
    pub(super) name: &'a str,
    /// The tool it runs.
    pub(super) tool: &'a Tool,
    /// Who calls, where, under which policy.
    pub(super) context: &'a CallContext,
    /// The caller's limits and stop.
    pub(super) options: &'a CallOptions,
}

impl Call<'_> {
    /// The call's own policy for the tool (a tenant's), or the runtime's.
    pub(super) fn policy(&self) -> Cow<'_, ToolPolicy> {
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
    pub(super) fn pin_broken(&self, tool_policy: &ToolPolicy) -> Option<CallReport> {
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
    pub(super) fn client_lacks(&self) -> Option<CallReport> {
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
pub(super) fn found<'c>(
    catalog: &'c Catalog,
    (name, namespace): (&str, Namespace),
) -> Option<&'c Tool> {
    let found = match namespace {
        Namespace::Tools => catalog.tools.get(name),
        Namespace::Offers => catalog.offers.get(name),
    };
    found.map(Arc::as_ref)
}
