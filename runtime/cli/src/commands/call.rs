//! `toolcell call`: one call, through the same pipeline a model's calls take.

use crate::args::{Cli, Command};
use crate::exit;
use crate::runtime::{Needs, interrupted, with_runtime_for};
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;
use toolcell::{CallOptions, CallReport, Runtime, StopToken, ToolResponse};

pub(crate) fn run(cli: &Cli) -> ExitCode {
    let Command::Call {
        name,
        arguments,
        cap,
        json,
        timeout_ms,
        memory_mib,
        fuel,
        diagnostics,
    } = &cli.command
    else {
        return ExitCode::from(exit::USAGE);
    };
    let (cap, json, timeout_ms, memory_mib, fuel, diagnostics) =
        (*cap, *json, *timeout_ms, *memory_mib, *fuel, *diagnostics);
    with_runtime_for(
        cli,
        Needs {
            may_ask: true,
            fuel_metering: fuel.is_some(),
            ..Needs::default()
        },
        |runtime| {
            let stop = StopToken::new();
            let options = CallOptions {
                timeout: timeout_ms.map(Duration::from_millis),
                memory_bytes: memory_mib.map(|mib| mib.saturating_mul(1024 * 1024)),
                fuel,
                stop: Some(stop.clone()),
            };
            let runtime = runtime.with_cap(cap);
            // Ctrl-C (or SIGTERM) stops the call, which answers `cancelled` (exit 5).
            let call = toolcell::Call::new("cli", name, arguments)
                .in_context(runtime.default_context().clone())
                .with_options(options);
            let executor = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(executor) => executor,
                Err(error) => {
                    eprintln!("toolcell: starting the async runtime: {error}");
                    return ExitCode::from(exit::FAILED);
                }
            };
            let report = executor.block_on(async {
                let call = runtime.run(&call);
                tokio::pin!(call);
                tokio::select! {
                    report = &mut call => report,
                    () = interrupted() => {
                        stop.stop();
                        call.await
                    }
                }
            });
            if diagnostics {
                print_diagnostics(&report);
            }
            let status = respond(&runtime, &report.response, json);
            if runtime.audit_failures() > 0 {
                eprintln!("toolcell: the call ran, but its audit record could not be written");
                return ExitCode::from(exit::AUDIT_FAILED);
            }
            status
        },
    )
}

/// Print what the guest wrote to its stdout and stderr, and how long the call took, on stderr.
fn print_diagnostics(report: &CallReport) {
    let mut err = std::io::stderr().lock();
    for (stream, captured) in [("stdout", &report.stdout), ("stderr", &report.stderr)] {
        let cut = if captured.truncated {
            " (truncated)"
        } else {
            ""
        };
        let _ = writeln!(err, "--- guest {stream}{cut} ---\n{}", captured.text);
    }
    let _ = writeln!(err, "--- {} us ---", report.elapsed.as_micros());
}

/// Print a response: the result on stdout, anything else on stderr (as the model would read
/// it, within the runtime's cap); or the whole response as JSON on stdout. Returns the exit
/// status for it.
pub(crate) fn respond(runtime: &Runtime, response: &ToolResponse, json: bool) -> ExitCode {
    let status = exit::status(response);
    let printed = if json {
        serde_json::to_string(response)
            .map_err(std::io::Error::other)
            .and_then(|line| writeln!(std::io::stdout().lock(), "{line}"))
    } else if let ToolResponse::Result { text, .. } = response {
        writeln!(std::io::stdout().lock(), "{text}")
    } else {
        writeln!(
            std::io::stderr().lock(),
            "toolcell: {}",
            runtime.model_text(response)
        )
    };
    if printed.is_err() {
        return ExitCode::from(exit::FAILED);
    }
    ExitCode::from(status)
}
