//! The call vocabulary: what a loop sends ([`ToolRequest`](proto::ToolRequest)) and gets back
//! ([`ToolResponse`](proto::ToolResponse), [`CallReport`](report::CallReport)), the seam
//! ([`ToolPort`](port::ToolPort)), the registry and the loop's own `find_tool` / `call_tool`
//! dispatch, the result cap, per-call limits and the stop flag. It depends on no other stage.

pub(crate) mod answered;
pub(crate) mod cap;
pub(crate) mod client;
pub(crate) mod content;
pub(crate) mod dispatch;
pub(crate) mod fake;
pub(crate) mod limits;
pub(crate) mod names;
pub(crate) mod port;
pub(crate) mod proto;
pub(crate) mod registry;
pub(crate) mod report;
pub(crate) mod stop;
