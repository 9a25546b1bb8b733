//! The runtime a command runs in, built from the global options (policy, workspace, tools
//! directories and registries, cache, audit), and what the terminal adds to it: the person
//! asked for gated calls, and a progress bar while components compile.

use crate::args::Cli;
use crate::exit;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use toolcell::Runtime;

/// The agent a command line's calls are made as (in the audit, and asked about).
const CLI_AGENT: &str = "cli";

/// How a tool from a registry is named (`--tools oci://...`).
const OCI_SCHEME: &str = "oci://";

/// Resolves when the process is sent SIGINT (Ctrl-C) or SIGTERM; never, if it cannot listen.
pub(crate) async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut interrupt), Ok(mut terminate)) => {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
        _ => std::future::pending().await,
    }
}

pub(crate) fn with_runtime(cli: &Cli, run: impl FnOnce(Runtime) -> ExitCode) -> ExitCode {
    with_runtime_for(cli, Needs::default(), run)
}

/// What a command needs of the runtime beyond the global options.
pub(crate) struct Needs {
    /// Instance slots (`serve --pool-slots`).
    pub(crate) pool_slots: u32,
    /// A gated capability may be put to the person at the terminal (only `call` does, and
    /// only when stdin is a terminal).
    pub(crate) may_ask: bool,
    /// Meter fuel (`call --fuel`); otherwise the runtime meters it only if the policy sets fuel.
    pub(crate) fuel_metering: bool,
    /// Memory kept resident per slot (`--keep-resident-mib`), if not the default.
    pub(crate) keep_resident_mib: Option<usize>,
}

impl Default for Needs {
    fn default() -> Self {
        Needs {
            pool_slots: toolcell::limits::POOL_SLOTS,
            may_ask: false,
            fuel_metering: false,
            keep_resident_mib: None,
        }
    }
}

/// Build the runtime the command line asks for.
pub(crate) fn with_runtime_for(
    cli: &Cli,
    needs: Needs,
    run: impl FnOnce(Runtime) -> ExitCode,
) -> ExitCode {
    // Every file the command reads for itself is read through this registry, which no tool
    // reaches (`toolcell::hostfs`); the runtime keeps it.
    let own_files = toolcell::hostfs::OwnFiles::new();
    let policy = match &cli.policy {
        Some(path) => match toolcell::Policy::from_own_file(path, &own_files) {
            Ok(policy) => policy,
            Err(error) => {
                eprintln!("toolcell: {error}");
                return ExitCode::from(exit::USAGE);
            }
        },
        None => toolcell::Policy::embedded_default(),
    };
    let workspace = cli.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    let mut bar = CompileBar::default();
    #[cfg_attr(not(feature = "oci"), allow(unused_mut))]
    let mut builder = Runtime::builder()
        .own_files(own_files)
        .on_compile(move |compiling| bar.show(compiling));
    // Tools from registries (`--tools oci://...`, a policy's `source`): the store and the lock.
    #[cfg(feature = "oci")]
    {
        let store = cli.store.clone().or_else(toolcell_oci::Store::default_dir);
        let source = toolcell_oci::OciSource::for_workspace(store, &workspace);
        builder = builder.source(std::sync::Arc::new(source));
    }
    let mut builder = builder
        .pool_slots(needs.pool_slots)
        .policy(policy)
        .workspace(workspace)
        .agent(CLI_AGENT);
    if needs.fuel_metering {
        builder = builder.fuel_metering(true);
    }
    if let Some(mib) = needs.keep_resident_mib {
        builder = builder.keep_resident_bytes(mib.saturating_mul(1024 * 1024));
    }
    if needs.may_ask && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        builder = builder.approver(std::sync::Arc::new(TerminalApprover));
    }
    if cli.no_builtin {
        builder = builder.builtin_tools(false);
    }
    for source in &cli.tools {
        builder = if source.starts_with(OCI_SCHEME) {
            if cfg!(not(feature = "oci")) {
                return exit::not_built("a tool from a registry (--tools oci://...)", "oci");
            }
            builder.pulled(source)
        } else {
            builder.tools_dir(source)
        };
    }
    // No tool may read or write the files that record what tools did (the policy was
    // registered as it was read).
    let audit_head = cli.audit.as_deref().map(toolcell::audit::head_path);
    for file in cli.audit.iter().chain(&audit_head) {
        builder = builder.protect(file);
    }
    if cli.no_cache {
        builder = builder.cache_dir(None);
    }
    let mut runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolcell: {error:#}");
            return ExitCode::from(exit::USAGE);
        }
    };
    for error in runtime.load_errors() {
        eprintln!("toolcell: skipped {error}");
    }
    if let Some(path) = &cli.audit {
        match toolcell::audit::Audit::open(path) {
            Ok(audit) => {
                runtime = runtime.with_audit(match cli.audit_rotate_bytes {
                    Some(bytes) => audit.rotate_at(bytes),
                    None => audit,
                });
            }
            Err(error) => {
                eprintln!(
                    "toolcell: opening the audit file {}: {error}",
                    path.display()
                );
                return ExitCode::from(exit::USAGE);
            }
        }
    }
    run(runtime)
}

/// Asks the person at the terminal: one prompt, three answers.
#[derive(Debug)]
pub(crate) struct TerminalApprover;

impl toolcell::approval::Approver for TerminalApprover {
    fn approve(
        &self,
        request: &toolcell::approval::ApprovalRequest,
    ) -> toolcell::approval::Approval {
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "toolcell: {request}.\n  [y] approve once   [a] approve always for this \
             workspace   [n] deny\n> "
        );
        let _ = err.flush();
        let mut answer = String::new();
        if std::io::stdin().read_line(&mut answer).is_err() {
            return toolcell::approval::Approval::Deny;
        }
        parse_approval(&answer)
    }
}

/// What a typed answer means; anything unclear is a denial.
pub(crate) fn parse_approval(answer: &str) -> toolcell::approval::Approval {
    match answer.trim() {
        "y" | "Y" | "yes" => toolcell::approval::Approval::Once,
        "a" | "A" | "always" => toolcell::approval::Approval::Always,
        _ => toolcell::approval::Approval::Deny,
    }
}

/// The progress bar over the components being compiled (a warm cache shows none), on a
/// terminal only; cleared when the last one is compiled or the bar is dropped.
#[derive(Default)]
struct CompileBar {
    bar: Option<indicatif::ProgressBar>,
}

impl CompileBar {
    fn show(&mut self, compiling: toolcell::source::Compiling<'_>) {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return;
        }
        let total = compiling.total as u64;
        let bar = self.bar.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new(total);
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("compiling {pos}/{len} {bar:30} {msg}")
            {
                bar.set_style(style);
            }
            bar
        });
        bar.set_position(compiling.index as u64);
        // A file's name is whoever put it there: shown escaped, on the operator's terminal.
        bar.set_message(toolcell::approval::shown_on_a_terminal(compiling.source));
    }
}

impl Drop for CompileBar {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolcell::approval::Approval;

    #[test]
    fn only_a_clear_yes_approves() {
        for (typed, meaning) in [
            ("y\n", Approval::Once),
            ("yes\n", Approval::Once),
            ("a\n", Approval::Always),
            ("always", Approval::Always),
            ("n\n", Approval::Deny),
            ("", Approval::Deny),
            ("sure\n", Approval::Deny),
        ] {
            assert_eq!(parse_approval(typed), meaning, "{typed:?}");
        }
    }
}
