//! Stage 6, audit: one record of the call, naming the tool that ran, its artifact, the agent
//! and the workspace.

use crate::audit::{Artifact, AuditRecord};
use crate::call::report::CallReport;
use crate::pipeline::Runtime;
use crate::pipeline::catalog::Catalog;
use crate::tool::info::{CapabilityKind, ResourceRef};
use std::sync::atomic::Ordering;
use std::time::Instant;

impl Runtime {
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
