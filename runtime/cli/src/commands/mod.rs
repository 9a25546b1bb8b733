//! The commands, one module each; [`run`] hands a parsed command line to its command.

pub(crate) mod audit;
pub(crate) mod bench;
mod call;
mod describe;
mod list;
mod new;
#[cfg(feature = "oci")]
mod registry;
mod serve;
mod token;

use crate::args::{Cli, Command};
use std::process::ExitCode;

/// Run a parsed command line.
pub(crate) fn run(cli: Cli) -> ExitCode {
    match &cli.command {
        Command::List { json } => list::list(&cli, *json),
        Command::Find { query } => list::find(&cli, query),
        Command::Call { .. } => call::run(&cli),
        Command::Bench { .. } => bench::command(&cli),
        Command::Describe { file } => describe::run(file, cli.no_cache),
        Command::Serve { .. } => serve::run(&cli),
        Command::Token { .. } => token::run(&cli),
        Command::New { name, lang, dir } => new::run(name, *lang, dir.as_deref()),
        Command::Policy => {
            print!("{}", toolcell::policy::DEFAULT_POLICY);
            ExitCode::SUCCESS
        }
        Command::Audit { command } => audit::run(command),
        #[cfg(feature = "oci")]
        Command::Pull {
            reference,
            update,
            insecure,
        } => registry::pull(&cli, reference, *update, insecure),
        #[cfg(feature = "oci")]
        Command::Push {
            file,
            reference,
            insecure,
        } => registry::push(file, reference, insecure, cli.no_cache),
        #[cfg(feature = "oci")]
        Command::Sign {
            key,
            reference,
            insecure,
        } => registry::sign(key, reference, insecure),
        #[cfg(feature = "oci")]
        Command::Keygen { prefix } => registry::keygen(prefix),
        #[cfg(not(feature = "oci"))]
        Command::Pull { .. }
        | Command::Push { .. }
        | Command::Sign { .. }
        | Command::Keygen { .. } => {
            crate::exit::not_built("tools from registries (pull, push, sign, keygen)", "oci")
        }
    }
}
