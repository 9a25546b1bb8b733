//! A fixture of the MCP conformance suite's tasks extension (`tasks-mrtr-input`, SEP-2663):
//! asks for two names at once (who wrote it and who reviews it), so two questions are pending
//! together; it answers once both are. See `tests/src/conformance.rs`.

use asking::{form, unanswered};
use toolcell_guest::client::{self, Answer, Question, Request};

asking::fixture!(
    "multi_input",
    "Asks for two names at once, and says both back.",
    [Elicit],
    {
        let ask = |key: &str, message: &str| Question {
            key: key.to_owned(),
            request: Request::Elicit(client::Form {
                message: message.to_owned(),
                requested_schema: form("name").to_string(),
            }),
        };
        let answers = client::ask(&[
            ask("author", "Who wrote it?"),
            ask("reviewer", "Who reviews it?"),
        ])
        .map_err(unanswered)?;
        let said: Vec<String> = answers
            .into_iter()
            .map(|answer| match answer {
                Answer::Elicited(elicited) => elicited.content.unwrap_or_default(),
                _ => String::new(),
            })
            .collect();
        Ok(format!("You said: {}", said.join(" and ")))
    }
);
