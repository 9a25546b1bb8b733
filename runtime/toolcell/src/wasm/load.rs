//! Loading a component: compile it once, link it once, ask it once what it is.
//!
//! Everything here may fail because of the component, never because of the host: each failure
//! is a [`LoadError`] naming the component, and the other components load regardless.

use crate::call::limits::{DESCRIBE_TIMEOUT, Limits};
use crate::tool::info::ToolInfo;
use crate::tool::offer::Offers;
use crate::validate::{ArgumentSchema, Subject};
use crate::wasm::bindings::GuestPre;
use crate::wasm::cache::{CacheEntry, CacheOutcome};
use crate::wasm::instance;
use crate::wasm::sandbox::CallState;
use std::fmt;
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

/// The interfaces the host links, as an import names them (`@0.2` for any 0.2.x; `|` between
/// exact versions): what a component may import. Anything else is refused at load, named.
pub(crate) const PROVIDED: &[&str] = &[
    "wasi:cli/environment",
    "wasi:cli/exit",
    "wasi:cli/stdin",
    "wasi:cli/stdout",
    "wasi:cli/stderr",
    "wasi:cli/terminal-input",
    "wasi:cli/terminal-output",
    "wasi:cli/terminal-stdin",
    "wasi:cli/terminal-stdout",
    "wasi:cli/terminal-stderr",
    "wasi:clocks/monotonic-clock",
    "wasi:clocks/wall-clock",
    "wasi:filesystem/types",
    "wasi:filesystem/preopens",
    "wasi:io/error",
    "wasi:io/poll",
    "wasi:io/streams",
    "wasi:random/random",
    "wasi:random/insecure",
    "wasi:random/insecure-seed",
    "wasi:sockets/network",
    "wasi:sockets/instance-network",
    "wasi:sockets/tcp",
    "wasi:sockets/tcp-create-socket",
    "wasi:sockets/udp",
    "wasi:sockets/udp-create-socket",
    "wasi:sockets/ip-name-lookup",
    "wasi:http/types",
    "wasi:http/outgoing-handler",
    "wasi:config/store@0.2.0-draft|0.2.0-rc.1",
    "toolcell:tool/types@0.4.0",
    "toolcell:tool/client@0.4.0",
];

/// A component that could not be loaded, and why.
///
/// It is for the person who runs toolcell (`toolcell describe`, `list`, the log), never for a
/// model: a tool that fails to load is not in the model's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadError {
    /// Where it came from: a file path, or `builtin:<name>`.
    pub source: String,
    /// What is wrong with it.
    pub message: String,
    /// What the guest wrote to its stderr while it was described, when `describe()` trapped
    /// or its answer broke a rule: the end of it (at most
    /// [`STDERR_TAIL_BYTES`](crate::limits::STDERR_TAIL_BYTES)), so that a Python or
    /// JavaScript author sees their exception. Empty for any other refusal.
    pub guest_stderr: String,
}

impl LoadError {
    /// A refusal of the component from `source`, for `message`, with no guest output.
    pub fn new(source: impl Into<String>, message: impl Into<String>) -> LoadError {
        LoadError {
            source: source.into(),
            message: message.into(),
            guest_stderr: String::new(),
        }
    }
}

impl fmt::Display for LoadError {
    /// `SOURCE: MESSAGE`, then, if the guest wrote to stderr, its lines, each after `  | `,
    /// with control and invisible characters escaped (`\u{1b}`): a guest's words must not
    /// drive the terminal they are shown on.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.source, self.message)?;
        if !self.guest_stderr.is_empty() {
            f.write_str("\n  the guest wrote to stderr:")?;
            for line in self.guest_stderr.lines() {
                write!(f, "\n  | {}", crate::gate::escaped_line(line))?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// What a component became: one tool of the contract, or the tools of its typed exports.
pub(crate) enum Loaded {
    /// A component of toolcell's contract: one tool.
    Contract(Box<LoadedTool>),
    /// A component of plain typed exports: a tool per function.
    Typed(LoadedTyped),
    /// A component that offers prompts, resources or completion, and no tool.
    Provider(LoadedProvider),
}

/// A component that offers prompts, resources or completion and no tool, ready: its prepared
/// instance and what it offers, checked.
pub(crate) struct LoadedProvider {
    pub(crate) pre: GuestPre<CallState>,
    pub(crate) offers: Offers,
    /// The size of its compiled code in memory.
    pub(crate) code_bytes: usize,
}

/// A component of plain typed exports, ready: its prepared instance, its functions served as
/// tools, and those left out with why.
pub(crate) struct LoadedTyped {
    pub(crate) pre: GuestPre<CallState>,
    pub(crate) reflected: crate::wasm::typed::Reflected,
    /// The size of its compiled code in memory.
    pub(crate) code_bytes: usize,
}

/// A tool ready to be called: its checked description and its prepared instance.
pub(crate) struct LoadedTool {
    pub(crate) info: ToolInfo,
    pub(crate) pre: GuestPre<CallState>,
    pub(crate) schema: ArgumentSchema,
    /// Its output schema, compiled, if it declared one.
    pub(crate) output: Option<ArgumentSchema>,
    /// The size of its compiled code in memory.
    pub(crate) code_bytes: usize,
    /// What it offers beside its tool (the `server` world), checked.
    pub(crate) offers: Option<Offers>,
}

/// Compile `bytes` (or read them compiled from their cache `entry`), link them against
/// `linker`, and read the tool's `describe()`; or, for a component without the contract, read
/// its functions by their types.
pub(crate) async fn load(
    engine: &Engine,
    linker: &Linker<CallState>,
    entry: &CacheEntry,
    source: &str,
    bytes: &[u8],
) -> Result<(Loaded, CacheOutcome), LoadError> {
    let refuse = |message: String| LoadError::new(source, message);
    // A refusal of what `describe()` did, with what the guest wrote to stderr meanwhile.
    let refuse_described = |message: String, stderr: &str| LoadError {
        guest_stderr: stderr.to_owned(),
        ..LoadError::new(source, message)
    };
    let (component, outcome) = entry.component(engine, bytes).map_err(&refuse)?;
    let pre = link(linker, &component).map_err(&refuse)?;
    let code_bytes = code_size(&component);
    if let GuestPre::Typed(_) = &pre {
        let reflected = crate::wasm::typed::reflect(engine, &component, bytes).map_err(&refuse)?;
        return Ok((
            Loaded::Typed(LoadedTyped {
                pre,
                reflected,
                code_bytes,
            }),
            outcome,
        ));
    }
    let limits = Limits {
        timeout: DESCRIBE_TIMEOUT,
        ..Limits::default()
    };
    // What it offers beside a tool, read (and checked) first: a provider has no tool.
    let (offers, stderr) = instance::describe_offers(engine, &pre, &limits).await;
    let offers = offers
        .and_then(|offers| offers.map(Offers::checked).transpose())
        .map_err(|why| refuse_described(why, &stderr))?;
    if let Some(offering) = pre.offering()
        && offering.tool.is_none()
    {
        let offers = offers.unwrap_or_default();
        if offers.is_empty() {
            return Err(refuse(
                "it exports the provider interfaces, but offers no prompt, resource, template \
                 or completion"
                    .to_owned(),
            ));
        }
        return Ok((
            Loaded::Provider(LoadedProvider {
                pre,
                offers,
                code_bytes,
            }),
            outcome,
        ));
    }
    let (described, stderr) = instance::describe(engine, &pre, &limits).await;
    let info = described.map_err(|why| refuse_described(why, &stderr))?;
    let info = ToolInfo::from_guest(info).map_err(|why| refuse_described(why, &stderr))?;
    let schema = ArgumentSchema::compile_bounded(&info.input_schema)
        .await
        .map_err(|why| refuse(format!("tool {:?}: {why}", info.name)))?;
    let output = match &info.output_schema {
        Some(output) => Some(
            ArgumentSchema::compile_bounded_for(output, Subject::Result)
                .await
                .map_err(|why| refuse(format!("tool {:?}: {why}", info.name)))?,
        ),
        None => None,
    };
    Ok((
        Loaded::Contract(Box::new(LoadedTool {
            info,
            pre,
            schema,
            output,
            code_bytes,
            offers,
        })),
        outcome,
    ))
}

/// How much memory a component's compiled code takes: its image, as mapped.
pub(crate) fn code_size(component: &Component) -> usize {
    let range = component.image_range();
    (range.end as usize).saturating_sub(range.start as usize)
}

/// Link `component` against the host: a component of the contract's tool interface (any
/// version), or else one of plain typed exports, each function of which may be a tool. An
/// import the host does not provide is named, here, at load.
pub(crate) fn link(
    linker: &Linker<CallState>,
    component: &Component,
) -> Result<GuestPre<CallState>, String> {
    let instance_pre = linker.instantiate_pre(component).map_err(|error| {
        let engine = component.engine();
        let unknown = component
            .component_type()
            .imports(engine)
            .map(|(name, _)| name.to_owned())
            .find(|name| !PROVIDED.iter().any(|known| provided(known, name)));
        match unknown {
            Some(name) => format!(
                "it imports {}, which toolcell does not provide ({error:#})",
                crate::call::names::echoed(&name)
            ),
            None => format!("it imports something toolcell does not provide: {error:#}"),
        }
    })?;
    match GuestPre::new(instance_pre.clone()) {
        Ok(pre) => Ok(pre),
        Err(contract) => crate::wasm::typed::TypedPre::new(component, instance_pre)
            .map(GuestPre::Typed)
            .ok_or_else(|| {
                format!(
                    "it exports neither the toolcell:tool/tool interface (0.4.0, 0.3.0, \
                     0.2.0 or 0.1.0: {contract:#}) nor any function"
                )
            }),
    }
}

/// Whether the import `name` (`wasi:http/types@0.2.3`) is of the interface `known`
/// (`wasi:http/types`) at a version the host's links satisfy: any 0.2.x of a WASI interface
/// (the linker matches them by their major and minor), or exactly the versions listed.
fn provided(known: &str, name: &str) -> bool {
    match name.split_once('@') {
        Some((interface, version)) => {
            let (base, versions) = known.split_once('@').unwrap_or((known, "0.2"));
            interface == base
                && versions.split('|').any(|accepted| {
                    version == accepted || version.starts_with(&format!("{accepted}."))
                })
        }
        None => name == known,
    }
}
