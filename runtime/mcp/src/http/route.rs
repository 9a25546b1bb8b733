//! One request's way through the front: the route, then for `/mcp` its place among the
//! client's requests, its body read once, the scope check, its place in the client's share,
//! its quotas, then the call, by the fast path or rmcp.

use crate::front::FromFront;
use crate::http::fast;
use crate::http::front::{Auth, BoxResponse, Caller, Front, respond};
use crate::http::metrics::Refusal;
use crate::http::quota::{Admission, NotAdmitted, Reserve};
use crate::http::reading::Reading;
use crate::http::running::{CallKey, HttpCall};
use crate::http::share::{MAX_REQUESTS_PER_CLIENT, Place};
use crate::http::{BODY_READ_TIMEOUT, MAX_REQUEST_BODY_BYTES, MCP_PATH};
use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime};

/// Answer one request. Only a request that passed authentication (or was made where none is
/// configured) keeps its connection open for the next: every other answer (a probe, a refusal,
/// a `404`) closes it, so that a client without a token cannot hold connections open, idle,
/// with probes or refused requests.
pub(crate) async fn route(
    front: Arc<Front>,
    peer: SocketAddr,
    connection: Arc<crate::http::connections::Connection>,
    request: Request<Incoming>,
) -> Result<BoxResponse, Infallible> {
    // Busy while this request is answered: never closed for another connection meanwhile.
    let _busy = connection.busy();
    let (mut response, keep) = dispatch(&front, peer, &connection, request).await;
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
    connection: &crate::http::connections::Connection,
    request: Request<Incoming>,
) -> (BoxResponse, bool) {
    // A target that is not a path (`POST http://evil.com/mcp`) is not for this server, on
    // any route.
    if let Err(refused) = crate::http::guard::check_origin_form(request.uri()) {
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
        metadata if get && metadata.starts_with(crate::http::oauth::METADATA_PATH) => {
            match &front.auth {
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
            }
        }
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
            // A token in the URL ends up in logs and proxies' histories: MCP puts it in the
            // Authorization header only, and a request carrying one there is refused whole.
            if carries_a_token_in_its_query(request.uri()) {
                front.metrics.refused(Refusal::ForeignRequest);
                return (
                    respond(
                        StatusCode::BAD_REQUEST,
                        &[],
                        "an access token goes in the Authorization header, never in the URL\n",
                    ),
                    false,
                );
            }
            match front.authenticate(&request) {
                Ok(caller) => {
                    // Proven from here: its place is its own while it is answered and after.
                    connection.authenticated(&front.client_of(&caller, peer));
                    return (serve_mcp(front, peer, caller, request).await, true);
                }
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
/// requests, its body read once ([`read_message`]), the scope check ([`check_scope`]), its
/// place in the client's share ([`take_share`]), its quotas ([`admit`]), then the call, by the
/// fast path or rmcp ([`hand_over`]). Each step refuses with its own answer.
async fn serve_mcp(
    front: &Arc<Front>,
    peer: SocketAddr,
    caller: Caller,
    request: Request<Incoming>,
) -> BoxResponse {
    let client = front.client_of(&caller, peer);
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
    let (mut parts, body) = request.into_parts();
    // A body declared longer than any is read: refused now, not once it has trickled in.
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_REQUEST_BODY_BYTES as u64) {
        front.metrics.refused(Refusal::BodyTooLarge);
        return respond(
            StatusCode::PAYLOAD_TOO_LARGE,
            &[(header::CONNECTION, "close")],
            &format!("a request body may be at most {MAX_REQUEST_BODY_BYTES} bytes\n"),
        );
    }
    let admitted = async {
        let reading = read_message(front, &parts.method, body).await?;
        let session = open_session(front, &client, &parts.headers, reading.as_ref())?;
        let is_call = reading.as_ref().is_some_and(Reading::runs_guest);
        check_scope(front, &caller, reading.as_ref())?;
        let share = take_share(front, &client, is_call)?;
        // Quotas last: a request refused for another reason takes nothing from them.
        let admission = admit(front, &caller, is_call, reading.as_ref()).await?;
        Ok::<_, Box<BoxResponse>>((reading, session, share, admission))
    };
    let (reading, session, share, admission) = match admitted.await {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    // In a session, a call's log level, and the route its questions' answers come back by
    // (for a client that declared it can be asked something).
    let (session_level, route) = match (&session, &reading) {
        (Some(session), Some(reading)) if reading.runs_guest() => {
            let asks = {
                let declared = &session.capabilities;
                declared.sampling.is_some()
                    || declared.elicitation.is_some()
                    || declared.roots.is_some()
            };
            (
                front.levels.get(session).await,
                (asks && reading.may_ask()).then(|| front.questions.route(&client)),
            )
        }
        _ => (None, None),
    };
    let call: Arc<dyn FromFront> = Arc::new(HttpCall {
        client: client.clone(),
        tenant: caller.tenant().cloned(),
        admission,
        _share: share,
        running: Arc::clone(&front.running),
        metrics: Arc::clone(&front.metrics),
        session,
        session_level,
        route: route.clone(),
        levels: Arc::clone(&front.levels),
    });
    parts.extensions.insert(call);
    hand_over(front, parts, reading, client, route).await
}

/// The session a request of the `initialize` era names in its `Mcp-Session-Id`
/// (`http/session.rs`): `None` for a request without one, a 2026-07-28 request (that revision
/// has no sessions) and an `initialize` (which begins one); `404` for an id that does not open
/// for this client (not this server's, another client's, expired), as MCP answers a session
/// that ended: the client initializes again.
fn open_session(
    front: &Front,
    client: &str,
    headers: &http::HeaderMap,
    reading: Option<&Reading>,
) -> Result<Option<crate::http::session::Session>, Box<BoxResponse>> {
    let Some(id) = headers.get(crate::http::session::SESSION_HEADER) else {
        return Ok(None);
    };
    let revision = headers
        .get("mcp-protocol-version")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    if revision >= "2026-07-28" || reading.is_some_and(|reading| reading.initialize().is_some()) {
        return Ok(None);
    }
    let opened = front.server.approvals.key().and_then(|key| {
        let id = id.to_str().ok()?;
        crate::http::session::open(key, client, id, SystemTime::now())
    });
    match opened {
        Some(session) => Ok(Some(session)),
        None => {
            let id = reading
                .and_then(Reading::id)
                .filter(|id| id.is_number() || id.as_str().is_some_and(|id| id.len() <= 64))
                .cloned()
                .unwrap_or(serde_json::Value::Null);
            Err(Box::new(respond(
                StatusCode::NOT_FOUND,
                &[(header::CONTENT_TYPE, "application/json")],
                &serde_json::json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {
                        "code": SESSION_NOT_FOUND,
                        "message": "Session not found: this server did not give you that \
                                    session id, or it expired; initialize again",
                    },
                })
                .to_string(),
            )))
        }
    }
}

/// The JSON-RPC error code of a session id that does not open (as MCP's own SDKs answer it).
pub const SESSION_NOT_FOUND: i64 = -32001;

/// The request's body, read to its limit here (so a too-large one is refused before MCP and a
/// call's tool is known for the scope check), and parsed once: every check after this decides
/// on the reading, and it is what runs (`http/reading.rs`). Only a `POST` carries a message.
async fn read_message(
    front: &Front,
    method: &Method,
    body: Incoming,
) -> Result<Option<Reading>, Box<BoxResponse>> {
    let collected = tokio::time::timeout(
        BODY_READ_TIMEOUT,
        http_body_util::Limited::new(body, MAX_REQUEST_BODY_BYTES).collect(),
    )
    .await;
    let Ok(collected) = collected else {
        return Err(Box::new(respond(
            StatusCode::REQUEST_TIMEOUT,
            &[(header::CONNECTION, "close")],
            "the request body did not arrive in time\n",
        )));
    };
    let body = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            if error.is::<http_body_util::LengthLimitError>() {
                front.metrics.refused(Refusal::BodyTooLarge);
                return Err(Box::new(respond(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &[],
                    &format!("a request body may be at most {MAX_REQUEST_BODY_BYTES} bytes\n"),
                )));
            }
            return Err(Box::new(respond(
                StatusCode::BAD_REQUEST,
                &[],
                "the request body was cut off\n",
            )));
        }
    };
    let reading = if *method == Method::POST {
        match Reading::parse(&body) {
            Ok(reading) => Some(reading),
            Err(unreadable) => {
                front.metrics.refused(Refusal::Unreadable);
                return Err(Box::new(respond(
                    StatusCode::BAD_REQUEST,
                    &[(header::CONTENT_TYPE, "application/json")],
                    &unreadable.body(),
                )));
            }
        }
    } else {
        None
    };
    // Read: the bytes are not kept while the call runs.
    drop(body);
    Ok(reading)
}

/// Under OAuth, whether the token carries the scopes the request needs: the server's, and each
/// called tool's (`403` with `insufficient_scope` naming the first missing).
fn check_scope(
    front: &Front,
    caller: &Caller,
    reading: Option<&Reading>,
) -> Result<(), Box<BoxResponse>> {
    let (Auth::OAuth(oauth), Caller::OAuth(principal)) = (&front.auth, caller) else {
        return Ok(());
    };
    let called = reading.map(Reading::tools_called).unwrap_or_default();
    let offer = reading.and_then(Reading::offer_called);
    let lacking = std::iter::once(None)
        .chain(called.into_iter().map(Some))
        .chain(offer.as_deref().map(Some))
        .find_map(|tool| oauth.missing_scope(principal, tool));
    if let Some(scope) = lacking {
        return Err(Box::new(respond(
            StatusCode::FORBIDDEN,
            &[(
                header::WWW_AUTHENTICATE,
                &format!(
                    r#"Bearer error="insufficient_scope", scope="{scope}", resource_metadata="{}""#,
                    oauth.metadata_url()
                ),
            )],
            &format!("this call needs the scope {scope:?}\n"),
        )));
    }
    Ok(())
}

/// A call's place in its client's share of the pool, which goes with it if it becomes a task
/// ([`crate::http::share`]); `None` for a request that is not a call.
fn take_share(
    front: &Front,
    client: &str,
    is_call: bool,
) -> Result<Option<Place<String>>, Box<BoxResponse>> {
    if !is_call {
        return Ok(None);
    }
    match front
        .per_client_calls
        .enter(client.to_owned(), front.call_share)
    {
        Some(place) => Ok(Some(place)),
        None => {
            front.metrics.refused(Refusal::TooManyRequests);
            Err(Box::new(respond(
                StatusCode::TOO_MANY_REQUESTS,
                &[(header::RETRY_AFTER, "1")],
                &format!(
                    "too many calls in flight for this client (at most {}, tasks included)\n",
                    front.call_share
                ),
            )))
        }
    }
}

/// A call's admission under the quotas it must fit (its tenant's, then its token's): `429` with
/// `Retry-After` past one, `503` when the shared store that keeps them cannot be reached.
async fn admit(
    front: &Front,
    caller: &Caller,
    is_call: bool,
    reading: Option<&Reading>,
) -> Result<Option<Admission>, Box<BoxResponse>> {
    let quotas = caller.quotas();
    if quotas.is_empty() || !is_call {
        return Ok(None);
    }
    // What the call may run at most (its tool's deadline and fuel in the tenant's policy) is
    // reserved of a daily budget until it ends.
    let called = reading.and_then(|r| {
        r.tools_called()
            .pop()
            .map(str::to_owned)
            .or_else(|| r.offer_called())
    });
    let limits = match (caller.tenant(), called) {
        (Some(tenant), Some(tool)) => front.runtime.limits_of(&tenant.context, &tool),
        _ => toolcell::limits::Limits::default(),
    };
    let reserve = Reserve {
        time: limits.timeout,
        fuel: limits.fuel.unwrap_or(0),
    };
    match front
        .ledger
        .admit(&quotas, Instant::now(), SystemTime::now(), reserve)
        .await
    {
        Ok(admission) => Ok(Some(admission)),
        Err(NotAdmitted::Refused(refused)) => {
            front.metrics.quota_refused(&refused);
            Err(Box::new(respond(
                StatusCode::TOO_MANY_REQUESTS,
                &[
                    (header::RETRY_AFTER, &refused.retry_after.to_string()),
                    (header::CONTENT_TYPE, "application/json"),
                ],
                &refused.body(reading.and_then(Reading::id)),
            )))
        }
        Err(NotAdmitted::Unavailable(unavailable)) => {
            front.metrics.refused(Refusal::StateUnavailable);
            Err(Box::new(respond(
                StatusCode::SERVICE_UNAVAILABLE,
                &[
                    (header::RETRY_AFTER, "1"),
                    (header::CONTENT_TYPE, "application/json"),
                ],
                &unavailable_body(&unavailable, reading.and_then(Reading::id)),
            )))
        }
    }
}

/// Hand the admitted request to what answers it: the fast path for the usual stateless call,
/// rmcp for anything else (as the front read it, written out again); and a
/// `notifications/cancelled` rmcp accepted stops the call it names, if it is `client`'s.
async fn hand_over(
    front: &Front,
    parts: http::request::Parts,
    reading: Option<Reading>,
    client: String,
    route: Option<Arc<crate::http::questions::Route>>,
) -> BoxResponse {
    let Some(reading) = reading else {
        // Not a `POST`: rmcp answers it (no stream but a request's own, so `405`), with
        // nothing to read.
        return pass_to_rmcp(front, parts, Bytes::new()).await;
    };
    // A client's answer to a question a call asked it on its stream: handed to that call,
    // here or, through the shared store, at the replica where it runs.
    if let Some((name, posted)) = reading.answer() {
        return answer_question(front, &client, name, posted, reading.id()).await;
    }
    // Every check above done, the usual stateless call is answered here, as rmcp
    // would answer it; anything else goes on to rmcp, as the front read it.
    // The reading is not kept while the call runs either: the call holds what it needs.
    if front.fast_path
        && let Some(accepted) = fast::accept(&parts, &reading, &front.server)
    {
        drop(reading);
        front.metrics.fast_path();
        return fast::answer(&front.server, accepted, parts, &front.fast_calls).await;
    }
    let (cancelled, initialize, rewritten) = (
        reading.cancelled(),
        reading.initialize(),
        reading.to_bytes(),
    );
    drop(reading);
    let mut response = pass_to_rmcp(front, parts, rewritten).await;
    // Without sessions, rmcp cannot route a `notifications/cancelled` to the request it
    // names: the front stops that call, if it is this client's, and only once rmcp
    // has accepted the request (its media type, its headers, one message): a request
    // refused for any reason has no effect.
    if response.status().is_success()
        && let Some(request) = cancelled
    {
        let key = CallKey { client, request };
        front.running.stop(&key);
        return response;
    }
    // An `initialize` answered: its session id is what the client declared, sealed.
    if response.status() == StatusCode::OK
        && let Some(declared) = initialize
        && let Some(key) = front.server.approvals.key()
        && let Some(id) = crate::http::session::issue(key, &client, &declared, SystemTime::now())
        && let Ok(value) = header::HeaderValue::from_str(&id)
    {
        response
            .headers_mut()
            .insert(crate::http::session::SESSION_HEADER, value);
    }
    // A call that may ask its client: the questions on its stream renamed, so that their
    // answers find it.
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    match route {
        Some(route) if streams => {
            response.map(|body| crate::http::questions::Renamed::new(body, route).boxed())
        }
        _ => response,
    }
}

/// The answer to a `POST` of a client's answer to a question (`http/questions.rs`): `202`
/// when it was handed on, `400` (a JSON-RPC error without an id, as MCP answers a message it
/// cannot accept) when it is not taken, `503` when the store that would carry it is out of
/// reach.
async fn answer_question(
    front: &Front,
    client: &str,
    name: &str,
    posted: crate::asking::Posted,
    id: Option<&serde_json::Value>,
) -> BoxResponse {
    use crate::http::questions::Delivered;
    match front.questions.deliver(client, name, posted).await {
        Delivered::Taken | Delivered::Relayed => respond(StatusCode::ACCEPTED, &[], ""),
        Delivered::Refused(why) => respond(
            StatusCode::BAD_REQUEST,
            &[(header::CONTENT_TYPE, "application/json")],
            &serde_json::json!({
                "jsonrpc": "2.0",
                "id": serde_json::Value::Null,
                "error": { "code": crate::http::INVALID_REQUEST, "message": why },
            })
            .to_string(),
        ),
        Delivered::Unavailable(unavailable) => {
            front.metrics.refused(Refusal::StateUnavailable);
            respond(
                StatusCode::SERVICE_UNAVAILABLE,
                &[
                    (header::RETRY_AFTER, "1"),
                    (header::CONTENT_TYPE, "application/json"),
                ],
                &unavailable_body(&unavailable, id),
            )
        }
    }
}

/// The JSON-RPC error refusing the request `id` (echoed if short) because the shared store
/// could not be reached: code [`STATE_UNAVAILABLE`](crate::approval::STATE_UNAVAILABLE), the
/// store named, at most [`crate::http::quota::MAX_REFUSAL_BYTES`] long.
fn unavailable_body(
    unavailable: &crate::state::Unavailable,
    id: Option<&serde_json::Value>,
) -> String {
    let id = match id {
        Some(serde_json::Value::Number(number)) => serde_json::Value::Number(number.clone()),
        Some(serde_json::Value::String(text))
            if text.chars().count() <= crate::http::quota::MAX_ECHOED_ID_CHARS =>
        {
            serde_json::Value::String(text.clone())
        }
        _ => serde_json::Value::Null,
    };
    let message: String = unavailable
        .to_string()
        .chars()
        .take(crate::http::quota::MAX_REFUSAL_BYTES / 2)
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

/// Whether `uri`'s query names an access token (`access_token`, as RFC 6750 once allowed):
/// read as a server reading it would, percent-decoded (`access%5Ftoken`), split on `&` and on
/// `;` (which some still take for a separator).
fn carries_a_token_in_its_query(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|query| {
        let decoded = percent_encoding::percent_decode_str(query).decode_utf8_lossy();
        decoded.split(['&', ';']).any(|pair| {
            pair.split('=')
                .next()
                .is_some_and(|name| name.trim().eq_ignore_ascii_case("access_token"))
        })
    })
}
