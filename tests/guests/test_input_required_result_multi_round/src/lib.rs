//! A fixture of the MCP conformance suite's newest line (`input-required-result-*`, MCP
//! 2026-07-28): asks one question, then, given its answer, another: two rounds.
//! Over 2026-07-28 its questions travel as the call's `input_required` answer, and the
//! client's retry runs it again with their answers; over a stdio session they are requests.
//! See `tests/src/conformance.rs` and `tests/src/rounds.rs`.

use asking::{form, said};
use toolcell_guest::client;

asking::fixture!(
    "test_input_required_result_multi_round",
    "Asks a name, then a colour.",
    [Elicit],
    {
        let name = said(client::elicit("step1", "What is your name?", &form("name")))?;
        let colour = said(client::elicit(
            "step2",
            &format!("Thanks ({name}). Your favourite colour?"),
            &form("color"),
        ))?;
        Ok(format!("{name} likes {colour}"))
    }
);
