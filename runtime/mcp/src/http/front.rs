//! Everything a request is handled with ([`Front`]), who sent it ([`Caller`], once
//! authenticated), and the plain answers the front gives itself.

use crate::McpServer;
use crate::http::auth::{MetricsToken, Tokens};
use crate::http::guard::Guard;
use crate::http::metrics::{Metrics, Refusal};
use crate::http::oauth::{OAuth, Principal};
use crate::http::quota::{Ledger, Limiter};
use crate::http::running::Running;
use crate::http::share::Counts;
use crate::http::tenant::Tenant;
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::convert::Infallible;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, RwLock};
use toolcell::Runtime;

pub(crate) type BoxResponse = Response<BoxBody<Bytes, Infallible>>;

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
pub(crate) enum Caller {
    Anonymous,
    /// A static token's tenant, and the token's own quota, if it has one.
    Token(Arc<Tenant>, Option<Arc<Limiter>>),
    OAuth(Principal),
}

impl Caller {
    pub(crate) fn tenant(&self) -> Option<&Arc<Tenant>> {
        match self {
            Caller::Anonymous => None,
            Caller::Token(tenant, _) => Some(tenant),
            Caller::OAuth(principal) => Some(&principal.tenant),
        }
    }

    /// The quotas a call of this caller must fit: its tenant's, then its token's.
    pub(crate) fn quotas(&self) -> Vec<&Arc<Limiter>> {
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

/// Everything a request is handled with.
pub(crate) struct Front {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) mcp: StreamableHttpService<McpServer, LocalSessionManager>,
    /// The server rmcp's service makes for each request, for the fast path to call directly.
    pub(crate) server: McpServer,
    /// Whether a stateless `tools/call` may be answered without rmcp ([`fast`]).
    pub(crate) fast_path: bool,
    pub(crate) auth: Auth,
    pub(crate) metrics: Arc<Metrics>,
    /// Requests in flight per client (a tenant's name, or a peer address).
    pub(crate) per_client: Counts<String>,
    /// Calls in flight per client, tasks included ([`crate::http::share`]).
    pub(crate) per_client_calls: Counts<String>,
    /// How many calls one client may have in flight: its share of the runtime's slots.
    pub(crate) call_share: usize,
    /// Where quotas are kept: here, or in the store replicas share.
    pub(crate) ledger: Ledger,
    pub(crate) draining: AtomicBool,
    /// The allowed `Host` and `Origin` values, checked before anything else.
    pub(crate) guard: Guard,
    /// The operator's token for `/metrics`, if one was given.
    pub(crate) metrics_token: Option<MetricsToken>,
    /// The calls running now.
    pub(crate) running: Arc<Running>,
    /// Who an anonymous caller is, for the fair shares.
    pub(crate) anonymous: crate::http::options::AnonymousClients,
    /// The questions calls asked their clients on their streams, waiting for answers.
    pub(crate) questions: Arc<crate::http::questions::Questions>,
    /// The log levels sessions set.
    pub(crate) levels: Arc<crate::http::session::Levels>,
    /// The fast path's calls in flight: one alone runs on its connection's task.
    pub(crate) fast_calls: std::sync::atomic::AtomicUsize,
}

impl Front {
    /// Who `caller` (from `peer`) is, for the fair shares and the connections: its tenant, or,
    /// anonymous, its address (or every anonymous caller together, `--anonymous-clients one`).
    pub(crate) fn client_of(&self, caller: &Caller, peer: std::net::SocketAddr) -> String {
        match caller.tenant() {
            Some(tenant) => format!("tenant:{}", tenant.name),
            None => self.anonymous.client(peer.ip()),
        }
    }

    /// Every tenant's quota, for the metrics.
    pub(crate) fn tenant_quotas(&self) -> Vec<Arc<Limiter>> {
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
    pub(crate) fn reload_tokens(&self, path: &std::path::Path) {
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
    pub(crate) fn metrics_allowed<B>(&self, request: &Request<B>) -> Result<(), Box<BoxResponse>> {
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
    pub(crate) fn authenticate<B>(&self, request: &Request<B>) -> Result<Caller, Box<BoxResponse>> {
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
                        why.to_string().chars()
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

pub(crate) fn respond(
    status: StatusCode,
    headers: &[(header::HeaderName, &str)],
    body: &str,
) -> BoxResponse {
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
