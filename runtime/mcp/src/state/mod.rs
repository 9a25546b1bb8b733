//! The store that makes replicas serve as one (`toolcell serve --http --state URL`): quotas,
//! the spent approval answers, and tasks, in a Redis or Valkey every replica given the same URL
//! shares.
//!
//! Without `--state` nothing here is used: each process keeps its own (the embedded default
//! for one server). With it, what a later request depends on lives in the store:
//!
//! - **quotas** ([`crate::http::quota`]): each tenant's and token's bucket, day's use and in-flight
//!   leases, changed by server-side scripts in one round trip per admitted call
//!   ([`scripts`]). An in-flight place is a lease that expires unless its replica renews it
//!   ([`LEASE_TTL`], renewed every [`LEASE_RENEW_EVERY`]): a replica killed mid-call gives its
//!   tenants' places back within a lease.
//! - **approvals** ([`crate::seal`]): a question's `requestState` is a sealed token any replica
//!   opens with the operator's key, which every replica is given (`--seal-key-file`, or
//!   `TOOLCELL_SEAL_KEY`) and which is never kept here: reading the store forges nothing. An
//!   answer counts once because its token's id is spent here, with an expiry at the question's
//!   deadline.
//! - **the epoch** ([`Store::epoch`]): a random name the store keeps for as long as it keeps
//!   its data and the same process runs it. A store that lost its data (`FLUSHALL`, a restart
//!   without persistence) has lost it too; a store that may have lost its latest writes (a
//!   restart from a snapshot or an append-only file, a replica promoted after a failover, a
//!   backup restored: each is another process, another `run_id`) keeps an epoch begun under
//!   another process. Either way the first script that sees it begins a new one, every token sealed in an earlier
//!   epoch is refused (the call is asked afresh: an answer spent before cannot count twice),
//!   every replica re-asserts the leases of its calls still running, and for
//!   [`LEASE_REASSERT_GRACE`] calls under an in-flight bound are refused, so that no call is
//!   admitted past a place a running call holds but the store forgot. (The day's use and the
//!   buckets are forgotten with the data: they start again from zero.)
//! - **tasks** ([`crate::tasks`]): each task's record (owner, status, result within the cap),
//!   so any replica answers `tasks/get`; a `tasks/cancel` reaching another replica sets a flag
//!   the running replica looks at every [`CANCEL_POLL_EVERY`]; every replica writes a heartbeat
//!   every [`HEARTBEAT_EVERY`]; a task whose replica has none for [`HEARTBEAT_TTL`] is answered
//!   `working` ("not heard from") for [`TASK_PRESUMED_LOST_AFTER`] more, then `failed` ("the
//!   replica running it stopped"), and the task's real end, if it comes after all, replaces
//!   that presumed failure: a result that exists is never lost. Results and messages are kept
//!   sealed under the operator's key, bound to the task and its owner
//!   ([`crate::seal::SealKey::seal_data`]).
//!
//! **When the store cannot be reached**, nothing it guarantees is given up silently: every
//! operation is bounded by [`STORE_TIMEOUT`] and fails as [`Unavailable`], which the front
//! answers `503` with a JSON-RPC error naming the store, counts in
//! `toolcell_state_unavailable_total`, and logs once per outage (and once when the store is
//! back). The connection comes back by itself. Calls that need nothing of the store (no quota,
//! no approval answer, no task) go on.
//!
//! The client is the `redis` crate's (`ConnectionManager`: one multiplexed connection,
//! reconnected after a failure; server-side Lua scripts run by digest, loaded once). It was
//! chosen over `fred` for what this needs and no more: scripts, pipelines and a connection
//! that comes back, with a smaller dependency tree and rustls on the process's own crypto
//! provider. One store (a primary, or Valkey) is supported; Redis Cluster is not (a quota's
//! scripts touch several keys at once).

pub mod scripts;

use crate::http::config_error::ConfigError;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one operation on the store may take before it is given up as [`Unavailable`]:
/// far above a store on the same network (well under a millisecond), short enough that a
/// store that hangs holds up a call only a moment.
pub const STORE_TIMEOUT: Duration = Duration::from_millis(1500);

/// How long an in-flight place lives unless its replica renews it: a killed replica's places
/// come back to its tenants within this.
pub const LEASE_TTL: Duration = Duration::from_secs(15);

/// How often a replica renews the leases of its calls in flight: three times a lease, so two
/// missed renewals (a store that blinked) lose nothing.
pub const LEASE_RENEW_EVERY: Duration = Duration::from_secs(5);

/// How soon a renewal that could not reach the store is tried again: well within the leases'
/// grace after a store comes back ([`LEASE_REASSERT_GRACE`]).
pub const RENEW_RETRY_EVERY: Duration = Duration::from_millis(500);

/// How often a replica says it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);

/// How long a replica's heartbeat lasts: a replica silent for this long is taken for dead, and
/// its running tasks are answered `failed`. Five heartbeats: a replica busy or slow for a
/// moment is not.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(10);

/// How long a running task whose replica is not heard from (no heartbeat for
/// [`HEARTBEAT_TTL`]) is still answered `working` before it is presumed `failed`: a replica
/// paused or cut off from the store for a moment may still end it, and its end replaces the
/// presumption whenever it comes.
pub const TASK_PRESUMED_LOST_AFTER: Duration = Duration::from_secs(10);

/// How long, after a store lost its data, calls under an in-flight bound are refused: one
/// renewal of every replica's leases and a store operation's timeout, so that every live
/// replica has re-asserted the places of its running calls before a new call is counted
/// against them.
pub const LEASE_REASSERT_GRACE: Duration = LEASE_RENEW_EVERY
    .saturating_add(STORE_TIMEOUT)
    .saturating_add(Duration::from_secs(1));

/// The environment variable that may hold the seal key (64 hex digits) instead of
/// `--seal-key-file`. The gate never grants a tool a `TOOLCELL_` variable.
pub const SEAL_KEY_ENV: &str = "TOOLCELL_SEAL_KEY";

/// The longest password, key or CA file read for the store (a CA bundle of a few dozen
/// certificates fits).
pub const MAX_STATE_FILE_BYTES: u64 = 1024 * 1024;

/// How often a replica with running tasks looks for cancellations other replicas received.
pub const CANCEL_POLL_EVERY: Duration = Duration::from_millis(250);

/// Every key toolcell writes starts with this, so a store shared with other programs keeps
/// them apart (choose a database in the URL, `redis://host/3`, to keep them further apart).
pub const KEY_PREFIX: &str = "toolcell:";

/// The store could not be reached (or did not answer within [`STORE_TIMEOUT`]): what needed it
/// is refused, and says so.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the shared store at {store} is unreachable ({why}); try again shortly")]
pub struct Unavailable {
    /// The store, as the operator named it (without its password).
    pub store: String,
    /// What failed.
    pub why: String,
}

/// The longest error text of the store's client quoted in a refusal.
const MAX_WHY_CHARS: usize = 200;

/// The shared store, and this replica's name in it.
pub struct Store {
    connection: ConnectionManager,
    /// The store's address as shown (scheme, host, port, database; never a password).
    shown: String,
    /// This process's name among the replicas: random, made at start.
    replica: String,
    /// Whether the last operation failed: an outage is logged once, at its start and end.
    down: AtomicBool,
    /// Operations refused because the store could not be reached.
    unavailable: AtomicU64,
    /// The operator's key: it seals approval tokens and task results (never kept in the store).
    seal_key: crate::seal::SealKey,
    /// The store's epoch as this replica last saw it (empty before it has seen one).
    epoch: Mutex<String>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("store", &self.shown)
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// The store `options` name, its password, CA and seal key read through `own` (the
    /// server's own files, which no tool reaches). Nothing is connected yet: a store that is
    /// down at start is connected to once it is up. Must be called inside a tokio runtime.
    ///
    /// Refused: a URL that is not `redis://` or `rediss://`; a password written in the URL (it
    /// would be in the process list, `/proc/PID/cmdline`, for every local user to read: give
    /// `--state-password-file`); no seal key (`--seal-key-file` or [`SEAL_KEY_ENV`]), or one
    /// that is not 64 hex digits.
    pub fn open(
        options: &crate::http::StateOptions,
        own: &toolcell::hostfs::OwnFiles,
    ) -> Result<Arc<Store>, ConfigError> {
        use redis::IntoConnectionInfo as _;
        let url = options.url.as_str();
        let refuse = |what: String| ConfigError::StateUrl {
            url: scrub(url),
            why: what,
        };
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(refuse(
                "give a redis:// or rediss:// URL (Redis 7 or Valkey)".to_owned(),
            ));
        }
        let mut info = url
            .into_connection_info()
            .map_err(|error| refuse(error.to_string()))?;
        if info.redis_settings().password().is_some() {
            return Err(refuse(
                "the URL holds a password, which every local user could read in the process \
                 list (/proc/PID/cmdline): give it in --state-password-file FILE instead"
                    .to_owned(),
            ));
        }
        if let Some(file) = &options.password_file {
            let password = own
                .read_to_string(file, MAX_STATE_FILE_BYTES)
                .map_err(|error| ConfigError::StateFile {
                    option: "--state-password-file",
                    file: file.clone(),
                    why: error.to_string(),
                })?;
            let settings = info
                .redis_settings()
                .clone()
                .set_password(password.trim_end());
            info = info.set_redis_settings(settings);
        }
        let seal_key = read_seal_key(options.seal_key_file.as_deref(), own)?;
        let root_cert = match &options.ca_file {
            Some(file) if url.starts_with("rediss://") => {
                Some(own.read(file, MAX_STATE_FILE_BYTES).map_err(|error| {
                    ConfigError::StateFile {
                        option: "--state-ca-file",
                        file: file.clone(),
                        why: error.to_string(),
                    }
                })?)
            }
            Some(file) => {
                return Err(ConfigError::CaWithoutTls { file: file.clone() });
            }
            None => None,
        };
        let shown = format!("{} (database {})", info.addr(), info.redis_settings().db());
        // `rediss://` makes its TLS configuration from the process's provider: ring, as
        // every other TLS client here (a provider already installed stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = match root_cert {
            // The operator's own CA, and no other root: a private store's certificate.
            Some(root_cert) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(root_cert),
                },
            ),
            None => redis::Client::open(info),
        }
        .map_err(|error| refuse(error.to_string()))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(STORE_TIMEOUT))
            .set_response_timeout(Some(STORE_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(STORE_TIMEOUT);
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|error| refuse(error.to_string()))?;
        let replica = toolcell::digest::hex(&toolcell::digest::random::<8>().map_err(|error| {
            ConfigError::ReplicaName {
                why: error.to_string(),
            }
        })?);
        Ok(Arc::new(Store {
            connection,
            shown,
            replica,
            down: AtomicBool::new(false),
            unavailable: AtomicU64::new(0),
            seal_key,
            epoch: Mutex::new(String::new()),
        }))
    }

    /// The store, as shown to people (no password).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// This replica's name in the store.
    pub fn replica(&self) -> &str {
        &self.replica
    }

    /// How many operations were refused because the store could not be reached.
    pub fn unavailable_count(&self) -> u64 {
        self.unavailable.load(Ordering::Relaxed)
    }

    /// Whether the last operation reached the store.
    pub fn is_up(&self) -> bool {
        !self.down.load(Ordering::Relaxed)
    }

    /// Run `op` on the store's connection, within [`STORE_TIMEOUT`]: its answer, or
    /// [`Unavailable`] (logged once per outage, and counted).
    pub(crate) async fn run<T, F, Fut>(&self, op: F) -> Result<T, Unavailable>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let deadline = tokio::time::Instant::now() + STORE_TIMEOUT;
        let mut answer = tokio::time::timeout_at(deadline, op(self.connection.clone())).await;
        // A store that came back after an outage (or a restart nobody saw): the first command
        // meets the connection it broke, and makes the client connect again. Sent once more,
        // within the same bound, so that the first request after the store is back is not
        // refused. (Every operation here is a read, or a script whose effect is all or
        // nothing and which a dropped connection did not run.)
        if let Ok(Err(error)) = &answer
            && (error.is_connection_dropped() || error.is_io_error())
        {
            answer = tokio::time::timeout_at(deadline, op(self.connection.clone())).await;
        }
        let failed = match answer {
            Ok(Ok(value)) => {
                if self.down.swap(false, Ordering::Relaxed) {
                    eprintln!(
                        "toolcell: the shared store at {} is reachable again",
                        self.shown
                    );
                }
                return Ok(value);
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {} ms", STORE_TIMEOUT.as_millis()),
        };
        let why: String = failed.chars().take(MAX_WHY_CHARS).collect();
        self.unavailable.fetch_add(1, Ordering::Relaxed);
        if !self.down.swap(true, Ordering::Relaxed) {
            eprintln!(
                "toolcell: the shared store at {} is unreachable ({why}): calls under a quota, \
                 approval answers and tasks are refused until it is back",
                self.shown
            );
        }
        Err(Unavailable {
            store: self.shown.clone(),
            why,
        })
    }

    /// Ask the store whether it answers (at start): a store that does not is said so on
    /// stderr once ([`Store::run`]), and connected to when it is back.
    pub(crate) async fn ping(&self) {
        let _ = self
            .run(|mut connection| async move {
                redis::cmd("PING")
                    .query_async::<String>(&mut connection)
                    .await
            })
            .await;
    }

    /// The key of `name` in the store.
    pub(crate) fn key(name: &str) -> String {
        format!("{KEY_PREFIX}{name}")
    }

    /// The operator's key, which seals approval tokens and task results.
    pub(crate) fn seal_key(&self) -> &crate::seal::SealKey {
        &self.seal_key
    }

    /// The store's epoch as this replica last saw it, asking the store when it has seen none
    /// yet (and beginning one there if the store has none).
    pub(crate) async fn epoch(&self) -> Result<String, Unavailable> {
        let seen = toolcell::sync::lock(&self.epoch).clone();
        if !seen.is_empty() {
            return Ok(seen);
        }
        self.check_epoch().await
    }

    /// Ask the store for its epoch now (beginning one if it has none, and, if it is not the
    /// one this replica saw, starting the leases' grace: [`scripts::EPOCH`]); remembered.
    pub(crate) async fn check_epoch(&self) -> Result<String, Unavailable> {
        let keys = epoch_keys();
        let (seen, candidate, grace) = self.epoch_arguments()?;
        let (keys, seen, candidate) = (&keys, &seen, &candidate);
        let epoch: String = self
            .run(|mut connection| async move {
                scripts::EPOCH
                    .key(&keys[0])
                    .key(&keys[1])
                    .arg(seen)
                    .arg(candidate)
                    .arg(grace)
                    .invoke_async(&mut connection)
                    .await
            })
            .await?;
        Ok(self.saw_epoch(epoch).0)
    }

    /// What the scripts that check the epoch take after their own arguments: the epoch this
    /// replica saw, a fresh one to begin if the store has none, and the leases' grace (ms).
    pub(crate) fn epoch_arguments(&self) -> Result<(String, String, u64), Unavailable> {
        let candidate = toolcell::digest::random::<8>()
            .map(|bytes| toolcell::digest::hex(&bytes))
            .map_err(|error| Unavailable {
                store: self.shown.clone(),
                why: format!("naming an epoch: {error}"),
            })?;
        Ok((
            toolcell::sync::lock(&self.epoch).clone(),
            candidate,
            u64::try_from(LEASE_REASSERT_GRACE.as_millis()).unwrap_or(u64::MAX),
        ))
    }

    /// Remember the epoch a script answered: it, and whether it is not the one seen before
    /// (the store forgot: this replica's leases must be re-asserted now).
    pub(crate) fn saw_epoch(&self, epoch: String) -> (String, bool) {
        let mut seen = toolcell::sync::lock(&self.epoch);
        let changed = !seen.is_empty() && *seen != epoch;
        if changed {
            eprintln!(
                "toolcell: the shared store at {} lost its data (a new epoch): approval answers \
                 sealed before are asked again, and running calls' places are re-asserted",
                self.shown
            );
        }
        seen.clone_from(&epoch);
        (epoch, changed)
    }

    /// Write this replica's heartbeat once: it lives [`HEARTBEAT_TTL`], and the serving loop
    /// writes it again every [`HEARTBEAT_EVERY`] (a replica whose heartbeat is gone is dead:
    /// its tasks end `failed`).
    pub(crate) async fn beat(&self) {
        let key = Store::key(&format!("replica:{}", self.replica));
        let ttl = u64::try_from(HEARTBEAT_TTL.as_millis()).unwrap_or(u64::MAX);
        let key = &key;
        let _ = self
            .run(|mut connection| async move {
                redis::cmd("SET")
                    .arg(key)
                    .arg(1)
                    .arg("PX")
                    .arg(ttl)
                    .query_async::<()>(&mut connection)
                    .await
            })
            .await;
    }
}

/// The keys of the store's epoch and of the leases' grace after it lost its data.
pub(crate) fn epoch_keys() -> [String; 2] {
    [Store::key("epoch"), Store::key("epoch-grace")]
}

/// Spend the approval token `id`, sealed in the store's `epoch` and counting until `until` (ms
/// since 1970): whether this is its first use, on any replica (`SET NX`, expiring at `until`),
/// in the epoch it was sealed in. A token of another epoch (the store lost its data since) is
/// never a first use.
pub(crate) async fn spend_token(
    store: &Store,
    id: &str,
    epoch: &str,
    until: u64,
) -> Result<bool, Unavailable> {
    let [epoch_key, grace_key] = epoch_keys();
    let spent_key = Store::key(&format!("spent:{id}"));
    // A deadline already past still marks the token spent, for a moment.
    let until = until.max(crate::seal::millis(std::time::SystemTime::now()) + 1000);
    let (seen, candidate, grace) = store.epoch_arguments()?;
    let (epoch_key, grace_key, spent_key) = (&epoch_key, &grace_key, &spent_key);
    let (seen, candidate) = (&seen, &candidate);
    let (answer, current): (String, String) = store
        .run(|mut connection| async move {
            scripts::SPEND
                .key(epoch_key)
                .key(grace_key)
                .key(spent_key)
                .arg(seen)
                .arg(candidate)
                .arg(grace)
                .arg(epoch)
                .arg(until)
                .invoke_async(&mut connection)
                .await
        })
        .await?;
    store.saw_epoch(current);
    Ok(answer == "first")
}

/// The seal key: from `file` (64 hex digits, white space around them ignored) through `own`,
/// or else from [`SEAL_KEY_ENV`]; refused when neither gives one.
fn read_seal_key(
    file: Option<&Path>,
    own: &toolcell::hostfs::OwnFiles,
) -> Result<crate::seal::SealKey, ConfigError> {
    let (text, from) = match file {
        Some(file) => (
            own.read_to_string(file, MAX_STATE_FILE_BYTES)
                .map_err(|error| ConfigError::StateFile {
                    option: "--seal-key-file",
                    file: file.to_owned(),
                    why: error.to_string(),
                })?,
            format!("--seal-key-file {}", file.display()),
        ),
        None => match std::env::var(SEAL_KEY_ENV) {
            Ok(text) => (text, SEAL_KEY_ENV.to_owned()),
            Err(_) => {
                return Err(ConfigError::NoSealKey { env: SEAL_KEY_ENV });
            }
        },
    };
    crate::seal::SealKey::from_hex(&text).ok_or(ConfigError::BadSealKey { from })
}

/// `url` without the password it may carry (`redis://user:secret@host` shows `user:***`).
fn scrub(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
            format!("{}{user}:***{}", &url[..scheme + 3], &url[at..])
        }
        _ => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_url_is_never_shown() {
        assert_eq!(
            scrub("redis://ops:hunter2@127.0.0.1:6379/2"),
            "redis://ops:***@127.0.0.1:6379/2"
        );
        assert_eq!(scrub("redis://:hunter2@h"), "redis://:***@h");
        assert_eq!(scrub("redis://127.0.0.1"), "redis://127.0.0.1");
    }

    fn options(url: &str) -> crate::http::StateOptions {
        crate::http::StateOptions {
            url: url.to_owned(),
            password_file: None,
            ca_file: None,
            seal_key_file: None,
        }
    }

    #[tokio::test]
    async fn only_redis_urls_without_passwords_are_taken() {
        let own = toolcell::hostfs::OwnFiles::new();
        let refused = Store::open(&options("http://127.0.0.1:6379"), &own).expect_err("refused");
        assert!(refused.to_string().contains("redis://"), "{refused}");
        let refused = Store::open(&options("redis://:hunter2@127.0.0.1"), &own)
            .expect_err("a password in the URL");
        assert!(!refused.to_string().contains("hunter2"), "{refused}");
        assert!(
            refused.to_string().contains("--state-password-file"),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn the_seal_key_is_the_operators_and_is_read_as_the_servers_own_file() {
        let temp = tempfile::tempdir().expect("temp dir");
        let own = toolcell::hostfs::OwnFiles::new();
        let file = temp.path().join("seal.key");
        std::fs::write(&file, "not a key\n").expect("write");
        let mut with_file = options("redis://127.0.0.1:1");
        with_file.seal_key_file = Some(file.clone());
        let refused = Store::open(&with_file, &own).expect_err("not hex");
        assert!(refused.to_string().contains("64 hex digits"), "{refused}");
        let key = crate::seal::SealKey::random().expect("a key");
        std::fs::write(&file, format!("{}\n", key.to_hex())).expect("write");
        let store = Store::open(&with_file, &own).expect("opened");
        assert_eq!(store.seal_key().id(), key.id());
        assert!(own.contains_path(&std::fs::canonicalize(&file).expect("canonical")));
    }
}
