//! A person decides a gated call from their MCP client: the gate's questions asked by
//! elicitation.
//!
//! Past the house's 700 lines only by its unit tests, kept beside the code they test.
//!
//! When the access gate needs a person ([`toolcell::approval`]) and the client that sent the
//! call declared the elicitation capability, the question goes to that client, in the same
//! words the terminal prompt uses ([`ApprovalRequest`]'s `Display`: the agent, the tool, the
//! capability and the resource as the workspace sees it, never the arguments), as a form with
//! one field, `decision`, whose three values are the prompt's three answers (`once`, `always`,
//! `deny`). "Always" saves the rule in the call's workspace (over HTTP with tokens, the
//! tenant's), as the terminal prompt does. A decline is a denial; a dismissed question, a
//! client that fails or never answers within the call's deadline is [`Approval::NoAnswer`], a
//! denial too. Nothing runs until the answer is yes.
//!
//! Each era has its own form:
//!
//! - **The `initialize` era**: `SessionApprover` sends `elicitation/create` to the client on
//!   the call's stream and waits for its answer, at most the call's deadline (then the request
//!   is cancelled): over stdio, and over HTTP for a client that kept the session id it was
//!   given at `initialize` (`asking.rs`). An HTTP client without one declared nothing
//!   the server remembers: such a call is answered `approval_required`, as for a client
//!   without the capability.
//! - **The stateless 2026-07-28 era** (stdio and HTTP): multi-round-trip requests. The call
//!   is answered with an `input_required` result that carries the elicitation and a
//!   `requestState`: a token sealed by this server ([`crate::seal`]) that names, by digest,
//!   the client, the tool, the call's arguments, the questions answered so far and the one
//!   asked now, and until when the answer counts. The client asks the person and sends the
//!   same `tools/call` again with the answer and the token. The call then runs the whole
//!   pipeline again, and the gate takes the answer for the question it is asked again (the same
//!   agent, workspace, tool, capability and resource). The server keeps nothing while the
//!   person thinks: any replica opens the token (they share its key, kept in the store with
//!   `--state`). A token counts only for the client it was given to (over HTTP, the token's
//!   tenant, or the peer address without tokens), for the same tool and arguments, once (its
//!   id is spent: in the store with `--state`, so across replicas too), and only until the
//!   call's deadline: a late answer is a denial; a token that is forged, another client's, for
//!   another call, or spent is ignored, and the call is asked afresh; a token of this server's
//!   key whose seal does not hold (altered on the way) is refused with an error (-32602).
//!   The same token carries a tool's own questions' answers from round to round
//!   (`rounds.rs`). With `--state` and the store out of reach, an answer cannot be
//!   counted once: it is refused ([`STATE_UNAVAILABLE`]), never taken twice.

use crate::seal::{SealKey, Sealed, question_digest};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use toolcell::approval::{Approval, ApprovalRequest, Approver};

/// The one field of the approval form.
pub const DECISION_FIELD: &str = "decision";

/// How many spent tokens one server without a store remembers (each until its question's
/// deadline): a token's id is a few dozen bytes, and each was given for a gated call. Past it,
/// the oldest is forgotten only once its deadline has passed; while all are current, a new
/// answer is not taken (the call is asked afresh) rather than forgetting one that could be
/// replayed.
pub const MAX_SPENT_APPROVALS: usize = 65_536;

/// The JSON-RPC error code of a call refused because the shared store (`--state`) could not be
/// reached for what it needed (a quota, an approval answer counted once, a task): in the range
/// JSON-RPC leaves to servers, beside the quota's -32029, and answered with HTTP `503` where
/// toolcell writes the status.
pub const STATE_UNAVAILABLE: i64 = -32030;

/// How many questions one call may be asked, round after round: a tool has at most this many
/// capabilities, each one question. A chain of rounds longer than that (a client sending the
/// call again with a new path each time) is not asked again: its call is denied, unanswered.
pub const MAX_QUESTIONS_PER_CALL: usize = toolcell::limits::MAX_CAPABILITIES;

/// The `inputRequests` key the approval goes under.
const INPUT_KEY: &str = "toolcell/approval";

/// The elicitation that asks `request`: the terminal prompt's words and its three answers.
pub fn elicitation(request: &ApprovalRequest) -> ElicitRequestParams {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            DECISION_FIELD: {
                "type": "string",
                "title": "Decision",
                "oneOf": [
                    { "const": "once", "title": "Approve once" },
                    { "const": "always", "title": "Approve always, in this workspace" },
                    { "const": "deny", "title": "Deny" }
                ]
            }
        },
        "required": [DECISION_FIELD]
    });
    let requested_schema: ElicitationSchema = match serde_json::from_value(schema) {
        Ok(schema) => schema,
        // The schema above is a constant; should rmcp ever refuse it, an empty form still
        // carries the question (and an answer without a decision is a denial).
        Err(_) => ElicitationSchema::new(Default::default()),
    };
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!(
            "toolcell: {request}. Approve once, always (saved for this workspace), or deny?"
        ),
        requested_schema,
    }
}

/// What a client's answer to [`elicitation`] means: anything unclear is a denial, as at the
/// terminal; a dismissed question is no answer.
pub fn answer_of(result: &ElicitResult) -> Approval {
    match result.action {
        ElicitationAction::Accept => {
            let decision = result
                .content
                .as_ref()
                .and_then(|content| content.get(DECISION_FIELD))
                .and_then(serde_json::Value::as_str);
            match decision {
                Some("once") => Approval::Once,
                Some("always") => Approval::Always,
                _ => Approval::Deny,
            }
        }
        ElicitationAction::Decline => Approval::Deny,
        // A dismissed question, or an action this version does not know: no answer.
        _ => Approval::NoAnswer,
    }
}

/// Whether a client declared that it can be asked (a form elicitation).
pub(crate) fn can_elicit(capabilities: Option<&rmcp::model::ClientCapabilities>) -> bool {
    capabilities
        .and_then(|capabilities| capabilities.elicitation.as_ref())
        .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none())
}

/// Asks the person behind one `initialize`-era session, by `elicitation/create`: over stdio,
/// or over HTTP for a client that kept its session id ([`crate::asking`]).
#[derive(Debug)]
pub(crate) struct SessionApprover {
    asker: crate::asking::SessionAsk,
}

impl SessionApprover {
    /// An approver that asks the client through `asker`.
    pub(crate) fn new(asker: crate::asking::SessionAsk) -> Self {
        SessionApprover { asker }
    }
}

impl Approver for SessionApprover {
    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            let elicit: Result<rmcp::model::ServerRequest, _> =
                serde_json::from_value(serde_json::json!({
                    "method": "elicitation/create",
                    "params": elicitation(request),
                }));
            let Ok(elicit) = elicit else {
                return Approval::NoAnswer;
            };
            // Cancelled (notifications/cancelled) when the wait passes.
            match self.asker.ask(elicit, request.timeout).await {
                Ok(answer) => match serde_json::from_value::<ElicitResult>(answer) {
                    Ok(result) => answer_of(&result),
                    // An answer that is not an elicitation's: nothing was approved.
                    Err(_) => Approval::Deny,
                },
                Err(error) => {
                    tracing::info!(%error, "the client gave no answer to an approval");
                    Approval::NoAnswer
                }
            }
        })
    }
}

/// The refusal of a call whose store could not be reached.
pub(crate) fn unavailable(why: &crate::state::Unavailable) -> rmcp::ErrorData {
    rmcp::ErrorData::new(
        rmcp::model::ErrorCode(i32::try_from(STATE_UNAVAILABLE).unwrap_or(-32030)),
        why.to_string(),
        None,
    )
}

/// Where seal keys and spent tokens are kept: in this process, or in the shared store.
enum Keeper {
    Local {
        /// `None` only if the system's random source failed at start: then no question can be
        /// sealed, and a call that needs an answer is denied, unanswered.
        key: Option<Box<SealKey>>,
        /// Each spent token's id, and until when (ms since 1970) it must stay spent.
        spent: Mutex<HashMap<String, u64>>,
    },
    #[cfg(feature = "state")]
    Shared(Arc<crate::state::Store>),
}

/// The stateless era's questions: sealed into tokens when asked (`Approvals::ask`), opened
/// and spent when answered (`Approvals::answers`).
pub struct Approvals {
    keeper: Keeper,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals").finish_non_exhaustive()
    }
}

impl Approvals {
    /// For one server: a key made now, spent tokens remembered in memory.
    pub fn local() -> Approvals {
        let key = SealKey::random()
            .inspect_err(|error| {
                tracing::error!(
                    "no key to seal approval questions with ({error}): gated calls \
                                 from clients that could be asked are denied, unanswered"
                );
            })
            .ok();
        Approvals {
            keeper: Keeper::Local {
                key: key.map(Box::new),
                spent: Mutex::default(),
            },
        }
    }

    /// For replicas sharing `store`: its key, and its memory of spent tokens.
    #[cfg(feature = "state")]
    pub fn shared(store: Arc<crate::state::Store>) -> Approvals {
        Approvals {
            keeper: Keeper::Shared(store),
        }
    }

    /// The key that seals tokens (and an HTTP client's session id, and the ids of the
    /// questions sent on its streams), if there is one.
    pub(crate) fn key(&self) -> Option<&SealKey> {
        match &self.keeper {
            Keeper::Local { key, .. } => key.as_deref(),
            #[cfg(feature = "state")]
            Keeper::Shared(store) => Some(store.seal_key()),
        }
    }

    /// The store replicas share, if there is one.
    #[cfg(feature = "state")]
    pub(crate) fn store(&self) -> Option<&Arc<crate::state::Store>> {
        match &self.keeper {
            Keeper::Local { .. } => None,
            Keeper::Shared(store) => Some(store),
        }
    }

    /// The epoch a token sealed now belongs to: the shared store's (so that a store that lost
    /// its data refuses it), none without a store.
    async fn epoch(&self) -> Result<String, crate::state::Unavailable> {
        match &self.keeper {
            Keeper::Local { .. } => Ok(String::new()),
            #[cfg(feature = "state")]
            Keeper::Shared(store) => store.epoch().await,
        }
    }

    /// Spend the token `id`, sealed in `epoch` (it counts until `until`, ms since 1970):
    /// whether this is its first use.
    async fn spend(
        &self,
        id: &str,
        epoch: &str,
        until: u64,
    ) -> Result<bool, crate::state::Unavailable> {
        match &self.keeper {
            Keeper::Local { spent, .. } => {
                if !epoch.is_empty() {
                    return Ok(false);
                }
                let now = crate::seal::millis(SystemTime::now());
                let mut spent = toolcell::sync::lock(spent);
                if spent.contains_key(id) {
                    return Ok(false);
                }
                if spent.len() >= MAX_SPENT_APPROVALS {
                    spent.retain(|_, until| *until > now);
                    if spent.len() >= MAX_SPENT_APPROVALS {
                        tracing::warn!(
                            "{MAX_SPENT_APPROVALS} approval answers are spent and current: this \
                             one is not taken (its call is asked again)"
                        );
                        return Ok(false);
                    }
                }
                spent.insert(id.to_owned(), until);
                Ok(true)
            }
            #[cfg(feature = "state")]
            Keeper::Shared(store) => crate::state::spend_token(store, id, epoch, until).await,
        }
    }

    /// What a call sent again by `owner` (of `tool` with `arguments`) carries in its
    /// `requestState`: the token opened and spent, if it is this call's; [`Carried::Nothing`]
    /// (the call is asked afresh) for no token, one that is not a token of this server's key,
    /// another client's or another call's, or one already spent; [`Carried::Altered`] for a
    /// token of this server's key whose seal does not hold.
    pub(crate) async fn carried(
        &self,
        owner: &str,
        tool: &str,
        arguments: &str,
        state: Option<&str>,
    ) -> Result<Carried, crate::state::Unavailable> {
        let (Some(state), Some(key)) = (state, self.key()) else {
            return Ok(Carried::Nothing);
        };
        let Some(sealed) = Sealed::open(state, key) else {
            // A token that names this server's key and fails its seal was changed on the way.
            return Ok(if Sealed::key_id(state).as_deref() == Some(key.id()) {
                Carried::Altered
            } else {
                Carried::Nothing
            });
        };
        if sealed.owner != crate::seal::owner_digest(owner)
            || sealed.tool != tool
            || sealed.args != crate::seal::arguments_digest(arguments)
            || !self.spend(&sealed.id, &sealed.e, sealed.deadline).await?
        {
            return Ok(Carried::Nothing);
        }
        Ok(Carried::Opened(Box::new(sealed)))
    }

    /// The approvals a call's opened token carries: what was answered before, and the
    /// question it asked with its answer in `responses` (a denial once its deadline has
    /// passed), if it asked one.
    pub(crate) fn answers(
        sealed: &Sealed,
        responses: Option<&InputResponses>,
    ) -> Vec<(String, Approval)> {
        let mut answered = sealed.answered();
        if sealed.asked.is_empty() {
            return answered;
        }
        let answer = if sealed.in_time(SystemTime::now()) {
            responses
                .and_then(|responses| responses.get(INPUT_KEY))
                .and_then(|value| serde_json::from_value::<ElicitResult>(value.clone()).ok())
                .map_or(Approval::NoAnswer, |result| answer_of(&result))
        } else {
            Approval::NoAnswer
        };
        answered.push((sealed.asked.clone(), answer));
        answered
    }

    /// What to answer `owner`'s call of `tool` with `arguments` whose tool asked `pending`
    /// (after `said`, and the approvals `answered`): its questions as `inputRequests` under
    /// the tool's keys, and a sealed token that carries the answers so far. `None` when there
    /// is no key to seal with.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn ask_questions(
        &self,
        owner: &str,
        tool: &str,
        arguments: &str,
        answered: &[(String, Approval)],
        said: Vec<crate::seal::Said>,
        pending: Vec<toolcell::client::Question>,
        wait: std::time::Duration,
    ) -> Result<Option<InputRequiredResult>, crate::state::Unavailable> {
        let Some(key) = self.key() else {
            return Ok(None);
        };
        let epoch = self.epoch().await?;
        let digests = pending
            .iter()
            .map(|question| {
                let digest =
                    crate::seal::said_digest(&question.key, question.method, &question.params);
                (question.key.clone(), digest)
            })
            .collect();
        let Ok(sealed) = Sealed::new(key, &epoch, owner, tool, arguments, answered, None, wait)
        else {
            return Ok(None);
        };
        let sealed = sealed.with_questions(said, digests);
        let mut requests = InputRequests::new();
        for question in pending {
            let request =
                serde_json::json!({ "method": question.method, "params": question.params });
            match serde_json::from_value::<InputRequest>(request) {
                Ok(request) => {
                    requests.insert(question.key, request);
                }
                Err(error) => {
                    tracing::warn!(key = %question.key, %error, "a question MCP cannot carry");
                    return Ok(None);
                }
            }
        }
        Ok(Some(InputRequiredResult::new(
            Some(requests),
            Some(sealed.seal(key)),
        )))
    }

    /// What to answer `owner`'s call of `tool` with `arguments` that must ask `asked` (after
    /// `answered`): the elicitation and its sealed token. `None` when the call has been asked
    /// as many questions as it may.
    pub(crate) async fn ask(
        &self,
        owner: &str,
        tool: &str,
        arguments: &str,
        answered: Vec<(String, Approval)>,
        asked: ApprovalRequest,
        said: Vec<crate::seal::Said>,
    ) -> Result<Option<InputRequiredResult>, crate::state::Unavailable> {
        if answered.len() >= MAX_QUESTIONS_PER_CALL {
            return Ok(None);
        }
        let Some(key) = self.key() else {
            return Ok(None);
        };
        let epoch = self.epoch().await?;
        let Ok(sealed) = Sealed::new(
            key,
            &epoch,
            owner,
            tool,
            arguments,
            &answered,
            Some(&asked),
            asked.timeout,
        ) else {
            return Ok(None);
        };
        let sealed = sealed.with_questions(said, Vec::new());
        let request = InputRequest::Elicitation(ElicitRequest::new(elicitation(&asked)));
        let requests: InputRequests = [(INPUT_KEY.to_owned(), request)].into_iter().collect();
        Ok(Some(InputRequiredResult::new(
            Some(requests),
            Some(sealed.seal(key)),
        )))
    }
}

/// What a call sent again carries in its `requestState` ([`Approvals::carried`]).
pub(crate) enum Carried {
    /// Nothing of this call's: it is asked afresh.
    Nothing,
    /// This call's token, opened and spent.
    Opened(Box<Sealed>),
    /// A token of this server's key whose seal does not hold: refused with an error.
    Altered,
}

/// One stateless-era call's approver: it answers from what the client already answered, and
/// notes the first question it cannot answer (the call then asks it: an `input_required`
/// result).
#[derive(Debug)]
pub(crate) struct RoundApprover {
    /// Each question answered ([`question_digest`]), with its answer.
    answered: Vec<(String, Approval)>,
    unanswered: Mutex<Option<ApprovalRequest>>,
}

impl RoundApprover {
    pub(crate) fn new(answered: Vec<(String, Approval)>) -> Arc<Self> {
        Arc::new(RoundApprover {
            answered,
            unanswered: Mutex::new(None),
        })
    }

    /// What the call's approvals answered so far.
    pub(crate) fn answered(&self) -> Vec<(String, Approval)> {
        self.answered.clone()
    }

    /// What the call answered so far, and the question it must ask next, if any.
    pub(crate) fn take_question(&self) -> Option<(Vec<(String, Approval)>, ApprovalRequest)> {
        let asked = toolcell::sync::lock(&self.unanswered).take()?;
        Some((self.answered.clone(), asked))
    }
}

impl Approver for RoundApprover {
    fn approve(&self, request: &ApprovalRequest) -> Approval {
        let question = question_digest(request);
        if let Some((_, answer)) = self.answered.iter().find(|(asked, _)| *asked == question) {
            return *answer;
        }
        let mut unanswered = toolcell::sync::lock(&self.unanswered);
        unanswered.get_or_insert_with(|| request.clone());
        Approval::Later
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn question(resource: &str) -> ApprovalRequest {
        ApprovalRequest {
            agent: "a".to_owned(),
            workspace: None,
            tool: "write_file".to_owned(),
            capability: "filesystem.write".to_owned(),
            resource: resource.to_owned(),
            timeout: Duration::from_secs(5),
        }
    }

    fn accepted(decision: &str) -> serde_json::Value {
        serde_json::json!({ "action": "accept", "content": { DECISION_FIELD: decision } })
    }

    #[test]
    fn answers_read_as_the_terminal_reads_them() {
        let cases = [
            (accepted("once"), Approval::Once),
            (accepted("always"), Approval::Always),
            (accepted("deny"), Approval::Deny),
            (accepted("yes please"), Approval::Deny),
            (serde_json::json!({ "action": "accept" }), Approval::Deny),
            (serde_json::json!({ "action": "decline" }), Approval::Deny),
            (
                serde_json::json!({ "action": "cancel" }),
                Approval::NoAnswer,
            ),
        ];
        for (answer, expected) in cases {
            let result: ElicitResult = serde_json::from_value(answer.clone()).expect("a result");
            assert_eq!(answer_of(&result), expected, "{answer}");
        }
    }

    #[test]
    fn the_form_asks_the_question_without_the_arguments() {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = elicitation(&question("notes/todo.txt"))
        else {
            panic!("a form");
        };
        assert!(
            message.contains(r#"agent a: write_file wants filesystem.write on "notes/todo.txt""#),
            "{message}"
        );
        let schema = serde_json::to_value(&requested_schema).expect("json");
        let values: Vec<&str> = schema["properties"][DECISION_FIELD]["oneOf"]
            .as_array()
            .expect("three choices")
            .iter()
            .filter_map(|choice| choice["const"].as_str())
            .collect();
        assert_eq!(values, ["once", "always", "deny"]);
    }

    fn block_on<T>(future: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(future)
    }

    const ARGS: &str = r#"{"path":"x","content":"y"}"#;

    #[test]
    fn a_token_counts_once_for_its_own_client_and_call_and_not_after_its_deadline() {
        block_on(async {
            let approvals = Approvals::local();
            let ask = |question: ApprovalRequest| {
                let approvals = &approvals;
                async move {
                    approvals
                        .ask(
                            "tenant:a",
                            "write_file",
                            ARGS,
                            Vec::new(),
                            question,
                            Vec::new(),
                        )
                        .await
                        .expect("no store to miss")
                        .expect("asked")
                        .request_state
                        .expect("a token")
                }
            };
            let token = ask(question("x")).await;
            let responses: InputResponses = [(INPUT_KEY.to_owned(), accepted("once"))]
                .into_iter()
                .collect();
            let answers = |owner: &'static str,
                           tool: &'static str,
                           args: &'static str,
                           token: String| {
                let approvals = &approvals;
                let responses = responses.clone();
                async move {
                    let carried = approvals
                        .carried(owner, tool, args, Some(&token))
                        .await
                        .expect("no store to miss");
                    match carried {
                        Carried::Opened(sealed) => Approvals::answers(&sealed, Some(&responses)),
                        _ => Vec::new(),
                    }
                }
            };
            // Another client's answer, another tool's, other arguments': not taken (and the
            // token is not spent by them).
            assert!(
                answers("tenant:b", "write_file", ARGS, token.clone())
                    .await
                    .is_empty()
            );
            assert!(
                answers("tenant:a", "edit_file", ARGS, token.clone())
                    .await
                    .is_empty()
            );
            assert!(
                answers("tenant:a", "write_file", r#"{"path":"z"}"#, token.clone())
                    .await
                    .is_empty()
            );
            // The same arguments spelled otherwise are the same call.
            let answered = answers(
                "tenant:a",
                "write_file",
                r#"{ "content":"y", "path":"x" }"#,
                token.clone(),
            )
            .await;
            assert_eq!(
                answered,
                [(question_digest(&question("x")), Approval::Once)]
            );
            // Spent: once.
            assert!(
                answers("tenant:a", "write_file", ARGS, token)
                    .await
                    .is_empty()
            );
            // A question whose deadline passed is answered NoAnswer, whatever the client says.
            let late = ask(ApprovalRequest {
                timeout: Duration::ZERO,
                ..question("y")
            })
            .await;
            let answered = answers("tenant:a", "write_file", ARGS, late).await;
            assert_eq!(answered[0].1, Approval::NoAnswer);
            // Not a token of this server's.
            let other = Approvals::local();
            let foreign = other
                .ask(
                    "tenant:a",
                    "write_file",
                    ARGS,
                    Vec::new(),
                    question("x"),
                    Vec::new(),
                )
                .await
                .expect("no store")
                .expect("asked")
                .request_state
                .expect("a token");
            assert!(
                answers("tenant:a", "write_file", ARGS, foreign)
                    .await
                    .is_empty()
            );
            assert!(
                answers(
                    "tenant:a",
                    "write_file",
                    ARGS,
                    "tc1.bm90.aGVsbG8".to_owned()
                )
                .await
                .is_empty()
            );
        });
    }

    #[test]
    fn a_call_is_asked_at_most_one_question_per_capability() {
        block_on(async {
            let approvals = Approvals::local();
            let answered: Vec<(String, Approval)> = (0..MAX_QUESTIONS_PER_CALL)
                .map(|i| (question_digest(&question(&i.to_string())), Approval::Once))
                .collect();
            assert!(
                approvals
                    .ask(
                        "stdio",
                        "write_file",
                        ARGS,
                        answered,
                        question("one more"),
                        Vec::new()
                    )
                    .await
                    .expect("no store")
                    .is_none()
            );
        });
    }

    #[test]
    fn the_round_approver_takes_an_answer_for_the_same_question_only() {
        let round = RoundApprover::new(vec![(question_digest(&question("x")), Approval::Once)]);
        assert_eq!(round.approve(&question("x")), Approval::Once);
        assert_eq!(round.approve(&question("y")), Approval::Later);
        let (answered, asked) = round.take_question().expect("a question to ask");
        assert_eq!(answered.len(), 1);
        assert!(asked.same_question(&question("y")));
    }
}
