//! The crate-internal items the fuzz checks reach, wrapped: the gate's path resolution, a
//! tool's argument schema as the loader compiles it and a call checks it, a policy's file
//! rules. Compiled only with the `fuzzing` feature; not for embedders.
//!
//! The checks themselves (one `check_<target>` per fuzz target, the properties every input
//! must keep) live in `tests/fuzz-checks` (`toolcell-fuzz-checks`), which the fuzz targets in
//! `fuzz/` and the replay of every seed and reproducer call. Only what they cannot reach
//! through the public API is here.

use crate::gate;
use crate::gate::workspace::Workspace;
use crate::policy::Policy;
use crate::tool::info::ToolInfo;
use crate::validate::{ArgumentSchema, Checked};
use serde_json::Value;
use std::path::PathBuf;

/// The depth of a JSON value (what the MCP fast path compares with rmcp's parse).
pub use crate::tool::schema::json_depth;
/// The stack the host's validation threads have (where a big check runs).
pub use crate::validate::VALIDATION_STACK_BYTES;

/// A policy's file rules, as their `Debug` text: two parses of one policy give the same.
pub fn file_rules(policy: &Policy) -> String {
    format!("{:?}", policy.files())
}

/// A path the gate resolved inside a workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// Canonical, relative to the workspace ("" for the workspace itself).
    pub path: PathBuf,
    /// The directory the gate would preopen: the path if it is a directory, else its parent.
    pub dir: PathBuf,
}

/// The gate's path resolution: resolve `requested` inside `workspace`, or say why it may not
/// be used.
pub fn resolve(workspace: &Workspace, requested: &str) -> Result<ResolvedPath, String> {
    gate::resolve(workspace, requested).map(|resolved| ResolvedPath {
        path: resolved.path,
        dir: resolved.dir,
    })
}

/// A tool's compiled argument schema.
pub struct CompiledSchema(ArgumentSchema);

/// Check and compile a tool's schema as the loader does with what a component's `describe()`
/// returned: `ToolInfo::from_guest` (the text's size, JSON, the checks every description
/// gets), then `ArgumentSchema::compile` (the schema's limits, then the compile). The error
/// says why the tool would be refused.
pub fn compile_schema_text(schema_text: &str) -> Result<CompiledSchema, String> {
    let info = ToolInfo::from_guest(crate::wasm::bindings::Info {
        name: "fuzz".to_owned(),
        description: "A fuzzed schema.".to_owned(),
        input_schema: schema_text.to_owned(),
        read_only: true,
        concurrency_safe: true,
        capabilities: Vec::new(),
        output_schema: None,
        client_needs: Vec::new(),
    })?;
    ArgumentSchema::compile_for(&info.input_schema, crate::validate::Subject::Arguments)
        .map(CompiledSchema)
}

/// What checking arguments as a call does came to.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckedArguments {
    /// They fit; here they are, parsed.
    Valid(Value),
    /// They do not (or are not JSON); why.
    Invalid(String),
    /// The deadline passed first.
    TimedOut,
    /// The stop token was stopped first.
    Stopped,
}

impl CompiledSchema {
    /// Parse `arguments` and check them here, to the end; returns them parsed.
    pub fn check(&self, tool: &str, arguments: &str) -> Result<Value, String> {
        self.0.check(tool, arguments)
    }

    /// Whether the validator's yes-or-no walk (a call's verdict) and the walk that names the
    /// violations (its error) agree on `value`.
    pub fn walks_agree(&self, value: &Value) -> bool {
        self.0.walks_agree(value)
    }

    /// Check `arguments` as the pipeline does, as a call's first stage: here if the work is
    /// small, else on the blocking pool of `pool` (whose threads must have
    /// [`VALIDATION_STACK_BYTES`](crate::validate::VALIDATION_STACK_BYTES) of stack), until `deadline`.
    pub async fn check_as_called(
        &self,
        pool: &tokio::runtime::Handle,
        tool: &str,
        arguments: &str,
        deadline: std::time::Instant,
    ) -> CheckedArguments {
        match self
            .0
            .check_within(pool, tool, arguments, deadline, None)
            .await
        {
            Checked::Valid(value) => CheckedArguments::Valid(value),
            Checked::Invalid(why) => CheckedArguments::Invalid(why),
            Checked::TimedOut => CheckedArguments::TimedOut,
            Checked::Stopped => CheckedArguments::Stopped,
        }
    }
}

/// One function of a component of plain typed exports, as a load reads it: for the benchmark of
/// the conversion between JSON and component values, and its checks.
pub struct TypedConversion(std::sync::Arc<crate::wasm::typed::TypedFunction>);

impl TypedConversion {
    /// The function served as the tool `tool` from the component `bytes` (compiled with a
    /// default engine): why not, if it cannot be.
    pub fn of(bytes: &[u8], tool: &str) -> Result<TypedConversion, String> {
        let engine = wasmtime::Engine::default();
        let component = wasmtime::component::Component::new(&engine, bytes)
            .map_err(|error| format!("{error:#}"))?;
        let reflected = crate::wasm::typed::reflect(&engine, &component, bytes)?;
        reflected
            .functions
            .into_iter()
            .find(|function| function.info.name == tool)
            .map(TypedConversion)
            .ok_or_else(|| format!("no function is served as {tool}"))
    }

    /// `arguments` (a call's parsed JSON object) made the function's parameters as component
    /// values, as a call makes them, and each made JSON again, as a result is: the object of
    /// the parameters' values, or why the arguments do not fit.
    pub fn round_trip(&self, arguments: &Value) -> Result<Value, String> {
        crate::wasm::typed::round_trip(&self.0, arguments)
    }
}
