//! The WASI context of one call: exactly that call's grants, and nothing ambient.
//!
//! A guest's WASI context is built from one call's [`Grants`] only, by `WasiSpec::builder`: in
//! `CallState::new` when the call has directories to preopen, otherwise the first time the
//! guest reaches WASI in that call (most small tools never do, and wasmtime-wasi's context is
//! a visible share of a small call; BENCHMARKS "Where the time goes"). By default it grants
//! nothing:
//!
//! - no preopened directories, so no file system at all;
//! - no environment variables and no arguments;
//! - stdin empty; stdout and stderr captured into bounded in-memory buffers (never the host's);
//! - TCP and UDP disabled, every socket address refused, name lookup disabled; `wasi:http`
//!   linked, but every request denied unless the call was granted hosts (`wasm/net.rs`);
//! - a wall clock fixed at [`FIXED_WALL_CLOCK`] unless the call is granted the clock;
//! - a monotonic clock that starts at zero with the context (it measures, but tells no date);
//! - randomness, which grants no authority.
//!
//! What a [`Grants`] adds (a preopened directory, read-only or read-write; environment variables
//! by name; the real clock) is added here and nowhere else. Inside every preopen, what the
//! grants' deny-read list names is not there for the guest (`wasm/guest_fs.rs`).

use crate::call::limits::{CallLimiter, Limits};
use crate::call::report::Captured;
use crate::gate::grants::FIXED_WALL_CLOCK;
use crate::gate::grants::Grants;
use crate::wasm::bindings::generated::toolcell::tool::client as wit;
use bytes::Bytes;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{FsPerms, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// How many bytes of a guest's stdout, and separately of its stderr, are kept. Guest output is
/// diagnostics, not the result; this bounds the host memory a chatty or hostile guest can
/// take. Writes past it are accepted and dropped, and the capture says it was cut.
pub const STDIO_CAPTURE_BYTES: usize = 64 * 1024;

/// Everything a call's `Store` holds: its WASI context, its resources, its limiter and its
/// captured output.
pub(crate) struct CallState {
    /// The WASI context, once built (at once when the call has preopens, else on the guest's
    /// first use of WASI).
    wasi: Option<WasiCtx>,
    /// What it is built from.
    spec: WasiSpec,
    table: ResourceTable,
    pub(crate) limiter: CallLimiter,
    /// The guest's stdout and stderr, made with its WASI context: a guest that never reaches
    /// WASI has written nothing, and its call makes neither.
    outputs: Option<Outputs>,
    /// A granted directory that could not be preopened (the call must not run without it).
    pub(crate) unopened: Option<String>,
    /// The names hidden in every preopen (`wasm/guest_fs.rs`).
    pub(crate) deny_read: crate::policy::files::DenyRead,
    /// The runtime's protected files, hidden in every preopen too (`wasm/guest_fs.rs`).
    pub(crate) protected: std::sync::Arc<[crate::hostfs::OwnFile]>,
    /// The workspace's credential files with other names, by identity (`gate/secrets.rs`).
    pub(crate) credentials: crate::gate::secrets::Identities,
    /// The real path of the directory each open directory stream lists, by the stream's
    /// resource slot (`wasm/guest_fs.rs`), while there are protected files to hide.
    pub(crate) listings: std::collections::HashMap<u32, std::path::PathBuf>,
    http: wasmtime_wasi_http::WasiHttpCtx,
    hooks: crate::wasm::net::NetworkHooks,
    /// The `wasi:config/store` values the call was granted, by key (`wasm/config.rs`).
    pub(crate) config: Vec<(String, String)>,
    /// The call's seat at its client: what it may send and ask, and what it has (`wasm/client.rs`).
    pub(crate) client: crate::wasm::client::ClientSeat,
}

impl CallState {
    /// The state of a fresh call holding exactly `grants`, limited by `limits`.
    ///
    /// The WASI context itself is built here only when the call has directories to preopen (a
    /// directory that cannot be opened must stop the call before it runs); otherwise it is
    /// built from this call's grants the first time the guest reaches WASI (see
    /// [`WasiSpec`]). A guest that never does (many small tools never read a clock, a
    /// variable or a stream) does not pay for one: wasmtime-wasi's builder makes two sets of
    /// clocks, random sources and boxed streams per context.
    pub(crate) fn new(grants: &Grants, limits: &Limits) -> CallState {
        let mut outputs = None;
        let spec = WasiSpec {
            clock: grants.clock,
            env: grants.env.clone(),
        };
        let mut unopened = None;
        let wasi = if grants.preopens.is_empty() {
            None
        } else {
            let mut builder = spec.builder(outputs.get_or_insert_with(Outputs::new));
            for preopen in &grants.preopens {
                let perms = if preopen.writable {
                    FsPerms::ReadWrite
                } else {
                    FsPerms::ReadOnly
                };
                // wasmtime opens a preopen by path. Handing it the already-open directory's
                // /proc/self/fd entry gives it that very directory, whatever has happened to
                // the path since the gate checked it.
                if let Err(error) =
                    builder.preopened_dir(preopen.host_path(), &preopen.guest, perms)
                {
                    unopened = Some(format!("{}: {error:#}", preopen.guest));
                }
            }
            Some(builder.build())
        };
        CallState {
            wasi,
            spec,
            table: ResourceTable::new(),
            limiter: CallLimiter::new(limits),
            outputs,
            unopened,
            deny_read: grants.deny_read.clone(),
            protected: std::sync::Arc::clone(&grants.protected),
            credentials: std::sync::Arc::clone(&grants.credentials),
            listings: std::collections::HashMap::new(),
            http: wasmtime_wasi_http::WasiHttpCtx::new(),
            hooks: crate::wasm::net::NetworkHooks::new(Arc::clone(&grants.network)),
            config: grants.config.clone(),
            client: crate::wasm::client::ClientSeat::new(&grants.client),
        }
    }
}

/// What one call's WASI context is built from, when the call has no directory to preopen:
/// taken from that call's grants in [`CallState::new`] and kept in that call's store only, so
/// a context built late holds exactly what one built at once would (nothing of any other call).
struct WasiSpec {
    /// The real wall clock was granted.
    clock: bool,
    /// The environment granted.
    env: Vec<(String, String)>,
}

impl WasiSpec {
    /// A builder holding everything of the context but its preopens: the call's captured
    /// stdout and stderr, its clock and environment grants, and no network of WASI's own.
    fn builder(&self, outputs: &Outputs) -> WasiCtxBuilder {
        let mut builder = WasiCtxBuilder::new();
        builder
            .stdout(outputs.stdout.clone())
            .stderr(outputs.stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            // A file operation (an open, a stat, a read of a few KiB) runs on the thread that
            // runs the call, as the guest waits for it anyway, instead of a hand-off to tokio's
            // blocking pool and back for each one: that hand-off was most of what a small
            // read_file cost (BENCHMARKS "File tools"). What could wait
            // forever (a FIFO) is refused before the open (`guest_fs.rs`: `would_block`).
            .allow_blocking_current_thread(true);
        if !self.clock {
            builder.wall_clock(FixedWallClock);
        }
        builder.envs(&self.env);
        builder
    }
}

impl wasmtime_wasi_http::WasiHttpView for CallState {
    fn http(&mut self) -> wasmtime_wasi_http::WasiHttpCtxView<'_> {
        wasmtime_wasi_http::WasiHttpCtxView {
            hooks: &mut self.hooks,
            table: &mut self.table,
            ctx: &mut self.http,
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let CallState {
            wasi,
            spec,
            outputs,
            table,
            ..
        } = self;
        WasiCtxView {
            ctx: wasi.get_or_insert_with(|| {
                spec.builder(outputs.get_or_insert_with(Outputs::new))
                    .build()
            }),
            table,
        }
    }
}

impl CallState {
    /// What the guest wrote to its stdout (nothing, if it never reached WASI).
    pub(crate) fn stdout(&self) -> Captured {
        self.outputs
            .as_ref()
            .map(|outputs| outputs.stdout.captured())
            .unwrap_or_default()
    }

    /// What the guest wrote to its stderr (nothing, if it never reached WASI).
    pub(crate) fn stderr(&self) -> Captured {
        self.outputs
            .as_ref()
            .map(|outputs| outputs.stderr.captured())
            .unwrap_or_default()
    }
}

/// A guest's stdout and stderr, each captured up to [`STDIO_CAPTURE_BYTES`].
struct Outputs {
    stdout: CapturePipe,
    stderr: CapturePipe,
}

impl Outputs {
    fn new() -> Outputs {
        Outputs {
            stdout: CapturePipe::new(STDIO_CAPTURE_BYTES),
            stderr: CapturePipe::new(STDIO_CAPTURE_BYTES),
        }
    }
}

/// A wall clock that always reads [`FIXED_WALL_CLOCK`].
struct FixedWallClock;

impl HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        FIXED_WALL_CLOCK
    }
}

/// A guest output stream kept in memory up to a capacity. Unlike wasmtime's
/// `MemoryOutputPipe`, a write past the capacity does not fail (which would make a guest's
/// `println!` panic): the excess is dropped and the capture remembers it was cut.
#[derive(Clone)]
pub(crate) struct CapturePipe {
    inner: Arc<Mutex<Capture>>,
}

#[derive(Default)]
struct Capture {
    bytes: Vec<u8>,
    capacity: usize,
    truncated: bool,
}

impl CapturePipe {
    fn new(capacity: usize) -> Self {
        CapturePipe {
            inner: Arc::new(Mutex::new(Capture {
                capacity,
                ..Capture::default()
            })),
        }
    }

    fn append(&self, bytes: &[u8]) {
        let mut capture = crate::sync::lock(&self.inner);
        let room = capture.capacity.saturating_sub(capture.bytes.len());
        let kept = bytes.len().min(room);
        capture.bytes.extend_from_slice(&bytes[..kept]);
        capture.truncated |= kept < bytes.len();
    }

    /// What was kept, as text (invalid UTF-8 replaced), and whether anything was dropped.
    pub(crate) fn captured(&self) -> Captured {
        let capture = crate::sync::lock(&self.inner);
        Captured {
            text: String::from_utf8_lossy(&capture.bytes).into_owned(),
            truncated: capture.truncated,
        }
    }
}

/// The most a single `write` may carry: the guest asks `check-write` before each write, and
/// this keeps one write's host-side copy small whatever the guest asks for.
const WRITE_PERMIT_BYTES: usize = 64 * 1024;

impl IsTerminal for CapturePipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CapturePipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CapturePipe {
    async fn ready(&mut self) {}
}

#[wasmtime_wasi::async_trait]
impl OutputStream for CapturePipe {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT_BYTES)
    }
}

impl tokio::io::AsyncWrite for CapturePipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        bytes: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.append(bytes);
        std::task::Poll::Ready(Ok(bytes.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

// The contract's `client` interface: each function is the call's seat's (`wasm/client.rs`).

/// The core's level for the contract's.
fn level_of(level: wit::Level) -> crate::call::client::LogLevel {
    match level {
        wit::Level::Debug => crate::call::client::LogLevel::Debug,
        wit::Level::Info => crate::call::client::LogLevel::Info,
        wit::Level::Notice => crate::call::client::LogLevel::Notice,
        wit::Level::Warning => crate::call::client::LogLevel::Warning,
        wit::Level::Error => crate::call::client::LogLevel::Error,
        wit::Level::Critical => crate::call::client::LogLevel::Critical,
        wit::Level::Alert => crate::call::client::LogLevel::Alert,
        wit::Level::Emergency => crate::call::client::LogLevel::Emergency,
    }
}

impl wit::Host for CallState {
    async fn log(&mut self, level: wit::Level, logger: Option<String>, message: String) {
        self.client.log(level_of(level), logger, message).await;
    }

    async fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        self.client.progress(progress, total, message).await;
    }

    fn features(&mut self) -> wit::FeatureSet {
        self.client.features()
    }

    async fn ask(
        &mut self,
        questions: Vec<wit::Question>,
    ) -> wasmtime::Result<Result<Vec<wit::Answer>, wit::AskError>> {
        let answered = self.client.ask(questions).await;
        if self.client.input_required {
            // The questions go back with the call's answer: the tool goes no further.
            return Err(wasmtime::Error::new(crate::wasm::client::InputRequired));
        }
        Ok(answered)
    }
}

impl crate::wasm::bindings::generated::toolcell::tool::types::Host for CallState {}

/// Link the `client` interface (and the `types` it uses) into `linker`.
pub(crate) fn link(linker: &mut wasmtime::component::Linker<CallState>) -> wasmtime::Result<()> {
    crate::wasm::bindings::generated::toolcell::tool::client::add_to_linker::<
        CallState,
        wasmtime::component::HasSelf<CallState>,
    >(linker, |state| state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_keeps_its_capacity_and_says_it_cut() {
        let pipe = CapturePipe::new(4);
        let captured = |text: &str, truncated| Captured {
            text: text.to_owned(),
            truncated,
        };
        pipe.append(b"ab");
        assert_eq!(pipe.captured(), captured("ab", false));
        pipe.append(b"cd");
        assert_eq!(pipe.captured(), captured("abcd", false));
        pipe.append(b"e");
        assert_eq!(pipe.captured(), captured("abcd", true));
    }
}
