//! The host's own answers that end a call before its tool runs: an unknown tool, arguments
//! too long, the gate's refusal; and a limit as a timed-out call reports it.

use crate::call::limits::MAX_ARGUMENT_BYTES;
use crate::call::proto::{DenyReason, FailureKind, ToolResponse};
use crate::call::report::{CallReport, GateDecision};
use crate::gate::Refusal;
use crate::pipeline::catalog::Catalog;

/// The report of a call the gate refused before anything ran: a denial, or (when the host ran
/// out of descriptors carrying out what it had allowed so far) an internal failure, never
/// reported as a denial.
pub(super) fn refused(refusal: Refusal) -> CallReport {
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

/// The answer to a call of a tool the catalog does not have.
pub(super) fn unknown_tool(catalog: &Catalog, name: &str) -> CallReport {
    CallReport::host_answer(ToolResponse::failed(
        FailureKind::UnknownTool,
        catalog.registry.unknown_tool(name),
    ))
}

/// The answer to arguments longer than a call may carry ([`MAX_ARGUMENT_BYTES`]), if they are.
pub(super) fn too_long(arguments: &str) -> Option<CallReport> {
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

/// `timeout` in whole milliseconds, as a timed-out call reports its limit.
pub(super) fn millis(timeout: std::time::Duration) -> u64 {
    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)
}
