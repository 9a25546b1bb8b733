//! Components as they are: a component that does not export toolcell's contract is read by its
//! WIT types, and every function it exports is a tool (DESIGN: "Two kinds of component").
//!
//! At load, [`reflect`] walks the component's exports (the world's own functions and those of
//! its exported interfaces, nested instances included), makes each function's [`Shape`]s
//! once, and describes it as a tool: its name by the ecosystem's rule (`names.rs`), its
//! description from the component's `package-docs` or a generated sentence (`docs.rs`), its
//! input schema an object with one property per parameter, all required and no other, and its
//! output schema the result's wrapped as `{"result": ...}` (MCP wants an object). A function
//! that takes or returns what JSON cannot carry (a resource handle, an async type) is left
//! out, with the reason, and the others load.
//!
//! Per call, [`call`] converts the checked arguments to component values (`value.rs`), calls
//! the function in the fresh instance the executor made, and converts its result back: a
//! `string` is the text, any other value is JSON, and a `result<T, E>` whose `err` came back is
//! the tool's failure, its payload the text the model reads. A trap is a crash, as for any
//! tool. The function is found by the export index [`TypedPre`] resolved when the code was
//! linked (an index belongs to the compiled code it came from, and code is linked again after
//! it was dropped under the memory budget).

pub(crate) mod docs;
pub(crate) mod names;
pub(crate) mod shape;
pub(crate) mod value;

use crate::call::content::Part;
use crate::tool::info::ToolInfo;
use serde_json::{Map, Value, json};
use shape::{MAX_SHAPE_NODES, Shape};
use std::collections::HashMap;
use std::sync::Arc;
use wasmtime::component::types::ComponentItem;
use wasmtime::component::{Component, ComponentExportIndex, InstancePre, Val};
use wasmtime::{AsContextMut, Engine};

/// The most functions one component may export: a component of tools exports a few; past this
/// the component is refused at load (a hostile one of 10,000 exports would otherwise make
/// 10,000 tools, schemas and registry entries).
pub const MAX_TYPED_FUNCTIONS: usize = 256;

/// How deep exported instances may nest (an interface in an instance in an instance...).
pub const MAX_INSTANCE_DEPTH: usize = 8;

/// The most bytes one call to a typed function may move from the guest to the host at once
/// (its result, or what it hands one host call), as wasmtime counts it (each lifted value is
/// counted at its size in host memory): a result larger than this (a 100 MB list) is refused
/// while it is lifted, before the host holds it, as a failure the model reads. A result is
/// capped far below this anyway (`--cap`, 64 KiB by default).
pub const MAX_TYPED_TRANSFER_BYTES: usize = 16 << 20;

/// One exported function, served as a tool.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct TypedFunction {
    /// Where it is: its instances' export names, then its own name.
    pub(crate) path: Vec<String>,
    /// Its parameters, by name, in order.
    pub(crate) params: Vec<(String, Shape)>,
    /// What it returns, if anything.
    pub(crate) result: Option<Shape>,
    /// It, as a tool.
    pub(crate) info: ToolInfo,
}

/// A function left out of a component's tools, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeftOut {
    /// Where it is, as WIT names it (`fetch`, `local:time-server/time#get-current-time`).
    pub function: String,
    /// Why it is not served.
    pub why: String,
}

/// What a typed component offers: its functions as tools, and those left out.
#[derive(Debug)]
pub(crate) struct Reflected {
    pub(crate) functions: Vec<Arc<TypedFunction>>,
    pub(crate) left_out: Vec<LeftOut>,
}

/// What the cache's index keeps of a typed component ([`Reflected`], by value): a later start
/// serves its tools from this, and compiles nothing until one is called.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Indexed {
    pub(crate) functions: Vec<TypedFunction>,
    pub(crate) left_out: Vec<LeftOut>,
}

impl Indexed {
    /// What the index keeps of `reflected`.
    pub(crate) fn of(reflected: &Reflected) -> Indexed {
        Indexed {
            functions: reflected
                .functions
                .iter()
                .map(|function| TypedFunction::clone(function))
                .collect(),
            left_out: reflected.left_out.clone(),
        }
    }

    /// It, as a load reads it; `None` if a function's description no longer passes the checks
    /// a component's does at load (the index was written by another toolcell).
    pub(crate) fn reflected(self) -> Option<Reflected> {
        let functions = self
            .functions
            .into_iter()
            .map(|mut function| {
                function.info = function.info.checked().ok()?;
                Some(Arc::new(function))
            })
            .collect::<Option<Vec<_>>>()?;
        (!functions.is_empty()).then_some(Reflected {
            functions,
            left_out: self.left_out,
        })
    }
}

/// A typed component ready to instantiate, with each function's export index.
pub(crate) struct TypedPre<T: 'static> {
    pre: InstancePre<T>,
    exports: Arc<HashMap<Vec<String>, ComponentExportIndex>>,
}

impl<T: 'static> Clone for TypedPre<T> {
    fn clone(&self) -> Self {
        TypedPre {
            pre: self.pre.clone(),
            exports: Arc::clone(&self.exports),
        }
    }
}

impl<T: Send + 'static> TypedPre<T> {
    /// `pre`, the instance of `component`, with the export index of every function it exports
    /// (any at all: which are served is [`reflect`]'s to say); `None` when it exports none.
    pub(crate) fn new(component: &Component, pre: InstancePre<T>) -> Option<TypedPre<T>> {
        let engine = component.engine();
        let mut exports = HashMap::new();
        let mut paths = Vec::new();
        walk(
            engine,
            exports_of(component),
            &mut Vec::new(),
            0,
            &mut |path, _| paths.push(path.to_vec()),
        );
        for path in paths {
            let mut index: Option<ComponentExportIndex> = None;
            for part in &path {
                index = component.get_export_index(index.as_ref(), part);
                if index.is_none() {
                    break;
                }
            }
            if let Some(index) = index {
                exports.insert(path, index);
            }
        }
        (!exports.is_empty()).then(|| TypedPre {
            pre,
            exports: Arc::new(exports),
        })
    }

    /// Instantiate it in `store` and call `function` with `arguments` (a JSON object, checked
    /// against its schema): its parts, or the tool's error (arguments that do not convert, or
    /// an `err` it returned), or a trap.
    pub(crate) async fn call(
        &self,
        mut store: impl AsContextMut<Data = T>,
        function: &TypedFunction,
        arguments: &str,
    ) -> wasmtime::Result<Result<Vec<Part>, ToolError>> {
        let params = match params_of(function, arguments) {
            Ok(params) => params,
            Err(why) => return Ok(Err(ToolError::InvalidInput(why))),
        };
        let Some(index) = self.exports.get(&function.path) else {
            return Ok(Err(ToolError::Failed(format!(
                "{} is not exported by this component's code",
                shown_path(&function.path)
            ))));
        };
        store
            .as_context_mut()
            .set_hostcall_fuel(MAX_TYPED_TRANSFER_BYTES);
        let instance = self.pre.instantiate_async(&mut store).await?;
        let Some(func) = instance.get_func(&mut store, index) else {
            return Ok(Err(ToolError::Failed(format!(
                "{} is not a function of this component",
                shown_path(&function.path)
            ))));
        };
        let mut results = vec![Val::Bool(false); usize::from(function.result.is_some())];
        func.call_async(&mut store, &params, &mut results).await?;
        Ok(answer(function.result.as_ref(), results.pop()))
    }
}

/// The component values of `arguments` for `function`'s parameters, in order.
fn params_of(function: &TypedFunction, arguments: &str) -> Result<Vec<Val>, String> {
    let value: Value = serde_json::from_str(arguments)
        .map_err(|error| format!("the arguments are not JSON: {error}"))?;
    params_of_value(function, &value)
}

/// `arguments` (a parsed call's arguments) made `function`'s parameters, in their order.
fn params_of_value(function: &TypedFunction, arguments: &Value) -> Result<Vec<Val>, String> {
    let Value::Object(object) = arguments else {
        return Err("the arguments are not a JSON object".to_owned());
    };
    let mut params = Vec::with_capacity(function.params.len());
    let mut at = String::new();
    for (name, shape) in &function.params {
        let value = object.get(name).unwrap_or(&Value::Null);
        params.push(value::nested(&mut at, name, |at| {
            value::to_val(shape, value, at)
        })?);
    }
    Ok(params)
}

/// `arguments` made `function`'s parameters and each made JSON again (the benchmark's and the
/// checks' view of a call's conversions, both ways: `fuzzing.rs`).
#[cfg(feature = "fuzzing")]
pub(crate) fn round_trip(function: &TypedFunction, arguments: &Value) -> Result<Value, String> {
    let params = params_of_value(function, arguments)?;
    Ok(Value::Object(
        function
            .params
            .iter()
            .zip(params)
            .map(|((name, shape), value)| (name.clone(), value::to_json(shape, value)))
            .collect(),
    ))
}

/// Why a typed function's call has no parts: as the contract's `tool-error` says it
/// (`wasm::bindings` maps it to that), kept here so that this module needs nothing of the
/// contract's bindings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToolError {
    /// The arguments do not convert to the function's parameters.
    InvalidInput(String),
    /// The function returned an `err`, or is not what the load read.
    Failed(String),
}

/// What a function's return value answers: a string is the text; nothing, an empty text; an
/// `err` of a `result`, the tool's failure; anything else (and an `ok`'s payload but a
/// string), `{"result": value}` as JSON.
fn answer(shape: Option<&Shape>, value: Option<Val>) -> Result<Vec<Part>, ToolError> {
    let (Some(shape), Some(value)) = (shape, value) else {
        return Ok(Vec::new());
    };
    match (shape, value) {
        (Shape::Result(ok, err), Val::Result(outcome)) => match outcome {
            Ok(payload) => Ok(plain(ok.as_deref(), payload.map(|v| *v))),
            Err(payload) => Err(ToolError::Failed(match (err.as_deref(), payload) {
                (Some(Shape::String), Some(value)) => match *value {
                    Val::String(text) => text,
                    other => value::to_json(&Shape::String, other).to_string(),
                },
                (Some(shape), Some(value)) => value::to_json(shape, *value).to_string(),
                _ => "the function returned an error".to_owned(),
            })),
        },
        (shape, value) => Ok(plain(Some(shape), Some(value))),
    }
}

/// A value as the tool's answer: a string as text, nothing as no text, else `{"result": v}`.
fn plain(shape: Option<&Shape>, value: Option<Val>) -> Vec<Part> {
    match (shape, value) {
        (_, None) | (None, _) => Vec::new(),
        (_, Some(Val::String(text))) => vec![Part::text(text)],
        (Some(shape), Some(value)) => {
            let mut object = Map::new();
            object.insert("result".to_owned(), value::to_json(shape, value));
            vec![Part::text(Value::Object(object).to_string())]
        }
    }
}

/// The schema of a function's structured result (`{"result": ...}`), if it has one: not for a
/// string, nothing, or a `result` whose `ok` is one of those.
fn output_schema(result: Option<&Shape>) -> Option<Value> {
    let value = match result? {
        Shape::String => return None,
        Shape::Result(ok, _) => match ok.as_deref() {
            None | Some(Shape::String) => return None,
            Some(shape) => shape,
        },
        shape => shape,
    };
    Some(json!({
        "type": "object",
        "properties": { "result": value.schema() },
        "required": ["result"],
        "additionalProperties": false
    }))
}

/// `a:b/c#f`: a function's path as WIT tools write it.
fn shown_path(path: &[String]) -> String {
    match path {
        [function] => function.clone(),
        [instances @ .., function] => format!("{}#{function}", instances.join("/")),
        [] => String::new(),
    }
}

/// Call `found` with the path and type of every function among `items` (the exports of a
/// component or of an instance under `prefix`), through nested instances up to
/// [`MAX_INSTANCE_DEPTH`].
fn walk(
    engine: &Engine,
    items: Vec<(String, ComponentItem)>,
    prefix: &mut Vec<String>,
    depth: usize,
    found: &mut dyn FnMut(&[String], &wasmtime::component::types::ComponentFunc),
) {
    for (name, item) in items {
        prefix.push(name);
        match item {
            ComponentItem::ComponentFunc(func) => found(prefix, &func),
            ComponentItem::ComponentInstance(instance) if depth < MAX_INSTANCE_DEPTH => {
                let inner = instance
                    .exports(engine)
                    .map(|(name, item)| (name.to_owned(), item.ty))
                    .collect();
                walk(engine, inner, prefix, depth + 1, found);
            }
            _ => {}
        }
        prefix.pop();
    }
}

/// What `component` exports, by name, as [`walk`] reads it.
fn exports_of(component: &Component) -> Vec<(String, ComponentItem)> {
    let engine = component.engine();
    component
        .component_type()
        .exports(engine)
        .map(|(name, item)| (name.to_owned(), item.ty))
        .collect()
}

/// The tools of `component` (its bytes are `bytes`, for the docs it carries), and the functions
/// left out with their reasons; or why the component cannot be served at all (too many
/// functions, docs that cannot be read, nothing to serve).
pub(crate) fn reflect(
    engine: &Engine,
    component: &Component,
    bytes: &[u8],
) -> Result<Reflected, String> {
    let docs = docs::Docs::read(bytes)?;
    let mut functions: Vec<Arc<TypedFunction>> = Vec::new();
    let mut left_out = Vec::new();
    let mut seen = 0usize;
    let mut names: HashMap<String, String> = HashMap::new();
    let mut component_budget = shape::MAX_COMPONENT_SHAPE_NODES;
    walk(
        engine,
        exports_of(component),
        &mut Vec::new(),
        0,
        &mut |path, func| {
            seen += 1;
            if seen > MAX_TYPED_FUNCTIONS {
                return;
            }
            match describe(path, func, &docs, &mut component_budget) {
                Ok(function) => {
                    let shown = shown_path(path);
                    if let Some(first) = names.get(&function.info.name) {
                        left_out.push(LeftOut {
                            function: crate::call::names::echoed(&shown),
                            why: format!(
                                "its tool name {} is {}'s already (the first export of a name \
                                 is served)",
                                function.info.name,
                                crate::call::names::echoed(first)
                            ),
                        });
                    } else {
                        names.insert(function.info.name.clone(), shown);
                        functions.push(Arc::new(function));
                    }
                }
                Err(why) => left_out.push(LeftOut {
                    function: crate::call::names::echoed(&shown_path(path)),
                    why,
                }),
            }
        },
    );
    if seen > MAX_TYPED_FUNCTIONS {
        return Err(format!(
            "it exports {seen} functions or more; toolcell serves at most {MAX_TYPED_FUNCTIONS} \
             from one component"
        ));
    }
    if functions.is_empty() {
        let why = match left_out.first() {
            Some(first) => format!(
                "none of its functions can be served ({}: {})",
                first.function, first.why
            ),
            None => "it exports no function".to_owned(),
        };
        return Err(why);
    }
    Ok(Reflected {
        functions,
        left_out,
    })
}

/// `func`, at `path`, as a tool: its shapes, its schemas, its name and description; or why it
/// cannot be served.
fn describe(
    path: &[String],
    func: &wasmtime::component::types::ComponentFunc,
    docs: &docs::Docs,
    component_budget: &mut usize,
) -> Result<TypedFunction, String> {
    let Some(own) = path.last() else {
        return Err("it has no name".to_owned());
    };
    if own.starts_with('[') {
        return Err(
            "it is a resource's constructor, method or static function: resources cannot be \
             sent as JSON"
                .to_owned(),
        );
    }
    if path
        .iter()
        .any(|part| part.len() > shape::MAX_WIT_NAME_BYTES)
    {
        return Err(format!(
            "its name has more than {} bytes",
            shape::MAX_WIT_NAME_BYTES
        ));
    }
    if func.async_() {
        return Err("it is an async function, which toolcell does not call".to_owned());
    }
    let mut budget = MAX_SHAPE_NODES;
    let mut params = Vec::new();
    for (name, ty) in func.params() {
        if name.len() > shape::MAX_WIT_NAME_BYTES {
            return Err(format!(
                "a parameter's name has more than {} bytes",
                shape::MAX_WIT_NAME_BYTES
            ));
        }
        let shape =
            Shape::of(&ty, &mut budget).map_err(|why| format!("its parameter `{name}`: {why}"))?;
        params.push((name.to_owned(), shape));
    }
    let result = match func.results().next() {
        Some(ty) => Some(Shape::of(&ty, &mut budget).map_err(|why| format!("its result: {why}"))?),
        None => None,
    };
    let used = MAX_SHAPE_NODES - budget;
    if used > *component_budget {
        return Err(format!(
            "its component's types are larger than toolcell serves ({} types, fields and cases \
             over all its functions)",
            shape::MAX_COMPONENT_SHAPE_NODES
        ));
    }
    *component_budget -= used;
    let function_docs = docs.function(path);
    let mut properties = Map::new();
    for (name, shape) in &params {
        let mut schema = shape.schema();
        let described = function_docs
            .as_deref()
            .and_then(|text| docs::parameter(text, name))
            .unwrap_or_else(|| format!("`{name}`: {}.", shape.phrase()));
        if let Value::Object(schema) = &mut schema {
            schema.insert("description".to_owned(), Value::String(described));
        }
        properties.insert(name.clone(), schema);
    }
    let required: Vec<&str> = params.iter().map(|(name, _)| name.as_str()).collect();
    let input_schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    });
    let description = function_docs.unwrap_or_else(|| generated(path, &params, result.as_ref()));
    let output = output_schema(result.as_ref());
    // Held to what a contract tool's schema is held to at load.
    for schema in std::iter::once(&input_schema).chain(output.as_ref()) {
        let bytes = schema.to_string().len();
        if bytes > crate::tool::info::MAX_SCHEMA_TEXT_BYTES {
            return Err(format!(
                "its schema would be {bytes} bytes of text; at most {} are served",
                crate::tool::info::MAX_SCHEMA_TEXT_BYTES
            ));
        }
    }
    let mut info = ToolInfo::new(names::tool_name(path), description, input_schema);
    info.output_schema = output;
    let info = info.checked()?;
    Ok(TypedFunction {
        path: path.to_vec(),
        params,
        result,
        info,
    })
}

/// A description for a function whose component says nothing of it.
fn generated(path: &[String], params: &[(String, Shape)], result: Option<&Shape>) -> String {
    let takes = if params.is_empty() {
        "takes nothing".to_owned()
    } else {
        format!(
            "takes {}",
            params
                .iter()
                .map(|(name, shape)| format!("`{name}` ({})", shape.phrase()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let returns = match result {
        None => "returns nothing".to_owned(),
        Some(Shape::Result(ok, _)) => format!(
            "returns {} or an error",
            ok.as_deref().map_or("nothing".to_owned(), Shape::phrase)
        ),
        Some(shape) => format!("returns {}", shape.phrase()),
    };
    format!(
        "Calls the component's `{}`: it {takes} and {returns}.",
        shown_path(path)
    )
}

/// The capabilities a call of a typed tool is checked for, from its policy: the ones it names
/// (`capabilities`, each on a fixed resource or on one an argument names, decided per call),
/// and, for each kind it has a rule for (its own, or its `policy.yaml`'s) but names no
/// capability of, every resource the rule names: its read roots, its hosts (the network rule's
/// list, whole), its variables and keys, the clock. A rule that denies adds nothing. Write roots
/// add nothing either: toolcell never grants a directory for writing, so a write needs a path
/// parameter tied to `filesystem.write`, and then the rule's roots decide each call's file. A
/// tool with any file system capability tied to a parameter gets no directory from its rules:
/// the files its calls name are all it reaches. Such a component says nothing of what it
/// needs: the operator's word is all there is.
pub(crate) fn capabilities_of(
    policy: &crate::policy::ToolPolicy,
) -> Vec<crate::tool::info::Capability> {
    use crate::tool::info::{Capability, CapabilityKind as Kind, ResourceRef};
    let mut capabilities = policy.capabilities.clone();
    for kind in [
        Kind::FilesystemRead,
        Kind::FilesystemWrite,
        Kind::Network,
        Kind::Env,
        Kind::Config,
        Kind::Clock,
    ] {
        let tied_files = |named: &Capability| {
            matches!(named.kind, Kind::FilesystemRead | Kind::FilesystemWrite)
                && matches!(kind, Kind::FilesystemRead | Kind::FilesystemWrite)
        };
        if capabilities
            .iter()
            .any(|named| named.kind == kind || tied_files(named))
        {
            continue;
        }
        let Some(rule) = policy.rules.get(&kind) else {
            continue;
        };
        if rule.access == crate::policy::Access::Deny {
            continue;
        }
        let on = |target| Capability { kind, target };
        match kind {
            Kind::FilesystemRead => {
                capabilities.extend(rule.roots.iter().map(|root| {
                    on(if root == "." {
                        ResourceRef::Whole
                    } else {
                        ResourceRef::Fixed(root.clone())
                    })
                }));
            }
            Kind::Network if !rule.hosts.is_empty() => capabilities.push(on(ResourceRef::Whole)),
            Kind::Env | Kind::Config => capabilities.extend(
                rule.vars
                    .iter()
                    .map(|var| on(ResourceRef::Fixed(var.clone()))),
            ),
            Kind::Clock => capabilities.push(on(ResourceRef::Whole)),
            _ => {}
        }
    }
    capabilities
}
