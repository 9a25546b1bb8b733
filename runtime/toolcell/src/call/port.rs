//! The seam every tool call goes through.

use crate::call::limits::CallOptions;

use crate::call::report::CallReport;

use crate::call::proto::{ToolRequest, ToolResponse};

/// Runs tool calls. An agent loop holds one and hands it every call [`dispatch`](crate::registry::dispatch)
/// routes to the port; the port decides everything about the call, including whether a tool
/// of that name exists.
///
/// `call` never panics and always answers: a failure, a denial or a deadline is a
/// [`ToolResponse`], never an error of this function.
pub trait ToolPort: Send + Sync {
    /// Run one call and say what became of it.
    fn call(&self, request: &ToolRequest) -> ToolResponse;

    /// Run one call with per-call [`CallOptions`]: limits that override the tool's own, and a
    /// stop token. A port that has nothing to limit or stop (like [`FakeTools`](crate::FakeTools), which answers
    /// at once) may ignore them; that is what this default does.
    fn call_with(&self, request: &ToolRequest, options: &CallOptions) -> ToolResponse {
        let _ = options;
        self.call(request)
    }

    /// [`ToolPort::call_with`], with what the port can tell beside the response: what the
    /// guest wrote, how long it ran, what it was granted and by whom. [`Runtime`](crate::Runtime)
    /// calls this, so its audit record holds all of it. This default reports the response
    /// alone.
    fn call_with_report(&self, request: &ToolRequest, options: &CallOptions) -> CallReport {
        CallReport::host_answer(self.call_with(request, options))
    }
}

/// A shared or borrowed port is a port: a loop may hold `Arc<dyn ToolPort>`.
macro_rules! forward_tool_port {
    ($($pointer:ty),*) => {$(
        impl<P: ToolPort + ?Sized> ToolPort for $pointer {
            fn call(&self, request: &ToolRequest) -> ToolResponse {
                (**self).call(request)
            }

            fn call_with(&self, request: &ToolRequest, options: &CallOptions) -> ToolResponse {
                (**self).call_with(request, options)
            }

            fn call_with_report(&self, request: &ToolRequest, options: &CallOptions) -> CallReport {
                (**self).call_with_report(request, options)
            }
        }
    )*};
}

forward_tool_port!(&P, std::sync::Arc<P>, Box<P>);
