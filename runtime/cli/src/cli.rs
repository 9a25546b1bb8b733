//! The `toolcell` command line: list, find, call, bench and describe tools, and serve them.
//!
//! `call` enters through the same [`Runtime::handle`] an agent loop would, so `find_tool` and
//! `call_tool` work here exactly as they do for a model. Exit status:
//!
//! | status | meaning |
//! |---|---|
//! | 0 | a result (printed on stdout) |
//! | 1 | the call failed (the reason on stderr) |
//! | 2 | usage: bad flags, or a tools directory that cannot be read |
//! | 3 | the call was denied |
//! | 4 | the call ran past its deadline |
//! | 5 | the call was cancelled |
//! | 6 | the call ran, but its audit record could not be written |
//! | 7 | not found: the registry has no such tag, manifest or repository |
//! | 8 | unreachable: the registry could not be reached, or stopped answering |
//!
//! `pull`, `push` and `sign` use the same codes for the same meanings: 3 when the registry
//! denied the credentials, 4 past the operation's overall limit, 1 for anything else.

use clap::{Parser, Subcommand};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use toolcell::limits::DEFAULT_RESULT_CAP;
use toolcell::registry::FIND_TOOL;
use toolcell::{CallOptions, CallReport, Runtime, StopToken, ToolPort as _, ToolResponse};

/// Run untrusted agent tools as WebAssembly components, one fresh powerless instance per call.
#[derive(Debug, Parser)]
#[command(name = "toolcell", version, about)]
pub struct Cli {
    /// Also load every *.wasm component in this directory, or the pulled tool
    /// oci://REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST) from the store; repeatable.
    #[arg(long, global = true, value_name = "DIR|oci://REF")]
    tools: Vec<String>,

    /// Load only the tools --tools and the policy name, not the ones built into toolcell.
    #[arg(long, global = true)]
    no_builtin: bool,

    /// Where pulled tools are stored (default: $TOOLCELL_STORE, or toolcell/store in the
    /// user's local data directory).
    #[arg(long, global = true, value_name = "DIR")]
    store: Option<PathBuf>,

    /// Compile every component afresh and cache nothing (the cache lives in
    /// $TOOLCELL_CACHE_DIR, or toolcell/ in the user's cache directory).
    #[arg(long, global = true)]
    no_cache: bool,

    /// Append one JSON line per call to this file (created 0600), in a hash chain (its head
    /// kept in FILE.head; see `toolcell audit verify`).
    #[arg(long, global = true, value_name = "FILE")]
    audit: Option<PathBuf>,

    /// Rotate the audit file before a record would take it past this many bytes: it becomes
    /// FILE.N, and the new FILE goes on from its last hash.
    #[arg(long, global = true, value_name = "BYTES", requires = "audit")]
    audit_rotate_bytes: Option<u64>,

    /// The directory every path a tool names is resolved in (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// The policy file (default: the embedded policy; see `toolcell policy`).
    #[arg(long, global = true, value_name = "FILE")]
    policy: Option<PathBuf>,

    /// Send every call's spans as OpenTelemetry traces to this OTLP/HTTP collector
    /// (`http://HOST:4318`; default: $TOOLCELL_OTLP_ENDPOINT; none: no traces).
    #[arg(long, global = true, value_name = "URL")]
    otlp_endpoint: Option<String>,

    /// Which calls' traces are sent: always_on (the default: every call, whatever its caller's
    /// trace says), always_off, traceidratio, or parentbased_always_on, parentbased_always_off,
    /// parentbased_traceidratio (the caller's sampled flag decides). Default:
    /// $OTEL_TRACES_SAMPLER, else always_on; a ratio from $OTEL_TRACES_SAMPLER_ARG.
    #[arg(long, global = true, value_name = "SAMPLER")]
    otlp_sampler: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the loaded tools.
    List {
        /// Print one JSON object per tool, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Search the tools, as the model's find_tool does.
    Find {
        /// A keyword to look for in tool names and descriptions (case-insensitive).
        query: String,
    },
    /// Call a tool (or find_tool / call_tool) with JSON arguments.
    Call {
        /// The tool's name.
        name: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        /// Cut the result to at most this many bytes.
        #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_RESULT_CAP)]
        cap: usize,
        /// Print the whole response as one JSON object.
        #[arg(long)]
        json: bool,
        /// Stop the call after this many milliseconds (default: the tool's limit, 5000).
        #[arg(long, value_name = "MS")]
        timeout_ms: Option<u64>,
        /// Limit the instance's memory to this many MiB (default: the tool's limit, 64).
        #[arg(long, value_name = "MIB")]
        memory_mib: Option<usize>,
        /// Stop the call after this much fuel (about one unit per wasm instruction).
        #[arg(long, value_name = "UNITS")]
        fuel: Option<u64>,
        /// Also print what the guest wrote to its stdout and stderr, on stderr.
        #[arg(long)]
        diagnostics: bool,
    },
    /// Measure what calls to one tool cost: each in a fresh instance, through the same
    /// pipeline as `call` (validation, gate, cap, audit).
    Bench {
        /// The tool's name.
        name: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
        /// How many calls to measure, in all.
        #[arg(long, value_name = "N", default_value_t = crate::bench::DEFAULT_BENCH_CALLS,
              value_parser = clap::value_parser!(u32).range(1..))]
        calls: u32,
        /// How many calls to make first, unmeasured.
        #[arg(long, value_name = "N", default_value_t = crate::bench::DEFAULT_BENCH_WARMUP)]
        warmup: u32,
        /// How many threads call at once.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::bench::MAX_BENCH_THREADS)))]
        threads: u32,
        /// Print the measurements as one JSON object.
        #[arg(long)]
        json: bool,
        /// Keep this much of each instance slot's memory mapped between calls (default 2).
        #[arg(long, value_name = "MIB")]
        keep_resident_mib: Option<usize>,
    },
    /// Serve the tools to an MCP client over stdio until stdin closes, or over Streamable
    /// HTTP (`--http`) until SIGTERM.
    Serve {
        /// How many calls may run at once; more wait for a slot.
        #[arg(long, value_name = "N", default_value_t = toolcell::limits::POOL_SLOTS)]
        pool_slots: u32,
        /// Keep this much of each instance slot's memory mapped between calls (default 2):
        /// faster for tools that use tens of MiB, at the price of holding that memory.
        #[arg(long, value_name = "MIB")]
        keep_resident_mib: Option<usize>,
        /// Serve MCP over Streamable HTTP at this address (such as 127.0.0.1:8080; port 0
        /// picks one and prints it), at /mcp, instead of stdio.
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// The bearer tokens file (TOML; see `toolcell token`): each token's SHA-256 and its
        /// tenant. Required to serve on an address other than loopback.
        #[arg(long, value_name = "FILE", requires = "http", conflicts_with = "oauth")]
        tokens: Option<PathBuf>,
        /// Take JWT access tokens from an OAuth authorization server, as this TOML file
        /// configures (issuer, audience, key set, tenants, scopes); see the README.
        #[arg(long, value_name = "FILE", requires = "http")]
        oauth: Option<PathBuf>,
        /// A name clients use to reach the server (the Host header must be one); repeatable.
        /// Default: loopback names only.
        #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
        allow_hosts: Vec<String>,
        /// A browser origin allowed to call (scheme://host[:port|:*]); repeatable. Default:
        /// loopback origins only.
        #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
        allow_origins: Vec<String>,
        /// After SIGTERM, how long calls in flight may run on before they are stopped.
        #[arg(long, value_name = "SECONDS", default_value_t = toolcell_mcp::http::DEFAULT_SHUTDOWN_GRACE.as_secs(), requires = "http")]
        grace_secs: u64,
        /// The operator's token for /metrics: a file with its SHA-256 (`toolcell token
        /// --metrics`). With --tokens or --oauth, only its bearer reads /metrics.
        #[arg(long, value_name = "FILE", requires = "http")]
        metrics_token: Option<PathBuf>,
        /// Share quotas, approval answers and tasks with every replica given the same store:
        /// a Redis 7 or Valkey URL (redis://HOST:PORT/DB, or rediss:// for TLS). Default: each
        /// process keeps its own.
        #[arg(long, value_name = "URL", requires = "http")]
        state: Option<String>,
        /// A file holding the store's password (read at start; better than one in the URL,
        /// which shows in the process list).
        #[arg(long, value_name = "FILE", requires = "state")]
        state_password_file: Option<PathBuf>,
    },
    /// Make a bearer token for `serve --http --tokens FILE`: prints the token, then the
    /// `[[token]]` table (its SHA-256, not the token) to add to the file.
    Token {
        /// The tenant the token's calls are made for (audited as that agent).
        #[arg(required_unless_present = "metrics")]
        tenant: Option<String>,
        /// The tenant's workspace: the only directory its calls' file tools may reach.
        #[arg(long, value_name = "DIR", conflicts_with = "metrics")]
        dir: Option<PathBuf>,
        /// Make the operator's token for `/metrics` instead: prints the token, then the line
        /// to keep in the file `serve --http --metrics-token FILE` reads (its SHA-256).
        #[arg(long, conflicts_with = "tenant")]
        metrics: bool,
    },
    /// Fetch a tool from an OCI registry into the store, check every digest, and lock its
    /// tag's digest in the workspace's toolcell.lock. Later loads need no network.
    Pull {
        /// oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST.
        reference: String,
        /// Accept a locked tag that now names other bytes, and lock the new digest.
        #[arg(long)]
        update: bool,
        /// Allow plain HTTP to this registry (host:port); loopback registries always may.
        #[arg(long = "insecure-registry", value_name = "HOST")]
        insecure: Vec<String>,
    },
    /// Publish a component to an OCI registry as a wasm artifact; prints its digest.
    Push {
        /// The component (.wasm).
        file: PathBuf,
        /// oci://REGISTRY/REPOSITORY:TAG.
        reference: String,
        /// Allow plain HTTP to this registry (host:port); loopback registries always may.
        #[arg(long = "insecure-registry", value_name = "HOST")]
        insecure: Vec<String>,
    },
    /// Sign a tool in a registry with a key, as `cosign sign --key` does (an encrypted key's
    /// password comes from $COSIGN_PASSWORD).
    Sign {
        /// The private key (cosign's encrypted PEM, or PKCS#8 PEM).
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// oci://REGISTRY/REPOSITORY:TAG or @sha256:DIGEST.
        reference: String,
        /// Allow plain HTTP to this registry (host:port); loopback registries always may.
        #[arg(long = "insecure-registry", value_name = "HOST")]
        insecure: Vec<String>,
    },
    /// Make a signing key pair, as `cosign generate-key-pair` does: PREFIX.key (encrypted
    /// with $COSIGN_PASSWORD, empty if unset) and PREFIX.pub.
    Keygen {
        /// Where to write them (default: ./cosign).
        #[arg(default_value = "cosign")]
        prefix: PathBuf,
    },
    /// Check or sign an audit file's hash chain.
    Audit {
        #[command(subcommand)]
        command: crate::audit::AuditCommand,
    },
    /// Print the embedded default policy.
    Policy,
    /// Load one component file and print what it says about itself.
    Describe {
        /// The component (.wasm).
        file: PathBuf,
    },
    /// Write a new tool project: the WIT, a starter tool, a README with its build line, and
    /// a Makefile whose `test` checks it through toolcell.
    New {
        /// The tool's name (letters, digits, `_` and `-`; a letter first).
        name: String,
        /// The language to write it in.
        #[arg(long, value_enum, default_value_t = crate::scaffold::Language::Rust)]
        lang: crate::scaffold::Language,
        /// Where to write it: a directory that does not exist or is empty (default: ./NAME).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// The agent the command line's calls are made for, as the audit record names it.
pub const CLI_AGENT: &str = "cli";

/// Exit statuses, one per kind of response.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_DENIED: u8 = 3;
const EXIT_TIMED_OUT: u8 = 4;
const EXIT_CANCELLED: u8 = 5;
const EXIT_AUDIT_FAILED: u8 = 6;
const EXIT_NOT_FOUND: u8 = 7;
const EXIT_UNREACHABLE: u8 = 8;

/// Say why a registry operation failed, and exit with the status its kind has.
fn registry_failed(why: toolcell_oci::OciError) -> ExitCode {
    use toolcell_oci::OciError;
    eprintln!("toolcell: {why}");
    ExitCode::from(match why {
        OciError::Denied { .. } => EXIT_DENIED,
        OciError::TimedOut { .. } => EXIT_TIMED_OUT,
        OciError::NotFound { .. } => EXIT_NOT_FOUND,
        OciError::Unreachable { .. } => EXIT_UNREACHABLE,
        _ => EXIT_FAILED,
    })
}

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
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = run(cli);
    telemetry.shutdown();
    code
}

/// Run a parsed command line.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Describe { ref file } => describe(file, cli.no_cache),
        Command::New {
            ref name,
            lang,
            ref dir,
        } => new_project(name, lang, dir.as_deref()),
        Command::Policy => {
            print!("{}", toolcell::policy::DEFAULT_POLICY);
            ExitCode::SUCCESS
        }
        Command::Pull {
            ref reference,
            update,
            ref insecure,
        } => pull(&cli, reference, update, insecure),
        Command::Push {
            ref file,
            ref reference,
            ref insecure,
        } => push(file, reference, insecure, cli.no_cache),
        Command::Sign {
            ref key,
            ref reference,
            ref insecure,
        } => sign(key, reference, insecure),
        Command::Keygen { ref prefix } => keygen(prefix),
        Command::Audit { ref command } => crate::audit::run(command),
        Command::Serve {
            pool_slots,
            keep_resident_mib,
            http,
            ref tokens,
            ref oauth,
            ref allow_hosts,
            ref allow_origins,
            grace_secs,
            ref metrics_token,
            ref state,
            ref state_password_file,
        } => {
            let http = match http {
                Some(addr) => {
                    // Before any tool is loaded: a refusal should be immediate.
                    if let Err(why) = toolcell_mcp::http::check_exposure(
                        addr,
                        tokens.is_some() || oauth.is_some(),
                        !allow_hosts.is_empty(),
                    ) {
                        eprintln!("toolcell: {why}");
                        return ExitCode::from(EXIT_USAGE);
                    }
                    Some(toolcell_mcp::http::HttpOptions {
                        addr,
                        tokens: tokens.clone(),
                        oauth: oauth.clone(),
                        allowed_hosts: allow_hosts.clone(),
                        allowed_origins: allow_origins.clone(),
                        grace: Duration::from_secs(grace_secs),
                        metrics_token: metrics_token.clone(),
                        state: state.clone().map(|url| toolcell_mcp::http::StateOptions {
                            url,
                            password_file: state_password_file.clone(),
                        }),
                    })
                }
                None => None,
            };
            with_runtime_for(
                &cli,
                Needs {
                    pool_slots,
                    keep_resident_mib,
                    ..Needs::default()
                },
                |runtime| {
                    let served = match http {
                        Some(options) => toolcell_mcp::http::serve_http(runtime, options),
                        None => toolcell_mcp::serve(runtime),
                    };
                    match served {
                        Ok(()) => ExitCode::SUCCESS,
                        Err(error) => {
                            eprintln!("toolcell: {error:#}");
                            ExitCode::from(EXIT_FAILED)
                        }
                    }
                },
            )
        }
        Command::Token { metrics: true, .. } => match toolcell_mcp::auth::MetricsToken::new_token()
        {
            Ok((token, line)) => {
                println!("{token}");
                print!("{line}");
                ExitCode::SUCCESS
            }
            Err(error) => {
                eprintln!("toolcell: making a token: {error}");
                ExitCode::from(EXIT_FAILED)
            }
        },
        Command::Token {
            ref tenant,
            ref dir,
            ..
        } => {
            let tenant = tenant.as_deref().unwrap_or_default();
            if let Err(why) = toolcell::registry::check_tool_name(tenant) {
                eprintln!("toolcell: tenant {tenant:?}: {why}");
                return ExitCode::from(EXIT_USAGE);
            }
            let dir = match dir
                .as_deref()
                .map(std::path::Path::canonicalize)
                .transpose()
            {
                Ok(dir) => dir,
                Err(error) => {
                    eprintln!("toolcell: the tenant's workspace: {error}");
                    return ExitCode::from(EXIT_USAGE);
                }
            };
            match toolcell_mcp::auth::new_token(tenant, dir.as_deref()) {
                Ok((token, table)) => {
                    println!("{token}");
                    print!("{table}");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("toolcell: making a token: {error}");
                    ExitCode::from(EXIT_FAILED)
                }
            }
        }
        Command::List { json } => with_runtime(&cli, |runtime| list(runtime, json)),
        Command::Bench {
            ref name,
            ref arguments,
            calls,
            warmup,
            threads,
            json,
            keep_resident_mib,
        } => with_runtime_for(
            &cli,
            Needs {
                keep_resident_mib,
                ..Needs::default()
            },
            |runtime| {
                let options = crate::bench::BenchOptions {
                    calls,
                    warmup,
                    threads,
                };
                match crate::bench::run(&runtime, name, arguments, options) {
                    Ok(report) => {
                        let text = if json {
                            serde_json::to_string(&report).unwrap_or_default()
                        } else {
                            report.to_string()
                        };
                        if writeln!(std::io::stdout().lock(), "{text}").is_err() {
                            return ExitCode::from(EXIT_FAILED);
                        }
                        ExitCode::SUCCESS
                    }
                    // The first call did not answer with a result: say why, as `call` would.
                    Err(response) => respond(&runtime, &response, false),
                }
            },
        ),
        Command::Find { ref query } => with_runtime(&cli, |runtime| {
            let arguments = serde_json::json!({ "query": query }).to_string();
            respond(
                &runtime,
                &runtime.call(&toolcell::ToolRequest::new("cli", FIND_TOOL, &arguments)),
                false,
            )
        }),
        Command::Call {
            ref name,
            ref arguments,
            cap,
            json,
            timeout_ms,
            memory_mib,
            fuel,
            diagnostics,
        } => with_runtime_for(
            &cli,
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
                        return ExitCode::from(EXIT_FAILED);
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
                    return ExitCode::from(EXIT_AUDIT_FAILED);
                }
                status
            },
        ),
    }
}

/// Resolves when the process is sent SIGINT (Ctrl-C) or SIGTERM; never, if it cannot listen.
async fn interrupted() {
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

fn with_runtime(cli: &Cli, run: impl FnOnce(Runtime) -> ExitCode) -> ExitCode {
    with_runtime_for(cli, Needs::default(), run)
}

/// What a command needs of the runtime beyond the global options.
struct Needs {
    /// Instance slots (`serve --pool-slots`).
    pool_slots: u32,
    /// A gated capability may be put to the person at the terminal (only `call` does, and
    /// only when stdin is a terminal).
    may_ask: bool,
    /// Meter fuel (`call --fuel`); otherwise the runtime meters it only if the policy sets fuel.
    fuel_metering: bool,
    /// Memory kept resident per slot (`--keep-resident-mib`), if not the default.
    keep_resident_mib: Option<usize>,
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
fn with_runtime_for(cli: &Cli, needs: Needs, run: impl FnOnce(Runtime) -> ExitCode) -> ExitCode {
    let policy = match &cli.policy {
        Some(path) => match toolcell::Policy::from_file(path) {
            Ok(policy) => policy,
            Err(error) => {
                eprintln!("toolcell: {error}");
                return ExitCode::from(EXIT_USAGE);
            }
        },
        None => toolcell::Policy::embedded_default(),
    };
    let workspace = cli.workspace.clone().unwrap_or_else(|| PathBuf::from("."));
    let store = cli.store.clone().or_else(toolcell_oci::Store::default_dir);
    let source = toolcell_oci::OciSource::for_workspace(store, &workspace);
    let mut bar = CompileBar::default();
    let mut builder = Runtime::builder()
        .on_compile(move |compiling| bar.show(compiling))
        .source(std::sync::Arc::new(source))
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
        builder = if source.starts_with(toolcell_oci::OCI_SCHEME) {
            builder.pulled(source)
        } else {
            builder.tools_dir(source)
        };
    }
    // No tool may write the files that decide and record what tools may do.
    let audit_head = cli.audit.as_deref().map(toolcell::audit::head_path);
    for file in cli.policy.iter().chain(&cli.audit).chain(&audit_head) {
        builder = builder.protect(file);
    }
    if cli.no_cache {
        builder = builder.cache_dir(None);
    }
    let mut runtime = match builder.build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolcell: {error:#}");
            return ExitCode::from(EXIT_USAGE);
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
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    run(runtime)
}

fn list(runtime: Runtime, json: bool) -> ExitCode {
    let mut out = std::io::stdout().lock();
    for entry in runtime.registry().entries() {
        let name = &entry.schema.name;
        let line = if json {
            serde_json::json!({
                "name": name,
                "description": entry.schema.description,
                "parameters": entry.schema.parameters,
                "core": entry.core,
                "source": runtime.source(name),
                "info": runtime.info(name),
            })
            .to_string()
        } else {
            let core = if entry.core { "core" } else { "    " };
            format!("{name:<16} {core}  {}", entry.schema.description)
        };
        if writeln!(out, "{line}").is_err() {
            return ExitCode::from(EXIT_FAILED);
        }
    }
    ExitCode::SUCCESS
}

fn new_project(
    name: &str,
    language: crate::scaffold::Language,
    dir: Option<&std::path::Path>,
) -> ExitCode {
    use crate::scaffold::ScaffoldError;
    let dir = dir.map_or_else(|| PathBuf::from(name), std::path::Path::to_path_buf);
    match crate::scaffold::new_tool(name, language, &dir) {
        Ok(files) => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "wrote {}:", dir.display());
            for file in files {
                let _ = writeln!(out, "  {}", file.display());
            }
            let _ = writeln!(
                out,
                "build it:  cd {} && {}\nrun it:    toolcell --tools {} call {name} '{{\"name\":\"world\"}}'",
                dir.display(),
                language.build_command(name),
                language.output_dir(),
            );
            ExitCode::SUCCESS
        }
        Err(error @ (ScaffoldError::BadName(_) | ScaffoldError::NotEmpty(_))) => {
            eprintln!("toolcell: {error}");
            ExitCode::from(EXIT_USAGE)
        }
        Err(error) => {
            eprintln!("toolcell: {error}");
            ExitCode::from(EXIT_FAILED)
        }
    }
}

/// A small async runtime for one registry command.
fn registry_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| {
            eprintln!("toolcell: starting the async runtime: {error}");
            ExitCode::from(EXIT_FAILED)
        })
}

fn parse_reference(text: &str) -> Result<toolcell_oci::ToolRef, ExitCode> {
    toolcell_oci::ToolRef::parse(text).map_err(|why| {
        eprintln!("toolcell: {why}");
        ExitCode::from(EXIT_USAGE)
    })
}

fn pull(cli: &Cli, text: &str, update: bool, insecure: &[String]) -> ExitCode {
    let run = || -> Result<ExitCode, ExitCode> {
        let reference = parse_reference(text)?;
        let usage = |why: String| {
            eprintln!("toolcell: {why}");
            ExitCode::from(EXIT_USAGE)
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

fn push(file: &PathBuf, text: &str, insecure: &[String], no_cache: bool) -> ExitCode {
    let run = || -> Result<ExitCode, ExitCode> {
        let reference = parse_reference(text)?;
        if reference.tag().is_none() || reference.digest().is_some() {
            eprintln!("toolcell: push to a tag: oci://REGISTRY/REPOSITORY:TAG");
            return Err(ExitCode::from(EXIT_USAGE));
        }
        let bytes = std::fs::read(file).map_err(|error| {
            eprintln!("toolcell: reading {}: {error}", file.display());
            ExitCode::from(EXIT_USAGE)
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
            ExitCode::from(EXIT_FAILED)
        })?;
        if let Some(error) = runtime.load_errors().first() {
            eprintln!("toolcell: not pushed: {error}");
            return Err(ExitCode::from(EXIT_FAILED));
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

fn sign(key: &std::path::Path, text: &str, insecure: &[String]) -> ExitCode {
    let run = || -> Result<ExitCode, ExitCode> {
        let reference = parse_reference(text)?;
        let key = toolcell_oci::signing::SigningKey::read(key).map_err(|why| {
            eprintln!("toolcell: {why}");
            ExitCode::from(EXIT_USAGE)
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

fn keygen(prefix: &std::path::Path) -> ExitCode {
    let private = prefix.with_extension("key");
    let public = prefix.with_extension("pub");
    let password = std::env::var(toolcell_oci::signing::PASSWORD_VARIABLE).unwrap_or_default();
    let written = toolcell_oci::signing::SigningKey::generate(password.as_bytes()).and_then(
        |(private_pem, public_pem)| {
            let create = |path: &std::path::Path, text: &str, mode: u32| {
                use std::os::unix::fs::OpenOptionsExt as _;
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(path)
                    .map_err(|error| format!("{}: {error}", path.display()))?;
                file.write_all(text.as_bytes())
                    .map_err(|error| format!("{}: {error}", path.display()))
            };
            create(&private, &private_pem, 0o600)?;
            create(&public, &public_pem, 0o644).map_err(toolcell_oci::OciError::from)
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
            ExitCode::from(EXIT_FAILED)
        }
    }
}

fn describe(file: &PathBuf, no_cache: bool) -> ExitCode {
    let bytes = match std::fs::read(file) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("toolcell: reading {}: {error}", file.display());
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut builder = Runtime::builder()
        .builtin_tools(false)
        .component(file.display().to_string(), bytes);
    if no_cache {
        builder = builder.cache_dir(None);
    }
    let built = builder.build();
    let runtime = match built {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolcell: {error:#}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    if let Some(error) = runtime.load_errors().first() {
        eprintln!("toolcell: refused {error}");
        return ExitCode::from(EXIT_FAILED);
    }
    let Some(info) = runtime
        .registry()
        .entries()
        .first()
        .and_then(|entry| runtime.info(&entry.schema.name))
    else {
        eprintln!("toolcell: {} holds no tool", file.display());
        return ExitCode::from(EXIT_FAILED);
    };
    match serde_json::to_string_pretty(&info) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("toolcell: {error}");
            ExitCode::from(EXIT_FAILED)
        }
    }
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

/// Asks the person at the terminal: one prompt, three answers.
#[derive(Debug)]
struct TerminalApprover;

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
fn parse_approval(answer: &str) -> toolcell::approval::Approval {
    match answer.trim() {
        "y" | "Y" | "yes" => toolcell::approval::Approval::Once,
        "a" | "A" | "always" => toolcell::approval::Approval::Always,
        _ => toolcell::approval::Approval::Deny,
    }
}

/// The exit status for a response: one per kind (see the module docs).
fn exit_status(response: &ToolResponse) -> u8 {
    match response {
        ToolResponse::Result { .. } => 0,
        ToolResponse::Failed { .. } => EXIT_FAILED,
        ToolResponse::Denied { .. } => EXIT_DENIED,
        ToolResponse::TimedOut { .. } => EXIT_TIMED_OUT,
        ToolResponse::Cancelled => EXIT_CANCELLED,
    }
}

/// Print a response: the result on stdout, anything else on stderr (as the model would read
/// it, within the runtime's cap); or the whole response as JSON on stdout. Returns the exit
/// status for it.
fn respond(runtime: &Runtime, response: &ToolResponse, json: bool) -> ExitCode {
    let status = exit_status(response);
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
        return ExitCode::from(EXIT_FAILED);
    }
    ExitCode::from(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolcell::approval::Approval;
    use toolcell::{DenyReason, FailureKind};

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

    #[test]
    fn every_response_kind_has_its_own_exit_status() {
        let rows = [
            (ToolResponse::text("x"), 0),
            (ToolResponse::failed(FailureKind::Trap, "x"), 1),
            (ToolResponse::failed(FailureKind::OutOfMemory, "x"), 1),
            (
                ToolResponse::Denied {
                    reason: DenyReason::NoGrant,
                },
                3,
            ),
            (ToolResponse::TimedOut { limit_ms: 1 }, 4),
            (ToolResponse::Cancelled, 5),
        ];
        for (response, status) in rows {
            assert_eq!(exit_status(&response), status, "{response:?}");
        }
        // 2 is clap's, for usage errors: no response may take it.
        assert_eq!(EXIT_USAGE, 2);
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
        bar.set_message(compiling.source.to_owned());
    }
}

impl Drop for CompileBar {
    fn drop(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
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
        *self.bar.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar);
    }

    fn advance(&self, received: u64) {
        if let Some(bar) = &*self.bar.lock().unwrap_or_else(|p| p.into_inner()) {
            bar.set_position(received);
        }
    }

    fn finish(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}
