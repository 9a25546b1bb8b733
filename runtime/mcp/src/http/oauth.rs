//! An OAuth 2.1 resource server, as the MCP authorization specification describes: the server
//! takes JWT access tokens issued by an authorization server it trusts, and publishes where to
//! get one (RFC 9728 protected-resource metadata).
//!
//! Past the house's 700 lines: one job (a bearer token checked as a resource server must), whose
//! steps (the file, the key set and its refresh, the token's claims, the tenants and scopes) share
//! the validated configuration; `load` names them in order.
//!
//! `toolcell serve --http ADDR --oauth FILE`, where FILE is TOML:
//!
//! ```toml
//! resource = "https://tools.example.com/mcp"    # this server: the tokens' audience
//! issuer = "https://auth.example.com"            # the only issuer accepted
//! jwks_file = "/etc/toolcell/jwks.json"          # the issuer's signing keys (a JWK Set),
//! # or: jwks_url = "https://auth.example.com/jwks.json"  (fetched at start, then every
//! # jwks_refresh_secs, default 300; https, or http to loopback only; usable for
//! # jwks_max_age_secs after the last good fetch, default 3600)
//! token_types = ["at+jwt", "application/at+jwt"] # the JOSE typ accepted (this is the default)
//! algorithms = ["ES256", "RS256"]                # default: both
//! tenant_claim = "sub"                           # the claim that names the tenant (default sub)
//! scope = "mcp:tools"                            # needed for every call (optional)
//!
//! [tool_scopes]                                  # needed, in addition, for these tools
//! write_file = "files:write"
//!
//! [tenants.team-a]                               # a tenant the claim may name
//! workspace = "/srv/team-a"
//! policy = "team-a.toml"                         # optional: its own policy (see auth.rs)
//! ```
//!
//! A token is accepted when its header's `typ` says it is an access token (RFC 9068), its signature verifies with a key of the set (by `kid` when the
//! token names one), with an allowed algorithm, and its `iss` is the issuer, its `aud` holds
//! the resource, `exp` is in the future (and `nbf`, if any, past), and its tenant claim names a
//! configured tenant. Scopes come from the `scope` claim (space-separated) or `scp` (a list).
//! A key set file is read at start (a server may have no route to the issuer; a restart picks
//! up rotated keys). A key set URL is fetched at start (the server does not start without it)
//! and again every `jwks_refresh_secs`; a refresh that fails keeps the keys it had, and says so
//! in the log, but only for `jwks_max_age_secs` after the last good fetch: past that every
//! token is refused (401) until a fetch succeeds, so keys the issuer withdrew are not
//! honoured for as long as someone can keep the server from reaching it.

use crate::http::config_error::ConfigError;
use crate::http::tenant::Tenant;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use toolcell::Runtime;

/// The longest OAuth configuration or key set read.
pub const MAX_OAUTH_FILE_BYTES: u64 = 1 << 20;

/// The longest access token read: far longer than any JWT an authorization server issues, short
/// enough that verifying one costs little.
pub const MAX_ACCESS_TOKEN_BYTES: usize = 16 * 1024;

/// Seconds of clock difference allowed between the issuer and this server (`exp`, `nbf`).
pub const CLOCK_LEEWAY_SECS: u64 = 30;

/// How often a key set URL is fetched again, unless the configuration says otherwise: an
/// issuer that rotates keys publishes the new one well before it signs with it.
pub const DEFAULT_JWKS_REFRESH: Duration = Duration::from_secs(300);

/// How long fetching the key set may take.
pub const JWKS_FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// How long keys fetched from a `jwks_url` stay usable when every refresh since has failed, by
/// default (`jwks_max_age_secs`): an issuer that withdrew a key (it leaked) must not have it
/// honoured for as long as someone can keep the server from reaching the issuer. Twelve of
/// the default refresh intervals: a short outage of the issuer is ridden out, a long one ends
/// in 401s, not in trusting keys the issuer may have revoked.
pub const DEFAULT_JWKS_MAX_AGE: Duration = Duration::from_secs(3600);

/// The JOSE `typ` values an access token may carry, by default (`token_types`): RFC 9068,
/// section 2.1 (`at+jwt`, and its full media type). An ID token or another JWT the issuer
/// signs with the same key (typ `JWT`, or none) is not an access token and is refused.
pub const DEFAULT_TOKEN_TYPES: &[&str] = &["at+jwt", "application/at+jwt"];

/// The path of the protected-resource metadata (RFC 9728, section 3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OAuthFile {
    resource: String,
    issuer: String,
    jwks_file: Option<PathBuf>,
    jwks_url: Option<String>,
    /// Take a plain-HTTP `jwks_url` (to loopback only): whoever holds that port on this
    /// machine then supplies the keys, so it must be said.
    #[serde(default)]
    jwks_allow_http: bool,
    jwks_refresh_secs: Option<u64>,
    jwks_max_age_secs: Option<u64>,
    #[serde(default)]
    token_types: Option<Vec<String>>,
    #[serde(default)]
    algorithms: Option<Vec<String>>,
    #[serde(default)]
    tenant_claim: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    tool_scopes: BTreeMap<String, String>,
    #[serde(default)]
    tenants: BTreeMap<String, TenantEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantEntry {
    workspace: Option<PathBuf>,
    policy: Option<PathBuf>,
    /// The tenant's quota ([`crate::http::quota`]).
    quota: Option<crate::http::quota::QuotaConfig>,
}

/// A verified caller: its tenant, and the scopes its token grants.
#[derive(Debug)]
pub struct Principal {
    /// The tenant the token's claim names.
    pub tenant: Arc<Tenant>,
    /// The token's scopes.
    pub scopes: HashSet<String>,
}

/// The resource server's configuration and keys.
pub struct OAuth {
    resource: String,
    issuer: String,
    keys: RwLock<Arc<KeySet>>,
    /// The key set's URL and how often it is fetched again, if it comes from one.
    jwks_url: Option<(String, Duration)>,
    /// How long keys from the URL stay usable after their fetch.
    jwks_max_age: Duration,
    /// The `typ` header values accepted (lower case).
    token_types: Vec<String>,
    algorithms: Vec<Algorithm>,
    validation: Validation,
    tenant_claim: String,
    scope: Option<String>,
    tool_scopes: BTreeMap<String, String>,
    tenants: HashMap<String, Arc<Tenant>>,
    metadata_url: String,
}

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("resource", &self.resource)
            .field("issuer", &self.issuer)
            .field("jwks_url", &self.jwks_url)
            .finish_non_exhaustive()
    }
}

/// The file at `path`, at most [`MAX_OAUTH_FILE_BYTES`], its errors naming it.
fn read_oauth_file(runtime: &Runtime, path: &Path) -> Result<String, String> {
    crate::http::tenant::read_own(runtime, path, MAX_OAUTH_FILE_BYTES)
        .map_err(|error| format!("{}: {error}", path.display()))
}

/// One key of the issuer's set: its id (if it has one), the key, and an algorithm it may be
/// used with.
type Key = (Option<String>, DecodingKey, Algorithm);

/// The keys in use, and when they were fetched (`None`: from a file, which does not age).
struct KeySet {
    keys: Vec<Key>,
    fetched: Option<std::time::Instant>,
}

/// The longest list of keys read from a key set (a real issuer publishes a handful; each key
/// is tried against a token that names none, so this also bounds the work per token).
pub const MAX_JWKS_KEYS: usize = 64;

/// A JWK Set, read key by key: a key this server cannot read (a curve or type it does not
/// support, an encryption key of another kind) is skipped, not a reason to refuse the whole
/// set, or one unusual key the issuer adds would stop the server or freeze its keys.
fn parse_jwks(text: &[u8]) -> Result<JwkSet, String> {
    #[derive(Deserialize)]
    struct RawSet {
        keys: Vec<serde_json::Value>,
    }
    let raw: RawSet = serde_json::from_slice(text).map_err(|error| error.to_string())?;
    if raw.keys.len() > MAX_JWKS_KEYS {
        return Err(format!(
            "{} keys, more than the {MAX_JWKS_KEYS} read",
            raw.keys.len()
        ));
    }
    let mut skipped = 0;
    let keys = raw
        .keys
        .into_iter()
        .filter_map(|key| {
            let parsed = serde_json::from_value::<jsonwebtoken::jwk::Jwk>(key).ok();
            skipped += usize::from(parsed.is_none());
            parsed
        })
        .collect();
    if skipped > 0 {
        tracing::warn!(
            skipped,
            "keys of the issuer's set that cannot be read were skipped"
        );
    }
    Ok(JwkSet { keys })
}

/// Whether a key may verify signatures: not one marked for encryption only (`use: enc`), nor
/// one whose `key_ops` leave out `verify` (RFC 7517, sections 4.2 and 4.3).
fn verifies_signatures(jwk: &jsonwebtoken::jwk::Jwk) -> bool {
    use jsonwebtoken::jwk::{KeyOperations, PublicKeyUse};
    let use_ok = match &jwk.common.public_key_use {
        None | Some(PublicKeyUse::Signature) => true,
        Some(_) => false,
    };
    let ops_ok = jwk
        .common
        .key_operations
        .as_ref()
        .is_none_or(|ops| ops.iter().any(|op| matches!(op, KeyOperations::Verify)));
    use_ok && ops_ok
}

/// The keys of `jwks` usable with `algorithms`: each with the algorithm it names, or with every
/// allowed algorithm of its own family (EC, RSA, OKP) when it names none.
fn usable_keys(jwks: &JwkSet, algorithms: &[Algorithm]) -> Vec<Key> {
    let mut keys = Vec::new();
    for jwk in jwks.keys.iter().filter(|jwk| verifies_signatures(jwk)) {
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        // A key is used only with the algorithm it names, or with every allowed algorithm of
        // its own family (EC, RSA, OKP) when it names none.
        use jsonwebtoken::jwk::AlgorithmParameters;
        let of_family = |alg: &Algorithm| match &jwk.algorithm {
            AlgorithmParameters::EllipticCurve(_) => {
                matches!(alg, Algorithm::ES256 | Algorithm::ES384)
            }
            AlgorithmParameters::RSA(_) => matches!(
                alg,
                Algorithm::RS256
                    | Algorithm::RS384
                    | Algorithm::RS512
                    | Algorithm::PS256
                    | Algorithm::PS384
                    | Algorithm::PS512
            ),
            AlgorithmParameters::OctetKeyPair(_) => matches!(alg, Algorithm::EdDSA),
            AlgorithmParameters::OctetKey(_) => false,
        };
        let family: Vec<Algorithm> = match jwk.common.key_algorithm {
            Some(named) => named
                .to_string()
                .parse::<Algorithm>()
                .ok()
                .filter(|alg| algorithms.contains(alg) && of_family(alg))
                .into_iter()
                .collect(),
            None => algorithms.iter().copied().filter(of_family).collect(),
        };
        for alg in family {
            keys.push((jwk.common.key_id.clone(), key.clone(), alg));
        }
    }
    keys
}

/// A key set URL must be https; or, where the operator allows it (`allow_http`), http to a
/// loopback address. Plain HTTP cannot tell who answers: a local process that binds the port
/// first (before the issuer's helper starts, or after it stops) becomes the source of the keys
/// every token is checked with, so it is refused unless the configuration says so.
fn check_jwks_url(url: &str, allow_http: bool) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|error| format!("jwks_url {url:?}: {error}"))?;
    let loopback = parsed.host_str().is_some_and(|host| {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    match parsed.scheme() {
        "https" => Ok(()),
        "http" if loopback && allow_http => Ok(()),
        "http" if loopback => Err(format!(
            "jwks_url {url:?} is plain HTTP: any local process that holds that port first \
             would supply the keys; use https, a jwks_file, or say jwks_allow_http = true"
        )),
        _ => Err(format!(
            "jwks_url {url:?} must be https (http only to a loopback address, with \
             jwks_allow_http = true)"
        )),
    }
}

/// Fetch the key set at `url`: at most [`MAX_OAUTH_FILE_BYTES`], within
/// [`JWKS_FETCH_TIMEOUT`], no redirects. A plain-HTTP (loopback) URL never goes through a
/// proxy from the environment: whoever ran the proxy could hand over their own keys.
async fn fetch_jwks(url: &str) -> Result<JwkSet, String> {
    use futures_util::StreamExt as _;
    let why = |what: String| format!("the key set at {url}: {what}");
    let mut builder = reqwest::Client::builder()
        .timeout(JWKS_FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none());
    if !url.starts_with("https://") {
        builder = builder.no_proxy();
    }
    let client = builder.build().map_err(|error| why(error.to_string()))?;
    let response = client
        .get(url)
        .header("Accept", "application/json")
        .send()
        .await
        .map_err(|error| why(error.to_string()))?;
    if !response.status().is_success() {
        return Err(why(format!("answered {}", response.status())));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|error| why(error.to_string()))?;
        if (body.len() + chunk.len()) as u64 > MAX_OAUTH_FILE_BYTES {
            return Err(why(format!("longer than {MAX_OAUTH_FILE_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    parse_jwks(&body).map_err(why)
}

/// [`fetch_jwks`] from synchronous code (the server's start).
fn fetch_jwks_blocking(url: &str) -> Result<JwkSet, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| error.to_string())?
        .block_on(fetch_jwks(url))
}

impl OAuth {
    /// Read the configuration at `path` and the key set it names, opening each tenant's
    /// workspace in `runtime`.
    pub fn load(path: &Path, runtime: &mut Runtime) -> Result<OAuth, ConfigError> {
        let why = |what: String| ConfigError::OAuthFile {
            file: path.to_owned(),
            why: what,
        };
        let parsed: OAuthFile = toml::from_str(&read_oauth_file(runtime, path).map_err(&why)?)
            .map_err(|e| why(e.to_string()))?;
        let resource = url_parts(&parsed.resource)
            .map(|_| parsed.resource.clone())
            .ok_or_else(|| {
                why(format!(
                    "resource {:?} is not an http(s) URL",
                    parsed.resource
                ))
            })?;
        let algorithms = algorithms_of(parsed.algorithms.as_deref()).map_err(&why)?;
        let base = path.parent().unwrap_or(Path::new("."));
        let (jwks, jwks_url, source) = key_set(&parsed, base, runtime).map_err(&why)?;
        if parsed.jwks_max_age_secs.is_some() && jwks_url.is_none() {
            return Err(why(
                "jwks_max_age_secs applies to a jwks_url only (a key file does not age)".to_owned(),
            ));
        }
        let token_types = token_types_of(parsed.token_types.as_deref()).map_err(&why)?;
        let keys = usable_keys(&jwks, &algorithms);
        if keys.is_empty() {
            return Err(why(format!(
                "{source} holds no key usable with {algorithms:?}"
            )));
        }
        let validation = validation_of(algorithms, &resource, &parsed.issuer);
        runtime.protect(path);
        let tenants = tenants_of(runtime, parsed.tenants, base).map_err(&why)?;
        if tenants.is_empty() {
            return Err(why(
                "no [tenants.NAME] tables: no token could name a tenant".to_owned(),
            ));
        }
        if let Some(unknown) = unknown_tool_scope(runtime, &parsed.tool_scopes) {
            return Err(why(format!(
                "[tool_scopes] names {unknown:?}, which is no tool of this server"
            )));
        }
        let metadata_url = metadata_url(&resource).ok_or_else(|| why("resource".to_owned()))?;
        let fetched = jwks_url.as_ref().map(|_| std::time::Instant::now());
        Ok(OAuth {
            resource,
            issuer: parsed.issuer,
            keys: RwLock::new(Arc::new(KeySet { keys, fetched })),
            jwks_url,
            jwks_max_age: parsed
                .jwks_max_age_secs
                .map_or(DEFAULT_JWKS_MAX_AGE, Duration::from_secs),
            token_types,
            algorithms: validation.algorithms.clone(),
            validation,
            tenant_claim: parsed.tenant_claim.unwrap_or_else(|| "sub".to_owned()),
            scope: parsed.scope,
            tool_scopes: parsed.tool_scopes,
            tenants,
            metadata_url,
        })
    }

    /// The keys as they are now.
    fn keys(&self) -> Arc<KeySet> {
        match self.keys.read() {
            Ok(keys) => Arc::clone(&keys),
            Err(poisoned) => Arc::clone(&poisoned.into_inner()),
        }
    }

    /// The key set's URL and how often to fetch it again, if the keys come from one.
    pub fn jwks_url(&self) -> Option<(&str, Duration)> {
        self.jwks_url
            .as_ref()
            .map(|(url, every)| (url.as_str(), *every))
    }

    /// Fetch the key set from its URL again and use it; on failure (the issuer unreachable,
    /// a set with no usable key) the keys stay as they were. Returns how many keys there are.
    pub async fn refresh_keys(&self) -> Result<usize, ConfigError> {
        let Some((url, _)) = &self.jwks_url else {
            return Ok(self.keys().keys.len());
        };
        let fetched = fetch_jwks(url)
            .await
            .map_err(|why| ConfigError::KeySetFetch { why })?;
        let keys = usable_keys(&fetched, &self.algorithms);
        if keys.is_empty() {
            return Err(ConfigError::KeySetUnusable { url: url.clone() });
        }
        let count = keys.len();
        let set = Arc::new(KeySet {
            keys,
            fetched: Some(std::time::Instant::now()),
        });
        match self.keys.write() {
            Ok(mut held) => *held = set,
            Err(poisoned) => *poisoned.into_inner() = set,
        }
        Ok(count)
    }

    /// Verify `token`: the caller it names, or why it is refused (for `error_description`).
    pub fn verify(&self, token: &str) -> Result<Principal, ConfigError> {
        let refused = |why: String| ConfigError::AccessToken { why };
        if token.len() > MAX_ACCESS_TOKEN_BYTES {
            return Err(refused("the token is too long".to_owned()));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|_| refused("not a JWT".to_owned()))?;
        // RFC 7515, section 4.1.11: a header naming extensions the recipient must understand
        // (`crit`) is refused by one that understands none.
        if header_names_crit(token) {
            return Err(refused(
                "the token's header has crit extensions this server does not understand".to_owned(),
            ));
        }
        // RFC 9068, section 4: a resource server checks that it was given an access token.
        let typ_ok = header.typ.as_deref().is_some_and(|typ| {
            self.token_types
                .iter()
                .any(|accepted| accepted.eq_ignore_ascii_case(typ))
        });
        if !typ_ok {
            return Err(refused(format!(
                "not an access token: its typ must be one of {:?}",
                self.token_types
            )));
        }
        let keys = self.keys();
        if let Some(fetched) = keys.fetched
            && fetched.elapsed() > self.jwks_max_age
        {
            return Err(ConfigError::KeysTooOld {
                fetched_secs_ago: fetched.elapsed().as_secs(),
                max_age_secs: self.jwks_max_age.as_secs(),
            });
        }
        let mut last = "no key of the issuer's set matches the token".to_owned();
        for (kid, key, alg) in keys.keys.iter() {
            if *alg != header.alg || (header.kid.is_some() && kid.is_some() && *kid != header.kid) {
                continue;
            }
            let mut validation = self.validation.clone();
            validation.algorithms = vec![*alg];
            match jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
                token,
                key,
                &validation,
            ) {
                Ok(data) => return self.principal(&data.claims).map_err(refused),
                Err(error) => {
                    use jsonwebtoken::errors::ErrorKind;
                    last = match error.kind() {
                        ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
                        ErrorKind::ImmatureSignature => "the token is not valid yet".to_owned(),
                        ErrorKind::InvalidAudience => {
                            format!("the token is not for {}", self.resource)
                        }
                        ErrorKind::InvalidIssuer => {
                            format!("the token is not from {}", self.issuer)
                        }
                        ErrorKind::MissingRequiredClaim(claim) => {
                            format!("the token has no {claim} claim")
                        }
                        ErrorKind::InvalidSignature => "the signature does not verify".to_owned(),
                        _ => "the token does not verify".to_owned(),
                    };
                    // A failed claim check is the token's; anything else (the signature, the
                    // key's form) may be this key's, and another key may fit.
                    let claims_failed = matches!(
                        error.kind(),
                        ErrorKind::ExpiredSignature
                            | ErrorKind::ImmatureSignature
                            | ErrorKind::InvalidAudience
                            | ErrorKind::InvalidIssuer
                            | ErrorKind::MissingRequiredClaim(_)
                    );
                    if claims_failed {
                        return Err(refused(last));
                    }
                }
            }
        }
        Err(refused(last))
    }

    fn principal(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Principal, String> {
        // What the library lets pass that a resource server should not: an `iss` that is a
        // list holding the issuer among others, an `nbf` that is not a number (read as none),
        // and a token bound to a key (DPoP, mTLS: `cnf`) whose proof this server cannot check,
        // which a thief could otherwise replay as a plain bearer token.
        if claims.get("iss").and_then(serde_json::Value::as_str) != Some(self.issuer.as_str()) {
            return Err(format!("the token is not from {}", self.issuer));
        }
        if claims.get("nbf").is_some_and(|nbf| !nbf.is_number()) {
            return Err("the token's nbf is not a number".to_owned());
        }
        if claims.contains_key("cnf") {
            return Err(
                "the token is bound to a key (cnf); this server takes bearer tokens only"
                    .to_owned(),
            );
        }
        let named = claims
            .get(&self.tenant_claim)
            .and_then(serde_json::Value::as_str)
            .ok_or_else(|| format!("the token has no {} claim", self.tenant_claim))?;
        let tenant = self.tenants.get(named).cloned().ok_or_else(|| {
            format!(
                "{} {named:?} is not a tenant of this server",
                self.tenant_claim
            )
        })?;
        let mut scopes: HashSet<String> = claims
            .get("scope")
            .and_then(serde_json::Value::as_str)
            .map(|scope| scope.split_ascii_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        if let Some(list) = claims.get("scp").and_then(serde_json::Value::as_array) {
            scopes.extend(
                list.iter()
                    .filter_map(|scope| scope.as_str().map(str::to_owned)),
            );
        }
        Ok(Principal { tenant, scopes })
    }

    /// The scope a call of `tool` needs that `principal` lacks, if any: the server's scope for
    /// every call, then the tool's own.
    pub fn missing_scope(&self, principal: &Principal, tool: Option<&str>) -> Option<String> {
        let needed = self
            .scope
            .iter()
            .chain(tool.and_then(|tool| self.tool_scopes.get(tool)));
        needed
            .filter(|scope| !principal.scopes.contains(*scope))
            .cloned()
            .reduce(|a, b| format!("{a} {b}"))
    }

    /// Where the protected-resource metadata is published.
    pub fn metadata_url(&self) -> &str {
        &self.metadata_url
    }

    /// Every tenant's quota ([`crate::http::quota`]), each once.
    pub fn tenant_quotas(&self) -> Vec<Arc<crate::http::quota::Limiter>> {
        self.tenants
            .values()
            .filter_map(|tenant| tenant.quota.clone())
            .collect()
    }

    /// The protected-resource metadata (RFC 9728), as JSON.
    pub fn metadata(&self) -> String {
        let mut scopes: Vec<&String> = self.scope.iter().chain(self.tool_scopes.values()).collect();
        scopes.sort();
        scopes.dedup();
        serde_json::json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
            "scopes_supported": scopes,
            "resource_name": "toolcell",
        })
        .to_string()
    }
}

/// Whether a JWT's header (its first part, base64url JSON) has a `crit` member.
fn header_names_crit(token: &str) -> bool {
    use base64::Engine as _;
    let Some(first) = token.split('.').next() else {
        return false;
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(first)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .is_some_and(|header| header.get("crit").is_some())
}

/// The scheme, authority and path of an http(s) URL.
fn url_parts(url: &str) -> Option<(&str, &str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    if scheme != "https" && scheme != "http" {
        return None;
    }
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    (!authority.is_empty()).then_some((scheme, authority, path))
}

/// RFC 9728, section 3.1: the metadata of `https://host/path` is at
/// `https://host/.well-known/oauth-protected-resource/path`.
fn metadata_url(resource: &str) -> Option<String> {
    let (scheme, authority, path) = url_parts(resource)?;
    Some(format!(
        "{scheme}://{authority}{METADATA_PATH}{}",
        path.trim_end_matches('/')
    ))
}

/// The algorithms a configuration accepts (`names`, ES256 and RS256 if it names none): each
/// an asymmetric JWS algorithm, or the error says which is not.
fn algorithms_of(names: Option<&[String]>) -> Result<Vec<Algorithm>, String> {
    let default = ["ES256".to_owned(), "RS256".to_owned()];
    names
        .unwrap_or(&default)
        .iter()
        .map(|name| {
            name.parse::<Algorithm>()
                .ok()
                .filter(|alg| {
                    !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
                })
                .ok_or_else(|| format!("algorithm {name:?} is not an asymmetric JWS algorithm"))
        })
        .collect()
}

/// A key set read at start: the keys, their URL and refresh interval if they are fetched,
/// and where they came from (for messages).
type LoadedKeys = (JwkSet, Option<(String, Duration)>, String);

/// The key set a configuration names, with its URL and refresh interval if it is fetched, and
/// where it came from (for messages): a key file (relative to `base`, registered among the
/// host's own files), or a URL fetched now.
fn key_set(parsed: &OAuthFile, base: &Path, runtime: &mut Runtime) -> Result<LoadedKeys, String> {
    match (&parsed.jwks_file, &parsed.jwks_url) {
        (Some(file), None) => {
            let file = base.join(file);
            runtime.protect(&file);
            let jwks = parse_jwks(read_oauth_file(runtime, &file)?.as_bytes())
                .map_err(|error| format!("the key set: {error}"))?;
            Ok((jwks, None, file.display().to_string()))
        }
        (None, Some(url)) => {
            check_jwks_url(url, parsed.jwks_allow_http)?;
            let every = parsed
                .jwks_refresh_secs
                .map_or(DEFAULT_JWKS_REFRESH, |secs| {
                    Duration::from_secs(secs.max(1))
                });
            let max_age = parsed
                .jwks_max_age_secs
                .map_or(DEFAULT_JWKS_MAX_AGE, Duration::from_secs);
            if max_age < 2 * every {
                return Err(format!(
                    "jwks_max_age_secs ({}) must be at least twice jwks_refresh_secs ({}): \
                     one failed refresh would refuse every token",
                    max_age.as_secs(),
                    every.as_secs()
                ));
            }
            let jwks = fetch_jwks_blocking(url)?;
            Ok((jwks, Some((url.clone(), every)), url.clone()))
        }
        _ => Err("give jwks_file or jwks_url (one of them)".to_owned()),
    }
}

/// The token types a configuration accepts (`types`, lowercase; the defaults if it names
/// none); none at all is an error.
fn token_types_of(types: Option<&[String]>) -> Result<Vec<String>, String> {
    match types {
        Some([]) => Err("token_types is empty: no token could be accepted".to_owned()),
        Some(types) => Ok(types.iter().map(|typ| typ.to_ascii_lowercase()).collect()),
        None => Ok(DEFAULT_TOKEN_TYPES
            .iter()
            .map(|typ| (*typ).to_owned())
            .collect()),
    }
}

/// How a token is checked: signed with one of `algorithms` (the first is the default), for
/// `resource`, from `issuer`, not before its time, with its expiry, issuer and audience.
fn validation_of(algorithms: Vec<Algorithm>, resource: &str, issuer: &str) -> Validation {
    let mut validation = Validation::new(algorithms[0]);
    validation.algorithms = algorithms;
    validation.set_audience(&[resource]);
    validation.set_issuer(&[issuer]);
    validation.leeway = CLOCK_LEEWAY_SECS;
    validation.validate_nbf = true;
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation
}

/// Each `[tenants.NAME]` table made a tenant (relative to `base`): its quota, its workspace
/// opened in `runtime`, its policy registered among the host's own files.
fn tenants_of(
    runtime: &mut Runtime,
    entries: BTreeMap<String, TenantEntry>,
    base: &Path,
) -> Result<HashMap<String, Arc<Tenant>>, String> {
    let mut tenants = HashMap::new();
    for (name, entry) in entries {
        let quota = match &entry.quota {
            Some(config) => Some(
                crate::http::tenant::limiter(
                    runtime,
                    &name,
                    crate::http::quota::Scope::Tenant,
                    config,
                    None,
                )
                .map_err(|error| format!("[tenants.{name}.quota]: {error}"))?,
            ),
            None => None,
        };
        let (tenant, policy) = crate::http::tenant::tenant(
            runtime,
            &name,
            entry.workspace.as_deref(),
            entry.policy.as_deref(),
            base,
            quota,
        )?;
        if let Some(policy) = policy {
            runtime.protect(&policy);
        }
        tenants.insert(name, tenant);
    }
    Ok(tenants)
}

/// A tool `[tool_scopes]` names that this server has not (a typo: `Read_File`), which would
/// leave the tool it meant behind the server's scope alone.
fn unknown_tool_scope<'s>(
    runtime: &Runtime,
    tool_scopes: &'s BTreeMap<String, String>,
) -> Option<&'s String> {
    tool_scopes.keys().find(|tool| {
        runtime.registry().get(tool).is_none()
            && tool.as_str() != toolcell::registry::CALL_TOOL
            && tool.as_str() != toolcell::registry::FIND_TOOL
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_url_inserts_the_well_known_path_after_the_host() {
        assert_eq!(
            metadata_url("https://tools.example.com/mcp").as_deref(),
            Some("https://tools.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8080").as_deref(),
            Some("http://127.0.0.1:8080/.well-known/oauth-protected-resource")
        );
        assert_eq!(metadata_url("ftp://x/y"), None);
        assert_eq!(metadata_url("https:///mcp"), None);
    }
}
