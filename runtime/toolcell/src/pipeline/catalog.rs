//! What a runtime's tools are at one moment ([`Catalog`]), each [`Tool`] as the pipeline
//! knows it, and what finds them ([`Loader`], whose work is in `loader/`).

use crate::call::registry::Registry;
use crate::pipeline::native::NativeTool;
use crate::pipeline::source::ComponentSource;
use crate::policy::{Policy, ToolPolicy};
use crate::tool::info::ToolInfo;
use crate::tool::offer::{Offers, PromptInfo, Reference, ResourceInfo, Template, TemplateInfo};
use crate::validate::ArgumentSchema;
use crate::wasm::cache::CompileCache;
use crate::wasm::lazy::LazyCode;
use crate::wasm::offering::Operation;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

/// What runs a tool's calls.
pub(crate) enum Executable {
    /// A component, instantiated afresh for every call; its code loaded on its first call.
    Wasm(Arc<LazyCode>),
    /// One function of a component of plain typed exports (`wasm/typed/`): the component
    /// instantiated afresh for every call, that function called. The component's tools share
    /// its code.
    Typed(Arc<LazyCode>, Arc<crate::wasm::typed::TypedFunction>),
    /// The host's own Rust tool.
    Native(Arc<dyn NativeTool>),
    /// A request of what a component offers beside tools: a prompt's `get`, a resource's or a
    /// template's `read`, a completion. Never a tool: its name holds a `:`, which no tool's
    /// may, and it is kept apart from the tools ([`Catalog::offers`]).
    Offer(Arc<LazyCode>, Arc<Offer>),
}

/// One thing a component offers, as the catalog keeps it: what runs, and what is listed.
pub(crate) struct Offer {
    pub(crate) operation: Operation,
    pub(crate) listed: Listed,
}

/// What an offer is, as MCP lists it.
pub(crate) enum Listed {
    Prompt(PromptInfo),
    Resource(ResourceInfo),
    Template(TemplateInfo, Template),
    /// Completion of a prompt's arguments or a template's variables.
    Completion,
}

impl Offer {
    /// The catalog's key of each thing `offers` holds, with it: `prompt:NAME`,
    /// `resource:URI`, `template:NAME`, and `completion:prompt:NAME` /
    /// `completion:template:NAME` for a component that completes.
    pub(crate) fn all_of(offers: &Offers) -> Vec<(String, Offer)> {
        let mut all = Vec::new();
        for prompt in &offers.prompts {
            all.push((
                format!("prompt:{}", prompt.name),
                Offer {
                    operation: Operation::Prompt(prompt.name.clone()),
                    listed: Listed::Prompt(prompt.clone()),
                },
            ));
            if offers.completes {
                all.push((
                    format!("completion:prompt:{}", prompt.name),
                    Offer {
                        operation: Operation::Complete(Reference::Prompt(prompt.name.clone())),
                        listed: Listed::Completion,
                    },
                ));
            }
        }
        for resource in &offers.resources {
            all.push((
                format!("resource:{}", resource.uri),
                Offer {
                    operation: Operation::Read,
                    listed: Listed::Resource(resource.clone()),
                },
            ));
        }
        for template in &offers.templates {
            // Checked when the offers were; a template that no longer parses is left out.
            let Ok(parsed) = Template::parse(&template.uri_template) else {
                continue;
            };
            all.push((
                format!("template:{}", template.name),
                Offer {
                    operation: Operation::Read,
                    listed: Listed::Template(template.clone(), parsed),
                },
            ));
            if offers.completes {
                all.push((
                    format!("completion:template:{}", template.name),
                    Offer {
                        operation: Operation::Complete(Reference::ResourceTemplate(
                            template.uri_template.clone(),
                        )),
                        listed: Listed::Completion,
                    },
                ));
            }
        }
        all
    }

    /// What the pipeline knows this offer by: its key, a description, and the schema its
    /// requests' arguments are validated against. It declares no capability: what a component
    /// offers runs with no authority at all.
    pub(crate) fn info(&self, key: &str) -> ToolInfo {
        let (description, schema) = match &self.listed {
            Listed::Prompt(prompt) => (
                prompt.description.clone().unwrap_or_default(),
                prompt.arguments_schema(),
            ),
            Listed::Resource(resource) => (
                resource.description.clone().unwrap_or_default(),
                read_schema(),
            ),
            Listed::Template(template, _) => (
                template.description.clone().unwrap_or_default(),
                read_schema(),
            ),
            Listed::Completion => (String::new(), completion_schema()),
        };
        let mut info = ToolInfo::new(key, description, schema);
        info.read_only = true;
        info.concurrency_safe = true;
        // A prompt talks to its client as a tool does, in the ways it declared.
        if let Listed::Prompt(prompt) = &self.listed {
            for need in &prompt.client_needs {
                info.capabilities.push(crate::tool::info::Capability {
                    kind: need.kind,
                    target: crate::tool::info::ResourceRef::Whole,
                });
                if need.required {
                    info.required_client.push(need.kind);
                }
            }
        }
        info
    }
}

/// The arguments of a read: the URI, and what a template's variables matched.
fn read_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "uri": { "type": "string", "maxLength": crate::call::content::MAX_URI_BYTES },
            "variables": {
                "type": "object",
                "additionalProperties": { "type": "string" },
            },
        },
        "required": ["uri", "variables"],
        "additionalProperties": false,
    })
}

/// The arguments of a completion: the argument's name, what was typed, and the arguments
/// given already.
fn completion_schema() -> serde_json::Value {
    let limit = crate::tool::offer::MAX_ARGUMENT_VALUE_BYTES;
    serde_json::json!({
        "type": "object",
        "properties": {
            "argument": { "type": "string", "maxLength": crate::tool::offer::MAX_OFFER_NAME_CHARS },
            "value": { "type": "string", "maxLength": limit },
            "context": {
                "type": "object",
                "additionalProperties": { "type": "string", "maxLength": limit },
                "maxProperties": crate::tool::offer::MAX_PROMPT_ARGUMENTS,
            },
        },
        "required": ["argument", "value", "context"],
        "additionalProperties": false,
    })
}

/// One tool as the pipeline knows it: what it says about itself, its compiled schema, its
/// policy, where it came from, and what runs it.
pub(crate) struct Tool {
    pub(crate) info: ToolInfo,
    /// Its schemas, compiled: at load for a tool described then, on its first call for one
    /// known from the cache's index (whose schemas compiled when it was described).
    pub(crate) schemas: tokio::sync::OnceCell<Schemas>,
    pub(crate) policy: ToolPolicy,
    pub(crate) source: String,
    /// A component's sha256 (lowercase hex); none for a native tool.
    pub(crate) digest: Option<String>,
    /// For a tool pulled from a registry, the artifact's digest (what its signatures sign).
    pub(crate) artifact: Option<String>,
    /// Who signed it, as verified at load (empty when the policy required no signature).
    pub(crate) signers: Vec<String>,
    pub(crate) executable: Executable,
}

/// A tool's compiled schemas.
pub(crate) struct Schemas {
    /// Its arguments' schema.
    pub(crate) input: ArgumentSchema,
    /// Its output schema, if it declared one: every result is checked against it.
    pub(crate) output: Option<ArgumentSchema>,
}

impl Schemas {
    /// The schemas `info` declares, compiled within the limits every tool's are.
    pub(crate) async fn compile(info: &ToolInfo) -> Result<Schemas, String> {
        let input = ArgumentSchema::compile_bounded(&info.input_schema)
            .await
            .map_err(|why| format!("tool {:?}: {why}", info.name))?;
        let output = match &info.output_schema {
            Some(output) => Some(
                ArgumentSchema::compile_bounded_for(output, crate::validate::Subject::Result)
                    .await
                    .map_err(|why| format!("tool {:?}: {why}", info.name))?,
            ),
            None => None,
        };
        Ok(Schemas { input, output })
    }
}

impl Tool {
    /// Its compiled schemas (compiled now if they were not yet).
    pub(crate) async fn schemas(&self) -> Result<&Schemas, String> {
        self.schemas
            .get_or_try_init(|| Schemas::compile(&self.info))
            .await
    }
}

/// The tools a runtime serves at one moment: a call takes the catalog as it stands when it
/// starts and finishes with it, whatever a reload swaps in meanwhile.
#[derive(Default)]
pub(crate) struct Catalog {
    pub(crate) registry: Arc<Registry>,
    pub(crate) tools: ByName,
    /// What the components offer beside tools, by key (see [`Offer::all_of`]): never found by
    /// a tool's name, so a `tools/call` cannot reach one.
    pub(crate) offers: ByName,
}

/// Tools (or offers) by name, hashed with foldhash: a call's lookup by name is on every call's
/// path, where SipHash was a visible share of a small call. The keys are the components' (a
/// tool's name from its `describe()` or its exports, an offer's key from its declarations),
/// inserted only when the catalog is built; a caller's name is only looked up. A hostile
/// component cannot flood a table: its names are bounded in number (`tool/offer.rs`,
/// `wasm/typed`), and each table's seed is random per process and per table, never seen by a
/// guest, so it cannot choose names that collide.
pub(crate) type ByName = HashMap<String, Arc<Tool>, foldhash::fast::RandomState>;

impl Catalog {
    /// The tool or offer `name` names.
    pub(crate) fn any(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.get(name).or_else(|| self.offers.get(name))
    }
}

/// What finds and loads a runtime's components.
pub(crate) struct Loader {
    pub(crate) builtin: bool,
    pub(crate) dirs: Vec<PathBuf>,
    pub(crate) components: Vec<(String, Arc<[u8]>)>,
    pub(crate) pulled: Vec<String>,
    pub(crate) source: Option<Arc<dyn ComponentSource>>,
    pub(crate) policy: Policy,
    pub(crate) cache: CompileCache,
    pub(crate) progress: Option<CompileReporter>,
    /// The native tools, checked once at build.
    pub(crate) natives: Vec<Arc<Tool>>,
    /// Whether every tool's code is loaded at start, not on its first call.
    pub(crate) load_code_at_start: bool,
    /// What the sources looked like at the last load (see [`Loader::fingerprint`]).
    pub(crate) seen: u64,
    /// The host's own files: a `policy.yaml` read for a component is registered there.
    pub(crate) own: crate::hostfs::OwnFiles,
    /// The `policy.yaml` the embedder named for a component, by its source.
    pub(crate) policy_yamls: Vec<(String, PathBuf)>,
}

/// What [`RuntimeBuilder::on_compile`](crate::RuntimeBuilder::on_compile) calls.
pub(crate) type CompileReporter = Box<dyn FnMut(Compiling<'_>) + Send>;

/// A component about to be compiled, as [`RuntimeBuilder::on_compile`](crate::RuntimeBuilder::on_compile) reports it.
#[derive(Debug, Clone, Copy)]
pub struct Compiling<'a> {
    /// Its place among the components being loaded (from 0).
    pub index: usize,
    /// How many components are being loaded.
    pub total: usize,
    /// Where it came from (a file path, `builtin:echo`, a registry reference).
    pub source: &'a str,
}
