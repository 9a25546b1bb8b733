//! Declares the `env` capability for the variable its `name` argument names, and reports every
//! variable it can see.

use toolcell_guest::{CapabilityKind, Info, Tool, ToolError};

struct Envy;

impl Tool for Envy {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let mut info = toolcell_guest::info(
            "envy",
            "Reports the environment it was given.",
            serde_json::json!({
                "type": "object",
                "properties": { "name": { "type": "string" } },
                "required": ["name"]
            }),
        );
        info.capabilities = vec![toolcell_guest::capability_from_argument(
            CapabilityKind::Env,
            "/name",
        )];
        info
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        let mut vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
        vars.sort();
        Ok(vars.join("\n"))
    }
}

toolcell_guest::export_tool!(Envy);
