//! MCP over Streamable HTTP: `toolcell serve --http ADDR`.
//!
//! rmcp's Streamable HTTP service speaks the protocol: the stateless 2026-07-28 era (every
//! request stands alone, so any replica can answer it) and the 2025-11-25 `initialize`
//! handshake for older clients, whose session id is what they declared, sealed, so that no
//! server keeps a session and any replica opens it ([`session`]); a `GET` stream and `DELETE`
//! are answered `405`. Every request of either era stands alone, but for a question a call
//! asks its client on its stream, whose answer the front routes back to it (`questions.rs`). Around it, this module is what a server shared by many clients
//! needs and rmcp leaves to its user:
//!
//! - **No anonymous access off loopback.** Binding an address that is not loopback without a
//!   tokens file or OAuth configuration is refused before anything listens
//!   ([`check_exposure`]). With either, every request to `/mcp` and `/metrics` must carry
//!   `Authorization: Bearer TOKEN`: a static token ([`crate::http::auth`]) or a JWT access token
//!   ([`crate::http::oauth`]); without a good one the answer is `401` with `WWW-Authenticate:
//!   Bearer` (naming the protected-resource metadata under OAuth), and a call that needs a
//!   scope the token lacks gets `403` with `error="insufficient_scope"`.
//! - **Tenants.** A token names its tenant ([`crate::http::auth`]): the call runs as that agent, in
//!   that tenant's workspace, and the audit line names it.
//! - **DNS rebinding, forged requests.** Before anything else (authentication, the body, a
//!   place in the client's queue), [`crate::http::guard`] checks that the target is a path, that
//!   there is exactly one `Host`, well-formed and allowed (loopback names by default), and at
//!   most one `Origin`, well-formed and allowed (loopback by default): a page elsewhere cannot
//!   reach a local server through a name that resolves to 127.0.0.1, and a refused request has
//!   no effect at all. A `notifications/cancelled` stops a call only once rmcp has accepted
//!   the request that carries it (media type, one message, protocol headers).
//! - **One reading of a request.** The body is parsed once (`http/reading.rs`): one JSON
//!   object whose `params`, if any, is an object, or `400` with a JSON-RPC error before
//!   anything else. The scope check, the fair share, quotas and cancellation decide on that
//!   value, and it is what runs: the fast path builds its call from it, and rmcp is handed it
//!   written out again, never the bytes the client sent.
//! - **Fair shares** ([`crate::http::share`]). One client (a tenant, or a peer address when there
//!   are no tokens) may have at most a quarter of the runtime's instance slots in calls, the
//!   tasks its calls became included, and at most [`MAX_REQUESTS_PER_CLIENT`](share::MAX_REQUESTS_PER_CLIENT) requests of any
//!   kind in flight; more get `429`. So three clients busy to their limits leave a quarter of
//!   the pool to the others. Request bodies are read to at most [`MAX_REQUEST_BODY_BYTES`]
//!   (`413` past it). Calls beyond the pool's slots wait for one, as everywhere.
//! - **Cancellation.** A client that closes a call's stream, or sends
//!   `notifications/cancelled`, stops its instance.
//! - **A fast path for the usual call.** Once every check above has passed, a stateless
//!   (2026-07-28) `tools/call` of the usual shape, with the headers rmcp requires, is answered
//!   by the front itself through the handler rmcp would call, with the answer rmcp would
//!   write, without the service rmcp builds per request (`http/fast.rs`; counted in
//!   `toolcell_http_fast_path_total`; off with [`FAST_PATH_ENV`]`=0`). Anything else is
//!   rmcp's.
//! - **Operations.** `GET /healthz` (the process serves), `GET /readyz` (it accepts calls; 503
//!   once it drains), `GET /metrics` (Prometheus, [`crate::http::metrics`]; the operator's: with
//!   tokens or OAuth, only the bearer of the `--metrics-token` reads it, never a tenant, since
//!   the metrics name every tenant's tools, outcomes and latencies). On SIGTERM or SIGINT
//!   the server stops accepting connections, lets calls in flight finish for the grace period,
//!   stops the rest (each answers `cancelled`), and exits 0.

pub mod auth;
pub(crate) mod config_error;
pub mod connections;
mod fast;
mod front;
pub mod guard;
pub mod metrics;
pub mod oauth;
mod options;
pub mod questions;
pub mod quota;
pub(crate) mod reading;
mod route;
mod running;
mod serve;
pub mod session;
pub mod share;
pub mod tenant;

pub use config_error::ConfigError;
pub use fast::FAST_PATH_ENV;
pub use front::Auth;
#[cfg(feature = "state")]
pub use options::StateOptions;
pub use options::{AnonymousClients, HttpOptions, check_exposure};
pub use reading::{INVALID_REQUEST, PARSE_ERROR};
pub use serve::serve_http;

use std::time::Duration;
use toolcell::limits::MAX_ARGUMENT_BYTES;

/// Where MCP is served.
pub const MCP_PATH: &str = "/mcp";

/// The longest request body read: a call's arguments are at most [`MAX_ARGUMENT_BYTES`], and
/// the JSON-RPC envelope around them is small; anything longer would be refused anyway.
pub const MAX_REQUEST_BODY_BYTES: usize = 2 * MAX_ARGUMENT_BYTES;

/// How many connections are served at once; one more is closed as it is accepted. Each holds
/// a descriptor and a task: this keeps a flood of idle connections from exhausting them.
pub const MAX_CONNECTIONS: usize = 1024;

/// How many of those connections one peer address may hold: a quarter, so that one client
/// flooding the server with idle connections leaves room for the others. (A proxy in front
/// is one peer: size its connection pool below this.)
pub const MAX_CONNECTIONS_PER_PEER: usize = MAX_CONNECTIONS / 4;

/// The most a request's head (its line and headers) may hold, as the connection's read buffer:
/// a bearer token is at most 16 KiB, the rest a few hundred bytes. A longer head is refused
/// (`431`) before it is read whole, and no header value a refusal might echo is large.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

/// How long a client may take to send a request's headers (a slow client holding connections
/// open without finishing a request is the oldest way to exhaust a server).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's body once its headers are in (`408` past
/// it): a body that never ends would otherwise hold one of its client's places for good.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// After the calls still running at the end of the grace period are stopped, how long their
/// `cancelled` answers have to reach their clients before the process exits.
pub const CANCELLED_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
