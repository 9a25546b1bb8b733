//! Gives a different name every time it is described: the host must describe it once and keep
//! to that.

use toolcell_guest::{Info, Tool, ToolError};

struct Shifty;

impl Tool for Shifty {
    type Args = serde_json::Value;
    type Output = String;

    fn describe() -> Info {
        let n = wasi::random::random::get_random_u64() % 1_000_000;
        toolcell_guest::info(
            &format!("shifty_{n}"),
            "Changes its name whenever it is asked.",
            serde_json::json!({ "type": "object" }),
        )
    }

    fn call(_: serde_json::Value) -> Result<String, ToolError> {
        Ok("steady".to_owned())
    }
}

toolcell_guest::export_tool!(Shifty);
