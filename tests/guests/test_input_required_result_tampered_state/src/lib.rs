//! A fixture of the MCP conformance suite's newest line (`input-required-result-*`, MCP
//! 2026-07-28): asks for a confirmation, whose `requestState` the suite alters: the retry must be refused.
//! Over 2026-07-28 its questions travel as the call's `input_required` answer, and the
//! client's retry runs it again with their answers; over a stdio session they are requests.
//! See `tests/src/conformance.rs` and `tests/src/rounds.rs`.

use asking::{form, said};
use toolcell_guest::client;

asking::fixture!(
    "test_input_required_result_tampered_state",
    "Asks for a confirmation.",
    [Elicit],
    {
        let answer = said(client::elicit("confirm", "Go ahead?", &form("ok")))?;
        Ok(format!("confirmed: {answer}"))
    }
);
