//! `toolcell call`: one call, through the same pipeline a model's calls take.

use crate::args::{Cli, Command};
use crate::exit;
use crate::runtime::{Needs, interrupted, with_runtime_for};
use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use toolcell::content::{Contents, Part};
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
        save_parts,
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
            let status = if report.parts.is_empty() {
                respond(&runtime, &report.response, json)
            } else {
                respond_parts(&report, json, save_parts.as_deref())
            };
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

/// Print a result of parts: as JSON (the response, and each part as the audit keeps it:
/// bytes as their size and sha256), or each part in turn, text as text and anything else as a
/// line naming it (and, with `save`, the file it was written to).
fn respond_parts(report: &CallReport, json: bool, save: Option<&Path>) -> ExitCode {
    let mut out = std::io::stdout().lock();
    if json {
        let mut line = serde_json::to_value(&report.response).unwrap_or_default();
        if let Some(object) = line.as_object_mut() {
            object.insert(
                "parts".to_owned(),
                serde_json::to_value(&report.parts).unwrap_or_default(),
            );
        }
        return match writeln!(out, "{line}") {
            Ok(()) => ExitCode::from(exit::status(&report.response)),
            Err(_) => ExitCode::from(exit::FAILED),
        };
    }
    for (index, part) in report.parts.iter().enumerate() {
        let mut shown = part.as_text();
        if let (Some(dir), Some((bytes, extension))) = (save, binary(part)) {
            let path = dir.join(format!("part-{index}.{extension}"));
            if let Err(error) = save_file(&path, bytes) {
                eprintln!("toolcell: writing {}: {error}", path.display());
                return ExitCode::from(exit::FAILED);
            }
            shown.push_str(&format!(" saved to {}", path.display()));
        }
        if writeln!(out, "{shown}").is_err() {
            return ExitCode::from(exit::FAILED);
        }
    }
    ExitCode::from(exit::status(&report.response))
}

/// A part's bytes and the file extension for its type, if it is bytes.
fn binary(part: &Part) -> Option<(&[u8], &'static str)> {
    let (data, mime_type): (&[u8], Option<&str>) = match part {
        Part::Image(media) | Part::Audio(media) => (&media.data, Some(&media.mime_type)),
        Part::Resource {
            contents: Contents::Blob(blob),
            mime_type,
            ..
        } => (blob, mime_type.as_deref()),
        _ => return None,
    };
    let extension = match mime_type.unwrap_or_default() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "audio/webm" => "webm",
        "audio/flac" => "flac",
        "application/pdf" => "pdf",
        "application/json" => "json",
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/csv" => "csv",
        _ => "bin",
    };
    Some((data, extension))
}

/// Write `bytes` to `path` as a new file, written beside it and renamed over it: whatever was
/// at `path` (a symlink, a hard link to a file elsewhere, a FIFO) is replaced, never written
/// through or waited on. The name beside it is made exclusively, so nothing planted there is
/// written either.
fn save_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut staging = path.as_os_str().to_owned();
    staging.push(format!(".{}.partial", std::process::id()));
    let staging = std::path::PathBuf::from(staging);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&staging)
        .and_then(|mut file| file.write_all(bytes))
        .and_then(|()| std::fs::rename(&staging, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    written
}
