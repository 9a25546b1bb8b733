//! The tool list as MCP serves it: made from the runtime's registry (each core schema an MCP
//! tool, annotated from what the tool says of itself), made again when the tools change, and
//! the watch that reloads the tools when their sources change.

use crate::McpServer;
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use toolcell::Runtime;
use toolcell::registry::{FIND_TOOL, ToolSchema};

/// How often a server looks at its tools directories (and lock file) for tools added, changed
/// or removed. A look reads directories and file metadata only; a second is soon enough for a
/// person installing a tool, and costs well under a millisecond with dozens of tools.
pub const RELOAD_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The tools as served, made once each time the runtime's tools change.
pub(crate) struct ToolList {
    /// What `tools/list` answers: the core tools, as MCP describes them.
    pub(crate) listed: Vec<Tool>,
    /// Every tool (listed or not) with a parameter a 2026-07-28 client mirrors into a header
    /// (`x-mcp-header`): its calls go to rmcp, which checks the headers against the body.
    #[cfg_attr(
        not(feature = "http"),
        allow(dead_code, reason = "read by the HTTP fast path only")
    )]
    pub(crate) mirrored: std::collections::HashSet<String>,
}

/// The MCP tool list of `runtime`'s tools as they stand.
pub(crate) fn tool_list(runtime: &Runtime) -> Arc<ToolList> {
    let registry = runtime.registry();
    let mirrored = registry
        .entries()
        .iter()
        .map(|entry| &entry.schema)
        .filter(|schema| {
            serde_json::to_string(&schema.parameters)
                .map_or(true, |text| text.contains("x-mcp-header"))
        })
        .map(|schema| schema.name.clone())
        .collect();
    Arc::new(ToolList {
        listed: registry
            .core_schemas()
            .into_iter()
            .map(|schema| mcp_tool(runtime, schema))
            .collect(),
        mirrored,
    })
}

impl McpServer {
    /// Make the tool list again from the runtime's tools (after a [`Runtime::reload`]); every
    /// clone of this server serves the new one.
    pub fn refresh_tools(&self) {
        let tools = tool_list(&self.runtime);
        *self.tools.write().unwrap_or_else(|p| p.into_inner()) = tools;
        self.tools_changed
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    /// Whether the tool `name` has a parameter a 2026-07-28 client mirrors into a header
    /// (`x-mcp-header`): read from the list made when the tools changed, not per call.
    #[cfg(feature = "http")]
    pub(crate) fn mirrors_headers(&self, name: &str) -> bool {
        self.tools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .mirrored
            .contains(name)
    }

    /// Reload the runtime's tools whenever their sources change (looking every
    /// [`RELOAD_POLL_INTERVAL`]), make the tool list again, and call `changed` with what
    /// changed, until `stop` completes.
    pub async fn watch_tools<F, Fut>(
        &self,
        stop: impl std::future::Future<Output = ()>,
        mut changed: F,
    ) where
        F: FnMut(toolcell::Reloaded) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let mut ticks = tokio::time::interval(RELOAD_POLL_INTERVAL);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut stop = std::pin::pin!(stop);
        loop {
            tokio::select! {
                () = &mut stop => return,
                _ = ticks.tick() => {}
            }
            match self.runtime.reload_if_changed().await {
                // Prompts and resources are listed from the runtime's catalog as it stands: a
                // change of theirs alone leaves the tool list and its listeners be.
                Ok(Some(reloaded)) if reloaded.tools_changed() => {
                    self.refresh_tools();
                    changed(reloaded).await;
                }
                Ok(_) => {}
                Err(error) => tracing::warn!("looking for changed tools: {error}"),
            }
        }
    }
}

/// A schema as an MCP tool, with hints from what the tool says about itself.
pub(crate) fn mcp_tool(runtime: &Runtime, schema: ToolSchema) -> Tool {
    let annotations = match runtime.info(&schema.name) {
        Some(info) => {
            let network = info.uses_network();
            Some(
                ToolAnnotations::new()
                    .read_only(info.read_only)
                    .destructive(!info.read_only)
                    .idempotent(info.read_only)
                    .open_world(network),
            )
        }
        // The loop's own search only reads the registry.
        None if schema.name == FIND_TOOL => Some(
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        // call_tool is whatever the tool it calls is.
        None => None,
    };
    let parameters = match schema.parameters {
        Value::Object(object) => object,
        _ => JsonObject::new(),
    };
    let mut tool = Tool::new(schema.name, schema.description, Arc::new(parameters));
    // A tool that declares its result's schema: clients may rely on `structuredContent`.
    if let Some(Value::Object(output)) = runtime
        .info(&tool.name)
        .and_then(|info| info.output_schema.clone())
    {
        tool.output_schema = Some(Arc::new(output));
    }
    match annotations {
        Some(annotations) => tool.with_annotations(annotations),
        None => tool,
    }
}
