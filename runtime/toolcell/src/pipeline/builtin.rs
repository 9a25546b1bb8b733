//! The tools that ship inside toolcell, built from `guest-tools/` by `build.rs` and embedded, so
//! a fresh checkout runs with no tools directory.

include!(concat!(env!("OUT_DIR"), "/builtin_tools.rs"));

/// The tools that ship inside toolcell, as (name, component bytes), sorted by name: what
/// [`Runtime::builder`](crate::Runtime::builder) loads by default.
pub fn builtin_components() -> &'static [(&'static str, &'static [u8])] {
    BUILTIN_TOOLS
}
