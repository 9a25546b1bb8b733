//! `toolcell token`: a bearer token for a tenant of `serve --http --tokens`, the operator's
//! token for `/metrics`, or a seal key for replicas (`--seal-key`) (the `http` feature).

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
        seal_key,
    } = &cli.command
    else {
        return ExitCode::from(exit::USAGE);
    };
    if *seal_key {
        return match toolcell_mcp::seal::SealKey::random() {
            Ok(key) => {
                println!("{}", key.to_hex());
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("toolcell: making a seal key: {error}");
                ExitCode::from(exit::FAILED)
            }
        };
    }
    let made = if *metrics {
        toolcell_mcp::http::auth::MetricsToken::new_token()
    } else {
        let tenant = tenant.as_deref().unwrap_or_default();
        if toolcell::registry::check_tool_name(tenant).is_err() {
            eprintln!(
                "toolcell: tenant {}: a tenant name is 1 to {} of a-z A-Z 0-9 _ -",
                toolcell::registry::echoed(tenant),
                toolcell::limits::MAX_TOOL_NAME_CHARS
            );
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
