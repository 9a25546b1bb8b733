//! A fixture of the MCP conformance suite's newest line (`input-required-result-*`, MCP
//! 2026-07-28): asks the person, the model and the client three questions at once.
//! Over 2026-07-28 its questions travel as the call's `input_required` answer, and the
//! client's retry runs it again with their answers; over a stdio session they are requests.
//! See `tests/src/conformance.rs` and `tests/src/rounds.rs`.

use asking::{form, unanswered};
use toolcell_guest::client::{self, Answer, Content, Question, Request};

asking::fixture!(
    "test_input_required_result_multiple_inputs",
    "Asks the person, the model and the client at once.",
    [Elicit, Sample, ListRoots],
    {
        let questions = [
            Question {
                key: "user_name".to_owned(),
                request: Request::Elicit(client::Form {
                    message: "What is your name?".to_owned(),
                    requested_schema: form("name").to_string(),
                }),
            },
            Question {
                key: "summary".to_owned(),
                request: Request::Sample(client::Sampling {
                    messages: vec![client::Message {
                        role: client::Role::User,
                        content: Content::Text("Say hello.".to_owned()),
                    }],
                    system_prompt: None,
                    max_tokens: 50,
                    temperature: None,
                    stop_sequences: Vec::new(),
                    model_preferences: None,
                }),
            },
            Question {
                key: "roots".to_owned(),
                request: Request::ListRoots,
            },
        ];
        let answers = client::ask(&questions).map_err(unanswered)?;
        let kinds: Vec<&str> = answers
            .iter()
            .map(|answer| match answer {
                Answer::Elicited(_) => "elicited",
                Answer::Sampled(_) => "sampled",
                Answer::Roots(_) => "roots",
            })
            .collect();
        Ok(format!("Answered: {}", kinds.join(", ")))
    }
);
