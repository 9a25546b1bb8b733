//! `mcp`: see `toolcell_fuzz_checks::check_mcp` (`tests/fuzz-checks`) for the input's layout and
//! what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(finding) = toolcell_fuzz_checks::check_mcp(data) {
        panic!("mcp: {finding}");
    }
});
