//! A fixture of the MCP conformance suite's newest line (`input-required-result-*`, MCP
//! 2026-07-28): asks the person their name (key `user_name`) and greets them.
//! Over 2026-07-28 its questions travel as the call's `input_required` answer, and the
//! client's retry runs it again with their answers; over a stdio session they are requests.
//! See `tests/src/conformance.rs` and `tests/src/rounds.rs`.

use asking::{form, said};
use toolcell_guest::client;

asking::fixture!(
    "test_input_required_result_elicitation",
    "Asks the person their name, and greets them.",
    [Elicit],
    {
        let name = said(client::elicit(
            "user_name",
            "What is your name?",
            &form("name"),
        ))?;
        Ok(format!("Hello, {name}!"))
    }
);
