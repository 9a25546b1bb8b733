//! `cap`: see `toolcell::fuzzing::check_cap` for the input's layout and what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(finding) = toolcell::fuzzing::check_cap(data) {
        panic!("cap: {finding}");
    }
});
