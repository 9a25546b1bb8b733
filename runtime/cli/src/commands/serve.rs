//! `toolcell serve`: the tools over MCP, on stdio, or over Streamable HTTP (the `http`
//! feature).

use crate::args::{Cli, Command};
use crate::exit;
use crate::runtime::{Needs, with_runtime_for};
use std::process::ExitCode;

pub(crate) fn run(cli: &Cli) -> ExitCode {
    let Command::Serve {
        pool_slots,
        cap,
        keep_resident_mib,
        http,
        tokens,
        oauth,
        allow_hosts,
        allow_origins,
        grace_secs,
        metrics_token,
        state,
        state_password_file,
        state_ca_file,
        seal_key_file,
        anonymous_clients,
    } = &cli.command
    else {
        return ExitCode::from(exit::USAGE);
    };
    let (pool_slots, keep_resident_mib) = (*pool_slots, *keep_resident_mib);
    #[cfg(not(feature = "http"))]
    if http.is_some() {
        let _ = (
            tokens,
            oauth,
            allow_hosts,
            allow_origins,
            grace_secs,
            metrics_token,
            state,
            state_password_file,
            state_ca_file,
            seal_key_file,
            anonymous_clients,
        );
        return exit::not_built("serving over HTTP (serve --http)", "http");
    }
    #[cfg(feature = "http")]
    let http = match *http {
        Some(addr) => {
            // Before any tool is loaded: a refusal should be immediate.
            if let Err(why) = toolcell_mcp::http::check_exposure(
                addr,
                tokens.is_some() || oauth.is_some(),
                !allow_hosts.is_empty(),
            ) {
                eprintln!("toolcell: {why}");
                return ExitCode::from(exit::USAGE);
            }
            Some(toolcell_mcp::http::HttpOptions {
                addr,
                tokens: tokens.clone(),
                oauth: oauth.clone(),
                allowed_hosts: allow_hosts.clone(),
                allowed_origins: allow_origins.clone(),
                grace: std::time::Duration::from_secs(*grace_secs),
                metrics_token: metrics_token.clone(),
                state: state.clone().map(|url| toolcell_mcp::http::StateOptions {
                    url,
                    password_file: state_password_file.clone(),
                    ca_file: state_ca_file.clone(),
                    seal_key_file: seal_key_file.clone(),
                }),
                anonymous: match anonymous_clients {
                    crate::args::AnonymousClients::PerAddress => {
                        toolcell_mcp::http::AnonymousClients::PerAddress
                    }
                    crate::args::AnonymousClients::One => toolcell_mcp::http::AnonymousClients::One,
                },
            })
        }
        None => None,
    };
    with_runtime_for(
        cli,
        Needs {
            pool_slots,
            keep_resident_mib,
            ..Needs::default()
        },
        |runtime| {
            let runtime = runtime.with_cap(*cap);
            #[cfg(feature = "http")]
            let served = match http {
                Some(options) => toolcell_mcp::http::serve_http(runtime, options),
                None => toolcell_mcp::serve(runtime),
            };
            #[cfg(not(feature = "http"))]
            let served = toolcell_mcp::serve(runtime);
            match served {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    eprintln!("toolcell: {error:#}");
                    ExitCode::from(exit::FAILED)
                }
            }
        },
    )
}
