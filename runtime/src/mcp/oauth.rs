//! An OAuth 2.1 resource server, as the MCP authorization specification describes: the server
//! takes JWT access tokens issued by an authorization server it trusts, and publishes where to
//! get one (RFC 9728 protected-resource metadata).
//!
//! `toolcell serve --http ADDR --oauth FILE`, where FILE is TOML:
//!
//! ```toml
//! resource = "https://tools.example.com/mcp"    # this server: the tokens' audience
//! issuer = "https://auth.example.com"            # the only issuer accepted
//! jwks_file = "/etc/toolcell/jwks.json"          # the issuer's signing keys (a JWK Set),
//! # or: jwks_url = "https://auth.example.com/jwks.json"  (fetched at start, then every
//! # jwks_refresh_secs, default 300; https, or http to loopback only)
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
//! A token is accepted when its signature verifies with a key of the set (by `kid` when the
//! token names one), with an allowed algorithm, and its `iss` is the issuer, its `aud` holds
//! the resource, `exp` is in the future (and `nbf`, if any, past), and its tenant claim names a
//! configured tenant. Scopes come from the `scope` claim (space-separated) or `scp` (a list).
//! A key set file is read at start (a server may have no route to the issuer; a restart picks
//! up rotated keys). A key set URL is fetched at start (the server does not start without it)
//! and again every `jwks_refresh_secs`; a refresh that fails keeps the keys it had, and says so
//! in the log.

use super::auth::Tenant;
use crate::Runtime;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

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

/// The path of the protected-resource metadata (RFC 9728, section 3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OAuthFile {
    resource: String,
    issuer: String,
    jwks_file: Option<PathBuf>,
    jwks_url: Option<String>,
    jwks_refresh_secs: Option<u64>,
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
    keys: RwLock<Arc<Vec<Key>>>,
    /// The key set's URL and how often it is fetched again, if it comes from one.
    jwks_url: Option<(String, Duration)>,
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

fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|error| format!("{}: {error}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_OAUTH_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|error| format!("{}: {error}", path.display()))?;
    if text.len() as u64 > MAX_OAUTH_FILE_BYTES {
        return Err(format!(
            "{}: longer than {MAX_OAUTH_FILE_BYTES} bytes",
            path.display()
        ));
    }
    Ok(text)
}

/// One key of the issuer's set: its id (if it has one), the key, and an algorithm it may be
/// used with.
type Key = (Option<String>, DecodingKey, Algorithm);

/// The keys of `jwks` usable with `algorithms`: each with the algorithm it names, or with every
/// allowed algorithm of its own family (EC, RSA, OKP) when it names none.
fn usable_keys(jwks: &JwkSet, algorithms: &[Algorithm]) -> Vec<Key> {
    let mut keys = Vec::new();
    for jwk in &jwks.keys {
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

/// A key set URL must be https, or http to a loopback address.
fn check_jwks_url(url: &str) -> Result<(), String> {
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
        "http" if loopback => Ok(()),
        _ => Err(format!(
            "jwks_url {url:?} must be https (http only to a loopback address)"
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
    serde_json::from_slice(&body).map_err(|error| why(error.to_string()))
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
    pub fn load(path: &Path, runtime: &mut Runtime) -> Result<OAuth, String> {
        let why = |what: String| format!("the OAuth configuration {}: {what}", path.display());
        let parsed: OAuthFile =
            toml::from_str(&read_bounded(path).map_err(&why)?).map_err(|e| why(e.to_string()))?;
        let resource = url_parts(&parsed.resource)
            .map(|_| parsed.resource.clone())
            .ok_or_else(|| {
                why(format!(
                    "resource {:?} is not an http(s) URL",
                    parsed.resource
                ))
            })?;
        let algorithms: Vec<Algorithm> = parsed
            .algorithms
            .unwrap_or_else(|| vec!["ES256".to_owned(), "RS256".to_owned()])
            .iter()
            .map(|name| {
                name.parse::<Algorithm>()
                    .ok()
                    .filter(|alg| {
                        !matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512)
                    })
                    .ok_or_else(|| {
                        why(format!(
                            "algorithm {name:?} is not an asymmetric JWS algorithm"
                        ))
                    })
            })
            .collect::<Result<_, _>>()?;
        let base = path.parent().unwrap_or(Path::new("."));
        let (jwks, jwks_url, source) = match (&parsed.jwks_file, &parsed.jwks_url) {
            (Some(file), None) => {
                let file = base.join(file);
                runtime.protect(&file);
                let jwks: JwkSet = serde_json::from_str(&read_bounded(&file).map_err(&why)?)
                    .map_err(|error| why(format!("the key set: {error}")))?;
                (jwks, None, file.display().to_string())
            }
            (None, Some(url)) => {
                check_jwks_url(url).map_err(&why)?;
                let jwks = fetch_jwks_blocking(url).map_err(&why)?;
                let every = parsed
                    .jwks_refresh_secs
                    .map_or(DEFAULT_JWKS_REFRESH, |secs| {
                        Duration::from_secs(secs.max(1))
                    });
                (jwks, Some((url.clone(), every)), url.clone())
            }
            _ => return Err(why("give jwks_file or jwks_url (one of them)".to_owned())),
        };
        let keys = usable_keys(&jwks, &algorithms);
        if keys.is_empty() {
            return Err(why(format!(
                "{source} holds no key usable with {algorithms:?}"
            )));
        }
        let mut validation = Validation::new(algorithms[0]);
        validation.algorithms = algorithms;
        validation.set_audience(&[&resource]);
        validation.set_issuer(&[&parsed.issuer]);
        validation.leeway = CLOCK_LEEWAY_SECS;
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let mut tenants = HashMap::new();
        runtime.protect(path);
        for (name, entry) in parsed.tenants {
            let tenant = super::auth::tenant(
                runtime,
                &name,
                entry.workspace.as_deref(),
                entry.policy.as_deref(),
                base,
            )
            .map_err(&why)?;
            tenants.insert(name, tenant);
        }
        if tenants.is_empty() {
            return Err(why(
                "no [tenants.NAME] tables: no token could name a tenant".to_owned(),
            ));
        }
        let metadata_url = metadata_url(&resource).ok_or_else(|| why("resource".to_owned()))?;
        Ok(OAuth {
            resource,
            issuer: parsed.issuer,
            keys: RwLock::new(Arc::new(keys)),
            jwks_url,
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
    fn keys(&self) -> Arc<Vec<Key>> {
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
    pub async fn refresh_keys(&self) -> Result<usize, String> {
        let Some((url, _)) = &self.jwks_url else {
            return Ok(self.keys().len());
        };
        let keys = usable_keys(&fetch_jwks(url).await?, &self.algorithms);
        if keys.is_empty() {
            return Err(format!(
                "the key set at {url} holds no usable key; kept the old one"
            ));
        }
        let count = keys.len();
        match self.keys.write() {
            Ok(mut held) => *held = Arc::new(keys),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(keys),
        }
        Ok(count)
    }

    /// Verify `token`: the caller it names, or why it is refused (for `error_description`).
    pub fn verify(&self, token: &str) -> Result<Principal, String> {
        if token.len() > MAX_ACCESS_TOKEN_BYTES {
            return Err("the token is too long".to_owned());
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| "not a JWT".to_owned())?;
        let mut last = "no key of the issuer's set matches the token".to_owned();
        let keys = self.keys();
        for (kid, key, alg) in keys.iter() {
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
                Ok(data) => return self.principal(&data.claims),
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
                        return Err(last);
                    }
                }
            }
        }
        Err(last)
    }

    fn principal(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Principal, String> {
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
