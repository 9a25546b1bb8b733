//! `mcp`: see `toolcell_mcp::fuzzing::check_mcp` for the input's layout and what is asserted.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(finding) = toolcell_mcp::fuzzing::check_mcp(data) {
        panic!("mcp: {finding}");
    }
});
