//! [`ConfigError`]: why the HTTP server refuses what it was given (a file, a list, an address,
//! the shared store's settings), or refuses an access token or a key set, one variant for each
//! thing that goes wrong where that configuration is read. Its messages name the file, line,
//! flag or claim, as the operator (or, for a token, the client) must read them.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the HTTP server refuses to start with what it was given (a tokens, tenants, OAuth or
/// metrics-token file, a host or origin list, an exposure without authentication, the shared
/// store's settings), or why an access token or a key set is refused: in words that name the
/// file, line or claim (its [`Display`](std::fmt::Display)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The tokens file (`--tokens`) could not be read, or holds something refused (its syntax,
    /// a token's hash, a tenant, a quota, a policy file).
    #[error("the tokens file {}: {why}", file.display())]
    TokensFile {
        /// The tokens file.
        file: PathBuf,
        /// What is wrong, naming the table or key.
        why: String,
    },
    /// The tokens file, read again while the server runs, names a tenant policy file that was
    /// not named when the server started, and so is not protected from tools' writes: the
    /// server keeps the tokens it has (restart it to add a tenant policy file).
    #[error(
        "the tokens file {}: the policy {} was not named when the server started, so it is \
         not protected from tools' writes: restart the server to add a tenant policy file",
        file.display(),
        policy.display()
    )]
    UnprotectedPolicy {
        /// The tokens file.
        file: PathBuf,
        /// The policy file it names.
        policy: PathBuf,
    },
    /// The metrics token file (`--metrics-token`) could not be read, or holds no token's
    /// SHA-256.
    #[error("the metrics token file {}: {why}", file.display())]
    MetricsTokenFile {
        /// The metrics token file.
        file: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The OAuth configuration (`--oauth`) could not be read, or holds something refused (its
    /// syntax, the resource, the algorithms, the key set, the tenants, the tool scopes).
    #[error("the OAuth configuration {}: {why}", file.display())]
    OAuthFile {
        /// The OAuth configuration file.
        file: PathBuf,
        /// What is wrong, naming the key.
        why: String,
    },
    /// The key set could not be fetched from its URL again (the keys in use stay).
    #[error("{why}")]
    KeySetFetch {
        /// What failed, naming the key set's URL.
        why: String,
    },
    /// The key set fetched again holds no key usable with the configured algorithms (the keys
    /// in use stay).
    #[error("the key set at {url} holds no usable key; kept the old one")]
    KeySetUnusable {
        /// The key set's URL.
        url: String,
    },
    /// The issuer's keys were fetched longer ago than they may be used: every access token is
    /// refused until they are fetched again.
    #[error(
        "the issuer's keys were last fetched {fetched_secs_ago} s ago, past the {max_age_secs} s \
         they may be used: every token is refused until they are fetched again"
    )]
    KeysTooOld {
        /// How long ago the keys were fetched, in seconds.
        fetched_secs_ago: u64,
        /// How long they may be used, in seconds (`jwks_max_age_secs`).
        max_age_secs: u64,
    },
    /// An access token is refused (what the client is told in `error_description`): not a
    /// JWT, not an access token, too long, expired, not for this resource or issuer, a claim
    /// missing or naming no tenant, a signature that does not verify.
    #[error("{why}")]
    AccessToken {
        /// Why, as the client reads it.
        why: String,
    },
    /// A non-loopback address asked to be served without authentication (`--tokens` or
    /// `--oauth`).
    #[error(
        "refusing to serve MCP on {addr} without authentication: anyone who can reach it could \
         run tools. Give --tokens FILE (see `toolcell token`) or --oauth FILE, or bind a \
         loopback address such as 127.0.0.1"
    )]
    NoAuthentication {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A non-loopback address asked to be served without `--allow-host` (only loopback names
    /// are allowed by default, so no client could reach it).
    #[error(
        "serving on {addr}: give --allow-host with each name clients use to reach this server \
         (the Host header is checked; only loopback names are allowed by default)"
    )]
    NoAllowedHost {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// An `--allow-host` entry that does not parse.
    #[error("--allow-host {entry:?}: expected name, name:port or [v6]:port")]
    AllowHost {
        /// The entry, trimmed.
        entry: String,
    },
    /// An `--allow-origin` entry that does not parse.
    #[error(
        "--allow-origin {entry:?}: expected scheme://host, scheme://host:port or scheme://host:*"
    )]
    AllowOrigin {
        /// The entry, as given.
        entry: String,
    },
    /// The shared store's URL (`--state`) is refused: not `redis://` or `rediss://`, holding a
    /// password, or not usable by the store's client.
    #[error("--state {url}: {why}")]
    StateUrl {
        /// The URL, without the password it may carry.
        url: String,
        /// What is wrong.
        why: String,
    },
    /// A file the shared store's settings name (`--state-password-file`, `--state-ca-file`,
    /// `--seal-key-file`) could not be read.
    #[error("{option} {}: {why}", file.display())]
    StateFile {
        /// The option that names it.
        option: &'static str,
        /// The file.
        file: PathBuf,
        /// Why it could not be read.
        why: String,
    },
    /// A CA file (`--state-ca-file`) given for a store reached without TLS.
    #[error("--state-ca-file {}: a CA is for rediss:// (TLS) only", file.display())]
    CaWithoutTls {
        /// The CA file.
        file: PathBuf,
    },
    /// `--state` given without the operator's seal key (`--seal-key-file`, or the environment
    /// variable `env`).
    #[error(
        "--state needs the operator's seal key, the same for every replica and never kept in the \
         store: give --seal-key-file FILE (or {env}); make one with `toolcell token --seal-key`"
    )]
    NoSealKey {
        /// The environment variable that may hold it.
        env: &'static str,
    },
    /// The seal key given is not 64 hex digits.
    #[error(
        "{from}: expected the seal key as 64 hex digits (`toolcell token --seal-key` makes one)"
    )]
    BadSealKey {
        /// Where it came from (`--seal-key-file FILE`, or the environment variable).
        from: String,
    },
    /// This replica's random name could not be drawn.
    #[error("naming this replica: {why}")]
    ReplicaName {
        /// Why.
        why: String,
    },
}
