//! `component`: a component from mutated bytes, loaded and called.

use toolcell::registry::TRUNCATION_MARKER;
use toolcell::{Runtime, ToolPort as _, ToolRequest, ToolResponse};

/// Load `data` as a component into a runtime of its own (no built-in tools, no compile cache,
/// one instance slot). Building never fails because of the component; a component that does
/// not load is exactly one [`Runtime::load_errors`] entry naming it, and none is registered; one
/// that loads is its registered tools (one for the contract, one per function served for a
/// component of plain typed exports, whose functions left out are load errors naming it), and
/// a call to each answers a typed response whose text respects the result cap.
pub fn check_component(data: &[u8]) -> Result<(), String> {
    load_component(data).map(drop)
}

/// What became of a component in [`check_component`].
#[derive(Debug, Clone, PartialEq)]
pub enum ComponentOutcome {
    /// It was refused at load, for this reason.
    Refused(String),
    /// It loaded, its first tool of this name, and a call with `{"text":"hi"}` answered this.
    Answered(String, ToolResponse),
}

/// The load and call of [`check_component`], checked as it says.
pub fn load_component(data: &[u8]) -> Result<ComponentOutcome, String> {
    let runtime = Runtime::builder()
        .builtin_tools(false)
        .cache_dir(None)
        .cache_key_file(None)
        .pool_slots(1)
        .component("fuzz", data.to_vec())
        .build()
        .map_err(|error| format!("the runtime did not build: {error:#}"))?;
    let errors = runtime.load_errors();
    let registry = runtime.registry();
    match (errors, registry.entries()) {
        ([error], []) => {
            if error.source != "fuzz" || error.message.is_empty() {
                return Err(format!("load error {error:?}"));
            }
            Ok(ComponentOutcome::Refused(error.message.clone()))
        }
        // A component of the contract is one tool; one of plain typed exports is a tool per
        // function, beside the functions left out (each a load error naming it and why).
        (errors, entries) if !entries.is_empty() => {
            if let Some(error) = errors
                .iter()
                .find(|error| error.source != "fuzz" || error.message.is_empty())
            {
                return Err(format!("load error {error:?}"));
            }
            let mut first = None;
            for entry in entries {
                let name = entry.schema.name.clone();
                let response = runtime.call(&ToolRequest::new("fuzz-1", &name, r#"{"text":"hi"}"#));
                match &response {
                    ToolResponse::Result {
                        text, truncated, ..
                    } => {
                        if text.len() > runtime.cap_bytes() {
                            return Err(format!("{name}: a result beyond the cap: {response:?}"));
                        }
                        if *truncated && !text.ends_with(TRUNCATION_MARKER) {
                            return Err(format!("{name}: cut without the marker: {response:?}"));
                        }
                    }
                    ToolResponse::Failed { message, .. } if message.is_empty() => {
                        return Err(format!("{name}: a failure that says nothing"));
                    }
                    _ => {}
                }
                first.get_or_insert(ComponentOutcome::Answered(name, response));
            }
            first.ok_or_else(|| "no tool".to_owned())
        }
        (errors, entries) => Err(format!(
            "{} load errors and {} tools: {errors:?}",
            errors.len(),
            entries.len()
        )),
    }
}
