//! Finding the components a runtime serves and making them tools: once at build, and again at
//! each [`Runtime::reload`](crate::Runtime::reload).
//!
//! A component known from the cache's index (a built-in tool, or a file whose identity has not
//! changed) is not read: its digest and description come from the index, and its code is
//! loaded on its first call. Any other is read, hashed, compiled (or read compiled from the
//! cache) and described, and the index remembers it. Either way, the same checks decide whether
//! it loads: its description's limits, the policy's `sha256` pin, where it came from, and who
//! signed it.
//!
//! In the order of a load: [`find`] finds the components, [`identify`] learns each one's
//! digest and what the index knows of it, [`compile`] compiles and admits its code, [`admit`]
//! (a component of the contract) or [`typed`] (one of plain typed exports) makes its tools
//! under the policy, [`load`] runs those steps for each component, and [`merge`] makes the
//! catalog of what loaded. [`reload`] does it all again for a running runtime.

mod admit;
mod compile;
mod error;
mod find;
mod identify;
mod load;
mod merge;
mod reload;
mod typed;

pub use error::BuildError;
pub(crate) use load::Loaded;
pub(crate) use merge::catalog;
pub use reload::Reloaded;
