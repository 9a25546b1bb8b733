//! Sealed approval tokens: a stateless-era question's `requestState`, which any replica opens.
//!
//! When a call needs a person's answer, the server answers `input_required` with the question
//! and a `requestState`; the client sends the call again with the answer and that state. Per
//! the 2026-07-28 specification the state comes back from the client, so it is
//! attacker-controlled: it is a token the server sealed, and believes only when the seal holds.
//!
//! A token is `tc1.PAYLOAD.MAC`: the payload (JSON, base64url) says which key sealed it, its
//! id (spent once), and digests of whose call it is, which tool, the call's arguments
//! (canonical JSON), every question asked so far with its answer, and the question asked now,
//! and until when the answer counts; the MAC is HMAC-SHA256 under the seal key over the
//! version and payload. Digests, not the words: the token tells the client nothing it was not
//! already told (the question itself goes in the elicitation), and nothing of the server (a
//! workspace's path). A tool's own questions travel the same way (`rounds.rs`): the
//! token carries the answers the client gave in earlier rounds ([`Said`], at most
//! [`MAX_SAID_BYTES`]), which tell it nothing it did not say, and the digests of the questions
//! asked now. A token is ignored (the call is asked afresh) when it is not this server's
//! key's, when it is another client's, for another tool or other arguments, or when its id was
//! spent; one of this key whose seal does not hold was altered, and is refused; an answer
//! after its deadline is a denial. The same format serves one
//! server and many: the key is made per process without a store, and kept in the store with
//! one (`state::Store::seal_key`), so every replica opens every replica's tokens.

use base64::Engine as _;
use hmac::Mac as _;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use std::time::{Duration, SystemTime};
use toolcell::approval::{Approval, ApprovalRequest};

/// The prefix of a token of this format.
const VERSION: &str = "tc1";

/// The prefix of data sealed at rest ([`SealKey::seal_data`]).
const DATA_VERSION: &str = "td1";

/// The longest `requestState` opened: a token holds at most
/// [`crate::approval::MAX_QUESTIONS_PER_CALL`] digests, and a tool's earlier answers of at
/// most [`MAX_SAID_BYTES`], as base64.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024 + MAX_SAID_BYTES * 2;

/// The most bytes (as JSON) of a tool's answers one `requestState` carries from round to round
/// (MCP 2026-07-28: the server keeps nothing between them). A form's answer or a model's
/// paragraph fits many times; a call whose answers outgrow it is told so.
pub const MAX_SAID_BYTES: usize = 64 * 1024;

/// A tool's question answered in an earlier round: its key, [`said_digest`] of the question,
/// and the client's answer, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Said {
    /// The tool's key for it.
    pub key: String,
    /// [`said_digest`] of the question.
    pub digest: String,
    /// The client's answer.
    pub answer: serde_json::Value,
}

/// The digest of a tool's question: its key, method and params, written canonically. A call
/// run again that asks under a key something else than was answered is told `mismatch`.
pub fn said_digest(key: &str, method: &str, params: &serde_json::Value) -> String {
    digest(&[
        b"said",
        key.as_bytes(),
        method.as_bytes(),
        params.to_string().as_bytes(),
    ])
}

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

/// The key that seals tokens, and its id (a digest of it, so a token names its key without
/// showing it).
#[derive(Clone)]
pub struct SealKey {
    bytes: [u8; 32],
    id: String,
    /// HMAC-SHA256 keyed with `bytes`, cloned for each MAC.
    mac: HmacSha256,
}

impl std::fmt::Debug for SealKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealKey")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl SealKey {
    /// A new random key.
    pub fn random() -> std::io::Result<SealKey> {
        SealKey::from_bytes(toolcell::digest::random::<32>()?)
            .ok_or_else(|| std::io::Error::other("HMAC refused a 32-byte key"))
    }

    fn from_bytes(bytes: [u8; 32]) -> Option<SealKey> {
        let id = toolcell::digest::hex(&sha2::Sha256::digest(bytes)[..8]);
        let mac = <HmacSha256 as hmac::Mac>::new_from_slice(&bytes).ok()?;
        Some(SealKey { bytes, id, mac })
    }

    /// The key from its hex form ([`SealKey::to_hex`]), if it is one.
    pub fn from_hex(text: &str) -> Option<SealKey> {
        let text = text.trim();
        if text.len() != 64 {
            return None;
        }
        let bytes: [u8; 32] = toolcell::digest::unhex(text)?.try_into().ok()?;
        SealKey::from_bytes(bytes)
    }

    /// The key as hex, as a key file holds it (`toolcell token --seal-key`).
    pub fn to_hex(&self) -> String {
        toolcell::digest::hex(&self.bytes)
    }

    /// The key for data at rest, derived from this one (HMAC-SHA256 of a fixed label), so the
    /// two uses never share a key.
    fn data_key(&self) -> Option<ring::aead::LessSafeKey> {
        let derived = self
            .mac(b"toolcell data at rest v1")
            .finalize()
            .into_bytes();
        let unbound = ring::aead::UnboundKey::new(&ring::aead::CHACHA20_POLY1305, &derived).ok()?;
        Some(ring::aead::LessSafeKey::new(unbound))
    }

    /// `plain` sealed (encrypted and authenticated) for keeping at rest, bound to `context`
    /// (what it belongs to: a task's id and owner), as `td1.BASE64URL(nonce | ciphertext)`.
    pub fn seal_data(&self, plain: &[u8], context: &[u8]) -> std::io::Result<String> {
        let key = self
            .data_key()
            .ok_or_else(|| std::io::Error::other("no data key"))?;
        let nonce_bytes = toolcell::digest::random::<12>()?;
        let mut sealed = plain.to_vec();
        key.seal_in_place_append_tag(
            ring::aead::Nonce::assume_unique_for_key(nonce_bytes),
            ring::aead::Aad::from(context),
            &mut sealed,
        )
        .map_err(|_| std::io::Error::other("sealing failed"))?;
        let mut out = nonce_bytes.to_vec();
        out.extend_from_slice(&sealed);
        Ok(format!(
            "{DATA_VERSION}.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out)
        ))
    }

    /// What [`SealKey::seal_data`] sealed for `context`, if this key sealed it for that very
    /// context and nothing in it was changed.
    pub fn open_data(&self, sealed: &str, context: &[u8]) -> Option<Vec<u8>> {
        let body = sealed.strip_prefix(DATA_VERSION)?.strip_prefix('.')?;
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .ok()?;
        if bytes.len() < 12 {
            return None;
        }
        let (nonce, ciphertext) = bytes.split_at(12);
        let nonce = ring::aead::Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buffer = ciphertext.to_vec();
        let plain = self
            .data_key()?
            .open_in_place(nonce, ring::aead::Aad::from(context), &mut buffer)
            .ok()?;
        Some(plain.to_vec())
    }

    /// A tag (HMAC-SHA256 under this key, the first 16 bytes as hex) over `label` and
    /// `parts`, each length-prefixed: what names a thing only this key's holders can name (a
    /// question sent to a client, `http::questions`).
    pub fn tag(&self, label: &[u8], parts: &[&[u8]]) -> String {
        let mut mac = self.mac(label);
        for part in parts {
            mac.update(&(part.len() as u64).to_le_bytes());
            mac.update(part);
        }
        toolcell::digest::hex(&mac.finalize().into_bytes()[..16])
    }

    /// Its id, as tokens name it.
    pub fn id(&self) -> &str {
        &self.id
    }

    fn mac(&self, message: &[u8]) -> HmacSha256 {
        let mut mac = self.mac.clone();
        mac.update(message);
        mac
    }
}

/// A digest (sha256, hex) of `parts`, each length-prefixed so that no two lists of parts
/// share one.
fn digest(parts: &[&[u8]]) -> String {
    let mut hash = sha2::Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part);
    }
    toolcell::digest::hex(&hash.finalize())
}

/// The digest of a question: who asks (the agent), in which workspace, which tool, capability
/// and resource. Two requests with the same digest are the same question
/// ([`ApprovalRequest::same_question`]).
pub fn question_digest(request: &ApprovalRequest) -> String {
    let workspace = request
        .workspace
        .as_ref()
        .map(|path| path.to_string_lossy().into_owned())
        .unwrap_or_default();
    digest(&[
        request.agent.as_bytes(),
        &[u8::from(request.workspace.is_some())],
        workspace.as_bytes(),
        request.tool.as_bytes(),
        request.capability.as_bytes(),
        request.resource.as_bytes(),
    ])
}

/// The digest of a client's key (over HTTP, its tenant or peer address).
pub fn owner_digest(owner: &str) -> String {
    digest(&[b"owner", owner.as_bytes()])
}

/// The digest of a call's arguments, written canonically (keys sorted, no whitespace): the
/// same arguments give the same digest whatever their spelling.
pub fn arguments_digest(arguments: &str) -> String {
    let canonical = serde_json::from_str::<serde_json::Value>(arguments)
        .map(|value| value.to_string())
        .unwrap_or_else(|_| arguments.to_owned());
    digest(&[b"arguments", canonical.as_bytes()])
}

/// An answer as a token writes it.
fn answer_name(answer: Approval) -> &'static str {
    match answer {
        Approval::Once => "once",
        Approval::Always => "always",
        Approval::Deny => "deny",
        _ => "none",
    }
}

fn answer_of(name: &str) -> Approval {
    match name {
        "once" => Approval::Once,
        "always" => Approval::Always,
        "deny" => Approval::Deny,
        _ => Approval::NoAnswer,
    }
}

/// What a token holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sealed {
    /// The id of the key that sealed it.
    pub k: String,
    /// The token's own id: an answer under it counts once.
    pub id: String,
    /// [`owner_digest`] of the client it was given to.
    pub owner: String,
    /// The tool called.
    pub tool: String,
    /// [`arguments_digest`] of the call's arguments.
    pub args: String,
    /// Each question answered before this one ([`question_digest`]), with its answer.
    pub answered: Vec<(String, String)>,
    /// The approval asked now ([`question_digest`]); empty when the round asks a tool's
    /// questions instead.
    #[serde(default)]
    pub asked: String,
    /// A tool's questions answered in earlier rounds, in the order it asked them, with their
    /// answers: a call runs again from the start each round, and is given these again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub said: Vec<Said>,
    /// A tool's questions asked now: each key, and [`said_digest`] of the question.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<(String, String)>,
    /// Until when (milliseconds since 1970, UTC) an answer counts.
    pub deadline: u64,
    /// The shared store's epoch when it was sealed (empty without a store): a token of an
    /// earlier epoch is refused, since the store that would remember it spent has forgotten.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub e: String,
}

impl Sealed {
    /// A token for the question `asked` (an approval; none for a round of a tool's own
    /// questions) of `owner`'s call of `tool` with `arguments`, after `answered`, whose answer
    /// counts for `wait` from now, in the store's `epoch` (empty
    /// without a store).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        key: &SealKey,
        epoch: &str,
        owner: &str,
        tool: &str,
        arguments: &str,
        answered: &[(String, Approval)],
        asked: Option<&ApprovalRequest>,
        wait: Duration,
    ) -> std::io::Result<Sealed> {
        Ok(Sealed {
            k: key.id().to_owned(),
            id: toolcell::digest::hex(&toolcell::digest::random::<16>()?),
            owner: owner_digest(owner),
            tool: tool.to_owned(),
            args: arguments_digest(arguments),
            answered: answered
                .iter()
                .map(|(question, answer)| (question.clone(), answer_name(*answer).to_owned()))
                .collect(),
            asked: asked.map(question_digest).unwrap_or_default(),
            said: Vec::new(),
            pending: Vec::new(),
            deadline: millis(SystemTime::now() + wait),
            e: epoch.to_owned(),
        })
    }

    /// The same token, carrying a tool's questions: `said` answered before (kept for the
    /// rounds after), and `pending` (each key and [`said_digest`]) asked now. The approval it
    /// was made for, if any, stays.
    pub fn with_questions(mut self, said: Vec<Said>, pending: Vec<(String, String)>) -> Sealed {
        self.said = said;
        self.pending = pending;
        self
    }

    /// The token: `tc1.PAYLOAD.MAC`.
    pub fn seal(&self, key: &SealKey) -> String {
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(serde_json::to_vec(self).unwrap_or_default());
        let signed = format!("{VERSION}.{payload}");
        let mac = key.mac(signed.as_bytes()).finalize().into_bytes();
        format!(
            "{signed}.{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(mac)
        )
    }

    /// The id of the key `token` says sealed it, if it reads as a token at all (to fetch that
    /// key before [`Sealed::open`]).
    pub fn key_id(token: &str) -> Option<String> {
        let (payload, _) = split(token)?;
        Some(decode(payload)?.k)
    }

    /// The token's contents, if `key` sealed it and nothing in it was changed.
    pub fn open(token: &str, key: &SealKey) -> Option<Sealed> {
        let (payload, mac) = split(token)?;
        let mac = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(mac)
            .ok()?;
        let signed = &token[..VERSION.len() + 1 + payload.len()];
        // Constant time: a forger learns nothing from how long the refusal took.
        key.mac(signed.as_bytes()).verify_slice(&mac).ok()?;
        let sealed = decode(payload)?;
        (sealed.k == key.id()).then_some(sealed)
    }

    /// The answers before this question.
    pub fn answered(&self) -> Vec<(String, Approval)> {
        self.answered
            .iter()
            .map(|(question, answer)| (question.clone(), answer_of(answer)))
            .collect()
    }

    /// Whether its answer still counts.
    pub fn in_time(&self, now: SystemTime) -> bool {
        millis(now) < self.deadline
    }
}

/// A token's payload and MAC, if it has this version's shape and size.
fn split(token: &str) -> Option<(&str, &str)> {
    if token.len() > MAX_TOKEN_BYTES {
        return None;
    }
    let rest = token.strip_prefix(VERSION)?.strip_prefix('.')?;
    rest.split_once('.')
}

fn decode(payload: &str) -> Option<Sealed> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `time` in milliseconds since 1970.
pub fn millis(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map(|since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(resource: &str) -> ApprovalRequest {
        ApprovalRequest {
            agent: "a".to_owned(),
            workspace: Some("/srv/ws/team-a".into()),
            tool: "write_file".to_owned(),
            capability: "filesystem.write".to_owned(),
            resource: resource.to_owned(),
            timeout: Duration::from_secs(5),
        }
    }

    fn token(key: &SealKey) -> (Sealed, String) {
        let sealed = Sealed::new(
            key,
            "",
            "tenant:a",
            "write_file",
            r#"{"path":"x","content":"y"}"#,
            &[(question_digest(&question("w")), Approval::Once)],
            Some(&question("x")),
            Duration::from_secs(5),
        )
        .expect("a token");
        let text = sealed.seal(key);
        (sealed, text)
    }

    #[test]
    fn a_token_opens_under_its_key_only_and_unchanged() {
        let key = SealKey::random().expect("a key");
        let (sealed, text) = token(&key);
        assert_eq!(Sealed::open(&text, &key), Some(sealed.clone()));
        assert_eq!(Sealed::key_id(&text).as_deref(), Some(key.id()));
        // Another key (another server), every byte changed, cut, or grown: refused.
        let other = SealKey::random().expect("a key");
        assert_eq!(Sealed::open(&text, &other), None);
        for at in 0..text.len() {
            let mut bytes = text.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            if let Ok(altered) = String::from_utf8(bytes) {
                assert_eq!(Sealed::open(&altered, &key), None, "byte {at} changed");
            }
        }
        assert_eq!(Sealed::open(&text[..text.len() - 1], &key), None);
        assert_eq!(Sealed::open(&format!("{text}A"), &key), None);
        // A payload rewritten (another owner) and sealed by no one: refused.
        let mut forged = sealed.clone();
        forged.owner = owner_digest("tenant:b");
        let forged = forged.seal(&other);
        assert_eq!(Sealed::open(&forged, &key), None);
    }

    #[test]
    fn data_at_rest_opens_under_its_key_for_its_context_only() {
        let key = SealKey::random().expect("a key");
        let sealed = key
            .seal_data(br#"{"content":"secret result"}"#, b"task-1\0tenant:a")
            .expect("sealed");
        assert!(!sealed.contains("secret"), "{sealed}");
        assert_eq!(
            key.open_data(&sealed, b"task-1\0tenant:a").as_deref(),
            Some(&br#"{"content":"secret result"}"#[..])
        );
        // Another task's or another owner's context, another key, any byte changed: nothing.
        assert_eq!(key.open_data(&sealed, b"task-2\0tenant:a"), None);
        assert_eq!(key.open_data(&sealed, b"task-1\0tenant:b"), None);
        let other = SealKey::random().expect("a key");
        assert_eq!(other.open_data(&sealed, b"task-1\0tenant:a"), None);
        for at in 4..sealed.len() {
            let mut bytes = sealed.clone().into_bytes();
            bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
            if let Ok(altered) = String::from_utf8(bytes) {
                assert_eq!(
                    key.open_data(&altered, b"task-1\0tenant:a"),
                    None,
                    "byte {at}"
                );
            }
        }
        // Two seals of one text differ (a fresh nonce each).
        assert_ne!(
            key.seal_data(b"x", b"c").expect("sealed"),
            key.seal_data(b"x", b"c").expect("sealed")
        );
    }

    #[test]
    fn the_token_tells_nothing_of_the_server() {
        let key = SealKey::random().expect("a key");
        let (_, text) = token(&key);
        let payload = text.split('.').nth(1).expect("a payload");
        let decoded = String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload)
                .expect("base64"),
        )
        .expect("UTF-8");
        assert!(!decoded.contains("/srv/ws"), "{decoded}");
        assert!(!decoded.contains("tenant:a"), "{decoded}");
        assert!(!decoded.contains(&key.to_hex()), "{decoded}");
    }

    #[test]
    fn digests_tell_questions_owners_and_arguments_apart() {
        assert_eq!(
            question_digest(&question("x")),
            question_digest(&ApprovalRequest {
                timeout: Duration::ZERO,
                ..question("x")
            })
        );
        assert_ne!(
            question_digest(&question("x")),
            question_digest(&question("y"))
        );
        assert_ne!(
            question_digest(&question("x")),
            question_digest(&ApprovalRequest {
                workspace: None,
                ..question("x")
            })
        );
        assert_eq!(
            arguments_digest(r#"{"b":1, "a":2}"#),
            arguments_digest(r#"{"a":2,"b":1}"#)
        );
        assert_ne!(
            arguments_digest(r#"{"a":2}"#),
            arguments_digest(r#"{"a":3}"#)
        );
        assert_ne!(owner_digest("tenant:a"), owner_digest("tenant:b"));
        let key = SealKey::random().expect("a key");
        assert_eq!(
            SealKey::from_hex(&key.to_hex()).map(|k| k.id().to_owned()),
            Some(key.id().to_owned())
        );
        assert!(SealKey::from_hex("zz").is_none());
    }
}
