//! Sessions of the `initialize` era (MCP 2025-11-25) over HTTP, kept by no one: a client's
//! session id is what it declared at `initialize`, sealed.
//!
//! Served without sessions, a 2025-11-25 client's capabilities (given only at `initialize`)
//! were unknown on its later requests, so a tool could never ask it anything. A session held
//! in one replica's memory would tie the client to that replica and die with it. So the id the
//! server gives (`Mcp-Session-Id`, in the answer to `initialize`) is the client's declared
//! capabilities and an expiry, sealed with the operator's seal key (`SealKey::seal_data`:
//! ChaCha20-Poly1305, bound to the client the front counts the request under): any replica
//! that holds the key opens it, nothing is kept, and another client (another tenant, another
//! address without tokens) cannot use it. What it means:
//!
//! - a later request that carries an id this server did not seal, another client's, or one
//!   past [`SESSION_LIFETIME`] is answered `404`, as MCP says of an ended session: the client
//!   initializes again;
//! - `DELETE` is answered `405` (the specification lets a server refuse it; there is nothing
//!   to end), and `GET` too (no stream but a request's own);
//! - a 2026-07-28 request's session id is ignored: that revision has none;
//! - `logging/setLevel` in a session is kept by the session id's digest, in this process and,
//!   with `--state`, in the shared store, for as long as the session lives.
//!
//! With a session, the client can be asked during a call: its answers come back by the
//! front's question routes (`http/questions.rs`).

use crate::seal::SealKey;
use rmcp::model::ClientCapabilities;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};
use toolcell::client::LogLevel;

/// The header a session id travels in.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// How long a session id opens: a working day and more; then the client initializes again (it
/// is told `404`), which costs one round trip.
pub const SESSION_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The most a client's declared capabilities may take, written out, to be kept in its session
/// id (which it sends back in a header on every request): what MCP defines takes a few hundred
/// bytes. A client that declares more (its `experimental` ones are dropped first) gets no
/// session id, and is served as one without.
pub const MAX_SESSION_CAPABILITIES_BYTES: usize = 4096;

/// The longest session id opened: what [`MAX_SESSION_CAPABILITIES_BYTES`] sealed and in base64
/// takes, with room to spare; a longer header is not one of this server's.
pub const MAX_SESSION_ID_BYTES: usize = 8192;

/// How many sessions' log levels are kept for one client (each until its session expires):
/// a person's few windows and agents. Past it, a session of that client whose level is not
/// kept yet is refused `logging/setLevel` (it keeps the default level) until one of the
/// others expires: one client cannot crowd out another's levels, in this process or in the
/// shared store.
pub const MAX_SESSION_LEVELS_PER_CLIENT: usize = 16;

/// How many sessions' log levels one process keeps in all: a digest and a level each (some
/// 100 bytes). Past it, the expired are forgotten first; a new one is then refused.
pub const MAX_SESSION_LEVELS: usize = 65_536;

/// What binds a session id to its client.
const CONTEXT: &[u8] = b"toolcell session v1\0";

/// An opened session: what the client declared, and how its level is found.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub(crate) capabilities: ClientCapabilities,
    /// A digest of the id, naming the session where its level is kept.
    pub(crate) digest: String,
    /// A digest of its client: where its levels are counted.
    pub(crate) owner: String,
    /// Until when it opens (ms since 1970).
    pub(crate) until: u64,
}

/// The context a session id of `owner` is sealed for.
fn context(owner: &str) -> Vec<u8> {
    let mut context = CONTEXT.to_vec();
    context.extend_from_slice(crate::seal::owner_digest(owner).as_bytes());
    context
}

/// A session id for `owner`, who declared `capabilities` at `initialize` (its `experimental`
/// ones left out); `None` when they are too large to keep, or sealing failed.
pub(crate) fn issue(
    key: &SealKey,
    owner: &str,
    capabilities: &Value,
    now: SystemTime,
) -> Option<String> {
    let mut declared = capabilities.as_object().cloned().unwrap_or_default();
    declared.remove("experimental");
    // Only what rmcp reads as capabilities is kept, so that an id always opens.
    let read: ClientCapabilities = serde_json::from_value(Value::Object(declared)).ok()?;
    let until = crate::seal::millis(now + SESSION_LIFETIME);
    let plain = serde_json::to_vec(&serde_json::json!({ "c": read, "u": until })).ok()?;
    if plain.len() > MAX_SESSION_CAPABILITIES_BYTES {
        return None;
    }
    key.seal_data(&plain, &context(owner)).ok()
}

/// The session `id` names, if this key sealed it for `owner` and it has not expired.
pub(crate) fn open(key: &SealKey, owner: &str, id: &str, now: SystemTime) -> Option<Session> {
    if id.len() > MAX_SESSION_ID_BYTES {
        return None;
    }
    let plain = key.open_data(id, &context(owner))?;
    let value: Value = serde_json::from_slice(&plain).ok()?;
    let until = value.get("u")?.as_u64()?;
    if until <= crate::seal::millis(now) {
        return None;
    }
    let capabilities = serde_json::from_value(value.get("c")?.clone()).ok()?;
    Some(Session {
        capabilities,
        digest: toolcell::digest::sha256_hex(id.as_bytes()),
        owner: crate::seal::owner_digest(owner),
        until,
    })
}

/// The levels sessions set (`logging/setLevel`), by client and session: in this process, and
/// with a shared store in it too, so that every replica sends a session's log messages at its
/// level. Each client keeps at most [`MAX_SESSION_LEVELS_PER_CLIENT`].
#[derive(Default)]
pub(crate) struct Levels {
    /// By client digest, then session digest: the level and until when it holds (ms).
    local: Mutex<ByClient>,
    #[cfg(feature = "state")]
    store: Option<std::sync::Arc<crate::state::Store>>,
}

/// Each client's sessions' levels: by client digest, then session digest, the level and until
/// when it holds (ms since 1970).
type ByClient = HashMap<String, HashMap<String, (LogLevel, u64)>>;

/// Why a level was not kept.
const NO_ROOM: &str = "this client has set a log level in too many sessions already (at most \
                       16 are kept); this session keeps the default level";

impl Levels {
    /// Levels kept in `store` as well.
    #[cfg(feature = "state")]
    pub(crate) fn shared(store: Option<std::sync::Arc<crate::state::Store>>) -> Levels {
        Levels {
            local: Mutex::default(),
            store,
        }
    }

    /// The level `session` set, if it set one.
    pub(crate) async fn get(&self, session: &Session) -> Option<LogLevel> {
        let now = crate::seal::millis(SystemTime::now());
        let here = self
            .lock()
            .get(&session.owner)
            .and_then(|sessions| sessions.get(&session.digest))
            .filter(|(_, until)| *until > now)
            .map(|(level, _)| *level);
        if here.is_some() {
            return here;
        }
        #[cfg(feature = "state")]
        if let Some(store) = &self.store {
            let key = crate::state::Store::key(&format!("levels:{}", session.owner));
            let (key, field) = (&key, &session.digest);
            let kept: Option<String> = store
                .run(|mut connection| async move {
                    redis::cmd("HGET")
                        .arg(key)
                        .arg(field)
                        .query_async(&mut connection)
                        .await
                })
                .await
                .ok()
                .flatten();
            let (name, until) = kept.as_deref()?.split_once('|')?;
            return (until.parse::<u64>().ok()? > now)
                .then(|| LogLevel::parse(name))
                .flatten();
        }
        None
    }

    /// Keep `level` for `session`, until it expires; why not, when its client has no room.
    pub(crate) async fn set(&self, session: &Session, level: LogLevel) -> Result<(), String> {
        let now = crate::seal::millis(SystemTime::now());
        {
            let mut local = self.lock();
            let total: usize = local.values().map(HashMap::len).sum();
            if total >= MAX_SESSION_LEVELS {
                local.retain(|_, sessions| {
                    sessions.retain(|_, (_, until)| *until > now);
                    !sessions.is_empty()
                });
            }
            let total: usize = local.values().map(HashMap::len).sum();
            let sessions = local.entry(session.owner.clone()).or_default();
            if !sessions.contains_key(&session.digest) {
                if sessions.len() >= MAX_SESSION_LEVELS_PER_CLIENT {
                    sessions.retain(|_, (_, until)| *until > now);
                }
                if sessions.len() >= MAX_SESSION_LEVELS_PER_CLIENT || total >= MAX_SESSION_LEVELS {
                    return Err(NO_ROOM.to_owned());
                }
            }
            sessions.insert(session.digest.clone(), (level, session.until));
        }
        #[cfg(feature = "state")]
        if let Some(store) = &self.store {
            let key = crate::state::Store::key(&format!("levels:{}", session.owner));
            let name = serde_json::to_value(level)
                .ok()
                .and_then(|name| name.as_str().map(str::to_owned))
                .unwrap_or_default();
            let value = format!("{name}|{}", session.until);
            let (key, field, value) = (&key, &session.digest, &value);
            let until = session.until;
            // A level the store does not keep is kept here: the session's other replicas send
            // at the default level meanwhile.
            let kept = store
                .run(|mut connection| async move {
                    crate::state::scripts::LEVEL_SET
                        .key(key)
                        .arg(field)
                        .arg(value)
                        .arg(until)
                        .arg(MAX_SESSION_LEVELS_PER_CLIENT)
                        .invoke_async::<i64>(&mut connection)
                        .await
                })
                .await;
            if kept == Ok(0) {
                return Err(NO_ROOM.to_owned());
            }
        }
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ByClient> {
        toolcell::sync::lock(&self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id opens for its own client, before it expires, unaltered; never for another client.
    #[test]
    fn a_session_id_opens_only_for_its_client_while_it_lives() {
        let key = SealKey::random().expect("a key");
        let now = SystemTime::now();
        let declared = serde_json::json!({
            "sampling": {},
            "elicitation": { "form": {} },
            "experimental": { "big": "x".repeat(10_000) }
        });
        let id = issue(&key, "tenant:a", &declared, now).expect("an id");
        assert!(id.len() < MAX_SESSION_ID_BYTES);
        let session = open(&key, "tenant:a", &id, now).expect("its own client opens it");
        assert!(session.capabilities.sampling.is_some());
        assert!(session.capabilities.elicitation.is_some());
        assert!(session.capabilities.experimental.is_none());
        assert!(open(&key, "tenant:b", &id, now).is_none(), "another client");
        let later = now + SESSION_LIFETIME + Duration::from_secs(1);
        assert!(open(&key, "tenant:a", &id, later).is_none(), "expired");
        let other = SealKey::random().expect("a key");
        assert!(open(&other, "tenant:a", &id, now).is_none(), "another key");
        let mut altered = id.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).expect("text");
        assert!(open(&key, "tenant:a", &altered, now).is_none(), "altered");
        assert!(open(&key, "tenant:a", &"x".repeat(MAX_SESSION_ID_BYTES + 1), now).is_none());
    }

    /// Capabilities too large to carry get no session (the client is served without one).
    #[test]
    fn capabilities_too_large_to_carry_get_no_session() {
        let key = SealKey::random().expect("a key");
        let declared = serde_json::json!({
            "roots": { "listChanged": true },
            "extensions": { "x": { "junk": "y".repeat(MAX_SESSION_CAPABILITIES_BYTES) } }
        });
        assert!(issue(&key, "a", &declared, SystemTime::now()).is_none());
    }
}

#[cfg(test)]
mod levels {
    use super::*;

    fn session(owner: &str, n: usize) -> Session {
        Session {
            capabilities: ClientCapabilities::default(),
            digest: format!("s{n}"),
            owner: owner.to_owned(),
            until: crate::seal::millis(SystemTime::now() + SESSION_LIFETIME),
        }
    }

    /// One client keeps at most its share of levels; another client's are kept all the same.
    #[tokio::test]
    async fn one_client_cannot_crowd_out_anothers_levels() {
        let levels = Levels::default();
        for n in 0..MAX_SESSION_LEVELS_PER_CLIENT {
            assert!(levels.set(&session("a", n), LogLevel::Error).await.is_ok());
        }
        let refused = levels
            .set(
                &session("a", MAX_SESSION_LEVELS_PER_CLIENT),
                LogLevel::Error,
            )
            .await;
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(
            levels.set(&session("a", 0), LogLevel::Debug).await,
            Ok(()),
            "a kept session may change its level"
        );
        assert_eq!(
            levels.set(&session("b", 0), LogLevel::Warning).await,
            Ok(())
        );
        assert_eq!(levels.get(&session("b", 0)).await, Some(LogLevel::Warning));
        assert_eq!(levels.get(&session("a", 0)).await, Some(LogLevel::Debug));
    }
}
