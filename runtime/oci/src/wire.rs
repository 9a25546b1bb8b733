//! A registry's HTTP API, spoken here rather than by `oci-client`: every body a registry or its
//! token endpoint sends is read through a stream that stops at a named limit.
//!
//! `oci-client` reads manifests, token answers and error bodies whole before anything can look
//! at their length, so a registry that sends a chunked body without a `Content-Length` could
//! grow `toolcell pull` without bound (2.5 GB before it failed, in a review). Its types
//! (references, manifests, credentials) are still used; its network calls are not.
//!
//! What is spoken: the [distribution specification]'s manifest `HEAD`/`GET`/`PUT`, blob `GET`
//! and monolithic upload (`POST` then `PUT`), and the docker token protocol (a `401` with a
//! `Bearer` challenge names a token endpoint; its answer is the token). A `401` is answered
//! once per request: a `Bearer` challenge with a fresh token, a `Basic` one with the basic
//! credentials, if any. Credentials go to the registry's own origin and to the token endpoint
//! its challenge names, never to an upload `Location` elsewhere; a registry not reached over
//! plain HTTP is HTTPS throughout (redirects and token endpoint included).
//!
//! [distribution specification]: https://github.com/opencontainers/distribution-spec/blob/main/spec.md
//!
//! Longer than the house's 700 lines on purpose: it is one protocol client (the token
//! challenge, manifests, blobs, uploads, error bodies) around one private `Wire`, and every
//! body it reads goes through the same bounded reader; split, the pieces would share that
//! private state through wider visibility.

use crate::error::{Limit, OciError};
use crate::{MAX_MANIFEST_BYTES, ToolRef, digest_of};
use oci_client::manifest::{
    IMAGE_MANIFEST_LIST_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_INDEX_MEDIA_TYPE,
    OCI_IMAGE_MEDIA_TYPE,
};
use oci_client::secrets::RegistryAuth;
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderValue, LOCATION,
    WWW_AUTHENTICATE,
};
use reqwest::{Method, RequestBuilder, Response, StatusCode, Url};
use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

/// The longest error body read from a registry or its token endpoint (the rest is not read,
/// and the error says so). Protects against a registry that answers an error with an endless
/// body; the distribution specification's error envelope needs a few hundred bytes.
pub const MAX_ERROR_BODY_BYTES: usize = 64 << 10;

/// The longest answer read from a registry's token endpoint. Protects against a token endpoint
/// (whose address the registry names) that answers with an endless body; a token is a few KiB.
pub const MAX_TOKEN_BYTES: usize = 64 << 10;

/// The most characters of a registry's error text shown in an error.
const SHOWN_ERROR_CHARS: usize = 300;

/// The media types asked for when a tag is resolved (what `oci-client` asked for).
const MANIFEST_MEDIA_TYPES: [&str; 4] = [
    OCI_IMAGE_MEDIA_TYPE,
    IMAGE_MANIFEST_MEDIA_TYPE,
    IMAGE_MANIFEST_LIST_MEDIA_TYPE,
    OCI_IMAGE_INDEX_MEDIA_TYPE,
];

/// How long connecting to a registry may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a registry may leave a response without a byte: a stalled registry is an error,
/// not a hung pull.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The header in which a registry reports a manifest's or blob's digest.
const DIGEST_HEADER: &str = "Docker-Content-Digest";

/// The [`Limit`] a `usize` or `u64` constant sets, named after it.
macro_rules! limit {
    ($constant:ident) => {
        Limit {
            name: stringify!($constant),
            bytes: $constant as u64,
        }
    };
}

/// Which access a request needs: the action of a token's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    Pull,
    Push,
}

/// What went wrong talking to a registry (the reference is added by the caller).
#[derive(Debug)]
pub(super) enum WireError {
    /// No answer: connecting, TLS, or a timeout before the status line.
    Unreachable(reqwest::Error),
    /// An answer whose body broke off (or stalled past the read timeout).
    Transfer {
        what: &'static str,
        error: reqwest::Error,
    },
    /// A body longer than its limit: not read further.
    TooLarge { what: &'static str, limit: Limit },
    /// An error status, with what its body said (at most [`MAX_ERROR_BODY_BYTES`] read).
    Status {
        status: StatusCode,
        url: String,
        /// The distribution specification's error codes, if its body was an error envelope.
        codes: Vec<String>,
        message: String,
        /// The body was longer than [`MAX_ERROR_BODY_BYTES`].
        cut: bool,
    },
    /// The digest the registry reports for bytes just pushed is not theirs.
    DigestMismatch {
        what: &'static str,
        computed: String,
        reported: String,
    },
    /// Anything the protocol does not allow (a token answer that is not JSON, no `Location`).
    Malformed(String),
}

impl WireError {
    /// The registry (or its token endpoint) refused the credentials, or asked for some.
    pub(super) fn denied(&self) -> bool {
        match self {
            WireError::Status { status, codes, .. } => {
                matches!(*status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                    || codes
                        .iter()
                        .any(|code| code == "UNAUTHORIZED" || code == "DENIED")
            }
            _ => false,
        }
    }

    /// The registry has no such manifest or repository.
    pub(super) fn not_found(&self) -> bool {
        match self {
            WireError::Status { status, codes, .. } => {
                *status == StatusCode::NOT_FOUND
                    || codes
                        .iter()
                        .any(|code| code == "MANIFEST_UNKNOWN" || code == "NAME_UNKNOWN")
            }
            _ => false,
        }
    }

    /// The registry could not be reached at all.
    pub(super) fn unreachable(&self) -> bool {
        matches!(self, WireError::Unreachable(_))
    }

    /// This error about `reference`, for the caller.
    pub(super) fn about(self, reference: &ToolRef) -> OciError {
        let reference = reference.to_string();
        match self {
            WireError::TooLarge { what, limit } => OciError::TooLarge {
                reference,
                what,
                limit,
            },
            WireError::DigestMismatch {
                what,
                computed,
                reported,
            } => OciError::DigestMismatch {
                reference,
                what,
                computed,
                reported,
            },
            error @ WireError::Status { .. } if error.not_found() => OciError::NotFound {
                reference,
                why: error.to_string(),
            },
            error @ (WireError::Unreachable(_) | WireError::Transfer { .. }) => {
                OciError::Unreachable {
                    reference,
                    why: error.to_string(),
                }
            }
            error @ WireError::Status { status, .. } => OciError::Refused {
                reference,
                status: status.as_u16(),
                why: error.to_string(),
            },
            WireError::Malformed(why) => OciError::Invalid { reference, why },
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Unreachable(error) => {
                write!(f, "the registry cannot be reached: {}", chain(error))
            }
            WireError::Transfer { what, error } => {
                write!(f, "reading {what}: {}", chain(error))
            }
            WireError::TooLarge { what, limit } => {
                write!(f, "{what} is longer than {limit}: not read further")
            }
            WireError::Status {
                status,
                url,
                codes,
                message,
                cut,
            } => {
                write!(f, "{url} answered {status}")?;
                if !codes.is_empty() {
                    write!(f, " ({})", codes.join(", "))?;
                }
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                if *cut {
                    write!(
                        f,
                        " (its error body is longer than {}: not read further)",
                        limit!(MAX_ERROR_BODY_BYTES)
                    )?;
                }
                Ok(())
            }
            WireError::DigestMismatch {
                what,
                computed,
                reported,
            } => write!(
                f,
                "the registry reports {reported} for {what} just pushed, but the bytes pushed \
                 are {computed}"
            ),
            WireError::Malformed(why) => f.write_str(why),
        }
    }
}

/// `error` and its sources, on one line.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// How a registry's `401` says to authenticate.
#[derive(Debug, PartialEq, Eq)]
enum Challenge {
    /// Get a token from `realm` (the docker token protocol).
    Bearer {
        realm: String,
        service: Option<String>,
    },
    /// Send the user name and password.
    Basic,
}

/// The challenge of a `401`'s `WWW-Authenticate` headers (a `Bearer` one first).
fn challenge(headers: &HeaderMap) -> Option<Challenge> {
    let mut found = None;
    for value in headers.get_all(WWW_AUTHENTICATE) {
        match value.to_str().ok().and_then(parse_challenge) {
            Some(bearer @ Challenge::Bearer { .. }) => return Some(bearer),
            Some(basic) => found = Some(basic),
            None => {}
        }
    }
    found
}

/// `Bearer realm="…",service="…"` or `Basic realm="…"`.
fn parse_challenge(text: &str) -> Option<Challenge> {
    let text = text.trim();
    let (scheme, rest) = text.split_once(' ').unwrap_or((text, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let parameters = auth_parameters(rest);
    let get = |name: &str| {
        parameters
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.clone())
    };
    Some(Challenge::Bearer {
        realm: get("realm")?,
        service: get("service"),
    })
}

/// The `name=value` and `name="quoted value"` parameters of a challenge, comma-separated.
fn auth_parameters(text: &str) -> Vec<(String, String)> {
    let mut parameters = Vec::new();
    let mut rest = text.trim_start();
    while let Some((name, after)) = rest.split_once('=') {
        let name = name.trim().trim_start_matches(',').trim().to_owned();
        let after = after.trim_start();
        let (value, next) = if let Some(quoted) = after.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let mut end = quoted.len();
            while let Some((at, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, escaped)) = chars.next() {
                            value.push(escaped);
                        }
                    }
                    '"' => {
                        end = at + 1;
                        break;
                    }
                    c => value.push(c),
                }
            }
            (value, &quoted[end.min(quoted.len())..])
        } else {
            let end = after.find(',').unwrap_or(after.len());
            (after[..end].trim().to_owned(), &after[end..])
        };
        parameters.push((name, value));
        rest = next.trim_start().trim_start_matches(',').trim_start();
    }
    parameters
}

/// What a request carries to be let in.
#[derive(Clone, Default)]
struct Authorization {
    /// The `Authorization` header, if any.
    header: Option<HeaderValue>,
}

/// One registry repository, spoken to over HTTP(S) with a limit on every body read.
pub(super) struct Wire {
    http: reqwest::Client,
    /// `https://HOST[:PORT]/` (or `http://` for a loopback or insecure registry).
    origin: Url,
    repository: String,
    credentials: RegistryAuth,
    /// The authorization found for [`Access::Pull`] and [`Access::Push`], once found.
    authorized: Mutex<[Authorization; 2]>,
}

impl Wire {
    /// A client for `reference`'s repository: HTTPS (redirects and token endpoints included),
    /// or plain HTTP for a loopback registry or one named in `insecure`. The environment's
    /// proxies (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`) are used, but never for a loopback
    /// address: a proxy would see a loopback registry's plain HTTP, credentials included, and
    /// could answer for it. No other proxy setting (`ALL_PROXY`) is read.
    pub(super) fn new(
        reference: &ToolRef,
        insecure: &[String],
        credentials: RegistryAuth,
    ) -> Result<Wire, String> {
        let registry = reference.registry();
        let plain = reference.is_loopback() || insecure.iter().any(|allowed| allowed == registry);
        let variable = |names: [&str; 2]| {
            names
                .iter()
                .find_map(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
        };
        // Set here (rather than leaving reqwest to read the environment) so that loopback is
        // exempt.
        let https_proxy = variable(["HTTPS_PROXY", "https_proxy"]);
        let http_proxy = variable(["HTTP_PROXY", "http_proxy"]);
        let loopback = "localhost,127.0.0.0/8,::1";
        let no_proxy = match variable(["NO_PROXY", "no_proxy"]) {
            Some(listed) => format!("{listed},{loopback}"),
            None => loopback.to_owned(),
        };
        let proxy_error = |error: reqwest::Error| format!("the proxy in the environment: {error}");
        let mut builder = reqwest::Client::builder()
            .no_proxy()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(concat!("toolcell/", env!("CARGO_PKG_VERSION")))
            .https_only(!plain);
        if let Some(proxy) = &https_proxy {
            builder = builder.proxy(
                reqwest::Proxy::https(proxy)
                    .map_err(proxy_error)?
                    .no_proxy(reqwest::NoProxy::from_string(&no_proxy)),
            );
        }
        if let Some(proxy) = &http_proxy {
            builder = builder.proxy(
                reqwest::Proxy::http(proxy)
                    .map_err(proxy_error)?
                    .no_proxy(reqwest::NoProxy::from_string(&no_proxy)),
            );
        }
        let http = builder
            .build()
            .map_err(|error| format!("an HTTP client: {}", chain(&error)))?;
        let scheme = if plain { "http" } else { "https" };
        let host = reference.oci().resolve_registry();
        let origin = Url::parse(&format!("{scheme}://{host}/"))
            .map_err(|error| format!("{reference}: the registry {host:?}: {error}"))?;
        let mut authorized: [Authorization; 2] = Default::default();
        if let RegistryAuth::Bearer(token) = &credentials {
            let header = sensitive(&format!("Bearer {token}"))?;
            authorized = [
                Authorization {
                    header: Some(header.clone()),
                },
                Authorization {
                    header: Some(header),
                },
            ];
        }
        Ok(Wire {
            http,
            origin,
            repository: reference.repository().to_owned(),
            credentials,
            authorized: Mutex::new(authorized),
        })
    }

    /// `/v2/REPOSITORY/{rest}` on the registry.
    fn url(&self, rest: &str) -> Result<Url, WireError> {
        self.origin
            .join(&format!("v2/{}/{rest}", self.repository))
            .map_err(|error| WireError::Malformed(format!("a registry URL: {error}")))
    }

    fn authorization(&self, access: Access) -> Authorization {
        let authorized = toolcell::sync::lock(&self.authorized);
        authorized[access as usize].clone()
    }

    fn remember(&self, access: Access, found: Authorization) {
        let mut authorized = toolcell::sync::lock(&self.authorized);
        authorized[access as usize] = found;
    }

    /// Send `method url` (with `prepare`'s headers and body), authorized for `access`; a `401`
    /// is answered once, as its challenge asks (credentials go only to the registry's own
    /// origin). The answer's body is not read.
    async fn send(
        &self,
        access: Access,
        method: Method,
        url: Url,
        prepare: impl Fn(RequestBuilder) -> RequestBuilder,
    ) -> Result<Response, WireError> {
        let ours = url.origin() == self.origin.origin();
        let mut authorization = if ours {
            self.authorization(access)
        } else {
            Authorization::default()
        };
        let mut answered = false;
        loop {
            let mut request = prepare(self.http.request(method.clone(), url.clone()));
            if let Some(header) = &authorization.header {
                request = request.header(AUTHORIZATION, header.clone());
            }
            let response = request.send().await.map_err(WireError::Unreachable)?;
            if response.status() != StatusCode::UNAUTHORIZED || answered || !ours {
                return Ok(response);
            }
            answered = true;
            let header = match (challenge(response.headers()), &self.credentials) {
                // A token given as such was sent already: nothing else to try.
                (_, RegistryAuth::Bearer(_)) | (None, _) => return Ok(response),
                (Some(Challenge::Bearer { realm, service }), _) => {
                    drop(response);
                    self.token(access, &realm, service.as_deref()).await?
                }
                (Some(Challenge::Basic), RegistryAuth::Basic(user, password))
                    if authorization.header.is_none() =>
                {
                    basic(user, password)?
                }
                (Some(Challenge::Basic), _) => return Ok(response),
            };
            authorization = Authorization {
                header: Some(header),
            };
            self.remember(access, authorization.clone());
        }
    }

    /// A token for `access` to the repository from the token endpoint `realm`, as an
    /// `Authorization` header: its answer is read up to [`MAX_TOKEN_BYTES`].
    async fn token(
        &self,
        access: Access,
        realm: &str,
        service: Option<&str>,
    ) -> Result<HeaderValue, WireError> {
        let mut url = Url::parse(realm).map_err(|error| {
            WireError::Malformed(format!("the registry's token endpoint {realm:?}: {error}"))
        })?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(WireError::Malformed(format!(
                "the registry's token endpoint {realm:?} is not HTTP(S)"
            )));
        }
        let actions = match access {
            Access::Pull => "pull",
            Access::Push => "pull,push",
        };
        {
            let mut query = url.query_pairs_mut();
            query.append_pair(
                "scope",
                &format!("repository:{}:{actions}", self.repository),
            );
            if let Some(service) = service {
                query.append_pair("service", service);
            }
        }
        let mut request = self.http.get(url.clone());
        if let RegistryAuth::Basic(user, password) = &self.credentials {
            request = request.header(AUTHORIZATION, basic(user, password)?);
        }
        let response = request.send().await.map_err(WireError::Unreachable)?;
        if response.status() != StatusCode::OK {
            return Err(failure(response).await);
        }
        let body = read_limited(
            response,
            limit!(MAX_TOKEN_BYTES),
            "the token endpoint's answer",
        )
        .await?;
        #[derive(serde::Deserialize)]
        struct Answer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let answer: Answer = serde_json::from_slice(&body).map_err(|error| {
            WireError::Malformed(format!("the token endpoint's answer: {error}"))
        })?;
        let token = answer
            .token
            .or(answer.access_token)
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                WireError::Malformed("the token endpoint's answer has no token".to_owned())
            })?;
        sensitive(&format!("Bearer {token}")).map_err(WireError::Malformed)
    }

    /// The digest the registry has for the manifest `tag` (a `HEAD`; if its answer reports
    /// none, the manifest is read, within [`MAX_MANIFEST_BYTES`], and digested here: then its
    /// bytes come too).
    pub(super) async fn resolve(&self, tag: &str) -> Result<(String, Option<Vec<u8>>), WireError> {
        let url = self.url(&format!("manifests/{tag}"))?;
        let accept = MANIFEST_MEDIA_TYPES.join(", ");
        let response = self
            .send(Access::Pull, Method::HEAD, url, |request| {
                request.header(ACCEPT, &accept)
            })
            .await?;
        if response.status() != StatusCode::OK {
            return Err(failure(response).await);
        }
        if let Some(digest) = reported_digest(response.headers()) {
            return Ok((digest, None));
        }
        let bytes = self
            .manifest(tag, &MANIFEST_MEDIA_TYPES, "the registry's manifest")
            .await?;
        Ok((digest_of(&bytes), Some(bytes)))
    }

    /// The manifest `reference` (a tag or digest) as the registry sends it, read up to
    /// [`MAX_MANIFEST_BYTES`]. A sha256 digest the registry reports with it must be its bytes'.
    pub(super) async fn manifest(
        &self,
        reference: &str,
        accept: &[&str],
        what: &'static str,
    ) -> Result<Vec<u8>, WireError> {
        let url = self.url(&format!("manifests/{reference}"))?;
        let accept = accept.join(", ");
        let response = self
            .send(Access::Pull, Method::GET, url, |request| {
                request.header(ACCEPT, &accept)
            })
            .await?;
        if response.status() != StatusCode::OK {
            return Err(failure(response).await);
        }
        let reported = reported_digest(response.headers());
        let bytes = read_limited(response, limit!(MAX_MANIFEST_BYTES), what).await?;
        if let Some(reported) = reported.filter(|digest| digest.starts_with("sha256:"))
            && reported != digest_of(&bytes)
        {
            return Err(WireError::Malformed(format!(
                "the registry says {what} is {reported}, but its bytes are {}",
                digest_of(&bytes)
            )));
        }
        Ok(bytes)
    }

    /// The blob `digest`: the answer, its status checked, its body left for the caller to
    /// read within the size the blob's manifest declares (which only the caller knows).
    pub(super) async fn blob(&self, digest: &str) -> Result<Response, WireError> {
        let url = self.url(&format!("blobs/{digest}"))?;
        let response = self.send(Access::Pull, Method::GET, url, |r| r).await?;
        if response.status() != StatusCode::OK {
            return Err(failure(response).await);
        }
        Ok(response)
    }

    /// Upload `bytes` as the blob `digest` (monolithic: a `POST` for a session, a `PUT` of the
    /// bytes to where it says).
    pub(super) async fn push_blob(
        &self,
        digest: &str,
        bytes: bytes::Bytes,
    ) -> Result<(), WireError> {
        let url = self.url("blobs/uploads/")?;
        let response = self
            .send(Access::Push, Method::POST, url, |request| {
                request.header(CONTENT_LENGTH, 0)
            })
            .await?;
        if response.status() != StatusCode::ACCEPTED {
            return Err(failure(response).await);
        }
        let mut location = self.location(&response)?;
        drop(response);
        location.query_pairs_mut().append_pair("digest", digest);
        let response = self
            .send(Access::Push, Method::PUT, location, |request| {
                request
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .body(bytes.clone())
            })
            .await?;
        if !response.status().is_success() {
            return Err(failure(response).await);
        }
        Ok(())
    }

    /// Put `bytes` as the manifest `tag`, of `media_type`; its digest (sha256 of exactly these
    /// bytes). The digest the registry reports for it (with the `PUT`, else for a `HEAD` of the
    /// tag), if it reports one, must be that one.
    pub(super) async fn push_manifest(
        &self,
        tag: &str,
        bytes: Vec<u8>,
        media_type: &str,
    ) -> Result<String, WireError> {
        let computed = digest_of(&bytes);
        let url = self.url(&format!("manifests/{tag}"))?;
        let bytes = bytes::Bytes::from(bytes);
        let response = self
            .send(Access::Push, Method::PUT, url.clone(), |request| {
                request.header(CONTENT_TYPE, media_type).body(bytes.clone())
            })
            .await?;
        if !response.status().is_success() {
            return Err(failure(response).await);
        }
        let reported = match reported_digest(response.headers()) {
            Some(reported) => Some(reported),
            None => {
                drop(response);
                let response = self
                    .send(Access::Push, Method::HEAD, url, |request| {
                        request.header(ACCEPT, media_type)
                    })
                    .await?;
                if response.status() != StatusCode::OK {
                    return Err(failure(response).await);
                }
                reported_digest(response.headers())
            }
        };
        match reported {
            Some(reported) if reported != computed => Err(WireError::DigestMismatch {
                what: "the manifest",
                computed,
                reported,
            }),
            _ => Ok(computed),
        }
    }

    /// The `Location` of an upload session, absolute.
    fn location(&self, response: &Response) -> Result<Url, WireError> {
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| {
                WireError::Malformed("the registry's upload answer has no Location".to_owned())
            })?;
        response.url().join(location).map_err(|error| {
            WireError::Malformed(format!(
                "the registry's upload Location {location:?}: {error}"
            ))
        })
    }
}

/// The `Docker-Content-Digest` an answer reports, if any.
fn reported_digest(headers: &HeaderMap) -> Option<String> {
    headers
        .get(DIGEST_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.trim().to_owned())
}

/// `Basic base64(user:password)`, marked sensitive.
fn basic(user: &str, password: &str) -> Result<HeaderValue, String> {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    sensitive(&format!("Basic {encoded}"))
}

/// `value` as a header value kept out of debug output.
fn sensitive(value: &str) -> Result<HeaderValue, String> {
    let mut header = HeaderValue::from_str(value)
        .map_err(|_| "the credentials cannot be sent in a header".to_owned())?;
    header.set_sensitive(true);
    Ok(header)
}

impl From<String> for WireError {
    fn from(why: String) -> WireError {
        WireError::Malformed(why)
    }
}

/// The body of `response`, at most `limit` bytes: a `Content-Length` over it, or a stream that
/// passes it, is [`WireError::TooLarge`], and nothing past the limit is read.
pub(super) async fn read_limited(
    mut response: Response,
    limit: Limit,
    what: &'static str,
) -> Result<Vec<u8>, WireError> {
    if response
        .content_length()
        .is_some_and(|length| length > limit.bytes)
    {
        return Err(WireError::TooLarge { what, limit });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| WireError::Transfer { what, error })?
    {
        if (body.len() + chunk.len()) as u64 > limit.bytes {
            return Err(WireError::TooLarge { what, limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error answer as a [`WireError::Status`]: its body read up to [`MAX_ERROR_BODY_BYTES`]
/// (the rest is left unread), its error envelope's codes and messages if it is one.
pub(super) async fn failure(mut response: Response) -> WireError {
    let status = response.status();
    let url = response.url().to_string();
    let mut body = Vec::new();
    let mut cut = false;
    while let Ok(Some(chunk)) = response.chunk().await {
        let room = MAX_ERROR_BODY_BYTES - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    drop(response);
    #[derive(serde::Deserialize)]
    struct Envelope {
        errors: Vec<Entry>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        code: String,
        #[serde(default)]
        message: String,
    }
    let (codes, message) = match serde_json::from_slice::<Envelope>(&body) {
        Ok(envelope) if !cut => (
            envelope
                .errors
                .iter()
                .map(|entry| entry.code.clone())
                .collect(),
            envelope
                .errors
                .iter()
                .map(|entry| entry.message.as_str())
                .filter(|message| !message.is_empty())
                .collect::<Vec<_>>()
                .join("; "),
        ),
        _ => (Vec::new(), String::from_utf8_lossy(&body).into_owned()),
    };
    WireError::Status {
        status,
        url,
        codes,
        message: shown(&message),
        cut,
    }
}

/// A registry's text as shown: on one line, without control characters, at most
/// [`SHOWN_ERROR_CHARS`] characters.
fn shown(text: &str) -> String {
    let mut shown: String = text
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(SHOWN_ERROR_CHARS)
        .collect();
    if text.trim().chars().count() > SHOWN_ERROR_CHARS {
        shown.push('…');
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_parsed() {
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.example/token".to_owned(),
                service: Some("registry.example".to_owned()),
            })
        );
        assert_eq!(
            parse_challenge(r#"bearer realm="https://a.example/t?x=\"y\", z""#),
            Some(Challenge::Bearer {
                realm: "https://a.example/t?x=\"y\", z".to_owned(),
                service: None,
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="toolcell""#),
            Some(Challenge::Basic)
        );
        assert_eq!(parse_challenge(r#"Bearer service="x""#), None);
        assert_eq!(parse_challenge("Negotiate"), None);
    }

    #[test]
    fn registry_text_is_shown_on_one_line_and_short() {
        assert_eq!(shown("a\nb\x1b[31m"), "a b [31m");
        let long = shown(&"x".repeat(10_000));
        assert_eq!(long.chars().count(), SHOWN_ERROR_CHARS + 1);
    }

    #[test]
    fn limits_are_named() {
        assert_eq!(
            limit!(MAX_MANIFEST_BYTES).to_string(),
            format!("MAX_MANIFEST_BYTES ({MAX_MANIFEST_BYTES} bytes)")
        );
    }
}
