//! The tools that ship inside toolcell, built from `guest-tools/` by `build.rs` and embedded, so
//! a fresh checkout runs with no tools directory.

include!(concat!(env!("OUT_DIR"), "/builtin_tools.rs"));
