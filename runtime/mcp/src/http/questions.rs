//! The way back for a client's answers to the questions a call asks it on its HTTP stream
//! (MCP 2025-11-25, a client with a session id: `http/session.rs`).
//!
//! Past the house's 700 lines only by its unit tests, kept beside the code they test.
//!
//! Why this is ours: rmcp serves each HTTP request of that era without a session, in a service
//! of its own whose transport takes the one request and never another message, so the peer
//! that writes a tool's `sampling/createMessage` on the call's stream never hears the answer,
//! which the client `POST`s as a request of its own (and rmcp refuses: "stateless server does
//! not accept JSON-RPC responses"). rmcp also numbers a request's questions from 0, so the ids
//! of two calls' questions collide. So:
//!
//! - each call that may ask gets a `Route` (`FromFront::answers`); the stream its answer
//!   goes out on is read by `Renamed`, which gives each request it carries (and each
//!   `notifications/cancelled` that names one) a name of its own, `tc-q-NONCE-UNTIL-TAG`: a
//!   random nonce, until when an answer is taken, and a tag (HMAC under the seal key) over
//!   them and the client the front counts the request under. No one without the key can make
//!   one, and it is good only for that client;
//! - a `POST` of a response whose id is such a name (`Questions::deliver`) is checked (the
//!   tag for this client, the time) and handed to the call that waits for it, here, or, with a
//!   shared store, put there sealed for the replica where the call runs, which looks for it
//!   every `state::CANCEL_POLL_EVERY` while it waits. It is answered `202`; anything
//!   else (another client's question, one answered already, one no one asked) `400`, and
//!   nothing happens.
//!
//! An answer is taken once; a question whose call ended takes none.

use crate::asking::{AnswerRoute, Posted, Waited};
use crate::seal::SealKey;
use bytes::{Bytes, BytesMut};
use hyper::body::{Body, Frame, SizeHint};
use rmcp::model::RequestId;
use serde_json::Value;
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

/// What every question's name begins with.
pub(crate) const QUESTION_PREFIX: &str = "tc-q-";

/// How long after it is asked a question's answer is taken: the longest any question waits
/// ([`crate::QUESTION_WAIT`]).
pub const ANSWER_WINDOW: Duration = crate::QUESTION_WAIT;

/// How many questions may wait for answers in one process: a call asks at most a few (the
/// core bounds them), and each waiting question is a few hundred bytes. Past it, questions
/// that expired are forgotten first; a question that still finds no room is sent unnamed,
/// and its call is told no answer came.
pub const MAX_OPEN_QUESTIONS: usize = 16_384;

/// The longest server-sent event the stream reader holds to look for a question in: a
/// question is far smaller (the core bounds them); a larger event (a long result) is passed on
/// as it comes, unread.
pub const MAX_EVENT_BYTES: usize = 256 * 1024;

/// What the tag of a question's name is made under.
const TAG_LABEL: &[u8] = b"toolcell question v1";

/// What an answer relayed through the store is sealed for.
#[cfg(feature = "state")]
const RELAY_CONTEXT: &[u8] = b"toolcell answer v1\0";

/// A question waiting for its answer: the call's route (gone once the call ended), and the id
/// rmcp gave it there.
struct Open {
    route: Weak<Route>,
    id: RequestId,
    until: u64,
}

/// The questions this process asked and is waiting for.
pub(crate) struct Questions {
    key: Option<SealKey>,
    open: Mutex<HashMap<String, Open>>,
    #[cfg(feature = "state")]
    store: Option<Arc<crate::state::Store>>,
}

/// What became of a posted answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Delivered {
    /// Handed to the call that asked, here.
    Taken,
    /// Kept in the shared store for the replica where the call runs.
    Relayed,
    /// Not taken, and why.
    Refused(&'static str),
    /// The shared store, needed to pass it on, could not be reached.
    Unavailable(crate::state::Unavailable),
}

impl Questions {
    /// Questions named under `key` (none can be without one), relayed through `store` when
    /// there is one.
    pub(crate) fn new(
        key: Option<SealKey>,
        #[cfg(feature = "state")] store: Option<Arc<crate::state::Store>>,
    ) -> Questions {
        Questions {
            key,
            open: Mutex::default(),
            #[cfg(feature = "state")]
            store,
        }
    }

    /// A route for the questions of one call of `client`'s.
    pub(crate) fn route(self: &Arc<Self>, client: &str) -> Arc<Route> {
        Arc::new(Route {
            owner: crate::seal::owner_digest(client),
            questions: Arc::clone(self),
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Open>> {
        toolcell::sync::lock(&self.open)
    }

    /// Note question `nonce` of `owner`'s in the shared store: an answer to it may be relayed
    /// until `until` (once). A question the store does not hear of is answered here only.
    #[cfg(feature = "state")]
    async fn note(&self, owner: &str, nonce: &str, until: u64) {
        let Some(store) = &self.store else {
            return;
        };
        let name = crate::state::Store::key(&format!("question:{nonce}"));
        let ttl = until
            .saturating_sub(crate::seal::millis(SystemTime::now()))
            .max(1);
        let name = &name;
        if let Err(unavailable) = store
            .run(|mut connection| async move {
                redis::cmd("SET")
                    .arg(name)
                    .arg(owner)
                    .arg("PX")
                    .arg(ttl)
                    .query_async::<()>(&mut connection)
                    .await
            })
            .await
        {
            tracing::warn!("{unavailable}: a question's answer is taken at this replica only");
        }
    }

    /// Forget the shared store's note of question `nonce`: it was answered here.
    #[cfg(feature = "state")]
    async fn forget(&self, nonce: &str) {
        let Some(store) = &self.store else {
            return;
        };
        let name = crate::state::Store::key(&format!("question:{nonce}"));
        let name = &name;
        let _ = store
            .run(|mut connection| async move {
                redis::cmd("DEL")
                    .arg(name)
                    .query_async::<()>(&mut connection)
                    .await
            })
            .await;
    }

    /// Hand `posted`, the answer `client` posted under the name `name`, to the call that asked
    /// it.
    pub(crate) async fn deliver(&self, client: &str, name: &str, posted: Posted) -> Delivered {
        let Some(key) = &self.key else {
            return Delivered::Refused("this server asks no questions");
        };
        let owner = crate::seal::owner_digest(client);
        let Some((nonce, until)) = parse_name(key, &owner, name) else {
            return Delivered::Refused("no question of this server's was sent to you by that id");
        };
        if until <= crate::seal::millis(SystemTime::now()) {
            return Delivered::Refused("that question was asked too long ago");
        }
        let open = self.lock().remove(nonce);
        if let Some(open) = open
            && let Some(route) = open.route.upgrade()
            && route.owner == owner
        {
            route.arrive(open.id, posted);
            // Answered: no other replica takes an answer to it now.
            #[cfg(feature = "state")]
            self.forget(nonce).await;
            return Delivered::Taken;
        }
        self.relay(&owner, nonce, until, posted).await
    }

    /// Keep `posted` in the shared store for the replica whose call asked question `nonce`
    /// (once: a second answer is refused).
    #[cfg(feature = "state")]
    async fn relay(&self, owner: &str, nonce: &str, until: u64, posted: Posted) -> Delivered {
        let (Some(store), Some(key)) = (&self.store, &self.key) else {
            return Delivered::Refused(
                "no question of that id is waiting (answered already, or its call ended)",
            );
        };
        let plain = serde_json::to_vec(&relayed(posted)).unwrap_or_default();
        let Ok(sealed) = key.seal_data(&plain, &relay_context(owner, nonce)) else {
            return Delivered::Refused("the answer could not be sealed");
        };
        let keys = [
            crate::state::Store::key(&format!("question:{nonce}")),
            crate::state::Store::key(&format!("answer:{nonce}")),
        ];
        let ttl = until
            .saturating_sub(crate::seal::millis(SystemTime::now()))
            .max(1);
        let (keys, sealed) = (&keys, &sealed);
        let kept: Result<i64, _> = store
            .run(|mut connection| async move {
                crate::state::scripts::RELAY_ANSWER
                    .key(&keys[0])
                    .key(&keys[1])
                    .arg(owner)
                    .arg(sealed)
                    .arg(ttl)
                    .invoke_async(&mut connection)
                    .await
            })
            .await;
        match kept {
            Ok(1) => Delivered::Relayed,
            Ok(_) => Delivered::Refused(
                "no question of that id is waiting (answered already, or its call ended)",
            ),
            Err(unavailable) => Delivered::Unavailable(unavailable),
        }
    }

    #[cfg(not(feature = "state"))]
    async fn relay(&self, _: &str, _: &str, _: u64, _: Posted) -> Delivered {
        Delivered::Refused(
            "no question of that id is waiting (answered already, or its call ended)",
        )
    }

    /// The answer to question `nonce` another replica kept in the store, taken from it.
    #[cfg(feature = "state")]
    async fn relayed_answer(&self, owner: &str, nonce: &str) -> Option<Posted> {
        let (store, key) = (self.store.as_ref()?, self.key.as_ref()?);
        let name = crate::state::Store::key(&format!("answer:{nonce}"));
        let name = &name;
        let sealed: Option<String> = store
            .run(|mut connection| async move {
                redis::cmd("GETDEL")
                    .arg(name)
                    .query_async(&mut connection)
                    .await
            })
            .await
            .ok()
            .flatten();
        let plain = key.open_data(&sealed?, &relay_context(owner, nonce))?;
        let value: Value = serde_json::from_slice(&plain).ok()?;
        match (value.get("result"), value.get("error")) {
            (Some(result), None) => Some(Ok(result.clone())),
            (None, Some(error)) => Some(Err(error.clone())),
            _ => None,
        }
    }
}

/// An answer as the store keeps it: one larger than a tool is given
/// ([`toolcell::client::MAX_ANSWER_BYTES`]) is kept as an error saying so, never whole.
#[cfg(feature = "state")]
fn relayed(posted: Posted) -> Value {
    let size = match &posted {
        Ok(value) | Err(value) => value.to_string().len(),
    };
    if size > toolcell::client::MAX_ANSWER_BYTES {
        let message = format!(
            "the answer is {size} bytes; at most {} are passed on",
            toolcell::client::MAX_ANSWER_BYTES
        );
        return serde_json::json!({ "error": { "code": -32603, "message": message } });
    }
    match posted {
        Ok(result) => serde_json::json!({ "result": result }),
        Err(error) => serde_json::json!({ "error": error }),
    }
}

/// What an answer to question `nonce` of `owner`'s is sealed for in the store.
#[cfg(feature = "state")]
fn relay_context(owner: &str, nonce: &str) -> Vec<u8> {
    let mut context = RELAY_CONTEXT.to_vec();
    context.extend_from_slice(owner.as_bytes());
    context.push(0);
    context.extend_from_slice(nonce.as_bytes());
    context
}

/// A new nonce, and until when its question's answer is taken.
fn fresh(now: SystemTime) -> Option<(String, u64)> {
    let nonce = toolcell::digest::hex(&toolcell::digest::random::<16>().ok()?);
    Some((nonce, crate::seal::millis(now + ANSWER_WINDOW)))
}

/// The name of a question asked of `owner`: `tc-q-NONCE-UNTIL-TAG`.
fn make_name(key: &SealKey, owner: &str, nonce: &str, until: u64) -> String {
    let until = format!("{until:x}");
    let tag = key.tag(
        TAG_LABEL,
        &[owner.as_bytes(), nonce.as_bytes(), until.as_bytes()],
    );
    format!("{QUESTION_PREFIX}{nonce}-{until}-{tag}")
}

/// The nonce and expiry of `name`, if it is a question's name this key made for `owner`.
fn parse_name<'a>(key: &SealKey, owner: &str, name: &'a str) -> Option<(&'a str, u64)> {
    let rest = name.strip_prefix(QUESTION_PREFIX)?;
    let mut parts = rest.splitn(3, '-');
    let (nonce, until_hex, tag) = (parts.next()?, parts.next()?, parts.next()?);
    if nonce.len() != 32 || until_hex.len() > 16 || tag.len() != 32 {
        return None;
    }
    let until = u64::from_str_radix(until_hex, 16).ok()?;
    let expected = key.tag(
        TAG_LABEL,
        &[owner.as_bytes(), nonce.as_bytes(), until_hex.as_bytes()],
    );
    use subtle::ConstantTimeEq as _;
    bool::from(expected.as_bytes().ct_eq(tag.as_bytes())).then_some((nonce, until))
}

/// The questions of one call: the name each was sent under, and who waits for each answer.
pub(crate) struct Route {
    /// The digest of the client the call is counted under: only its answers are taken.
    owner: String,
    questions: Arc<Questions>,
    state: Mutex<RouteState>,
}

#[derive(Default)]
struct RouteState {
    /// Names made ready for the next questions (a nonce, and until when it is answered), in
    /// the order the questions go out.
    prepared: std::collections::VecDeque<(String, u64)>,
    /// Each question's nonce, by the id rmcp gave it.
    named: HashMap<RequestId, String>,
    /// Who waits for each answer.
    waiting: HashMap<RequestId, tokio::sync::oneshot::Sender<Posted>>,
    /// Answers that came before they were waited for.
    arrived: HashMap<RequestId, Posted>,
}

impl Route {
    fn lock(&self) -> std::sync::MutexGuard<'_, RouteState> {
        toolcell::sync::lock(&self.state)
    }

    /// The name the question rmcp sent as `id` goes out under, noted as waiting; `None` when
    /// no name can be made (no key, no randomness, no room).
    fn name(self: &Arc<Self>, id: &RequestId) -> Option<String> {
        if let Some(nonce) = self.lock().named.get(id) {
            let until = self.questions.lock().get(nonce).map(|open| open.until)?;
            return Some(make_name(
                self.questions.key.as_ref()?,
                &self.owner,
                nonce,
                until,
            ));
        }
        let key = self.questions.key.as_ref()?;
        let now = SystemTime::now();
        let prepared = self.lock().prepared.pop_front();
        let (nonce, until) = match prepared {
            Some(prepared) => prepared,
            None => fresh(now)?,
        };
        {
            let mut open = self.questions.lock();
            if open.len() >= MAX_OPEN_QUESTIONS {
                let now = crate::seal::millis(now);
                open.retain(|_, question| {
                    question.until > now && question.route.strong_count() > 0
                });
                if open.len() >= MAX_OPEN_QUESTIONS {
                    tracing::warn!(
                        "{MAX_OPEN_QUESTIONS} questions wait for answers: one more is sent \
                         unnamed, and its call gets no answer"
                    );
                    return None;
                }
            }
            open.insert(
                nonce.clone(),
                Open {
                    route: Arc::downgrade(self),
                    id: id.clone(),
                    until,
                },
            );
        }
        self.lock().named.insert(id.clone(), nonce.clone());
        Some(make_name(key, &self.owner, &nonce, until))
    }

    /// The answer to `id` arrived.
    fn arrive(&self, id: RequestId, posted: Posted) {
        let mut state = self.lock();
        match state.waiting.remove(&id) {
            Some(waiter) => {
                let _ = waiter.send(posted);
            }
            None => {
                state.arrived.insert(id, posted);
            }
        }
    }
}

impl Drop for Route {
    /// The call ended: its questions take no more answers, here or (their notes taken from
    /// the shared store) at another replica.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        let named: Vec<String> = state
            .named
            .drain()
            .map(|(_, nonce)| nonce)
            .chain(state.prepared.drain(..).map(|(nonce, _)| nonce))
            .collect();
        {
            let mut open = self.questions.lock();
            for nonce in &named {
                open.remove(nonce);
            }
        }
        // Every note this route made (one answered here or relayed was taken already; taking
        // a note that is gone does nothing).
        let unanswered = named;
        #[cfg(feature = "state")]
        if !unanswered.is_empty()
            && self.questions.store.is_some()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let questions = Arc::clone(&self.questions);
            runtime.spawn(async move {
                for nonce in unanswered {
                    questions.forget(&nonce).await;
                }
            });
        }
        #[cfg(not(feature = "state"))]
        drop(unanswered);
    }
}

impl AnswerRoute for Route {
    fn prepare(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let Some((nonce, until)) = fresh(SystemTime::now()) else {
                return;
            };
            // With a shared store, the question is noted there first: only a question noted
            // (and not answered yet) takes an answer relayed from another replica.
            #[cfg(feature = "state")]
            self.questions.note(&self.owner, &nonce, until).await;
            self.lock().prepared.push_back((nonce, until));
        })
    }

    fn wait<'a>(&'a self, id: &'a RequestId, timeout: Duration) -> Waited<'a> {
        Box::pin(async move {
            let receiver = {
                let mut state = self.lock();
                if let Some(posted) = state.arrived.remove(id) {
                    return Some(posted);
                }
                let (sender, receiver) = tokio::sync::oneshot::channel();
                state.waiting.insert(id.clone(), sender);
                receiver
            };
            let deadline = tokio::time::Instant::now() + timeout;
            let mut receiver = std::pin::pin!(receiver);
            #[cfg(feature = "state")]
            let mut look = tokio::time::interval(crate::state::CANCEL_POLL_EVERY);
            loop {
                #[cfg(feature = "state")]
                let relayed = async {
                    if self.questions.store.is_none() {
                        return std::future::pending().await;
                    }
                    look.tick().await;
                    let nonce = self.lock().named.get(id).cloned();
                    match nonce {
                        Some(nonce) => self.questions.relayed_answer(&self.owner, &nonce).await,
                        None => None,
                    }
                };
                #[cfg(not(feature = "state"))]
                let relayed = std::future::pending::<Option<Posted>>();
                tokio::select! {
                    answer = &mut receiver => return answer.ok(),
                    () = tokio::time::sleep_until(deadline) => {
                        self.lock().waiting.remove(id);
                        return None;
                    }
                    relayed = relayed => if let Some(posted) = relayed {
                        self.lock().waiting.remove(id);
                        return Some(posted);
                    }
                }
            }
        })
    }
}

/// A call's response stream, each question it carries renamed as it goes out (and each
/// cancellation of one), so that the answer finds its way back ([`Route`]).
pub(crate) struct Renamed<B> {
    inner: B,
    route: Arc<Route>,
    buffer: BytesMut,
    /// Passing on an event too large to be a question, until its end.
    passing: bool,
    ended: bool,
}

impl<B> Renamed<B> {
    /// `inner`, its questions named on `route`.
    pub(crate) fn new(inner: B, route: Arc<Route>) -> Renamed<B> {
        Renamed {
            inner,
            route,
            buffer: BytesMut::new(),
            passing: false,
            ended: false,
        }
    }
}

/// Where the first event in `buffer` ends (after its blank line), if it has ended.
fn event_end(buffer: &[u8]) -> Option<usize> {
    buffer
        .windows(2)
        .position(|pair| pair == b"\n\n")
        .map(|at| at + 2)
}

impl<B> Body for Renamed<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        loop {
            if let Some(end) = event_end(&this.buffer) {
                let event = this.buffer.split_to(end).freeze();
                let out = if this.passing {
                    this.passing = false;
                    event
                } else {
                    rename(&this.route, &event).unwrap_or(event)
                };
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
            if this.buffer.len() > MAX_EVENT_BYTES || (this.ended && !this.buffer.is_empty()) {
                this.passing = !this.ended;
                let out = this.buffer.split().freeze();
                return Poll::Ready(Some(Ok(Frame::data(out))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.ended = true,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.buffer.extend_from_slice(&data),
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.buffer.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// `event` (one server-sent event, its blank line included) with the question it carries
/// renamed, or the cancellation of one; `None` to pass it on as it is.
fn rename(route: &Arc<Route>, event: &[u8]) -> Option<Bytes> {
    let text = std::str::from_utf8(event).ok()?;
    let mut out = String::with_capacity(text.len() + 96);
    let mut changed = false;
    for line in text.split_inclusive('\n') {
        let data = line
            .strip_prefix("data:")
            .map(|data| data.trim_start_matches(' ').trim_end_matches('\n'));
        let renamed = data.and_then(|data| rename_message(route, data));
        match renamed {
            Some(message) => {
                out.push_str("data: ");
                out.push_str(&message);
                out.push('\n');
                changed = true;
            }
            None => out.push_str(line),
        }
    }
    changed.then(|| Bytes::from(out))
}

/// One message of the stream, written out again with its question's id renamed (a request
/// the server sends the client), or the id a cancellation names; `None` for any other.
fn rename_message(route: &Arc<Route>, data: &str) -> Option<String> {
    let mut message: serde_json::Map<String, Value> = serde_json::from_str(data).ok()?;
    let method = message.get("method")?.as_str()?.to_owned();
    if message.contains_key("id") {
        let id: RequestId = serde_json::from_value(message.get("id")?.clone()).ok()?;
        let name = route.name(&id)?;
        message.insert("id".to_owned(), Value::String(name));
    } else if method == "notifications/cancelled" {
        let params = message.get_mut("params")?.as_object_mut()?;
        let id: RequestId = serde_json::from_value(params.get("requestId")?.clone()).ok()?;
        let named = route.lock().named.contains_key(&id);
        if !named {
            return None;
        }
        let name = route.name(&id)?;
        params.insert("requestId".to_owned(), Value::String(name));
    } else {
        return None;
    }
    serde_json::to_string(&message).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn questions() -> Arc<Questions> {
        Arc::new(Questions::new(
            Some(SealKey::random().expect("a key")),
            #[cfg(feature = "state")]
            None,
        ))
    }

    /// A name opens for its own client only, unaltered.
    #[test]
    fn a_questions_name_is_good_for_its_client_only() {
        let key = SealKey::random().expect("a key");
        let owner = crate::seal::owner_digest("tenant:a");
        let nonce = "0123456789abcdef0123456789abcdef";
        let name = make_name(&key, &owner, nonce, 12345);
        assert_eq!(parse_name(&key, &owner, &name), Some((nonce, 12345)));
        let other = crate::seal::owner_digest("tenant:b");
        assert_eq!(parse_name(&key, &other, &name), None);
        let later = name.replace("-3039-", "-3040-");
        assert_eq!(parse_name(&key, &owner, &later), None, "a later expiry");
        assert_eq!(parse_name(&key, &owner, "tc-q-1-2-3"), None);
        let another_key = SealKey::random().expect("a key");
        assert_eq!(parse_name(&another_key, &owner, &name), None);
    }

    /// A question on the stream goes out renamed, and its answer, posted under that name by
    /// its client, reaches the call; posted again, or by another client, it is refused.
    #[tokio::test]
    async fn an_answer_finds_its_call_once_and_only_from_its_client() {
        let questions = questions();
        let route = questions.route("tenant:a");
        let event = b"data: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"sampling/createMessage\",\"params\":{}}\n\n";
        let renamed = rename(&route, event).expect("renamed");
        let text = std::str::from_utf8(&renamed).expect("text");
        let message: Value =
            serde_json::from_str(text.trim().strip_prefix("data: ").expect("data")).expect("JSON");
        let name = message["id"].as_str().expect("a name").to_owned();
        assert!(name.starts_with(QUESTION_PREFIX), "{name}");
        let waiting = {
            let route = Arc::clone(&route);
            tokio::spawn(async move {
                route
                    .wait(&RequestId::Number(0), Duration::from_secs(5))
                    .await
            })
        };
        let other = questions
            .deliver("tenant:b", &name, Ok(serde_json::json!({"x": 1})))
            .await;
        assert!(matches!(other, Delivered::Refused(_)), "{other:?}");
        let taken = questions
            .deliver("tenant:a", &name, Ok(serde_json::json!({"x": 2})))
            .await;
        assert_eq!(taken, Delivered::Taken);
        let answer = waiting.await.expect("joined");
        assert_eq!(answer, Some(Ok(serde_json::json!({"x": 2}))));
        let again = questions
            .deliver("tenant:a", &name, Ok(serde_json::json!({"x": 3})))
            .await;
        assert!(matches!(again, Delivered::Refused(_)), "{again:?}");
        // Notifications and results pass unchanged.
        assert!(rename(&route, b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n").is_none());
        assert!(
            rename(
                &route,
                b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"
            )
            .is_none()
        );
    }

    /// A call that ended takes no answer: its route is gone.
    #[tokio::test]
    async fn a_question_whose_call_ended_takes_no_answer() {
        let questions = questions();
        let route = questions.route("tenant:a");
        let name = route.name(&RequestId::Number(4)).expect("a name");
        drop(route);
        assert!(questions.lock().is_empty());
        let late = questions.deliver("tenant:a", &name, Ok(Value::Null)).await;
        assert!(matches!(late, Delivered::Refused(_)), "{late:?}");
    }
}
