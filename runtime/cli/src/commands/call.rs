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
        overwrite,
        raw,
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
            let shown = Shown::for_stdout(*raw);
            if diagnostics {
                print_diagnostics(&report, Shown::for_stderr(*raw));
            }
            let status = if report.parts.is_empty() {
                respond(&runtime, &report.response, json, *raw)
            } else {
                let save = save_parts.as_deref().map(|dir| Saving {
                    dir,
                    overwrite: *overwrite,
                });
                respond_parts(&report, json, save, shown)
            };
            if runtime.audit_failures() > 0 {
                eprintln!("toolcell: the call ran, but its audit record could not be written");
                return ExitCode::from(exit::AUDIT_FAILED);
            }
            status
        },
    )
}

/// How a tool's text is printed: as it is (piped, or `--raw`), or with control and invisible
/// characters written `\u{...}` (on a terminal), so that a tool's text cannot set the window's
/// title, clear the screen or write the clipboard (OSC 52) of the operator's terminal.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shown {
    Raw,
    Escaped,
}

impl Shown {
    /// For stdout: escaped when it is a terminal, unless `raw`.
    pub(crate) fn for_stdout(raw: bool) -> Shown {
        Shown::when(raw, std::io::IsTerminal::is_terminal(&std::io::stdout()))
    }

    /// For stderr: escaped when it is a terminal, unless `raw`.
    pub(crate) fn for_stderr(raw: bool) -> Shown {
        Shown::when(raw, std::io::IsTerminal::is_terminal(&std::io::stderr()))
    }

    fn when(raw: bool, terminal: bool) -> Shown {
        if terminal && !raw {
            Shown::Escaped
        } else {
            Shown::Raw
        }
    }

    /// `text` as this way of showing prints it.
    pub(crate) fn text<'t>(self, text: &'t str) -> std::borrow::Cow<'t, str> {
        match self {
            Shown::Raw => std::borrow::Cow::Borrowed(text),
            Shown::Escaped => {
                std::borrow::Cow::Owned(toolcell::approval::shown_on_a_terminal(text))
            }
        }
    }
}

/// Print what the guest wrote to its stdout and stderr, and how long the call took, on stderr.
fn print_diagnostics(report: &CallReport, shown: Shown) {
    let mut err = std::io::stderr().lock();
    for (stream, captured) in [("stdout", &report.stdout), ("stderr", &report.stderr)] {
        let cut = if captured.truncated {
            " (truncated)"
        } else {
            ""
        };
        let _ = writeln!(
            err,
            "--- guest {stream}{cut} ---\n{}",
            shown.text(&captured.text)
        );
    }
    let _ = writeln!(err, "--- {} us ---", report.elapsed.as_micros());
}

/// Print a response: the result on stdout, anything else on stderr (as the model would read
/// it, within the runtime's cap); or the whole response as JSON on stdout. Returns the exit
/// status for it.
pub(crate) fn respond(
    runtime: &Runtime,
    response: &ToolResponse,
    json: bool,
    raw: bool,
) -> ExitCode {
    let status = exit::status(response);
    let printed = if json {
        // JSON escapes every control character itself.
        serde_json::to_string(response)
            .map_err(std::io::Error::other)
            .and_then(|line| writeln!(std::io::stdout().lock(), "{line}"))
    } else if let ToolResponse::Result { text, .. } = response {
        writeln!(
            std::io::stdout().lock(),
            "{}",
            Shown::for_stdout(raw).text(text)
        )
    } else {
        // Shown as stderr is: escaped on a terminal whatever stdout is (`call X | jq` leaves
        // stderr on the operator's terminal).
        let on_stderr = Shown::for_stderr(raw);
        writeln!(
            std::io::stderr().lock(),
            "toolcell: {}",
            on_stderr.text(&runtime.model_text(response))
        )
    };
    if printed.is_err() {
        return ExitCode::from(exit::FAILED);
    }
    ExitCode::from(status)
}

/// Where `--save-parts` writes parts, and whether it may replace what is there.
struct Saving<'a> {
    dir: &'a Path,
    overwrite: bool,
}

/// Print a result of parts: as JSON (the response, and each part as the audit keeps it:
/// bytes as their size and sha256), or each part in turn, text as text and anything else as a
/// line naming it (and, with `save`, the file it was written to).
fn respond_parts(
    report: &CallReport,
    json: bool,
    save: Option<Saving<'_>>,
    shown: Shown,
) -> ExitCode {
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
        let mut line = shown.text(&part.as_text()).into_owned();
        if let (Some(save), Some((bytes, extension))) = (&save, binary(part)) {
            // The file's name is the host's own (the part's place and a type from a fixed
            // list): nothing of what the tool said (a name, a URI) reaches the path.
            let path = save.dir.join(format!("part-{index}.{extension}"));
            if let Err(error) = save_file(&path, bytes, save.overwrite) {
                eprintln!("toolcell: {error}");
                return ExitCode::from(exit::FAILED);
            }
            line.push_str(&format!(" saved to {}", path.display()));
        }
        if writeln!(out, "{line}").is_err() {
            return ExitCode::from(exit::FAILED);
        }
    }
    ExitCode::from(exit::status(&report.response))
}

/// A part's bytes and the file extension for its type, if it is bytes. An image or a sound is
/// checked against its bytes before it leaves the pipeline; a resource's blob is not, so one
/// labelled as an image or a sound whose bytes do not begin as that type's do is saved as
/// `.bin`, never under an extension a viewer would trust.
fn binary(part: &Part) -> Option<(&[u8], &'static str)> {
    let (data, mime_type): (&[u8], Option<&str>) = match part {
        Part::Image(media) | Part::Audio(media) => (&media.data, Some(&media.mime_type)),
        Part::Resource {
            contents: Contents::Blob(blob),
            mime_type,
            ..
        } => {
            let claimed = mime_type.as_deref().unwrap_or_default();
            let media = claimed.starts_with("image/") || claimed.starts_with("audio/");
            if media && toolcell::content::sniff(blob) != Some(claimed) {
                return Some((blob, "bin"));
            }
            (blob, mime_type.as_deref())
        }
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

/// Write `bytes` to `path` as a new file. Without `overwrite`, a name already taken (a file, a
/// symlink, a FIFO) is refused, naming it; with it, the file is written beside it and renamed
/// over it, so whatever was at `path` is replaced, never written through or waited on. The
/// name beside it is made exclusively, so nothing planted there is written either. A write
/// that fails (a full disk) leaves nothing behind and says which file and why.
fn save_file(path: &Path, bytes: &[u8], overwrite: bool) -> Result<(), String> {
    let failed =
        |what: &str, error: std::io::Error| format!("writing {} ({what}): {error}", path.display());
    if !overwrite {
        // A new file, never through anything already there (O_EXCL does not follow a link).
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|error| {
                if error.kind() == std::io::ErrorKind::AlreadyExists {
                    format!(
                        "{} already exists: give --overwrite to replace it",
                        path.display()
                    )
                } else {
                    failed("making it", error)
                }
            })?;
        return file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|error| {
                drop(file);
                let _ = std::fs::remove_file(path);
                failed("its bytes", error)
            });
    }
    let mut staging = path.as_os_str().to_owned();
    staging.push(format!(".{}.partial", std::process::id()));
    let staging = std::path::PathBuf::from(staging);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&staging)
        .map_err(|error| format!("writing {}: {error}", staging.display()))
        .and_then(|mut file| {
            file.write_all(bytes)
                .map_err(|error| failed("its bytes", error))
        })
        .and_then(|()| {
            std::fs::rename(&staging, path).map_err(|error| failed("putting it in place", error))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(&staging);
    }
    written
}
