//! `toolcell token`: a bearer token for a tenant of `serve --http --tokens`, or the operator's
//! token for `/metrics` (the `http` feature).

use crate::args::Cli;
use crate::exit;
use std::process::ExitCode;

#[cfg(not(feature = "http"))]
pub(crate) fn run(_cli: &Cli) -> ExitCode {
    exit::not_built("tokens for serving over HTTP (token)", "http")
}

#[cfg(feature = "http")]
pub(crate) fn run(cli: &Cli) -> ExitCode {
    use crate::args::Command;
    let Command::Token {
        tenant,
        dir,
        metrics,
    } = &cli.command
    else {
        return ExitCode::from(exit::USAGE);
    };
    let made = if *metrics {
        toolcell_mcp::http::auth::MetricsToken::new_token()
    } else {
        let tenant = tenant.as_deref().unwrap_or_default();
        if let Err(why) = toolcell::registry::check_tool_name(tenant) {
            eprintln!("toolcell: tenant {tenant:?}: {why}");
            return ExitCode::from(exit::USAGE);
        }
        let dir = match dir
            .as_deref()
            .map(std::path::Path::canonicalize)
            .transpose()
        {
            Ok(dir) => dir,
            Err(error) => {
                eprintln!("toolcell: the tenant's workspace: {error}");
                return ExitCode::from(exit::USAGE);
            }
        };
        toolcell_mcp::http::auth::new_token(tenant, dir.as_deref())
    };
    match made {
        Ok((token, table)) => {
            println!("{token}");
            print!("{table}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("toolcell: making a token: {error}");
            ExitCode::from(exit::FAILED)
        }
    }
}
