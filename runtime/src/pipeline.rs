//! [`Runtime`]: the one pipeline every front end enters. The CLI, the MCP server and an
//! embedding host all call [`Runtime::handle`]; none has its own copy of dispatch or the cap.

use crate::limits::DEFAULT_RESULT_CAP;
use crate::{
    Dispatch, Registry, ToolPort, ToolRequest, ToolResponse, WasmToolPort, cap_result, dispatch,
};

/// A registry, a port and a result cap, strung together: a model's tool call in, the response
/// it should read out.
#[derive(Debug)]
pub struct Runtime<P> {
    registry: Registry,
    port: P,
    cap: usize,
}

impl<P: ToolPort> Runtime<P> {
    /// A pipeline over `registry` and `port`, capping results at [`DEFAULT_RESULT_CAP`] bytes.
    pub fn new(registry: Registry, port: P) -> Self {
        Runtime {
            registry,
            port,
            cap: DEFAULT_RESULT_CAP,
        }
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
        let response = match dispatch(&self.registry, name, arguments) {
            Dispatch::Local(text) => ToolResponse::text(text),
            Dispatch::Port { tool, arguments } => {
                self.port.call(&ToolRequest::new(id, tool, arguments))
            }
        };
        self.cap(response)
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
