//! A fixture of the MCP conformance suite's newest line (`input-required-result-*`, MCP
//! 2026-07-28): asks the client for its roots, and lists them.
//! Over 2026-07-28 its questions travel as the call's `input_required` answer, and the
//! client's retry runs it again with their answers; over a stdio session they are requests.
//! See `tests/src/conformance.rs` and `tests/src/rounds.rs`.

use asking::unanswered;
use toolcell_guest::client;

asking::fixture!(
    "test_input_required_result_list_roots",
    "Lists the client's roots.",
    [ListRoots],
    {
        match client::roots("roots") {
            Ok(roots) => Ok(format!(
                "Roots: {}",
                roots
                    .iter()
                    .map(|root| root.uri.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Err(why) => Err(unanswered(why)),
        }
    }
);
