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
//!   opens with the key kept here ([`Store::seal_key`]); an answer counts once because its
//!   token's id is spent here, with an expiry at the question's deadline.
//! - **tasks** ([`crate::tasks`]): each task's record (owner, status, result within the cap),
//!   so any replica answers `tasks/get`; a `tasks/cancel` reaching another replica sets a flag
//!   the running replica looks at every [`CANCEL_POLL_EVERY`]; every replica writes a heartbeat
//!   every [`HEARTBEAT_EVERY`], and a task whose replica has none for [`HEARTBEAT_TTL`] is
//!   answered `failed` ("the replica running it stopped").
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

/// How often a replica says it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);

/// How long a replica's heartbeat lasts: a replica silent for this long is taken for dead, and
/// its running tasks are answered `failed`. Five heartbeats: a replica busy or slow for a
/// moment is not.
pub const HEARTBEAT_TTL: Duration = Duration::from_secs(10);

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
    /// The key that seals approval tokens, once read from (or made in) the store.
    seal_key: Mutex<Option<crate::seal::SealKey>>,
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
    /// A store at `url` (`redis://` or `rediss://`, with a database and a password if the
    /// operator puts them there), its password read from `password_file` if one is given
    /// (trailing whitespace dropped). Nothing is connected yet: a store that is down at start
    /// is connected to once it is up. Must be called inside a tokio runtime.
    pub fn open(url: &str, password_file: Option<&Path>) -> Result<Arc<Store>, crate::ConfigError> {
        use redis::IntoConnectionInfo as _;
        if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
            return Err(crate::ConfigError(format!(
                "--state {}: give a redis:// or rediss:// URL (Redis 7 or Valkey)",
                scrub(url)
            )));
        }
        let mut info = url
            .into_connection_info()
            .map_err(|error| crate::ConfigError(format!("--state {}: {error}", scrub(url))))?;
        if let Some(file) = password_file {
            let password = std::fs::read_to_string(file).map_err(|error| {
                crate::ConfigError(format!("--state-password-file {}: {error}", file.display()))
            })?;
            let settings = info
                .redis_settings()
                .clone()
                .set_password(password.trim_end());
            info = info.set_redis_settings(settings);
        }
        let shown = format!("{} (database {})", info.addr(), info.redis_settings().db());
        // `rediss://` makes its TLS configuration from the process's provider: ring, as
        // every other TLS client here (a provider already installed stays).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = redis::Client::open(info)
            .map_err(|error| crate::ConfigError(format!("--state {}: {error}", scrub(url))))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(STORE_TIMEOUT))
            .set_response_timeout(Some(STORE_TIMEOUT))
            .set_number_of_retries(1)
            .set_max_delay(STORE_TIMEOUT);
        let connection = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|error| crate::ConfigError(format!("--state {}: {error}", scrub(url))))?;
        let replica = toolcell::digest::hex(
            &toolcell::digest::random::<8>()
                .map_err(|error| crate::ConfigError(format!("naming this replica: {error}")))?,
        );
        Ok(Arc::new(Store {
            connection,
            shown,
            replica,
            down: AtomicBool::new(false),
            unavailable: AtomicU64::new(0),
            seal_key: Mutex::new(None),
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
        F: FnOnce(ConnectionManager) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let answer = tokio::time::timeout(STORE_TIMEOUT, op(self.connection.clone())).await;
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

    /// The key that seals approval tokens, shared by every replica: read from the store, or
    /// made there by the first replica that needs it (`SET NX`, so two replicas starting at
    /// once agree on one). `refresh` reads it again (a token sealed under a key this replica
    /// has not seen: the store was emptied and a new key made).
    pub(crate) async fn seal_key(
        &self,
        refresh: bool,
    ) -> Result<crate::seal::SealKey, Unavailable> {
        if !refresh
            && let Some(key) = self
                .seal_key
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone()
        {
            return Ok(key);
        }
        let name = Store::key("seal-key");
        let fresh = crate::seal::SealKey::random().map_err(|error| Unavailable {
            store: self.shown.clone(),
            why: format!("making a key: {error}"),
        })?;
        let hex = fresh.to_hex();
        let stored: String = self
            .run(|mut connection| async move {
                let _: () = redis::cmd("SET")
                    .arg(&name)
                    .arg(&hex)
                    .arg("NX")
                    .query_async(&mut connection)
                    .await?;
                redis::cmd("GET")
                    .arg(&name)
                    .query_async(&mut connection)
                    .await
            })
            .await?;
        let key = crate::seal::SealKey::from_hex(&stored).ok_or_else(|| Unavailable {
            store: self.shown.clone(),
            why: "the seal key in the store is not one toolcell made".to_owned(),
        })?;
        *self
            .seal_key
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(key.clone());
        Ok(key)
    }

    /// Write this replica's heartbeat once: it lives [`HEARTBEAT_TTL`], and the serving loop
    /// writes it again every [`HEARTBEAT_EVERY`] (a replica whose heartbeat is gone is dead:
    /// its tasks end `failed`).
    pub(crate) async fn beat(&self) {
        let key = Store::key(&format!("replica:{}", self.replica));
        let ttl = u64::try_from(HEARTBEAT_TTL.as_millis()).unwrap_or(u64::MAX);
        let _ = self
            .run(|mut connection| async move {
                redis::cmd("SET")
                    .arg(&key)
                    .arg(1)
                    .arg("PX")
                    .arg(ttl)
                    .query_async::<()>(&mut connection)
                    .await
            })
            .await;
    }
}

/// Spend the approval token `id`, which counts until `until` (ms since 1970): whether this is
/// its first use, on any replica (`SET NX`, expiring at `until`).
pub(crate) async fn spend_token(store: &Store, id: &str, until: u64) -> Result<bool, Unavailable> {
    let key = Store::key(&format!("spent:{id}"));
    // A deadline already past still marks the token spent, for a moment.
    let until = until.max(crate::seal::millis(std::time::SystemTime::now()) + 1000);
    let first: Option<String> = store
        .run(|mut connection| async move {
            redis::cmd("SET")
                .arg(&key)
                .arg(1)
                .arg("NX")
                .arg("PXAT")
                .arg(until)
                .query_async(&mut connection)
                .await
        })
        .await?;
    Ok(first.is_some())
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

    #[tokio::test]
    async fn only_redis_urls_are_taken() {
        let refused = Store::open("http://127.0.0.1:6379", None).expect_err("refused");
        assert!(refused.0.contains("redis://"), "{refused}");
        let refused = Store::open("redis://:hunter2@", None).err();
        assert!(
            refused
                .as_ref()
                .is_none_or(|refused| !refused.0.contains("hunter2")),
            "{refused:?}"
        );
    }
}
