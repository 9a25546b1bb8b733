//! A fixture of the MCP conformance suite's newest line (`input-required-result-*`, MCP
//! 2026-07-28): asks the client's model a question, and passes on its answer.
//! Over 2026-07-28 its questions travel as the call's `input_required` answer, and the
//! client's retry runs it again with their answers; over a stdio session they are requests.
//! See `tests/src/conformance.rs` and `tests/src/rounds.rs`.

use asking::unanswered;
use toolcell_guest::client::{self, Content};

asking::fixture!(
    "test_input_required_result_sampling",
    "Asks the model for the capital of France.",
    [Sample],
    {
        match client::sample("capital", "What is the capital of France?", 100) {
            Ok(sampled) => match sampled.content {
                Content::Text(text) => Ok(format!("The model ({}) said: {text}", sampled.model)),
                _ => Ok(format!(
                    "The model ({}) answered without text",
                    sampled.model
                )),
            },
            Err(why) => Err(unanswered(why)),
        }
    }
);
