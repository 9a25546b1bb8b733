//! A person decides a gated call from their MCP client: the gate's questions asked by
//! elicitation.
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
//! - **The `initialize` era** (stdio): [`SessionApprover`] sends `elicitation/create` to the
//!   client over the session and waits for its answer, at most the call's deadline (then
//!   rmcp cancels the request). Over HTTP this era is served without sessions, so the server
//!   has no way to send the client a request: such a call is answered `approval_required`, as
//!   for a client without the capability.
//! - **The stateless 2026-07-28 era** (stdio and HTTP): multi-round-trip requests. The call
//!   is answered with an `input_required` result that carries the elicitation and an opaque
//!   `requestState`, a random handle to what was asked, which this server keeps
//!   ([`PendingApprovals`]); the client asks the person and sends the same `tools/call` again
//!   with the answer and the handle. The call then runs the whole pipeline again, and the gate
//!   takes the answer for the question it is asked again (the same agent, workspace, tool,
//!   capability and resource). A handle counts only for the client it was given to (over
//!   HTTP, the token's tenant, or the peer address without tokens), once, and only until the
//!   call's deadline: a late answer is a denial, another client's handle is ignored (its call
//!   is asked afresh), and a handle unknown to this replica asks again.

use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::{Peer, RoleServer};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use toolcell::approval::{Approval, ApprovalRequest, Approver};

/// The one field of the approval form.
pub const DECISION_FIELD: &str = "decision";

/// How many questions may wait for their answer (stateless era) in one server. Each is a few
/// hundred bytes; a server with more waiting than this is being flooded, and a new question
/// then takes the place of one that expired, or of the oldest of the client holding the most.
pub const MAX_PENDING_APPROVALS: usize = 4096;

/// How many of them one client may have: a client that keeps asking without answering loses
/// its oldest questions first, and cannot crowd out the others.
pub const MAX_PENDING_APPROVALS_PER_CLIENT: usize = 64;

/// How many questions one call may be asked, round after round: a tool has at most this many
/// capabilities, each one question. A chain of rounds longer than that (a client sending the
/// call again with a new path each time) is not asked again: its call is denied, unanswered.
pub const MAX_QUESTIONS_PER_CALL: usize = toolcell::limits::MAX_CAPABILITIES;

/// How long a question is remembered after its deadline passed, so that an answer arriving
/// late is told so (a denial) rather than asked again.
pub const EXPIRED_APPROVAL_RETAINED: Duration = Duration::from_secs(300);

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

/// Asks the person behind one `initialize`-era session, by `elicitation/create`.
#[derive(Debug)]
pub struct SessionApprover {
    peer: Peer<RoleServer>,
}

impl SessionApprover {
    /// An approver that asks the client at the other end of `peer`.
    pub fn new(peer: Peer<RoleServer>) -> Self {
        SessionApprover { peer }
    }
}

impl Approver for SessionApprover {
    fn ask<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> Pin<Box<dyn Future<Output = Approval> + Send + 'a>> {
        Box::pin(async move {
            // rmcp cancels the request (notifications/cancelled) when the wait passes.
            let asked = self
                .peer
                .create_elicitation_with_timeout(elicitation(request), Some(request.timeout))
                .await;
            match asked {
                Ok(result) => answer_of(&result),
                Err(error) => {
                    tracing::info!(%error, "the client gave no answer to an approval");
                    Approval::NoAnswer
                }
            }
        })
    }
}

/// A question asked in the stateless era, waiting for the client to send its call again.
#[derive(Debug)]
struct Pending {
    /// The client it was asked of.
    owner: String,
    /// What the call had been answered before it.
    answered: Vec<(ApprovalRequest, Approval)>,
    asked: ApprovalRequest,
    /// Its answer counts until then.
    deadline: Instant,
}

/// The questions this server asked in the stateless era, by handle (`requestState`).
#[derive(Debug, Default)]
pub struct PendingApprovals {
    waiting: Mutex<HashMap<String, Pending>>,
}

impl PendingApprovals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.waiting
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// The answers a call sent again by `owner` carries: what was asked under `state` and
    /// answered in `responses`, with what was answered before it. Empty for a handle that
    /// is unknown here or another client's (that one is left for its own client).
    pub(crate) fn answers(
        &self,
        owner: &str,
        state: Option<&str>,
        responses: Option<&InputResponses>,
    ) -> Vec<(ApprovalRequest, Approval)> {
        let Some(state) = state else {
            return Vec::new();
        };
        let pending = {
            let mut waiting = self.lock();
            match waiting.get(state) {
                Some(pending) if pending.owner == owner => waiting.remove(state),
                _ => None,
            }
        };
        let Some(Pending {
            mut answered,
            asked,
            deadline,
            ..
        }) = pending
        else {
            return Vec::new();
        };
        let answer = if Instant::now() >= deadline {
            Approval::NoAnswer
        } else {
            responses
                .and_then(|responses| responses.get(INPUT_KEY))
                .and_then(|value| serde_json::from_value::<ElicitResult>(value.clone()).ok())
                .map_or(Approval::NoAnswer, |result| answer_of(&result))
        };
        answered.push((asked, answer));
        answered
    }

    /// Keep `asked` for `owner` and say what to answer the call: the elicitation and its
    /// handle. `None` when the server already holds too many questions.
    pub(crate) fn ask(
        &self,
        owner: &str,
        answered: Vec<(ApprovalRequest, Approval)>,
        asked: ApprovalRequest,
    ) -> Option<InputRequiredResult> {
        if answered.len() >= MAX_QUESTIONS_PER_CALL {
            return None;
        }
        let handle = crate::hex(&crate::random::<16>().ok()?);
        let now = Instant::now();
        let mut waiting = self.lock();
        waiting.retain(|_, pending| pending.deadline + EXPIRED_APPROVAL_RETAINED > now);
        // This client's oldest question makes room for its newest.
        let mine = waiting.iter().filter(|(_, pending)| pending.owner == owner);
        if mine.clone().count() >= MAX_PENDING_APPROVALS_PER_CLIENT
            && let Some(oldest) = mine
                .min_by_key(|(_, pending)| pending.deadline)
                .map(|(handle, _)| handle.clone())
        {
            waiting.remove(&oldest);
        }
        if waiting.len() >= MAX_PENDING_APPROVALS {
            // Full: questions past their deadline (kept only to tell a late answer so) go
            // first, then the oldest of the client that holds the most. No set of clients can
            // keep another from being asked.
            waiting.retain(|_, pending| pending.deadline > now);
            if waiting.len() >= MAX_PENDING_APPROVALS {
                let mut held: HashMap<&str, usize> = HashMap::new();
                for pending in waiting.values() {
                    *held.entry(pending.owner.as_str()).or_default() += 1;
                }
                let greediest = held
                    .into_iter()
                    .max_by_key(|(_, count)| *count)
                    .map(|(client, _)| client.to_owned());
                let oldest = greediest.and_then(|client| {
                    waiting
                        .iter()
                        .filter(|(_, pending)| pending.owner == client)
                        .min_by_key(|(_, pending)| pending.deadline)
                        .map(|(handle, _)| handle.clone())
                });
                if let Some(oldest) = oldest {
                    waiting.remove(&oldest);
                }
            }
        }
        let request = InputRequest::Elicitation(ElicitRequest::new(elicitation(&asked)));
        waiting.insert(
            handle.clone(),
            Pending {
                owner: owner.to_owned(),
                answered,
                deadline: now + asked.timeout,
                asked,
            },
        );
        let requests: InputRequests = [(INPUT_KEY.to_owned(), request)].into_iter().collect();
        Some(InputRequiredResult::new(Some(requests), Some(handle)))
    }

    /// How many questions wait.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none does.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One stateless-era call's approver: it answers from what the client already answered, and
/// notes the first question it cannot answer (the call then asks it: an `input_required`
/// result).
#[derive(Debug)]
pub(crate) struct RoundApprover {
    answered: Vec<(ApprovalRequest, Approval)>,
    unanswered: Mutex<Option<ApprovalRequest>>,
}

impl RoundApprover {
    pub(crate) fn new(answered: Vec<(ApprovalRequest, Approval)>) -> Arc<Self> {
        Arc::new(RoundApprover {
            answered,
            unanswered: Mutex::new(None),
        })
    }

    /// What the call answered so far, and the question it must ask next, if any.
    pub(crate) fn take_question(
        &self,
    ) -> Option<(Vec<(ApprovalRequest, Approval)>, ApprovalRequest)> {
        let asked = self
            .unanswered
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .take()?;
        Some((self.answered.clone(), asked))
    }
}

impl Approver for RoundApprover {
    fn approve(&self, request: &ApprovalRequest) -> Approval {
        if let Some((_, answer)) = self
            .answered
            .iter()
            .find(|(asked, _)| asked.same_question(request))
        {
            return *answer;
        }
        let mut unanswered = self
            .unanswered
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        unanswered.get_or_insert_with(|| request.clone());
        Approval::NoAnswer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_handle_counts_once_for_its_own_client_and_not_after_its_deadline() {
        let pending = PendingApprovals::default();
        let asked = pending
            .ask("tenant:a", Vec::new(), question("x"))
            .expect("asked");
        let handle = asked.request_state.clone().expect("a handle");
        let responses: InputResponses = [(INPUT_KEY.to_owned(), accepted("once"))]
            .into_iter()
            .collect();
        // Another client's answer is not taken, and leaves the question for its own client.
        assert!(
            pending
                .answers("tenant:b", Some(&handle), Some(&responses))
                .is_empty()
        );
        let answers = pending.answers("tenant:a", Some(&handle), Some(&responses));
        assert_eq!(answers.len(), 1);
        assert_eq!(answers[0].1, Approval::Once);
        assert!(answers[0].0.same_question(&question("x")));
        // Used once.
        assert!(
            pending
                .answers("tenant:a", Some(&handle), Some(&responses))
                .is_empty()
        );
        // A question whose deadline passed is answered NoAnswer, whatever the client says.
        let late = ApprovalRequest {
            timeout: Duration::ZERO,
            ..question("y")
        };
        let asked = pending.ask("tenant:a", Vec::new(), late).expect("asked");
        let handle = asked.request_state.expect("a handle");
        let answers = pending.answers("tenant:a", Some(&handle), Some(&responses));
        assert_eq!(answers[0].1, Approval::NoAnswer);
    }

    #[test]
    fn a_call_is_asked_at_most_one_question_per_capability() {
        let pending = PendingApprovals::default();
        let answered: Vec<(ApprovalRequest, Approval)> = (0..MAX_QUESTIONS_PER_CALL)
            .map(|i| (question(&i.to_string()), Approval::Once))
            .collect();
        assert!(
            pending
                .ask("stdio", answered, question("one more"))
                .is_none()
        );
        assert!(pending.is_empty());
    }

    #[test]
    fn a_full_table_still_asks_a_new_client() {
        let pending = PendingApprovals::default();
        let clients = MAX_PENDING_APPROVALS / MAX_PENDING_APPROVALS_PER_CLIENT;
        for client in 0..clients {
            for i in 0..MAX_PENDING_APPROVALS_PER_CLIENT {
                pending
                    .ask(
                        &format!("peer:{client}"),
                        Vec::new(),
                        question(&i.to_string()),
                    )
                    .expect("asked");
            }
        }
        assert_eq!(pending.len(), MAX_PENDING_APPROVALS);
        let asked = pending
            .ask("peer:newcomer", Vec::new(), question("mine"))
            .expect("a new client is still asked");
        assert_eq!(pending.len(), MAX_PENDING_APPROVALS);
        let handle = asked.request_state.expect("a handle");
        let responses: InputResponses = [(INPUT_KEY.to_owned(), accepted("once"))]
            .into_iter()
            .collect();
        assert_eq!(
            pending.answers("peer:newcomer", Some(&handle), Some(&responses))[0].1,
            Approval::Once
        );
    }

    #[test]
    fn one_client_cannot_keep_more_than_its_share_of_questions() {
        let pending = PendingApprovals::default();
        for i in 0..MAX_PENDING_APPROVALS_PER_CLIENT + 10 {
            pending
                .ask("peer:1", Vec::new(), question(&i.to_string()))
                .expect("asked");
        }
        assert_eq!(pending.len(), MAX_PENDING_APPROVALS_PER_CLIENT);
        pending
            .ask("peer:2", Vec::new(), question("other"))
            .expect("another client is still asked");
        assert_eq!(pending.len(), MAX_PENDING_APPROVALS_PER_CLIENT + 1);
    }
}
