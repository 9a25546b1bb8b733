//! Serving one MCP client over a byte stream: stdin and stdout ([`serve`]), or any pair of
//! streams ([`serve_on`]), with toolcell's [`LineTransport`], telling the client when the
//! tools change.

use crate::transport::LineTransport;
use crate::{McpServer, SHUTDOWN_GRACE, transport};
use anyhow::Context as _;
use rmcp::ServiceExt as _;
use std::sync::Arc;
use toolcell::Runtime;

/// Serve `runtime` over stdin and stdout until stdin closes.
pub fn serve(runtime: Runtime) -> anyhow::Result<()> {
    let runtime = Arc::new(runtime);
    let executor = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("toolcell-mcp")
        .enable_time()
        .enable_io()
        .build()
        .context("starting the server's async runtime")?;
    let server = McpServer::new(Arc::clone(&runtime));
    let served = executor.block_on(async {
        // Pipes (how MCP clients start a server) are read and written from the reactor, with
        // no hand-off to a blocking thread per message; a terminal or a file falls back to
        // tokio's blocking stdio. Must be made inside the runtime.
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        serve_session(server, stdin, stdout).await
    });
    // Calls still running once the session has ended (rmcp cancelled them) have this long to
    // stop; then their tasks are dropped.
    executor.shutdown_timeout(SHUTDOWN_GRACE);
    // The runtime owns a tokio runtime of its own (the blocking pool validation uses, and the
    // executor of synchronous callers), which must be dropped outside async code: here, after
    // the server's runtime is gone. Calls run on the server's runtime, never hopping to it.
    drop(runtime);
    served
}

/// Serve `runtime` to one MCP client over `input` and `output` (any byte streams: pipes, a
/// socket, an in-memory duplex) until `input` closes, with toolcell's [`LineTransport`]. For
/// an embedder whose runtime holds its own native tools, and for tests.
pub async fn serve_on<R, W>(runtime: Arc<Runtime>, input: R, output: W) -> anyhow::Result<()>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    serve_session(McpServer::new(runtime), input, output).await
}

/// Serve `server` to one MCP client over `input` and `output` until `input` closes.
async fn serve_session<R, W>(server: McpServer, input: R, output: W) -> anyhow::Result<()>
where
    R: tokio::io::AsyncRead + Send + Unpin + 'static,
    W: tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    // A call read while nothing else is in flight is answered where it was read
    // (`transport/in_place.rs`), once the session is up.
    let lane = transport::in_place::InPlace::new(server.clone());
    let mut transport = LineTransport::new(input, output);
    if transport::in_place::enabled() {
        transport = transport.with_lane(Arc::clone(&lane));
    }
    let service = server
        .clone()
        .serve(transport)
        .await
        .context("starting the MCP session")?;
    lane.initialized(service.peer().clone());
    // Tools added, changed or removed while serving: the client is told to list them again.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let peer = service.peer().clone();
    let watching = tokio::spawn({
        async move {
            let stopped = async {
                let _ = stopped.await;
            };
            server
                .watch_tools(stopped, |_| {
                    let peer = peer.clone();
                    async move {
                        if let Err(error) = peer.notify_tool_list_changed().await {
                            tracing::debug!(%error, "the client was not told the tools changed");
                        }
                    }
                })
                .await;
        }
    });
    let served = service.waiting().await.context("serving MCP");
    let _ = stop.send(());
    let _ = watching.await;
    served?;
    Ok(())
}
