//! The `toolcell` command's own code: argument parsing and each command (`cli`), `toolcell
//! bench` (`bench`), `toolcell new` (`scaffold`), the terminal approver and the progress bars.
//! A library target only so the end-to-end tests can name a scaffold language; it is not
//! toolcell's embedding API (that is the `toolcell` crate).

pub mod audit;
pub mod bench;
pub mod cli;
pub mod scaffold;
pub mod telemetry;
