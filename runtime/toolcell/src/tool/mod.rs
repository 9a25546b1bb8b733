//! What a tool says about itself ([`ToolInfo`](info::ToolInfo): name, description, schema,
//! capabilities), what a component offers beside tools ([`Offers`](offer::Offers): prompts,
//! resources, completion), the limits that make it untrusted input, what its schema may ask of the host,
//! and a tool's own error vocabulary. Depends on `call` only.

pub(crate) mod backtrack;
pub(crate) mod error;
pub(crate) mod info;
pub(crate) mod offer;
pub(crate) mod schema;
