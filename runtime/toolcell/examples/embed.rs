//! An agent loop's tool layer: two native tools beside the built-in wasm ones, two agents in
//! two workspaces, one pipeline, one line printed per call.
//!
//! ```sh
//! cargo run --release -p toolcell --example embed
//! ```

use serde_json::json;
use std::time::Duration;
use toolcell::limits::Limits;
use toolcell::policy::{Access, Rule, ToolPolicy};
use toolcell::{
    Call, CapabilityKind, FnTool, Policy, ResourceRef, Runtime, ToolError, ToolInfo, ToolResponse,
};

fn main() -> anyhow::Result<()> {
    // Two workspaces, as two worktrees of an agent loop would be.
    let temp = tempfile::tempdir()?;
    for (name, note) in [("alice", "buy milk"), ("bob", "fix the build")] {
        std::fs::create_dir_all(temp.path().join(name))?;
        std::fs::write(temp.path().join(name).join("notes.txt"), note)?;
    }

    // A native tool that reads a file through the directory handle its grant hands it.
    let read_note = FnTool::new(
        ToolInfo::new(
            "read_note",
            "Reads a note from the workspace.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        )
        .read_only(true)
        .capability(CapabilityKind::FilesystemRead, ResourceRef::Argument("/path".into())),
        |arguments, context| async move {
            let path = arguments["path"].as_str().unwrap_or_default();
            let granted = context
                .granted(path)
                .ok_or_else(|| ToolError::Denied(format!("{path} was not granted")))?;
            granted
                .dir
                .read_to_string(granted.path)
                .map_err(|error| ToolError::NotFound(format!("{path}: {error}")))
        },
    );
    // A native tool that would sleep past its deadline.
    let slow = FnTool::new(
        ToolInfo::new("slow", "Takes its time.", json!({"type": "object"})),
        |_, _| async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok("done".to_owned())
        },
    );

    // The embedded default policy, extended in code with what the two native tools may do:
    // `read_note` reads the workspace, `slow` gets 100 ms.
    let policy = Policy::embedded_default()
        .with_tool(
            "read_note",
            ToolPolicy::default().core(true).rule_for(
                CapabilityKind::FilesystemRead,
                Rule::new(Access::Allow).roots(["."]),
            ),
        )?
        .with_tool(
            "slow",
            ToolPolicy::default().limits(Limits {
                timeout: Duration::from_millis(100),
                ..Limits::default()
            }),
        )?;
    let runtime = Runtime::builder()
        .policy(policy)
        .native(read_note)
        .native(slow)
        .build()?;

    let calls = [
        ("read_note", json!({"path": "notes.txt"})),
        ("read_file", json!({"path": "notes.txt"})),
        ("read_note", json!({"path": "../bob/notes.txt"})),
        (
            "call_tool",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        ),
        ("slow", json!({})),
    ];
    for agent in ["alice", "bob"] {
        let context = runtime.context(agent, temp.path().join(agent))?;
        for (index, (tool, arguments)) in calls.iter().enumerate() {
            let call = Call::new(format!("{agent}-{index}"), *tool, arguments.to_string())
                .in_context(context.clone());
            let report = runtime.run_blocking(&call);
            let outcome = match &report.response {
                ToolResponse::Result { text, .. } => format!("result: {}", text.trim_end()),
                other => other.model_text(),
            };
            println!("{agent:<5} {:<9} {outcome}", report.tool);
        }
    }
    println!("engines: {}", toolcell::engines_created());
    Ok(())
}
