//! `component`: see `toolcell_fuzz_checks::check_component` (`tests/fuzz-checks`) for the input's layout and
//! what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(finding) = toolcell_fuzz_checks::check_component(data) {
        panic!("component: {finding}");
    }
});
