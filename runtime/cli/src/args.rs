//! The command line: the global options ([`Cli`]) and the commands ([`Command`]), as clap
//! parses them. What each command does is in `commands/`.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use toolcell::limits::DEFAULT_RESULT_CAP;

/// Calls measured when the caller does not say: enough for a stable p99 of a fast tool in well
/// under a second.
pub const DEFAULT_BENCH_CALLS: u32 = 1_000;

/// Calls made first and not measured, so that what runs once (the first slot of the pool, the
/// caches of the CPU and the allocator) is warm, as it is in a long-running host.
pub const DEFAULT_BENCH_WARMUP: u32 = 100;

/// The most threads a bench may use: far more than a machine that runs one has cores, and
/// few enough that a typo does not start thousands.
pub const MAX_BENCH_THREADS: u32 = 256;

/// Run untrusted agent tools as WebAssembly components, one fresh powerless instance per call.
#[derive(Debug, Parser)]
#[command(name = "toolcell", version, about, after_help = crate::exit::HELP)]
pub struct Cli {
    /// Also load every *.wasm component in this directory, or the pulled tool
    /// oci://REGISTRY/REPOSITORY:TAG (or @sha256:DIGEST) from the store; repeatable.
    #[arg(long, global = true, value_name = "DIR|oci://REF")]
    pub(crate) tools: Vec<String>,

    /// Load only the tools --tools and the policy name, not the ones built into toolcell.
    #[arg(long, global = true)]
    pub(crate) no_builtin: bool,

    /// Where pulled tools are stored (default: $TOOLCELL_STORE, or toolcell/store in the
    /// user's local data directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) store: Option<PathBuf>,

    /// Compile every component afresh and cache nothing (the cache lives in
    /// $TOOLCELL_CACHE_DIR, or toolcell/ in the user's cache directory).
    #[arg(long, global = true)]
    pub(crate) no_cache: bool,

    /// Append one JSON line per call to this file (created 0600), in a hash chain (its head
    /// kept in FILE.head; see `toolcell audit verify`).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) audit: Option<PathBuf>,

    /// Rotate the audit file before a record would take it past this many bytes: it becomes
    /// FILE.N, and the new FILE goes on from its last hash.
    #[arg(long, global = true, value_name = "BYTES", requires = "audit")]
    pub(crate) audit_rotate_bytes: Option<u64>,

    /// The directory every path a tool names is resolved in (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) workspace: Option<PathBuf>,

    /// The policy file (default: the embedded policy; see `toolcell policy`).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) policy: Option<PathBuf>,

    /// Send every call's spans as OpenTelemetry traces to this OTLP/HTTP collector
    /// (`http://HOST:4318`; default: $TOOLCELL_OTLP_ENDPOINT; none: no traces).
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) otlp_endpoint: Option<String>,

    /// Which calls' traces are sent: always_on (the default: every call, whatever its caller's
    /// trace says), always_off, traceidratio, or parentbased_always_on, parentbased_always_off,
    /// parentbased_traceidratio (the caller's sampled flag decides). Default:
    /// $OTEL_TRACES_SAMPLER, else always_on; a ratio from $OTEL_TRACES_SAMPLER_ARG.
    #[arg(long, global = true, value_name = "SAMPLER")]
    pub(crate) otlp_sampler: Option<String>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
        /// Write each image, sound and binary resource of the result to DIR (part-N.png, ...)
        /// rather than only naming it.
        #[arg(long, value_name = "DIR")]
        save_parts: Option<std::path::PathBuf>,
        /// With --save-parts: replace files already there (default: refuse, naming the file).
        #[arg(long, requires = "save_parts")]
        overwrite: bool,
        /// Print the tool's text as it is, even on a terminal (default on a terminal: control
        /// characters shown escaped, so a tool cannot drive the terminal).
        #[arg(long)]
        raw: bool,
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
        #[arg(long, value_name = "N", default_value_t = DEFAULT_BENCH_CALLS,
              value_parser = clap::value_parser!(u32).range(1..))]
        calls: u32,
        /// How many calls to make first, unmeasured.
        #[arg(long, value_name = "N", default_value_t = DEFAULT_BENCH_WARMUP)]
        warmup: u32,
        /// How many threads call at once.
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_BENCH_THREADS)))]
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
        /// The result cap: a text result is cut to this many bytes; a result of parts
        /// (images, audio, resources), counted as the client receives it (bytes as base64),
        /// larger than this is a failure.
        #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_RESULT_CAP)]
        cap: usize,
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
        /// configures (issuer, audience, key set, tenants, scopes); see docs/http.md.
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
        #[arg(long, value_name = "SECONDS", default_value_t = toolcell_mcp::DEFAULT_SHUTDOWN_GRACE.as_secs(), requires = "http")]
        grace_secs: u64,
        /// The operator's token for /metrics: a file with its SHA-256 (`toolcell token
        /// --metrics`). With --tokens or --oauth, only its bearer reads /metrics.
        #[arg(long, value_name = "FILE", requires = "http")]
        metrics_token: Option<PathBuf>,
        /// Without --tokens or --oauth (loopback only): whether each peer address is a client
        /// of its own for the fair shares (per-address, the default), or every caller is one
        /// client (one), so no local program takes more than one share by using several
        /// loopback addresses.
        #[arg(long, value_enum, value_name = "WHO", default_value_t = AnonymousClients::PerAddress, requires = "http")]
        anonymous_clients: AnonymousClients,
        /// Share quotas, approval answers and tasks with every replica given the same store:
        /// a Redis 7 or Valkey URL (redis://HOST:PORT/DB, or rediss:// for TLS). Default: each
        /// process keeps its own.
        #[arg(long, value_name = "URL", requires = "http")]
        state: Option<String>,
        /// A file holding the store's password, read at start (a password in the URL is
        /// refused: it would show in the process list).
        #[arg(long, value_name = "FILE", requires = "state")]
        state_password_file: Option<PathBuf>,
        /// A PEM file of the CA certificates a rediss:// store's certificate must chain to
        /// (a store with a private CA), instead of the system's and the web's roots.
        #[arg(long, value_name = "FILE", requires = "state")]
        state_ca_file: Option<PathBuf>,
        /// A file holding the operator's seal key (`toolcell token --seal-key`), the same for
        /// every replica, never kept in the store: it seals approval answers and task
        /// results. Needed with --state (or $TOOLCELL_SEAL_KEY).
        #[arg(long, value_name = "FILE", requires = "state")]
        seal_key_file: Option<PathBuf>,
    },
    /// Make a bearer token for `serve --http --tokens FILE`: prints the token, then the
    /// `[[token]]` table (its SHA-256, not the token) to add to the file.
    Token {
        /// The tenant the token's calls are made for (audited as that agent).
        #[arg(required_unless_present_any = ["metrics", "seal_key"])]
        tenant: Option<String>,
        /// The tenant's workspace: the only directory its calls' file tools may reach.
        #[arg(long, value_name = "DIR", conflicts_with = "metrics")]
        dir: Option<PathBuf>,
        /// Make the operator's token for `/metrics` instead: prints the token, then the line
        /// to keep in the file `serve --http --metrics-token FILE` reads (its SHA-256).
        #[arg(long, conflicts_with_all = ["tenant", "seal_key"])]
        metrics: bool,
        /// Make a seal key for `serve --http --state URL --seal-key-file FILE` instead: prints
        /// 64 hex digits, to keep in a file every replica reads (mode 0600).
        #[arg(long, conflicts_with_all = ["tenant", "dir"])]
        seal_key: bool,
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
        command: crate::commands::audit::AuditCommand,
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

/// `serve --http --anonymous-clients`: who an unauthenticated caller is, for the fair shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum AnonymousClients {
    /// Each peer address is a client of its own.
    PerAddress,
    /// Every anonymous caller is one client.
    One,
}
