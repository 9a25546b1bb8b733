//! [`Runtime`]: the one pipeline every front end enters. The CLI, the MCP server and an
//! embedding host all call [`Runtime::handle`] (or its report-returning forms); none has its
//! own copy of dispatch, validation, limits, the cap or the audit record.

use crate::audit::{Audit, AuditRecord};
use crate::limits::DEFAULT_RESULT_CAP;
use crate::{
    CallOptions, CallReport, Dispatch, Registry, ToolPort, ToolRequest, ToolResponse, WasmToolPort,
    cap_result, dispatch,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A registry, a port, a result cap and an optional audit record, strung together: a model's
/// tool call in, the response it should read out.
#[derive(Debug)]
pub struct Runtime<P> {
    registry: Registry,
    port: P,
    cap: usize,
    audit: Option<Audit>,
    audit_failures: AtomicU64,
}

impl<P: ToolPort> Runtime<P> {
    /// A pipeline over `registry` and `port`, capping results at [`DEFAULT_RESULT_CAP`] bytes.
    pub fn new(registry: Registry, port: P) -> Self {
        Runtime {
            registry,
            port,
            cap: DEFAULT_RESULT_CAP,
            audit: None,
            audit_failures: AtomicU64::new(0),
        }
    }

    /// This pipeline, appending a record of every call to `audit`.
    pub fn with_audit(mut self, audit: Audit) -> Self {
        self.audit = Some(audit);
        self
    }

    /// How many calls' audit records could not be written (each is also logged as an error).
    pub fn audit_failures(&self) -> u64 {
        self.audit_failures.load(Ordering::Relaxed)
    }

    /// This pipeline with results capped at `cap` bytes.
    pub fn with_cap(mut self, cap: usize) -> Self {
        self.cap = cap;
        self
    }

    /// The registry the pipeline dispatches against.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The port behind the pipeline.
    pub fn port(&self) -> &P {
        &self.port
    }

    /// Handle one call the model made: dispatch it, answer it locally or through the port,
    /// and cap the result.
    pub fn handle(&self, id: &str, name: &str, arguments: &str) -> ToolResponse {
        self.handle_with(id, name, arguments, &CallOptions::default())
    }

    /// [`Runtime::handle`] with per-call options (limits, a stop token) for the port.
    pub fn handle_with(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
        options: &CallOptions,
    ) -> ToolResponse {
        self.handle_report(id, name, arguments, options).response
    }

    /// [`Runtime::handle_with`], reporting also what the port told beside the response (for
    /// [`WasmToolPort`]: what the guest wrote, what it was granted; nothing more for an answer
    /// given without the port).
    pub fn handle_report(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
        options: &CallOptions,
    ) -> CallReport {
        let started = Instant::now();
        let report = match self.route(id, name, arguments) {
            Ok(request) => self.port.call_with_report(&request, options),
            Err(local) => CallReport::host_answer(local),
        };
        self.finish(id, name, arguments, report, started)
    }

    /// Cap the result and append the audit record: the last two steps of every call, which
    /// started at `started`.
    fn finish(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
        mut report: CallReport,
        started: Instant,
    ) -> CallReport {
        report.response = self.cap(report.response);
        let record = |audit: &Audit| {
            audit.record(&AuditRecord::of(
                id,
                name,
                arguments,
                &report,
                started.elapsed(),
            ))
        };
        if let Some(audit) = &self.audit
            && let Err(error) = record(audit)
        {
            self.audit_failures.fetch_add(1, Ordering::Relaxed);
            tracing::error!(call = id, tool = name, %error, "the audit record could not be written");
        }
        report
    }

    /// What the port should run for this call, or the answer given here without it.
    fn route(&self, id: &str, name: &str, arguments: &str) -> Result<ToolRequest, ToolResponse> {
        match dispatch(&self.registry, name, arguments) {
            Dispatch::Local(text) => Err(ToolResponse::text(text)),
            Dispatch::Port { tool, arguments } => Ok(ToolRequest::new(id, tool, arguments)),
        }
    }

    fn cap(&self, response: ToolResponse) -> ToolResponse {
        match response {
            ToolResponse::Result {
                text,
                class,
                untrusted,
                truncated,
            } => {
                let (text, cut) = cap_result(&text, self.cap);
                ToolResponse::Result {
                    text,
                    class,
                    untrusted,
                    truncated: truncated || cut,
                }
            }
            other => other,
        }
    }
}

impl Runtime<WasmToolPort> {
    /// A pipeline over a wasm port and the registry of the tools it loaded.
    pub fn wasm(port: WasmToolPort) -> Self {
        Runtime::new(port.registry().clone(), port)
    }

    /// [`Runtime::handle_report`] from async code (what the MCP server runs).
    pub async fn handle_report_async(
        &self,
        id: &str,
        name: &str,
        arguments: &str,
        options: &CallOptions,
    ) -> CallReport {
        let started = Instant::now();
        let report = match self.route(id, name, arguments) {
            Ok(request) => self.port.call_report(&request, options).await,
            Err(local) => CallReport::host_answer(local),
        };
        self.finish(id, name, arguments, report, started)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FakeTools;

    #[test]
    fn the_pipeline_dispatches_then_caps() {
        let runtime = Runtime::new(Registry::m2b(), FakeTools::new()).with_cap(3);
        let response = runtime.handle(
            "1",
            "call_tool",
            r#"{"name":"echo","arguments":{"text":"hello"}}"#,
        );
        assert_eq!(
            response,
            ToolResponse::Result {
                text: "hel\n[truncated]".to_owned(),
                class: crate::Class::Public,
                untrusted: false,
                truncated: true,
            }
        );
        let requests = runtime.port().calls();
        assert_eq!(
            requests,
            vec![ToolRequest::new("1", "echo", r#"{"text":"hello"}"#)]
        );

        // Answered locally: the port never sees it.
        let response = runtime.handle("2", "find_tool", r#"{"query":"zzz"}"#);
        assert_eq!(
            response,
            ToolResponse::Result {
                text: "No \n[truncated]".to_owned(),
                class: crate::Class::Public,
                untrusted: false,
                truncated: true,
            }
        );
        assert_eq!(runtime.port().calls().len(), 1);
    }
}
