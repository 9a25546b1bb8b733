//! Stage 2, validate: the limits a call asks for kept or refused, and its arguments checked
//! against the tool's input schema within the call's deadline.

use crate::call::limits::Limits;
use crate::call::proto::{FailureKind, ToolResponse};
use crate::call::report::CallReport;
use crate::pipeline::catalog::Schemas;
use crate::pipeline::stages::answers::millis;
use crate::pipeline::stages::call::Call;
use crate::pipeline::{Runtime, record_micros};
use crate::validate::Checked;
use serde_json::Value;
use std::time::Instant;

impl Runtime {
    /// The answer to a call that asks for a fuel limit this runtime cannot keep (it does not
    /// meter fuel), if it does.
    pub(super) fn unmetered(&self, limits: &Limits) -> Option<CallReport> {
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
    pub(super) async fn validate<'t>(
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
        record_micros(call.span, "validate_us", validating);
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
}
