//! A tool's questions to its client over MCP 2026-07-28, where the server keeps nothing
//! between requests: `input_required` rounds (multi-round-trip requests).
//!
//! A call whose tool asks what this request does not answer ends there: the server answers
//! `input_required` with the questions, under the tool's keys, and a sealed `requestState`
//! ([`crate::seal`]) that carries the tool's earlier answers and the digests of the questions
//! asked now. The client answers and sends the call again with `inputResponses` and that
//! state; the call runs again from the start, in a fresh instance, and each `ask` is answered
//! from what the state carries (in the order asked) and from the new responses, only for the
//! very questions the state says were asked ([`QuestionRound::answer`]). A tool that asks
//! under a key something else than was answered is told `mismatch`, never given another
//! question's answer. Without a state (a first request that already carries answers) an
//! answer is taken by its key alone. An answer that is not what its question asks for (not an
//! `ElicitResult` for `elicitation/create`, ...) is no answer: the question is asked again.

// Sampling and roots are deprecated by SEP-2577, and still part of 2026-07-28, which a tool
// may ask them in.
#![allow(deprecated)]

use crate::seal::{MAX_SAID_BYTES, Said, Sealed, said_digest};
use rmcp::model::{CreateMessageResult, ElicitResult, InputResponses, ListRootsResult};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use toolcell::client::{AskFailure, Question};

/// How long a round's answers count: a person reading a form, or a model answering, takes
/// minutes; a retry after that is asked afresh (its earlier answers are not believed then).
pub(crate) const ROUND_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// One stateless-era call's questions: what its request carries, and what it asked that no
/// answer was carried for.
#[derive(Debug)]
pub(crate) struct QuestionRound {
    /// The answers earlier rounds gathered, as the state carries them.
    recorded: Vec<Said>,
    /// The questions the state says were asked last (each key and digest); `None` for a
    /// request that carried no state.
    pending: Option<Vec<(String, String)>>,
    /// This request's `inputResponses`.
    responses: BTreeMap<String, Value>,
    state: Mutex<RoundState>,
}

#[derive(Debug, Default)]
struct RoundState {
    /// Every question answered in this run, in the order asked.
    said: Vec<Said>,
    /// The questions of the `ask` that had no answer: the call ends at it.
    unanswered: Option<Vec<Question>>,
}

impl QuestionRound {
    /// The round of a request that carried `sealed` (opened) and `responses`.
    pub(crate) fn new(
        sealed: Option<&Sealed>,
        responses: Option<&InputResponses>,
    ) -> Arc<QuestionRound> {
        Arc::new(QuestionRound {
            recorded: sealed.map(|sealed| sealed.said.clone()).unwrap_or_default(),
            pending: sealed.map(|sealed| sealed.pending.clone()),
            responses: responses
                .map(|responses| {
                    responses
                        .iter()
                        .map(|(key, value)| (key.clone(), value.clone()))
                        .collect()
                })
                .unwrap_or_default(),
            state: Mutex::default(),
        })
    }

    /// The round of a task's call run again: `recorded`, the answers its earlier runs used (in
    /// order), `pending`, the questions (key and digest) its last run asked, and `responses`,
    /// what `tasks/update` answered them with.
    pub(crate) fn resumed(
        recorded: Vec<Said>,
        pending: Vec<(String, String)>,
        responses: InputResponses,
    ) -> Arc<QuestionRound> {
        Arc::new(QuestionRound {
            recorded,
            pending: Some(pending),
            responses: responses.into_iter().collect(),
            state: Mutex::default(),
        })
    }

    /// The answers to `questions` (one `ask`), in order, if the request carries them all;
    /// else [`AskFailure::InputRequired`], and the questions without an answer are kept to
    /// be sent ([`QuestionRound::take_unanswered`]).
    pub(crate) fn answer(&self, questions: Vec<Question>) -> Result<Vec<Value>, AskFailure> {
        let mut answers = Vec::with_capacity(questions.len());
        let mut said_now = Vec::new();
        let mut missing = Vec::new();
        for question in questions {
            let digest = said_digest(&question.key, question.method, &question.params);
            let mismatch = || {
                AskFailure::Mismatch(format!(
                    "question {:?} was answered as another question: a tool must ask the same \
                     questions given the same arguments and answers",
                    question.key
                ))
            };
            if let Some(said) = self.recorded.iter().find(|said| said.key == question.key) {
                if said.digest != digest {
                    return Err(mismatch());
                }
                answers.push(said.answer.clone());
                said_now.push(said.clone());
                continue;
            }
            let asked_last = match &self.pending {
                None => true,
                Some(pending) => match pending.iter().find(|(key, _)| *key == question.key) {
                    Some((_, asked)) if *asked != digest => return Err(mismatch()),
                    Some(_) => true,
                    None => false,
                },
            };
            let answer = self
                .responses
                .get(&question.key)
                .filter(|answer| asked_last && answers_as_asked(question.method, answer));
            match answer {
                Some(answer) => {
                    answers.push(answer.clone());
                    said_now.push(Said {
                        key: question.key.clone(),
                        digest,
                        answer: answer.clone(),
                    });
                }
                None => missing.push(question),
            }
        }
        let mut state = toolcell::sync::lock(&self.state);
        state.said.extend(said_now);
        let carried: usize = state
            .said
            .iter()
            .map(|said| said.answer.to_string().len())
            .sum();
        if carried > MAX_SAID_BYTES {
            return Err(AskFailure::Failed(format!(
                "the answers so far are {carried} bytes; a call carries at most \
                 {MAX_SAID_BYTES} from round to round"
            )));
        }
        if !missing.is_empty() {
            state.unanswered = Some(missing);
            return Err(AskFailure::InputRequired);
        }
        Ok(answers)
    }

    /// What the call answered, in order, and the questions it must send, if it asked one it
    /// had no answer for.
    pub(crate) fn take_unanswered(&self) -> Option<(Vec<Said>, Vec<Question>)> {
        let mut state = toolcell::sync::lock(&self.state);
        let unanswered = state.unanswered.take()?;
        Some((std::mem::take(&mut state.said), unanswered))
    }
}

/// Whether `answer` is what `method` asks for.
fn answers_as_asked(method: &str, answer: &Value) -> bool {
    match method {
        "elicitation/create" => serde_json::from_value::<ElicitResult>(answer.clone()).is_ok(),
        "sampling/createMessage" => {
            serde_json::from_value::<CreateMessageResult>(answer.clone()).is_ok()
        }
        "roots/list" => serde_json::from_value::<ListRootsResult>(answer.clone()).is_ok(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question(key: &str, text: &str) -> Question {
        Question {
            key: key.to_owned(),
            method: "elicitation/create",
            params: json!({ "message": text, "requestedSchema": { "type": "object", "properties": {} } }),
        }
    }

    fn accept() -> Value {
        json!({ "action": "accept", "content": { "name": "Alice" } })
    }

    #[test]
    fn unanswered_questions_end_the_round_and_are_kept_to_send() {
        let round = QuestionRound::new(None, None);
        assert_eq!(
            round.answer(vec![question("a", "A?")]),
            Err(AskFailure::InputRequired)
        );
        let (said, unanswered) = round.take_unanswered().expect("kept");
        assert!(said.is_empty());
        assert_eq!(unanswered[0].key, "a");
    }

    #[test]
    fn a_state_answers_only_the_questions_it_asked() {
        let asked = question("a", "A?");
        let digest = said_digest("a", asked.method, &asked.params);
        let mut sealed: Sealed = serde_json::from_value(json!({
            "k": "k", "id": "i", "owner": "o", "tool": "t", "args": "x",
            "answered": [], "deadline": 0,
        }))
        .expect("a token's contents");
        sealed.pending = vec![("a".to_owned(), digest.clone())];
        sealed.said = vec![Said {
            key: "before".to_owned(),
            digest: said_digest("before", asked.method, &asked.params),
            answer: accept(),
        }];
        let responses: InputResponses = [("a".to_owned(), accept())].into_iter().collect();
        let round = QuestionRound::new(Some(&sealed), Some(&responses));
        // The same question: answered, with the earlier round's first.
        let answers = round
            .answer(vec![question("before", "A?"), question("a", "A?")])
            .expect("answered");
        assert_eq!(answers, vec![accept(), accept()]);
        // Another question under an answered key: a mismatch, never the other's answer.
        let round = QuestionRound::new(Some(&sealed), Some(&responses));
        assert!(matches!(
            round.answer(vec![question("a", "Something else?")]),
            Err(AskFailure::Mismatch(_))
        ));
        // An answer that is not an elicitation's result is no answer: asked again.
        let wrong: InputResponses = [("a".to_owned(), json!(12345))].into_iter().collect();
        let round = QuestionRound::new(Some(&sealed), Some(&wrong));
        assert_eq!(
            round.answer(vec![question("a", "A?")]),
            Err(AskFailure::InputRequired)
        );
    }
}
