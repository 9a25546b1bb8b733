//! MCP over Streamable HTTP: `toolcell serve --http ADDR`.
//!
//! rmcp's Streamable HTTP service speaks the protocol: the stateless 2026-07-28 era (every
//! request stands alone, so any replica can answer it) and the 2025-11-25 `initialize`
//! handshake for older clients, served without sessions (the server assigns no
//! `Mcp-Session-Id`, which that era allows; a `GET` stream is answered `405`), so every request
//! of either era stands alone. Around it, this module is what a server shared by many clients
//! needs and rmcp leaves to its user:
//!
//! - **No anonymous access off loopback.** Binding an address that is not loopback without a
//!   tokens file or OAuth configuration is refused before anything listens
//!   ([`check_exposure`]). With either, every request to `/mcp` and `/metrics` must carry
//!   `Authorization: Bearer TOKEN`: a static token ([`crate::auth`]) or a JWT access token
//!   ([`crate::oauth`]); without a good one the answer is `401` with `WWW-Authenticate:
//!   Bearer` (naming the protected-resource metadata under OAuth), and a call that needs a
//!   scope the token lacks gets `403` with `error="insufficient_scope"`.
//! - **Tenants.** A token names its tenant ([`crate::auth`]): the call runs as that agent, in
//!   that tenant's workspace, and the audit line names it.
//! - **DNS rebinding, forged requests.** Before anything else (authentication, the body, a
//!   place in the client's queue), [`crate::guard`] checks that the target is a path, that
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
//! - **Fair shares** ([`crate::share`]). One client (a tenant, or a peer address when there
//!   are no tokens) may have at most a quarter of the runtime's instance slots in calls, the
//!   tasks its calls became included, and at most [`MAX_REQUESTS_PER_CLIENT`] requests of any
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
//!   once it drains), `GET /metrics` (Prometheus, [`crate::metrics`]; the operator's: with
//!   tokens or OAuth, only the bearer of the `--metrics-token` reads it, never a tenant, since
//!   the metrics name every tenant's tools, outcomes and latencies). On SIGTERM or SIGINT
//!   the server stops accepting connections, lets calls in flight finish for the grace period,
//!   stops the rest (each answers `cancelled`), and exits 0.

use crate::McpServer;
use crate::auth::{MetricsToken, Tokens};
use crate::guard::Guard;
use crate::metrics::{Metrics, Refusal};
use crate::oauth::{OAuth, Principal};
use crate::quota::{Admission, Ledger, Limiter, NotAdmitted};
use crate::share::{Counts, Place};
use crate::tenant::Tenant;
use anyhow::Context as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};
use tokio_util::sync::CancellationToken;
use toolcell::limits::MAX_ARGUMENT_BYTES;
use toolcell::{Runtime, StopToken};

mod fast;
pub(crate) mod reading;

pub use crate::share::MAX_REQUESTS_PER_CLIENT;
pub use fast::FAST_PATH_ENV;
use reading::Reading;
pub use reading::{INVALID_REQUEST, PARSE_ERROR};

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

/// How long a client may take to send a request's headers (a slow client holding connections
/// open without finishing a request is the oldest way to exhaust a server).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's body once its headers are in (`408` past
/// it): a body that never ends would otherwise hold one of its client's places for good.
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

pub use crate::DEFAULT_SHUTDOWN_GRACE;

/// After the calls still running at the end of the grace period are stopped, how long their
/// `cancelled` answers have to reach their clients before the process exits.
pub const CANCELLED_ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// How the HTTP server is set up (`toolcell serve --http`).
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address to listen on (port 0: any free port, printed at start).
    pub addr: SocketAddr,
    /// The bearer tokens file ([`crate::auth`]); this or `oauth` is required unless `addr` is
    /// loopback.
    pub tokens: Option<PathBuf>,
    /// The OAuth resource server's configuration ([`crate::oauth`]).
    pub oauth: Option<PathBuf>,
    /// Hosts (`name` or `name:port`) the `Host` header may name; empty: loopback names only.
    pub allowed_hosts: Vec<String>,
    /// Origins (`scheme://host[:port|:*]`) a browser's `Origin` header may name; empty:
    /// loopback origins only.
    pub allowed_origins: Vec<String>,
    /// How long calls in flight may run on after SIGTERM.
    pub grace: Duration,
    /// The file holding the SHA-256 (hex) of the operator's token for `/metrics`. With tokens
    /// or OAuth, `/metrics` answers only its bearer (403 to everyone else, tenants included);
    /// without authentication (loopback), it is open unless this is given.
    pub metrics_token: Option<PathBuf>,
    /// The store replicas share quotas, approval answers and tasks through (`--state`); none:
    /// each process keeps its own.
    #[cfg(feature = "state")]
    pub state: Option<StateOptions>,
}

/// Where the shared store is (`toolcell serve --http --state URL`).
#[cfg(feature = "state")]
#[derive(Debug, Clone)]
pub struct StateOptions {
    /// `redis://` or `rediss://` (a database and a password may be in it).
    pub url: String,
    /// A file holding the store's password (trailing whitespace dropped), read at start.
    pub password_file: Option<PathBuf>,
}

/// Whether serving at `addr` is allowed: an address other than loopback needs authentication
/// (`auth_given`) and the names clients will reach it by (`hosts_given`), since the default
/// allow-list holds loopback names only.
pub fn check_exposure(
    addr: SocketAddr,
    auth_given: bool,
    hosts_given: bool,
) -> Result<(), crate::ConfigError> {
    if is_loopback(addr.ip()) {
        return Ok(());
    }
    if !auth_given {
        return Err(crate::ConfigError(format!(
            "refusing to serve MCP on {addr} without authentication: anyone who can reach it \
             could run tools. Give --tokens FILE (see `toolcell token`) or --oauth FILE, or \
             bind a loopback address such as 127.0.0.1"
        )));
    }
    if !hosts_given {
        return Err(crate::ConfigError(format!(
            "serving on {addr}: give --allow-host with each name clients use to reach this \
             server (the Host header is checked; only loopback names are allowed by default)"
        )));
    }
    Ok(())
}

/// The key a peer's connections are counted under: its address, but an IPv6 address's /64
/// (what one host is usually given), so that one host cannot take a place per address of its
/// prefix. An IPv4 address mapped into IPv6 is the IPv4 address.
fn peer_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(std::net::Ipv6Addr::from(prefix))
            }
        },
        v4 => v4,
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

type BoxResponse = Response<BoxBody<Bytes, Infallible>>;

/// How callers prove who they are.
#[derive(Debug)]
pub enum Auth {
    /// Nobody needs to (loopback only): calls run in the runtime's default context.
    None,
    /// Static bearer tokens, each naming a tenant; replaced whole when the file is read again
    /// (SIGHUP), while requests already authenticated go on with the tenants they got.
    Tokens(RwLock<Arc<Tokens>>),
    /// JWT access tokens from an authorization server.
    OAuth(Arc<OAuth>),
}

/// Who a request is from, once authenticated.
enum Caller {
    Anonymous,
    /// A static token's tenant, and the token's own quota, if it has one.
    Token(Arc<Tenant>, Option<Arc<Limiter>>),
    OAuth(Principal),
}

impl Caller {
    fn tenant(&self) -> Option<&Arc<Tenant>> {
        match self {
            Caller::Anonymous => None,
            Caller::Token(tenant, _) => Some(tenant),
            Caller::OAuth(principal) => Some(&principal.tenant),
        }
    }

    /// The quotas a call of this caller must fit: its tenant's, then its token's.
    fn quotas(&self) -> Vec<&Arc<Limiter>> {
        let token = match self {
            Caller::Token(_, token) => token.as_ref(),
            _ => None,
        };
        self.tenant()
            .and_then(|tenant| tenant.quota.as_ref())
            .into_iter()
            .chain(token)
            .collect()
    }
}

/// The calls running now, so shutdown can wait for them and stop the rest.
#[derive(Default)]
pub(crate) struct Running {
    next: AtomicU64,
    /// Each call's client and request id (how a `notifications/cancelled` names it), and what
    /// stops it.
    calls: Mutex<HashMap<u64, (CallKey, StopToken)>>,
    idle: tokio::sync::Notify,
}

/// Which client made a call, and the JSON-RPC id it gave it: a client can cancel its own
/// calls only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallKey {
    pub(crate) client: Option<ClientKey>,
    pub(crate) request: String,
}

/// The client a request came from, as the front counts it (a tenant, or a peer address); put
/// in the request's extensions for the MCP handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientKey(pub(crate) String);

impl Running {
    /// Note a call that `stop` stops; it is forgotten when the guard drops.
    pub(crate) fn enter(self: &Arc<Self>, key: CallKey, stop: StopToken) -> RunningGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, (key, stop));
        RunningGuard {
            running: Arc::clone(self),
            id,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, (CallKey, StopToken)>> {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn count(&self) -> usize {
        self.lock().len()
    }

    fn stop_all(&self) {
        for (_, stop) in self.lock().values() {
            stop.stop();
        }
    }

    /// Stop the calls `key` names (a client's request id); how many there were.
    fn stop(&self, key: &CallKey) -> usize {
        let calls = self.lock();
        let mut stopped = 0;
        for (_, stop) in calls.values().filter(|(call, _)| call == key) {
            stop.stop();
            stopped += 1;
        }
        stopped
    }

    async fn until_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Forgets its call when dropped.
pub(crate) struct RunningGuard {
    running: Arc<Running>,
    id: u64,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        let mut calls = self.running.lock();
        calls.remove(&self.id);
        if calls.is_empty() {
            self.running.idle.notify_waiters();
        }
    }
}

/// Everything a request is handled with.
struct Front {
    runtime: Arc<Runtime>,
    mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    /// The server rmcp's service makes for each request, for the fast path to call directly.
    server: McpServer,
    /// Whether a stateless `tools/call` may be answered without rmcp ([`fast`]).
    fast_path: bool,
    auth: Auth,
    metrics: Arc<Metrics>,
    /// Requests in flight per client (a tenant's name, or a peer address).
    per_client: Counts<String>,
    /// Calls in flight per client, tasks included ([`crate::share`]).
    per_client_calls: Counts<String>,
    /// How many calls one client may have in flight: its share of the runtime's slots.
    call_share: usize,
    /// Where quotas are kept: here, or in the store replicas share.
    ledger: Ledger,
    draining: AtomicBool,
    /// The allowed `Host` and `Origin` values, checked before anything else.
    guard: Guard,
    /// The operator's token for `/metrics`, if one was given.
    metrics_token: Option<MetricsToken>,
    /// The calls running now.
    running: Arc<Running>,
}

impl Front {
    /// Every tenant's quota, for the metrics.
    fn tenant_quotas(&self) -> Vec<Arc<Limiter>> {
        match &self.auth {
            Auth::Tokens(tokens) => tokens
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .tenant_quotas(),
            Auth::OAuth(oauth) => oauth.tenant_quotas(),
            Auth::None => Vec::new(),
        }
    }

    /// Read the tokens file at `path` again (SIGHUP): the next requests see the new tokens,
    /// tenants and quotas; requests already authenticated go on as they were. A file that
    /// cannot be used is refused, with its reason logged, and the one in use stays.
    fn reload_tokens(&self, path: &std::path::Path) {
        let Auth::Tokens(tokens) = &self.auth else {
            return;
        };
        let current = Arc::clone(
            &tokens
                .read()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        match current.reload(path, &self.runtime) {
            Ok(reloaded) => {
                let count = reloaded.len();
                *tokens
                    .write()
                    .unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(reloaded);
                eprintln!(
                    "toolcell: SIGHUP: read the tokens file {} again: {count} token(s)",
                    path.display()
                );
            }
            Err(why) => {
                eprintln!("toolcell: SIGHUP: kept the tokens in use: {why}");
            }
        }
    }

    /// Whether the bearer may read `/metrics`: the operator's token where one is set; with no
    /// authentication and no operator token (loopback), anyone; otherwise nobody.
    fn metrics_allowed<B>(&self, request: &Request<B>) -> Result<(), Box<BoxResponse>> {
        let presented = bearer(request)?;
        match (&self.metrics_token, &self.auth) {
            (Some(token), _) if presented.is_some_and(|presented| token.check(presented)) => Ok(()),
            (None, Auth::None) => Ok(()),
            (Some(_), _) if presented.is_none() => {
                self.metrics.refused(Refusal::Unauthenticated);
                Err(Box::new(respond(
                    StatusCode::UNAUTHORIZED,
                    &[(
                        header::WWW_AUTHENTICATE,
                        r#"Bearer realm="toolcell-metrics""#,
                    )],
                    "the operator's metrics token is required\n",
                )))
            }
            _ => Err(Box::new(respond(
                StatusCode::FORBIDDEN,
                &[],
                "the metrics are the operator's: they need the token given with \
                 --metrics-token, not a tenant's\n",
            ))),
        }
    }

    /// Who the request's bearer token says it is from; with no authentication configured
    /// (loopback only), anonymous, and calls run in the default context.
    fn authenticate<B>(&self, request: &Request<B>) -> Result<Caller, Box<BoxResponse>> {
        let presented = bearer(request)?;
        let refused = |challenge: String| {
            self.metrics.refused(Refusal::Unauthenticated);
            Box::new(respond(
                StatusCode::UNAUTHORIZED,
                &[(header::WWW_AUTHENTICATE, &challenge)],
                "a valid bearer token is required\n",
            ))
        };
        match &self.auth {
            Auth::None => Ok(Caller::Anonymous),
            Auth::Tokens(tokens) => match presented.and_then(|token| {
                tokens
                    .read()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .check_with_quota(token)
            }) {
                Some((tenant, quota)) => Ok(Caller::Token(tenant, quota)),
                None if presented.is_some() => Err(refused(
                    r#"Bearer realm="toolcell", error="invalid_token""#.to_owned(),
                )),
                None => Err(refused(r#"Bearer realm="toolcell""#.to_owned())),
            },
            Auth::OAuth(oauth) => {
                let metadata = oauth.metadata_url();
                let Some(token) = presented else {
                    return Err(refused(format!(r#"Bearer resource_metadata="{metadata}""#)));
                };
                oauth.verify(token).map(Caller::OAuth).map_err(|why| {
                    refused(format!(
                        r#"Bearer resource_metadata="{metadata}", error="invalid_token", error_description="{}""#,
                        // A quoted-string of printable ASCII: the reason may quote the token's
                        // own claims (a tenant's name), which are the caller's to choose.
                        why.0.chars()
                            .map(|c| match c {
                                '"' | '\\' => '\'',
                                ' '..='~' => c,
                                _ => '?',
                            })
                            .collect::<String>()
                    ))
                })
            }
        }
    }
}

/// The bearer token a request presents, if any; more than one `Authorization` header is a
/// `400`. RFC 6750, section 2: one method, once. Which one a proxy or a server would pick is
/// exactly what an attacker wants to choose.
fn bearer<B>(request: &Request<B>) -> Result<Option<&str>, Box<BoxResponse>> {
    let mut values = request.headers().get_all(header::AUTHORIZATION).iter();
    let value = values.next();
    if values.next().is_some() {
        return Err(Box::new(respond(
            StatusCode::BAD_REQUEST,
            &[],
            "more than one Authorization header\n",
        )));
    }
    Ok(value
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        }))
}

fn respond(status: StatusCode, headers: &[(header::HeaderName, &str)], body: &str) -> BoxResponse {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())).boxed());
    *response.status_mut() = status;
    for (name, value) in headers {
        if let Ok(value) = header::HeaderValue::from_str(value) {
            response.headers_mut().insert(name.clone(), value);
        }
    }
    response
        .headers_mut()
        .entry(header::CONTENT_TYPE)
        .or_insert(header::HeaderValue::from_static(
            "text/plain; charset=utf-8",
        ));
    response
}

/// Answer one request. Only a request that passed authentication (or was made where none is
/// configured) keeps its connection open for the next: every other answer (a probe, a refusal,
/// a `404`) closes it, so that a client without a token cannot hold connections open, idle,
/// with probes or refused requests.
async fn route(
    front: Arc<Front>,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> Result<BoxResponse, Infallible> {
    let (mut response, keep) = dispatch(&front, peer, request).await;
    if !keep {
        response.headers_mut().insert(
            header::CONNECTION,
            header::HeaderValue::from_static("close"),
        );
    }
    Ok(response)
}

/// The answer to a request, and whether its connection may stay open.
async fn dispatch(
    front: &Arc<Front>,
    peer: SocketAddr,
    request: Request<Incoming>,
) -> (BoxResponse, bool) {
    // A target that is not a path (`POST http://evil.com/mcp`) is not for this server, on
    // any route.
    if let Err(refused) = crate::guard::check_origin_form(request.uri()) {
        return (respond(refused.status(), &[], refused.message()), false);
    }
    let path = request.uri().path().to_owned();
    let get = request.method() == Method::GET;
    // `/mcp` and `/metrics` are what a rebinding page would want: their Host and Origin are
    // checked before anything else. (The probes answer any Host: a kubelet names the pod's
    // address.)
    if matches!(path.as_str(), MCP_PATH | "/metrics")
        && let Err(refused) = front.guard.check(request.uri(), request.headers())
    {
        front.metrics.refused(Refusal::ForeignRequest);
        return (respond(refused.status(), &[], refused.message()), false);
    }
    let response = match path.as_str() {
        "/healthz" if get => respond(StatusCode::OK, &[], "ok\n"),
        "/readyz" if get => {
            if front.draining.load(Ordering::Relaxed) {
                respond(StatusCode::SERVICE_UNAVAILABLE, &[], "draining\n")
            } else {
                respond(StatusCode::OK, &[], "ready\n")
            }
        }
        "/metrics" if get => match front.metrics_allowed(&request) {
            Ok(()) => {
                let metrics = respond(
                    StatusCode::OK,
                    &[(
                        header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    &front.metrics.render(
                        &front.runtime,
                        &front
                            .ledger
                            .usage(&front.tenant_quotas(), SystemTime::now())
                            .await,
                    ),
                );
                return (metrics, true);
            }
            Err(refused) => *refused,
        },
        metadata if get && metadata.starts_with(crate::oauth::METADATA_PATH) => match &front.auth {
            Auth::OAuth(oauth) => respond(
                StatusCode::OK,
                &[(header::CONTENT_TYPE, "application/json")],
                &oauth.metadata(),
            ),
            _ => respond(
                StatusCode::NOT_FOUND,
                &[],
                "no OAuth here: this server takes static tokens or none\n",
            ),
        },
        MCP_PATH => {
            if front.draining.load(Ordering::Relaxed) {
                return (
                    respond(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &[(header::RETRY_AFTER, "1")],
                        "shutting down\n",
                    ),
                    false,
                );
            }
            match front.authenticate(&request) {
                Ok(caller) => return (serve_mcp(front, peer, caller, request).await, true),
                Err(refused) => *refused,
            }
        }
        _ => respond(
            StatusCode::NOT_FOUND,
            &[],
            "not found: MCP is served at /mcp; /healthz, /readyz and /metrics report on it\n",
        ),
    };
    (response, false)
}

/// Serve an MCP request of `caller` (authenticated) from `peer`: its place among the client's
/// requests, its body read once, the scope check, its place in the client's share, its
/// quotas, then the call, by the fast path or rmcp.
async fn serve_mcp(
    front: &Arc<Front>,
    peer: SocketAddr,
    caller: Caller,
    request: Request<Incoming>,
) -> BoxResponse {
    let client = match caller.tenant() {
        Some(tenant) => format!("tenant:{}", tenant.name),
        None => format!("peer:{}", peer.ip()),
    };
    let Some(_place) = front
        .per_client
        .enter(client.clone(), MAX_REQUESTS_PER_CLIENT)
    else {
        front.metrics.refused(Refusal::TooManyRequests);
        return respond(
            StatusCode::TOO_MANY_REQUESTS,
            &[(header::RETRY_AFTER, "1")],
            "too many requests in flight for this client\n",
        );
    };
    // The body, read to its limit here, so a too-large one is refused before MCP and
    // a call's tool is known for the scope check.
    let (mut parts, body) = request.into_parts();
    let collected = tokio::time::timeout(
        BODY_READ_TIMEOUT,
        http_body_util::Limited::new(body, MAX_REQUEST_BODY_BYTES).collect(),
    )
    .await;
    let Ok(collected) = collected else {
        return respond(
            StatusCode::REQUEST_TIMEOUT,
            &[(header::CONNECTION, "close")],
            "the request body did not arrive in time\n",
        );
    };
    let body = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            if error.is::<http_body_util::LengthLimitError>() {
                front.metrics.refused(Refusal::BodyTooLarge);
                return respond(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &[],
                    &format!("a request body may be at most {MAX_REQUEST_BODY_BYTES} bytes\n"),
                );
            }
            return respond(
                StatusCode::BAD_REQUEST,
                &[],
                "the request body was cut off\n",
            );
        }
    };
    // The one reading of the body: every check below decides on it, and it is what
    // runs (`http/reading.rs`). Only a `POST` carries a message.
    let reading = if parts.method == Method::POST {
        match Reading::parse(&body) {
            Ok(reading) => Some(reading),
            Err(unreadable) => {
                front.metrics.refused(Refusal::Unreadable);
                return respond(
                    StatusCode::BAD_REQUEST,
                    &[(header::CONTENT_TYPE, "application/json")],
                    &unreadable.body(),
                );
            }
        }
    } else {
        None
    };
    // Read: the bytes are not kept while the call runs.
    drop(body);
    let is_call = reading.as_ref().is_some_and(Reading::is_call);
    if let (Auth::OAuth(oauth), Caller::OAuth(principal)) = (&front.auth, &caller) {
        let called = reading
            .as_ref()
            .map(Reading::tools_called)
            .unwrap_or_default();
        let lacking = std::iter::once(None)
            .chain(called.into_iter().map(Some))
            .find_map(|tool| oauth.missing_scope(principal, tool));
        if let Some(scope) = lacking {
            return respond(
                StatusCode::FORBIDDEN,
                &[(
                    header::WWW_AUTHENTICATE,
                    &format!(
                        r#"Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{}""#,
                        oauth.metadata_url()
                    ),
                )],
                &format!("this call needs the scope {scope:?}\n"),
            );
        }
    }
    // A call takes a place in its client's share of the pool, which goes with it if it
    // becomes a task ([`crate::share`]).
    let share = if is_call {
        match front
            .per_client_calls
            .enter(client.clone(), front.call_share)
        {
            Some(place) => Some(place),
            None => {
                front.metrics.refused(Refusal::TooManyRequests);
                return respond(
                    StatusCode::TOO_MANY_REQUESTS,
                    &[(header::RETRY_AFTER, "1")],
                    &format!(
                        "too many calls in flight for this client (at most {}, tasks \
                         included)\n",
                        front.call_share
                    ),
                );
            }
        }
    } else {
        None
    };
    // Quotas last: a request refused for another reason takes nothing from them.
    let quotas = caller.quotas();
    let admission = if !quotas.is_empty() && is_call {
        match front
            .ledger
            .admit(&quotas, Instant::now(), SystemTime::now())
            .await
        {
            Ok(admission) => Some(admission),
            Err(NotAdmitted::Refused(refused)) => {
                front.metrics.quota_refused(&refused);
                return respond(
                    StatusCode::TOO_MANY_REQUESTS,
                    &[
                        (header::RETRY_AFTER, &refused.retry_after.to_string()),
                        (header::CONTENT_TYPE, "application/json"),
                    ],
                    &refused.body(reading.as_ref().and_then(Reading::id)),
                );
            }
            Err(NotAdmitted::Unavailable(unavailable)) => {
                front.metrics.refused(Refusal::StateUnavailable);
                return respond(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &[
                        (header::RETRY_AFTER, "1"),
                        (header::CONTENT_TYPE, "application/json"),
                    ],
                    &unavailable_body(&unavailable, reading.as_ref().and_then(Reading::id)),
                );
            }
        }
    } else {
        None
    };
    if let Some(share) = share {
        parts.extensions.insert(Arc::new(CallHold {
            admission,
            _share: share,
        }));
    }
    parts.extensions.insert(ClientKey(client.clone()));
    if let Some(tenant) = caller.tenant() {
        parts.extensions.insert(Arc::clone(tenant));
    }
    let Some(reading) = reading else {
        // Not a `POST`: rmcp answers it (no session, so `405`), with nothing to read.
        return pass_to_rmcp(front, parts, Bytes::new()).await;
    };
    // Every check above done, the usual stateless call is answered here, as rmcp
    // would answer it; anything else goes on to rmcp, as the front read it.
    // The reading is not kept while the call runs either: the call holds what it needs.
    if front.fast_path
        && let Some(accepted) = fast::accept(&parts, &reading, &front.server)
    {
        drop(reading);
        front.metrics.fast_path();
        return fast::answer(&front.server, accepted, parts).await;
    }
    let (cancelled, rewritten) = (reading.cancelled(), reading.to_bytes());
    drop(reading);
    let response = pass_to_rmcp(front, parts, rewritten).await;
    // Without sessions, rmcp cannot route a `notifications/cancelled` to the request it
    // names: the front stops that call, if it is this client's, and only once rmcp
    // has accepted the request (its media type, its headers, one message): a request
    // refused for any reason has no effect.
    if response.status().is_success()
        && let Some(request) = cancelled
    {
        let key = CallKey {
            client: Some(ClientKey(client.clone())),
            request,
        };
        front.running.stop(&key);
    }
    response
}

/// What a call holds from the front until it ends (the request is answered, or the task it
/// became ends): its place in its client's share of the pool, and its quota admission (charged
/// with what the call used).
pub(crate) struct CallHold {
    pub(crate) admission: Option<Admission>,
    _share: Place<String>,
}

/// The JSON-RPC error refusing the request `id` (echoed if short) because the shared store
/// could not be reached: code [`STATE_UNAVAILABLE`](crate::approval::STATE_UNAVAILABLE), the
/// store named, at most [`crate::quota::MAX_REFUSAL_BYTES`] long.
fn unavailable_body(
    unavailable: &crate::state::Unavailable,
    id: Option<&serde_json::Value>,
) -> String {
    let id = match id {
        Some(serde_json::Value::Number(number)) => serde_json::Value::Number(number.clone()),
        Some(serde_json::Value::String(text))
            if text.chars().count() <= crate::quota::MAX_ECHOED_ID_CHARS =>
        {
            serde_json::Value::String(text.clone())
        }
        _ => serde_json::Value::Null,
    };
    let message: String = unavailable
        .to_string()
        .chars()
        .take(crate::quota::MAX_REFUSAL_BYTES / 2)
        .collect();
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": { "code": crate::approval::STATE_UNAVAILABLE, "message": message },
    })
    .to_string()
}

/// Hand a request, with `body` (what the front read, written out again), to rmcp.
async fn pass_to_rmcp(front: &Front, parts: http::request::Parts, body: Bytes) -> BoxResponse {
    let request = Request::from_parts(parts, Full::new(body));
    let mut mcp = front.mcp.clone();
    match tower_service::Service::call(&mut mcp, request).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// Serve `runtime` over Streamable HTTP as `options` say, until SIGTERM or SIGINT.
pub fn serve_http(runtime: Runtime, options: HttpOptions) -> anyhow::Result<()> {
    check_exposure(
        options.addr,
        options.tokens.is_some() || options.oauth.is_some(),
        !options.allowed_hosts.is_empty(),
    )
    .map_err(anyhow::Error::msg)?;
    let mut runtime = runtime;
    let auth = match (&options.tokens, &options.oauth) {
        (Some(_), Some(_)) => anyhow::bail!("give --tokens or --oauth, not both"),
        (Some(path), None) => Auth::Tokens(RwLock::new(Arc::new(
            Tokens::load(path, &mut runtime).map_err(anyhow::Error::msg)?,
        ))),
        (None, Some(path)) => Auth::OAuth(Arc::new(
            OAuth::load(path, &mut runtime).map_err(anyhow::Error::msg)?,
        )),
        (None, None) => Auth::None,
    };
    let metrics_token = match &options.metrics_token {
        Some(path) => Some(MetricsToken::load(path, &mut runtime).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let runtime = Arc::new(runtime);
    let executor = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("toolcell-http")
        .enable_time()
        .enable_io()
        .build()
        .context("starting the server's async runtime")?;
    let served = executor.block_on(serve_http_on(
        Arc::clone(&runtime),
        auth,
        metrics_token,
        options,
    ));
    executor.shutdown_timeout(crate::SHUTDOWN_GRACE);
    // As in `serve`: the runtime's own tokio runtime is dropped outside async code.
    drop(runtime);
    served
}

async fn serve_http_on(
    runtime: Arc<Runtime>,
    auth: Auth,
    metrics_token: Option<MetricsToken>,
    options: HttpOptions,
) -> anyhow::Result<()> {
    // With a shared store: quotas, approvals and tasks kept there; this replica's heartbeat,
    // leases and tasks looked after while it serves.
    #[cfg(feature = "state")]
    let store = match &options.state {
        Some(state) => {
            let store = crate::state::Store::open(&state.url, state.password_file.as_deref())
                .map_err(anyhow::Error::msg)?;
            store.ping().await;
            eprintln!(
                "toolcell: quotas, approval answers and tasks are shared through the store at {} \
                 (this replica: {})",
                store.shown(),
                store.replica()
            );
            Some(store)
        }
        None => None,
    };
    #[cfg(feature = "state")]
    let metrics = Arc::new(match &store {
        Some(store) => Metrics::sharing(Arc::clone(store)),
        None => Metrics::default(),
    });
    #[cfg(not(feature = "state"))]
    let metrics = Arc::new(Metrics::default());
    let running = Arc::new(Running::default());
    let sessions_end = CancellationToken::new();
    let hosts = if options.allowed_hosts.is_empty() {
        vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ]
    } else {
        options.allowed_hosts.clone()
    };
    let origins = if options.allowed_origins.is_empty() {
        vec![
            "http://localhost:*".to_owned(),
            "http://127.0.0.1:*".to_owned(),
            "http://[::1]:*".to_owned(),
        ]
    } else {
        options.allowed_origins.clone()
    };
    let guard = Guard::new(&hosts, &origins).map_err(anyhow::Error::msg)?;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        // No sessions, in either era: toolcell keeps no state between requests, and a session
        // would be memory a client can make the server hold (rmcp keeps each for minutes, with
        // no bound on how many), a stream it can keep open, and an id another tenant could
        // reuse. A 2025-11-25 client still shakes hands; each of its requests stands alone.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_cancellation_token(sessions_end.clone());
    let server =
        McpServer::new(Arc::clone(&runtime)).for_http(Arc::clone(&metrics), Arc::clone(&running));
    #[cfg(feature = "state")]
    let (server, ledger) = match store {
        Some(store) => {
            let leases = Arc::new(crate::quota::Leases::default());
            let server = server.with_store(Arc::clone(&store));
            tokio::spawn(
                Arc::clone(&store)
                    .keep_alive(Arc::clone(&leases), sessions_end.clone().cancelled_owned()),
            );
            tokio::spawn(Arc::clone(server.tasks()).watch(sessions_end.clone().cancelled_owned()));
            (server, Ledger::Shared(store, leases))
        }
        None => (server, Ledger::Local),
    };
    #[cfg(not(feature = "state"))]
    let ledger = Ledger::Local;

    // Tools added, changed or removed while serving are served from the next request on. With
    // no sessions there is no stream to announce it on: clients list the tools again.
    tokio::spawn({
        let server = server.clone();
        let stop = sessions_end.clone();
        async move {
            server
                .watch_tools(stop.cancelled_owned(), |_| async {})
                .await;
        }
    });
    let for_rmcp = server.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(for_rmcp.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let front_slots = runtime.pool_slots();
    let front = Arc::new(Front {
        runtime,
        mcp,
        server,
        fast_path: fast::enabled(),
        auth,
        metrics,
        per_client: Counts::default(),
        per_client_calls: Counts::default(),
        call_share: crate::share::calls_per_client(front_slots),
        ledger,
        draining: AtomicBool::new(false),
        guard,
        metrics_token,
        running: Arc::clone(&running),
    });

    // A key set from a URL is fetched again now and then, for as long as the server runs.
    if let Auth::OAuth(oauth) = &front.auth
        && let Some((_, every)) = oauth.jwks_url()
    {
        let oauth = Arc::clone(oauth);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.tick().await;
            loop {
                ticks.tick().await;
                match oauth.refresh_keys().await {
                    Ok(count) => tracing::debug!(count, "the OAuth key set was fetched again"),
                    Err(why) => tracing::warn!("{why}"),
                }
            }
        });
    }
    // SIGHUP reads the tokens file again, one reload at a time, off the reactor (it reads files
    // and opens workspaces). Listened for before the server says it serves, so that a HUP sent
    // once it does never meets the default action (exit).
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("listening for SIGHUP")?;
    {
        let front = Arc::clone(&front);
        let path = options.tokens.clone();
        tokio::spawn(async move {
            while hangup.recv().await.is_some() {
                let Some(path) = path.clone() else {
                    eprintln!("toolcell: SIGHUP: no tokens file to read again (only --tokens is)");
                    continue;
                };
                let front = Arc::clone(&front);
                if let Err(error) =
                    tokio::task::spawn_blocking(move || front.reload_tokens(&path)).await
                {
                    tracing::warn!(%error, "reading the tokens file again");
                }
            }
        });
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("listening on {}", options.addr))?;
    let local = listener.local_addr().context("the listening address")?;
    // How a supervisor or a test learns the port when 0 was asked for.
    eprintln!("toolcell: serving MCP at http://{local}{MCP_PATH}");

    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let per_peer: Counts<IpAddr> = Counts::default();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, or a connection reset before it was accepted: the
                    // listener itself is fine. Pause so a persistent error does not spin.
                    tracing::warn!(%error, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            drop(stream);
            continue;
        };
        let Some(peer_place) = per_peer.enter(peer_key(peer.ip()), MAX_CONNECTIONS_PER_PEER) else {
            drop(stream);
            continue;
        };
        let front = Arc::clone(&front);
        let service =
            hyper::service::service_fn(move |request| route(Arc::clone(&front), peer, request));
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT);
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "an HTTP connection ended with an error");
            }
            drop(peer_place);
            drop(permit);
        });
    }

    // Draining: accept nothing more, finish what runs.
    front.draining.store(true, Ordering::Relaxed);
    drop(listener);
    eprintln!(
        "toolcell: shutting down: {} call(s) in flight, {} s to finish",
        running.count(),
        options.grace.as_secs_f64()
    );
    let connections_done = graceful.shutdown();
    tokio::pin!(connections_done);
    let finished = tokio::time::timeout(options.grace, running.until_idle()).await;
    if finished.is_err() {
        // Past the grace period: stop what still runs; each call answers `cancelled`.
        running.stop_all();
        let _ = tokio::time::timeout(CANCELLED_ANSWER_TIMEOUT, running.until_idle()).await;
    }
    // Every call has answered. A connection closes once its answer is written; what stays
    // open after that is a legacy session's event stream, which ends when the sessions do.
    // (Ending the sessions first would race the answers: rmcp drops an answer not yet
    // handed over when its server's token is cancelled.)
    if tokio::time::timeout(CANCELLED_ANSWER_TIMEOUT, &mut connections_done)
        .await
        .is_err()
    {
        sessions_end.cancel();
        if tokio::time::timeout(CANCELLED_ANSWER_TIMEOUT, &mut connections_done)
            .await
            .is_err()
        {
            tracing::warn!("connections still open at exit");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_stops_only_the_calls_of_its_own_client() {
        let running = Arc::new(Running::default());
        let key = |client: &str, request: &str| CallKey {
            client: Some(ClientKey(client.to_owned())),
            request: request.to_owned(),
        };
        let (a, b) = (StopToken::new(), StopToken::new());
        let _a = running.enter(key("tenant:a", "7"), a.clone());
        let _b = running.enter(key("tenant:b", "7"), b.clone());
        assert_eq!(running.stop(&key("tenant:c", "7")), 0);
        assert_eq!(running.stop(&key("tenant:a", "8")), 0);
        assert!(!a.is_stopped() && !b.is_stopped());
        assert_eq!(running.stop(&key("tenant:b", "7")), 1);
        assert!(!a.is_stopped() && b.is_stopped());
    }

    #[test]
    fn an_ipv6_host_is_one_peer_however_many_addresses_it_uses() {
        let key = |text: &str| peer_key(text.parse().expect("an address"));
        assert_eq!(key("2001:db8::1"), key("2001:db8::ffff:1234"));
        assert_ne!(key("2001:db8::1"), key("2001:db8:0:1::1"));
        assert_eq!(key("::ffff:10.0.0.1"), key("10.0.0.1"));
        assert_ne!(key("10.0.0.1"), key("10.0.0.2"));
    }

    #[test]
    fn only_loopback_may_go_without_authentication() {
        for addr in [
            "127.0.0.1:0",
            "127.8.9.10:80",
            "[::1]:0",
            "[::ffff:127.0.0.1]:0",
        ] {
            let addr: SocketAddr = addr.parse().expect("an address");
            assert_eq!(check_exposure(addr, false, false), Ok(()), "{addr}");
        }
        for addr in ["0.0.0.0:8080", "[::]:0", "10.0.0.1:80", "192.168.1.2:0"] {
            let addr: SocketAddr = addr.parse().expect("an address");
            let refused = check_exposure(addr, false, true).expect_err("refused");
            assert!(
                refused.0.contains("without authentication"),
                "{addr}: {refused}"
            );
            let refused = check_exposure(addr, true, false).expect_err("refused");
            assert!(refused.0.contains("--allow-host"), "{addr}: {refused}");
            assert_eq!(check_exposure(addr, true, true), Ok(()), "{addr}");
        }
    }
}
