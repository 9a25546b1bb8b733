//! What the conformance suite's `input-required-result-*` fixtures share: a one-field form, the
//! person's answer as text, and [`fixture!`], which makes a tool of a name, a description, the
//! ways it asks and its call. Each fixture is a component of its own (one tool each), built
//! from a few lines on top of this.

use toolcell_guest::ToolError;
use toolcell_guest::client::{AskError, Elicited};

/// A form of one string field, `field`, which is required.
pub fn form(field: &str) -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": { field: { "type": "string" } },
        "required": [field]
    })
}

/// What the person answered (their form as JSON text, or what they did instead), or why
/// there is no answer, as the call's failure.
pub fn said(answer: Result<Elicited, AskError>) -> Result<String, ToolError> {
    match answer {
        Ok(elicited) => Ok(elicited
            .content
            .unwrap_or_else(|| format!("{:?}", elicited.action))),
        Err(why) => Err(unanswered(why)),
    }
}

/// The call's failure for a question that got no answer.
pub fn unanswered(why: AskError) -> ToolError {
    ToolError::Failed(format!("not answered: {why:?}"))
}

/// A tool named `$name`, described by `$description`, that asks in the ways `$feature`
/// (`ClientFeature` names) and answers a call with `$call` (a `Result<String, ToolError>`).
#[macro_export]
macro_rules! fixture {
    ($name:literal, $description:literal, [$($feature:ident),+ $(,)?], $call:block) => {
        struct Fixture;

        impl toolcell_guest::Tool for Fixture {
            type Args = serde_json::Value;
            type Output = String;

            fn describe() -> toolcell_guest::Info {
                toolcell_guest::talks(
                    toolcell_guest::info(
                        $name,
                        $description,
                        serde_json::json!({ "type": "object", "properties": {} }),
                    ),
                    &[$(toolcell_guest::ClientFeature::$feature),+],
                )
            }

            fn call(_: serde_json::Value) -> Result<String, toolcell_guest::ToolError> $call
        }

        toolcell_guest::export_tool!(Fixture);
    };
}
