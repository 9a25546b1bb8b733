//! An OAuth 2.1 resource server, as the MCP authorization specification describes: the server
//! takes JWT access tokens issued by an authorization server it trusts, and publishes where to
//! get one (RFC 9728 protected-resource metadata).
//!
//! `toolcell serve --http ADDR --oauth FILE`, where FILE is TOML:
//!
//! ```toml
//! resource = "https://tools.example.com/mcp"    # this server: the tokens' audience
//! issuer = "https://auth.example.com"            # the only issuer accepted
//! jwks_file = "/etc/toolcell/jwks.json"          # the issuer's signing keys (a JWK Set)
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
//! The keys are read at start: a server may have no route to the issuer, and a restart picks up
//! rotated keys.

use super::auth::Tenant;
use crate::Runtime;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The longest OAuth configuration or key set read.
pub const MAX_OAUTH_FILE_BYTES: u64 = 1 << 20;

/// The longest access token read: far longer than any JWT an authorization server issues, short
/// enough that verifying one costs little.
pub const MAX_ACCESS_TOKEN_BYTES: usize = 16 * 1024;

/// Seconds of clock difference allowed between the issuer and this server (`exp`, `nbf`).
pub const CLOCK_LEEWAY_SECS: u64 = 30;

/// The path of the protected-resource metadata (RFC 9728, section 3).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OAuthFile {
    resource: String,
    issuer: String,
    jwks_file: PathBuf,
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
    keys: Vec<(Option<String>, DecodingKey, Algorithm)>,
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
            .field("keys", &self.keys.len())
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
        let jwks_path = path
            .parent()
            .unwrap_or(Path::new("."))
            .join(&parsed.jwks_file);
        let jwks: JwkSet = serde_json::from_str(&read_bounded(&jwks_path).map_err(&why)?)
            .map_err(|error| why(format!("the key set: {error}")))?;
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
        if keys.is_empty() {
            return Err(why(format!(
                "{} holds no key usable with {algorithms:?}",
                jwks_path.display()
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
        let base = path.parent().unwrap_or(Path::new("."));
        runtime.protect(path);
        runtime.protect(&jwks_path);
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
            keys,
            validation,
            tenant_claim: parsed.tenant_claim.unwrap_or_else(|| "sub".to_owned()),
            scope: parsed.scope,
            tool_scopes: parsed.tool_scopes,
            tenants,
            metadata_url,
        })
    }

    /// Verify `token`: the caller it names, or why it is refused (for `error_description`).
    pub fn verify(&self, token: &str) -> Result<Principal, String> {
        if token.len() > MAX_ACCESS_TOKEN_BYTES {
            return Err("the token is too long".to_owned());
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| "not a JWT".to_owned())?;
        let mut last = "no key of the issuer's set matches the token".to_owned();
        for (kid, key, alg) in &self.keys {
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
