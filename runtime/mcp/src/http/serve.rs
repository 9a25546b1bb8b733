//! The server's life: its configuration read and checked, the front built, the listener's
//! loop (connections counted, per peer too), and the drain on SIGTERM.

use crate::McpServer;
use crate::http::auth::{MetricsToken, Tokens};
use crate::http::fast;
use crate::http::front::{Auth, Front};
use crate::http::guard::Guard;
use crate::http::metrics::Metrics;
use crate::http::oauth::OAuth;
use crate::http::options::{HttpOptions, check_exposure, peer_key};
use crate::http::quota::Ledger;
use crate::http::route::route;
use crate::http::running::Running;
use crate::http::share::Counts;
use crate::http::{CANCELLED_ANSWER_TIMEOUT, HEADER_READ_TIMEOUT, MCP_PATH};
use anyhow::Context as _;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use toolcell::Runtime;

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

/// Serve until SIGTERM or SIGINT, then drain: the pieces below, in order.
async fn serve_http_on(
    runtime: Arc<Runtime>,
    auth: Auth,
    metrics_token: Option<MetricsToken>,
    options: HttpOptions,
) -> anyhow::Result<()> {
    // Ends rmcp's sessions (legacy event streams) and everything spawned below.
    let sessions_end = CancellationToken::new();
    // The allow-lists first: a bad one stops the server before it touches a shared store.
    let (hosts, origins) = allowed_hosts_and_origins(&options);
    let guard = Guard::new(&hosts, &origins).map_err(anyhow::Error::msg)?;
    let (server, metrics, ledger) = sharing(
        &options,
        runtime.own_files(),
        McpServer::new(Arc::clone(&runtime)),
        &sessions_end,
    )
    .await?;
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        // No sessions kept, in either era: toolcell keeps no state between requests, and a
        // session rmcp keeps would be memory a client can make the server hold (for minutes,
        // with no bound on how many), a stream it can keep open, and an id another tenant
        // could reuse. A 2025-11-25 client's session id is what it declared, sealed, which the
        // front opens (`http/session.rs`); rmcp serves each request alone.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_cancellation_token(sessions_end.clone());
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
    let call_share = crate::http::share::calls_per_client(runtime.pool_slots());
    #[cfg(feature = "state")]
    let store = server.approvals.store().cloned();
    let questions = Arc::new(crate::http::questions::Questions::new(
        server.approvals.key().cloned(),
        #[cfg(feature = "state")]
        store.clone(),
    ));
    #[cfg(feature = "state")]
    let levels = Arc::new(crate::http::session::Levels::shared(store));
    #[cfg(not(feature = "state"))]
    let levels = Arc::new(crate::http::session::Levels::default());
    let front = Arc::new(Front {
        runtime,
        mcp,
        server,
        fast_path: fast::enabled(),
        auth,
        metrics: Arc::new(metrics),
        per_client: Counts::default(),
        per_client_calls: Counts::default(),
        call_share,
        ledger,
        draining: AtomicBool::new(false),
        guard,
        metrics_token,
        running: Arc::new(Running::default()),
        anonymous: options.anonymous,
        questions,
        levels,
        fast_calls: std::sync::atomic::AtomicUsize::new(0),
    });
    refresh_key_set(&front);
    // Listened for before the server says it serves, so that a HUP sent once it does never
    // meets the default action (exit).
    reload_tokens_on_hangup(&front, options.tokens.clone())?;
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("listening on {}", options.addr))?;
    let local = listener.local_addr().context("the listening address")?;
    // How a supervisor or a test learns the port when 0 was asked for.
    eprintln!("toolcell: serving MCP at http://{local}{MCP_PATH}");
    let graceful = GracefulShutdown::new();
    accept_until_told_to_stop(&front, &listener, &graceful).await?;
    drop(listener);
    drain(&front, graceful, options.grace, &sessions_end).await;
    Ok(())
}

/// With a shared store (`--state`): the server keeping its approvals and tasks there, the
/// metrics and quotas' ledger reading and writing it, and this replica's heartbeat, leases and
/// tasks looked after while it serves. Without one: `server` as it is, each process on its own.
#[cfg(feature = "state")]
async fn sharing(
    options: &HttpOptions,
    own: &toolcell::hostfs::OwnFiles,
    server: McpServer,
    stop: &CancellationToken,
) -> anyhow::Result<(McpServer, Metrics, Ledger)> {
    let Some(state) = &options.state else {
        return Ok((server, Metrics::default(), Ledger::Local));
    };
    let store = crate::state::Store::open(state, own).map_err(anyhow::Error::msg)?;
    store.ping().await;
    let _ = store.check_epoch().await;
    eprintln!(
        "toolcell: quotas, approval answers and tasks are shared through the store at {} \
         (this replica: {})",
        store.shown(),
        store.replica()
    );
    let leases = Arc::new(crate::http::quota::Leases::default());
    let server = server.with_store(Arc::clone(&store));
    tokio::spawn(keep_alive(
        Arc::clone(&store),
        Arc::clone(&leases),
        stop.clone().cancelled_owned(),
    ));
    tokio::spawn(Arc::clone(server.tasks()).watch(stop.clone().cancelled_owned()));
    let metrics = Metrics::sharing(Arc::clone(&store));
    Ok((server, metrics, Ledger::Shared(store, leases)))
}

/// Without the `state` feature there is no store to share: each process keeps its own.
#[cfg(not(feature = "state"))]
async fn sharing(
    _options: &HttpOptions,
    _own: &toolcell::hostfs::OwnFiles,
    server: McpServer,
    _stop: &CancellationToken,
) -> anyhow::Result<(McpServer, Metrics, Ledger)> {
    Ok((server, Metrics::default(), Ledger::Local))
}

/// Write this replica's heartbeat every [`HEARTBEAT_EVERY`] and renew its leases every
/// [`LEASE_RENEW_EVERY`], and give back the leases of calls that ended as they end, until
/// `stop` completes.
///
/// [`HEARTBEAT_EVERY`]: crate::state::HEARTBEAT_EVERY
/// [`LEASE_RENEW_EVERY`]: crate::state::LEASE_RENEW_EVERY
#[cfg(feature = "state")]
async fn keep_alive(
    store: Arc<crate::state::Store>,
    leases: Arc<crate::http::quota::Leases>,
    stop: impl std::future::Future<Output = ()>,
) {
    let stop = futures_util::FutureExt::shared(Box::pin(stop));
    let giving_back = leases.give_back(&store, stop.clone());
    tokio::pin!(giving_back);
    let mut stop = stop;
    let mut heartbeat = tokio::time::interval(crate::state::HEARTBEAT_EVERY);
    let mut renew = tokio::time::interval(crate::state::LEASE_RENEW_EVERY);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = &mut stop => return,
            () = &mut giving_back => return,
            _ = heartbeat.tick() => store.beat().await,
            _ = renew.tick() => {
                // The epoch first: a store that lost its data starts the leases' grace, and
                // this replica's running calls' places are put back by the renewal. A store
                // that could not be reached (coming back from a restart) is tried again soon,
                // not a renewal later: the grace is short.
                while !(store.check_epoch().await.is_ok() && leases.renew(&store).await.is_ok())
                {
                    tokio::select! {
                        () = &mut stop => return,
                        () = tokio::time::sleep(crate::state::RENEW_RETRY_EVERY) => {}
                    }
                }
            }
        }
    }
}

/// The `Host` and `Origin` values requests may carry: the operator's, or loopback's.
fn allowed_hosts_and_origins(options: &HttpOptions) -> (Vec<String>, Vec<String>) {
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
    (hosts, origins)
}

/// A key set from a URL is fetched again now and then, for as long as the server runs.
fn refresh_key_set(front: &Front) {
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
}

/// SIGHUP reads the tokens file at `path` again, one reload at a time, off the reactor (it
/// reads files and opens workspaces).
fn reload_tokens_on_hangup(front: &Arc<Front>, path: Option<PathBuf>) -> anyhow::Result<()> {
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("listening for SIGHUP")?;
    let front = Arc::clone(front);
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
    Ok(())
}

/// Accept connections, each served by [`route`], until SIGTERM or SIGINT: at most
/// [`MAX_CONNECTIONS`](crate::http::MAX_CONNECTIONS), and
/// [`MAX_CONNECTIONS_PER_PEER`](crate::http::MAX_CONNECTIONS_PER_PEER) of one peer, where a new connection
/// takes the place of the oldest that has not yet made an authenticated request
/// ([`crate::http::connections`]); the first byte must arrive within [`FIRST_BYTE_TIMEOUT`]
/// and the headers within [`HEADER_READ_TIMEOUT`].
///
/// [`FIRST_BYTE_TIMEOUT`]: crate::http::connections::FIRST_BYTE_TIMEOUT
async fn accept_until_told_to_stop(
    front: &Arc<Front>,
    listener: &tokio::net::TcpListener,
    graceful: &GracefulShutdown,
) -> anyhow::Result<()> {
    let connections = Arc::new(crate::http::connections::Connections::default());
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
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
            _ = terminate.recv() => return Ok(()),
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let Some(place) = connections.admit(peer_key(peer.ip())) else {
            drop(stream);
            continue;
        };
        let front = Arc::clone(front);
        let connection = Arc::clone(&place.connection);
        let service = hyper::service::service_fn(move |request| {
            route(Arc::clone(&front), peer, Arc::clone(&connection), request)
        });
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_READ_TIMEOUT)
            .max_buf_size(crate::http::MAX_HEAD_BYTES);
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            // The first byte, soon: a connection that sends nothing holds a place for naught.
            let mut byte = [0u8; 1];
            let first = tokio::select! {
                ready = tokio::time::timeout(
                    crate::http::connections::FIRST_BYTE_TIMEOUT,
                    stream.peek(&mut byte),
                ) => matches!(ready, Ok(Ok(1))),
                () = place.connection.evicted() => false,
            };
            if !first {
                return;
            }
            let served = watcher.watch(builder.serve_connection(TokioIo::new(stream), service));
            tokio::select! {
                ended = served => {
                    if let Err(error) = ended {
                        tracing::debug!(%error, "an HTTP connection ended with an error");
                    }
                }
                // A newer connection took this unproven one's place: dropped, so closed.
                () = place.connection.evicted() => {}
            }
            drop(place);
        });
    }
}

/// How long the accept loop pauses after an error accepting a connection (out of descriptors):
/// long enough that a persistent error does not spin a core, short enough to go unnoticed.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// Drain: answer `503` to new requests, let calls in flight finish within `grace`, stop the
/// rest (each answers `cancelled`), and close the connections once their answers are written.
async fn drain(
    front: &Front,
    graceful: GracefulShutdown,
    grace: Duration,
    sessions_end: &CancellationToken,
) {
    front.draining.store(true, Ordering::Relaxed);
    let running = &front.running;
    eprintln!(
        "toolcell: shutting down: {} call(s) in flight, {} s to finish",
        running.count(),
        grace.as_secs_f64()
    );
    let connections_done = graceful.shutdown();
    tokio::pin!(connections_done);
    let finished = tokio::time::timeout(grace, running.until_idle()).await;
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
}
