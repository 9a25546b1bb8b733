//! How one request's run (a tool's call, a prompt's `get`) talks to its client, decided once
//! per request, by era and transport, in one place: who asks the person when the policy
//! gates something, how the tool's own questions travel, and, once the run has ended, whether
//! its answer is the protocol's `input_required` instead.
//!
//! - In the `initialize` era (stdio, or an HTTP client that kept its session id) the client is
//!   asked on the request's stream and the run waits for the answer (`asking.rs`).
//! - In the stateless 2026-07-28 era nothing waits: a run that needs an answer it does not
//!   carry ends, and the request is answered `input_required` with the questions and a sealed
//!   `requestState`; the client sends it again with the answers, which this reads back
//!   (`approval.rs`, `rounds.rs`).

use crate::approval::{self, RoundApprover};
use crate::asking::SessionAsk;
use crate::front::FromFront;
use crate::{McpServer, client, rounds, seal};
use rmcp::model::{ClientCapabilities, InputRequiredResult, InputResponses, RequestMetaObject};
use rmcp::service::Peer;
use rmcp::{ErrorData as McpError, RoleServer};
use std::sync::Arc;
use toolcell::{CallContext, CallReport, DenyReason, FailureKind, ToolResponse};

/// What a request brings to its talk.
pub(crate) struct Asking<'a> {
    /// What runs, as the catalog names it (a tool, `prompt:NAME`): what a sealed state names.
    pub(crate) name: &'a str,
    /// Its arguments, as the pipeline is handed them.
    pub(crate) arguments: &'a str,
    /// Who asks (over HTTP the front's client key): a state counts for its client only.
    pub(crate) owner: &'a str,
    /// The context it runs in, before anything of the talk is added.
    pub(crate) base: CallContext,
    pub(crate) capabilities: Option<&'a ClientCapabilities>,
    /// Whether the request is of the stateless era.
    pub(crate) stateless: bool,
    pub(crate) front: Option<&'a Arc<dyn FromFront>>,
    /// The request's peer; `None` on the HTTP fast path.
    pub(crate) peer: Option<&'a Peer<RoleServer>>,
    pub(crate) meta: &'a RequestMetaObject,
    pub(crate) request_state: Option<&'a str>,
    pub(crate) input_responses: Option<&'a InputResponses>,
    /// The level a stdio session's client set.
    pub(crate) session_level: Option<toolcell::client::LogLevel>,
}

/// One request's talk with its client, as decided.
pub(crate) struct Talk {
    /// The context with the approver that asks the person (the session's, or the round's).
    pub(crate) context: CallContext,
    /// The way from the tool to the client.
    pub(crate) link: Arc<client::RequestClient>,
    /// The values sent on the request's progress token, by the host and the tool.
    pub(crate) progress_line: Arc<client::ProgressLine>,
    /// The stateless era's person's answers, and the question to send back.
    pub(crate) round: Option<Arc<RoundApprover>>,
    /// The stateless era's tool's questions: answered from the request, or sent back.
    pub(crate) questions: Option<Arc<rounds::QuestionRound>>,
    /// The stateless era's earlier rounds, as the request's state carried them.
    pub(crate) carried: Option<seal::Sealed>,
}

impl McpServer {
    /// Decide how the request in `asking` talks to its client: its sealed state opened (and
    /// spent) once, here, for the approvals and the tool's questions alike (a state of this
    /// server's whose seal does not hold is refused, never asked afresh).
    pub(crate) async fn talk(&self, asking: Asking<'_>) -> Result<Talk, McpError> {
        let Asking {
            name,
            arguments,
            owner,
            base,
            capabilities,
            stateless,
            front,
            peer,
            meta,
            request_state,
            input_responses,
            session_level,
        } = asking;
        // In the initialize era the client is asked on the request's stream: through a stdio
        // session's peer, or over HTTP through the request's peer with the route the front
        // keeps for the answers (only for a client that kept its session id; the fast path has
        // no peer, and takes no request of this era).
        let asker = match (front, peer) {
            _ if stateless => None,
            (None, Some(peer)) => Some(SessionAsk::session(peer.clone())),
            (Some(front), Some(peer)) => front
                .answers()
                .map(|route| SessionAsk::routed(peer.clone(), route)),
            (_, None) => None,
        };
        let carried = if stateless {
            let carried = self
                .approvals
                .carried(owner, name, arguments, request_state)
                .await
                .map_err(|unavailable| approval::unavailable(&unavailable))?;
            match carried {
                approval::Carried::Altered => {
                    return Err(McpError::invalid_params(
                        "the requestState was altered: it is not one this server gave",
                        None,
                    ));
                }
                approval::Carried::Opened(sealed) => Some(*sealed),
                approval::Carried::Nothing => None,
            }
        } else {
            None
        };
        let (context, round) = self
            .approver_for(
                &base,
                capabilities,
                stateless,
                asker.as_ref(),
                carried.as_ref(),
                input_responses,
            )
            .await?;
        // The tool's own questions, over the stateless era: answered from what the request
        // carries (within its deadline), the rest sent back with the answer.
        let questions = stateless.then(|| {
            let current = carried
                .as_ref()
                .filter(|sealed| sealed.in_time(std::time::SystemTime::now()));
            rounds::QuestionRound::new(current, input_responses)
        });
        // What the client offers is read once, here, for the gate and the tool alike. Its
        // progress token's values rise through one line, which the host's own reports share:
        // once the tool reports, the host's step aside.
        let progress_line = Arc::new(client::ProgressLine::default());
        let link = Arc::new(client::RequestClient::new(
            client::Reach {
                peer,
                meta,
                capabilities,
                stateless,
                session_level: match front {
                    Some(front) => front.session_level(),
                    None => session_level,
                },
                asker,
                round: questions.clone(),
            },
            Arc::clone(&progress_line),
        ));
        Ok(Talk {
            context,
            link,
            progress_line,
            round,
            questions,
            carried,
        })
    }

    /// What a stateless-era request whose run ended with `report` is answered instead of its
    /// result, if anything: the protocol's error for what the client must declare (-32021);
    /// the tool's unanswered questions, sent back; the person's approval, asked for. Each
    /// sealed for `owner`'s `name` with `arguments`, so the request sent again with the
    /// answers runs with them.
    pub(crate) async fn instead_of_result(
        &self,
        talk: &Talk,
        owner: &str,
        name: &str,
        arguments: &str,
        capabilities: Option<&ClientCapabilities>,
        report: &CallReport,
    ) -> Option<Result<InputRequiredResult, McpError>> {
        // A tool that cannot work without what this request's client did not declare.
        if talk.questions.is_some()
            && let ToolResponse::Denied {
                reason: DenyReason::ClientLacks { capability },
            } = &report.response
            && let Some(error) = client::missing_capability(capability, capabilities)
        {
            return Some(Err(error));
        }
        // A tool that asked what its request did not answer: its questions go back.
        if let Some(questions) = &talk.questions
            && let ToolResponse::Failed {
                kind: FailureKind::InputRequired,
                ..
            } = &report.response
            && let Some((said, unanswered)) = questions.take_unanswered()
        {
            let approved = talk
                .round
                .as_ref()
                .map(|round| round.answered())
                .unwrap_or_default();
            return Some(
                match self
                    .approvals
                    .ask_questions(
                        owner,
                        name,
                        arguments,
                        &approved,
                        said,
                        unanswered,
                        rounds::ROUND_WAIT,
                    )
                    .await
                {
                    Ok(Some(input)) => Ok(input),
                    Ok(None) => Err(McpError::internal_error(
                        "the tool's questions could not be sent back",
                        None,
                    )),
                    Err(unavailable) => Err(approval::unavailable(&unavailable)),
                },
            );
        }
        // A run that needs a person's answer asks for it: denied before it ran, or stopped at
        // a tool's first use of a gated client feature.
        if let Some(round) = &talk.round
            && matches!(
                &report.response,
                ToolResponse::Denied {
                    reason: DenyReason::Unanswered { .. },
                } | ToolResponse::Failed {
                    kind: FailureKind::InputRequired,
                    ..
                }
            )
            && let Some((answered, asked)) = round.take_question()
        {
            return match self
                .approvals
                .ask(
                    owner,
                    name,
                    arguments,
                    answered,
                    asked,
                    talk.carried
                        .as_ref()
                        .map(|sealed| sealed.said.clone())
                        .unwrap_or_default(),
                )
                .await
            {
                Ok(Some(input)) => Some(Ok(input)),
                Ok(None) => None,
                Err(unavailable) => Some(Err(approval::unavailable(&unavailable))),
            };
        }
        None
    }
}
