//! The `toolcell` command: each command in its own module (`commands/`), the command line as
//! clap parses it (`args`), the runtime a command runs in and the terminal's part in it
//! (`runtime`), the exit statuses (`exit`), logs and traces (`telemetry`), and the templates of
//! `toolcell new` (`scaffold`). A library target only so that the end-to-end tests can name a
//! scaffold language; it is not toolcell's embedding API (that is the `toolcell` crate).
//!
//! What a build holds is chosen by features: by default the calls, the tools, `serve` over
//! stdio, `new`, `bench` and `audit verify`; `http` adds `serve --http` (tokens, OAuth,
//! quotas, `--state`) and `token`; `oci` adds tools from registries (`pull`, `push`, `sign`,
//! `keygen`, `--tools oci://`, `audit sign`); `otel` adds `--otlp-endpoint`; `full` is all
//! three. A command a build leaves out says which feature brings it.

mod args;
mod commands;
mod exit;
mod runtime;
pub mod scaffold;
pub mod telemetry;

use clap::Parser as _;
use std::process::ExitCode;

pub use args::Cli;

/// Parse the process's arguments and run the command. Logs go to stderr (never stdout, which
/// belongs to results and, under `serve`, to the protocol), filtered by `$TOOLCELL_LOG`
/// (default [`DEFAULT_LOG_FILTER`](crate::telemetry::DEFAULT_LOG_FILTER)); traces go to the
/// collector `--otlp-endpoint` names, if any (see [`crate::telemetry`]).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let endpoint = cli
        .otlp_endpoint
        .clone()
        .or_else(|| std::env::var(crate::telemetry::OTLP_ENDPOINT_ENV).ok())
        .filter(|endpoint| !endpoint.is_empty());
    let telemetry = match crate::telemetry::init(endpoint.as_deref(), cli.otlp_sampler.as_deref()) {
        Ok(telemetry) => telemetry,
        Err(why) => {
            eprintln!("toolcell: {why}");
            return ExitCode::from(exit::USAGE);
        }
    };
    let code = commands::run(cli);
    telemetry.shutdown();
    code
}
