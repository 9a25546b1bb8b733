//! `toolcell pull`, `push`, `sign` and `keygen`: tools from OCI registries, and their
//! signatures (the `oci` feature).

use crate::args::Cli;
use crate::exit::{self, registry_failed};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use toolcell::Runtime;

/// A small async runtime for one registry command.
fn registry_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("toolcell: starting the async runtime: {error}");
            ExitCode::from(exit::FAILED)
        })
}

fn parse_reference(text: &str) -> Result<toolcell_oci::ToolRef, ExitCode> {
    toolcell_oci::ToolRef::parse(text).map_err(|why| {
        eprintln!("toolcell: {why}");
        ExitCode::from(exit::USAGE)
    })
}

pub(crate) fn pull(cli: &Cli, text: &str, update: bool, insecure: &[String]) -> ExitCode {
    let run = || -> Result<ExitCode, ExitCode> {
        let reference = parse_reference(text)?;
        let usage = |why: String| {
            eprintln!("toolcell: {why}");
            ExitCode::from(exit::USAGE)
        };
        let policy = match &cli.policy {
            Some(path) => {
                toolcell::Policy::from_file(path).map_err(|error| usage(error.to_string()))?
            }
            None => toolcell::Policy::embedded_default(),
        };
        let store = cli
            .store
            .clone()
            .or_else(toolcell_oci::Store::default_dir)
            .map(toolcell_oci::Store::new)
            .ok_or_else(|| {
                usage("no store directory: give --store or set $TOOLCELL_STORE".into())
            })?;
        let workspace = cli.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
        let mut lock = toolcell_oci::Lock::open(workspace.join(toolcell_oci::LOCK_FILE))
            .map_err(|error| usage(error.to_string()))?;
        let mut keys = Vec::new();
        let mut identities = Vec::new();
        for signer in &policy.registry().signed_by {
            match signer {
                toolcell::policy::Signer::Key(path) => {
                    keys.push(
                        toolcell_oci::signing::TrustedKey::read(path)
                            .map_err(|error| usage(error.to_string()))?,
                    );
                }
                toolcell::policy::Signer::Identity(identity) => identities.push(identity.clone()),
                other => {
                    return Err(usage(format!(
                        "the policy names a signer this build cannot check: {other}"
                    )));
                }
            }
        }
        let trust_root = match &policy.registry().trust_root {
            Some(path) if !identities.is_empty() => Some(
                toolcell_oci::signing::TrustRoot::read(path)
                    .map_err(|error| usage(error.to_string()))?,
            ),
            _ => None,
        };
        let options = toolcell_oci::PullOptions {
            update,
            insecure: insecure
                .iter()
                .chain(&policy.registry().insecure)
                .cloned()
                .collect(),
            progress: std::io::IsTerminal::is_terminal(&std::io::stderr())
                .then(|| std::sync::Arc::new(PullBar::default()) as _),
            keys,
            identities,
            trust_root,
        };
        let pulled = registry_runtime()?
            .block_on(toolcell_oci::pull(
                &reference,
                &store,
                Some(&mut lock),
                &options,
            ))
            .map_err(registry_failed)?;
        let at = reference.at(&pulled.digest);
        println!("{at}");
        eprintln!(
            "{}: component {} ({} bytes), {} signature(s){}{}",
            reference,
            pulled.component,
            pulled.bytes,
            pulled.signatures,
            if pulled.signers.is_empty() {
                String::new()
            } else {
                format!(", signed by {}", pulled.signers.join(", "))
            },
            if pulled.offline {
                ", from the store"
            } else {
                ""
            },
        );
        Ok(ExitCode::SUCCESS)
    };
    run().unwrap_or_else(|code| code)
}

pub(crate) fn push(file: &PathBuf, text: &str, insecure: &[String], no_cache: bool) -> ExitCode {
    let run = || -> Result<ExitCode, ExitCode> {
        let reference = parse_reference(text)?;
        if reference.tag().is_none() || reference.digest().is_some() {
            eprintln!("toolcell: push to a tag: oci://REGISTRY/REPOSITORY:TAG");
            return Err(ExitCode::from(exit::USAGE));
        }
        let bytes = std::fs::read(file).map_err(|error| {
            eprintln!("toolcell: reading {}: {error}", file.display());
            ExitCode::from(exit::USAGE)
        })?;
        // Only what toolcell itself would load is published.
        let mut builder = Runtime::builder()
            .builtin_tools(false)
            .component(file.display().to_string(), bytes.clone());
        if no_cache {
            builder = builder.cache_dir(None);
        }
        let runtime = builder.build().map_err(|error| {
            eprintln!("toolcell: {error:#}");
            ExitCode::from(exit::FAILED)
        })?;
        if let Some(error) = runtime.load_errors().first() {
            eprintln!("toolcell: not pushed: {error}");
            return Err(ExitCode::from(exit::FAILED));
        }
        drop(runtime);
        let digest = registry_runtime()?
            .block_on(toolcell_oci::push(bytes, &reference, insecure))
            .map_err(registry_failed)?;
        println!("{}", reference.at(&digest));
        Ok(ExitCode::SUCCESS)
    };
    run().unwrap_or_else(|code| code)
}

pub(crate) fn sign(key: &std::path::Path, text: &str, insecure: &[String]) -> ExitCode {
    let run = || -> Result<ExitCode, ExitCode> {
        let reference = parse_reference(text)?;
        let key = toolcell_oci::signing::SigningKey::read(key).map_err(|why| {
            eprintln!("toolcell: {why}");
            ExitCode::from(exit::USAGE)
        })?;
        let (digest, tag) = registry_runtime()?
            .block_on(toolcell_oci::sign(&reference, &key, insecure))
            .map_err(registry_failed)?;
        println!("{}", reference.at(&digest));
        eprintln!(
            "signed with {} (the signature is at {tag})",
            key.id().unwrap_or_default()
        );
        Ok(ExitCode::SUCCESS)
    };
    run().unwrap_or_else(|code| code)
}

pub(crate) fn keygen(prefix: &std::path::Path) -> ExitCode {
    let private = prefix.with_extension("key");
    let public = prefix.with_extension("pub");
    let password = std::env::var(toolcell_oci::signing::PASSWORD_VARIABLE).unwrap_or_default();
    let written = toolcell_oci::signing::SigningKey::generate(password.as_bytes()).and_then(
        |(private_pem, public_pem)| {
            let create = |path: &std::path::Path, text: &str, mode: u32| {
                use std::os::unix::fs::OpenOptionsExt as _;
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(path)
                    .and_then(|mut file| file.write_all(text.as_bytes()))
                    .map_err(|error| toolcell_oci::OciError::Local {
                        path: path.display().to_string(),
                        why: error.to_string(),
                    })
            };
            create(&private, &private_pem, 0o600)?;
            create(&public, &public_pem, 0o644)
        },
    );
    match written {
        Ok(()) => {
            println!(
                "{}
{}",
                private.display(),
                public.display()
            );
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("toolcell: {why}");
            ExitCode::from(exit::FAILED)
        }
    }
}

/// The progress bar of a pull's download, on a terminal.
#[derive(Debug, Default)]
struct PullBar {
    bar: std::sync::Mutex<Option<indicatif::ProgressBar>>,
}

impl toolcell_oci::PullProgress for PullBar {
    fn start(&self, repository: &str, total: u64) {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(format!("pulling {repository} (1 layer)"));
        *toolcell::sync::lock(&self.bar) = Some(bar);
    }

    fn advance(&self, received: u64) {
        if let Some(bar) = &*toolcell::sync::lock(&self.bar) {
            bar.set_position(received);
        }
    }

    fn finish(&self) {
        if let Some(bar) = toolcell::sync::lock(&self.bar).take() {
            bar.finish_and_clear();
        }
    }
}
