//! A fixture of the MCP conformance suite's newest line (`input-required-result-*`, MCP
//! 2026-07-28): asks only what the request's client offers (`features()`): a client that declares sampling alone is asked no form.
//! Over 2026-07-28 its questions travel as the call's `input_required` answer, and the
//! client's retry runs it again with their answers; over a stdio session they are requests.
//! See `tests/src/conformance.rs` and `tests/src/rounds.rs`.

use asking::{form, said, unanswered};
use toolcell_guest::client::{self, FeatureSet};

asking::fixture!(
    "test_input_required_result_capabilities",
    "Asks the client whatever it can answer.",
    [Elicit, Sample, ListRoots],
    {
        let held = client::features();
        if held.contains(FeatureSet::SAMPLE) {
            return match client::sample("capital", "What is the capital of France?", 100) {
                Ok(_) => Ok("sampled".to_owned()),
                Err(why) => Err(unanswered(why)),
            };
        }
        if held.contains(FeatureSet::ELICIT) {
            return said(client::elicit(
                "user_name",
                "What is your name?",
                &form("name"),
            ));
        }
        if held.contains(FeatureSet::LIST_ROOTS) {
            return client::roots("roots")
                .map(|roots| format!("{} roots", roots.len()))
                .map_err(unanswered);
        }
        Ok("This client can be asked nothing.".to_owned())
    }
);
