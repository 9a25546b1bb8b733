//! What the test modules share: a port loaded once with the built-in tools and every test
//! guest, because compiling components is the slow part of a test.

use std::sync::LazyLock;
use toolcell::{ToolPort, ToolRequest, ToolResponse, WasmToolPort};

/// A port with the built-in tools, the test guests and the default policy.
pub(crate) fn port() -> &'static WasmToolPort {
    static PORT: LazyLock<WasmToolPort> = LazyLock::new(|| {
        let port = WasmToolPort::builder()
            .component("test:counter", crate::guests::COUNTER)
            .component("test:snoop", crate::guests::SNOOP)
            .build()
            .expect("the test port builds");
        assert_eq!(port.load_errors(), &[], "every test guest loads");
        port
    });
    &PORT
}

/// Call `tool` with `arguments` on the shared port.
pub(crate) fn call(tool: &str, arguments: &str) -> ToolResponse {
    port().call(&ToolRequest::new("test", tool, arguments))
}

/// The text of a result, or a panic that shows what came back instead.
pub(crate) fn result_text(response: ToolResponse) -> String {
    match response {
        ToolResponse::Result { text, .. } => text,
        other => panic!("expected a result, got {other:?}"),
    }
}
