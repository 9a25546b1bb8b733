//! toolcell's integration tests, one module per area, in one test binary.
//!
//! The test-only guests in `guests/` are built by `build.rs`; each has a constant in
//! [`guests`] and, by the check at the bottom of this file, a test named after it.

/// The test guests' components.
#[macro_use]
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

pub mod system;
pub mod toolchains;

#[cfg(test)]
mod support;

#[cfg(test)]
mod builtin_tools;
#[cfg(test)]
mod cache;
#[cfg(test)]
mod capabilities;
#[cfg(test)]
mod cli;
#[cfg(test)]
mod concurrency;
#[cfg(test)]
mod conformance;
#[cfg(test)]
mod containment;
#[cfg(test)]
mod deploy;
#[cfg(test)]
mod docs;
#[cfg(test)]
mod ecosystem;
#[cfg(test)]
mod fresh_instance;
#[cfg(test)]
mod grants;
#[cfg(test)]
mod guest_logic;
#[cfg(test)]
mod host_edges;
#[cfg(test)]
mod http;
#[cfg(test)]
mod inplace_attacks;
#[cfg(test)]
mod js_tools;
#[cfg(test)]
mod keyless;
#[cfg(test)]
mod lazy;
#[cfg(test)]
mod lazy_attacks;
#[cfg(test)]
mod loading;
#[cfg(test)]
mod mcp;
#[cfg(test)]
mod metadata;
#[cfg(test)]
mod native_tools;
#[cfg(test)]
mod network;
#[cfg(test)]
mod new_tool;
#[cfg(test)]
mod no_ambient_authority;
#[cfg(test)]
mod oci;
#[cfg(test)]
mod offers;
#[cfg(test)]
mod parts;
#[cfg(test)]
mod python_tools;
#[cfg(test)]
mod structured;
#[cfg(test)]
mod talking;
#[cfg(test)]
mod traces;
#[cfg(test)]
mod typed;
#[cfg(test)]
mod vendored;

/// Every test guest must have a test of its own name somewhere in these modules: a new guest
/// without one does not compile.
#[cfg(test)]
mod every_guest_has_a_test {
    macro_rules! assert_test_exists {
        ($name:ident) => {
            #[allow(unused_imports)]
            use crate::guest_tests::$name as _;
        };
    }
    for_each_guest!(assert_test_exists);
}

/// The tests named after the guests, gathered so the check above can find them.
#[cfg(test)]
mod guest_tests {
    pub(crate) use crate::builtin_tools::compute;
    pub(crate) use crate::capabilities::envy;
    pub(crate) use crate::conformance::{
        header_echo, json_schema_2020_12_tool, test_audio_content, test_embedded_resource,
        test_error_handling, test_image_content, test_multiple_content_types, test_simple_text,
    };
    pub(crate) use crate::containment::hostile;
    pub(crate) use crate::ecosystem::{fetch_rs, files_rs, typed_snoop};
    pub(crate) use crate::fresh_instance::counter;
    pub(crate) use crate::grants::{prowler, seeker};
    pub(crate) use crate::http::rounds::{
        test_input_required_result_capabilities, test_input_required_result_elicitation,
        test_input_required_result_list_roots, test_input_required_result_multi_round,
        test_input_required_result_multiple_inputs, test_input_required_result_request_state,
        test_input_required_result_sampling, test_input_required_result_tampered_state,
    };
    pub(crate) use crate::http::task_tools::{
        confirm_delete, failing_job, greet, multi_input, protocol_error_job, slow_compute,
        test_tool_with_task,
    };
    pub(crate) use crate::lazy::numbered;
    pub(crate) use crate::loading::{
        liar_name, liar_schema, shifty, slow_describe, wrong_call, wrong_world,
    };
    pub(crate) use crate::mcp::mirror;
    pub(crate) use crate::metadata::{bomb_schema, slow_schema};
    pub(crate) use crate::no_ambient_authority::snoop;
    pub(crate) use crate::offers::{hostile_provider, offers_fixture, prompts_only};
    pub(crate) use crate::parts::{contract_v2, contract_v3, painter};
    pub(crate) use crate::structured::{old_contract, structured};
    pub(crate) use crate::talking::{
        talker, test_elicitation, test_elicitation_sep1034_defaults,
        test_elicitation_sep1330_enums, test_logging_tool, test_missing_capability, test_sampling,
        test_streaming_elicitation, test_tool_with_logging, test_tool_with_progress,
    };
    pub(crate) use crate::typed::{typed_echo, typed_probe};
}
