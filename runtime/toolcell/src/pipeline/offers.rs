//! What components offer beside tools, as the runtime serves it: the lists (read from the
//! catalog, as the components declared them at load) and each request (a prompt's `get`, a
//! resource's `read`, a completion), which takes the pipeline a call takes.
//!
//! A request is resolved here to one catalog key and the JSON its guest gets, and from there
//! it is a call like any other: the key's policy (`[tools."prompt:NAME"]` sets its limits and
//! access, may pin or deny it), validation against the schema the host made from what the
//! component declared, the gate, a fresh instance with no grants at all, the deadline, memory
//! and fuel, the parts checks and the result cap, the audit record (the key and the arguments,
//! never the answer) and the call's span.

use crate::call::limits::CallOptions;
use crate::call::names::echoed;
use crate::call::proto::{FailureKind, ToolResponse};
use crate::call::report::CallReport;
use crate::pipeline::Namespace;
use crate::pipeline::Runtime;
use crate::pipeline::catalog::{Catalog, Executable, Listed};
use crate::pipeline::context::CallContext;
use crate::tool::offer::{Answered, PromptInfo, Reference, ResourceInfo, TemplateInfo};
use serde_json::{Map, Value};

/// A request of what the runtime's components offer beside tools.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OfferRequest {
    /// A prompt, filled from `arguments` (strings; each one the prompt declares).
    GetPrompt {
        /// The prompt's name.
        name: String,
        /// Its arguments.
        arguments: Map<String, Value>,
    },
    /// A resource, listed or of a template.
    ReadResource {
        /// Its URI.
        uri: String,
    },
    /// Values for a prompt's argument or a template's variable.
    Complete {
        /// The prompt or template.
        reference: Reference,
        /// The argument's or variable's name.
        argument: String,
        /// What has been typed so far.
        value: String,
        /// The arguments given already.
        context: Map<String, Value>,
    },
}

/// What kinds of things a runtime's components offer beside tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OfferedKinds {
    /// At least one prompt.
    pub prompts: bool,
    /// At least one resource or URI template.
    pub resources: bool,
    /// At least one component completes its prompts' arguments or templates' variables.
    pub completion: bool,
}

impl Runtime {
    /// The prompts the runtime's components offer, by name.
    pub fn prompts(&self) -> Vec<PromptInfo> {
        let mut prompts = self.listed(|listed| match listed {
            Listed::Prompt(prompt) => Some(prompt.clone()),
            _ => None,
        });
        prompts.sort_by(|a, b| a.name.cmp(&b.name));
        prompts
    }

    /// The resources the runtime's components list, by URI.
    pub fn resources(&self) -> Vec<ResourceInfo> {
        let mut resources = self.listed(|listed| match listed {
            Listed::Resource(resource) => Some(resource.clone()),
            _ => None,
        });
        resources.sort_by(|a, b| a.uri.cmp(&b.uri));
        resources
    }

    /// The URI templates the runtime's components offer, by name.
    pub fn resource_templates(&self) -> Vec<TemplateInfo> {
        let mut templates = self.listed(|listed| match listed {
            Listed::Template(template, _) => Some(template.clone()),
            _ => None,
        });
        templates.sort_by(|a, b| a.name.cmp(&b.name));
        templates
    }

    /// What `pick` takes of each offer in the catalog as it stands.
    fn listed<T>(&self, pick: impl Fn(&Listed) -> Option<T>) -> Vec<T> {
        self.catalog()
            .offers
            .values()
            .filter_map(|tool| pick(listed(tool)?))
            .collect()
    }

    /// What kinds of things the runtime's components offer (what an MCP server declares).
    pub fn offered_kinds(&self) -> OfferedKinds {
        let mut kinds = OfferedKinds::default();
        for tool in self.catalog().offers.values() {
            match listed(tool) {
                Some(Listed::Prompt(_)) => kinds.prompts = true,
                Some(Listed::Resource(_) | Listed::Template(..)) => kinds.resources = true,
                Some(Listed::Completion) => kinds.completion = true,
                None => {}
            }
        }
        kinds
    }

    /// Run `request` in `context`: resolved to what offers it, then through the pipeline a
    /// call takes. The report's [`offered`](CallReport::offered) says what its parts are (a
    /// prompt's messages and their roles, a read's contents, a completion's values). A name,
    /// URI or reference nothing offers is a failure of kind [`FailureKind::NotFound`] (for a
    /// URI) or [`FailureKind::UnknownTool`], decided before anything runs.
    pub async fn offer(
        &self,
        id: &str,
        request: &OfferRequest,
        context: &CallContext,
        options: &CallOptions,
    ) -> CallReport {
        // Resolved and run in one catalog: the key and what a template's variables matched
        // are those of the offer that runs.
        let catalog = self.catalog();
        let resolved = resolve(&catalog, request);
        let (key, arguments) = match resolved {
            Ok(Resolved::Run(key, arguments)) => (key, arguments),
            Ok(Resolved::Answered(report)) => return *report,
            Err((kind, why)) => return CallReport::host_answer(ToolResponse::failed(kind, why)),
        };
        let arguments = Value::Object(arguments).to_string();
        let report = self
            .run_on(
                &catalog,
                id,
                (&key, Namespace::Offers),
                &arguments,
                context,
                options,
            )
            .await;
        // A guest that answered the wrong shape (a prompt's component answering a read) is the
        // host's mistake to catch, never passed on as a result.
        match (&report.response, &report.offered) {
            (ToolResponse::Result { .. }, None) => CallReport {
                parts: Vec::new(),
                ..CallReport::host_answer(ToolResponse::failed(
                    FailureKind::Internal,
                    "the component's answer is not of what was asked",
                ))
            },
            _ => report,
        }
    }

    /// [`Runtime::offer`] from synchronous code.
    pub fn offer_blocking(
        &self,
        id: &str,
        request: &OfferRequest,
        context: &CallContext,
        options: &CallOptions,
    ) -> CallReport {
        self.block_on(self.offer(id, request, context, options))
    }
}

/// What a request comes to: a key to run with its arguments, or an answer the host gives.
enum Resolved {
    Run(String, Map<String, Value>),
    Answered(Box<CallReport>),
}

/// The catalog key `request` asks for and the arguments its guest gets, or why there is none.
fn resolve(catalog: &Catalog, request: &OfferRequest) -> Result<Resolved, (FailureKind, String)> {
    match request {
        OfferRequest::GetPrompt { name, arguments } => {
            let key = format!("prompt:{name}");
            if !catalog.offers.contains_key(&key) {
                return Err((
                    FailureKind::UnknownTool,
                    format!("no prompt named {}", echoed(name)),
                ));
            }
            Ok(Resolved::Run(key, arguments.clone()))
        }
        OfferRequest::ReadResource { uri } => resolve_read(catalog, uri),
        OfferRequest::Complete {
            reference,
            argument,
            value,
            context,
        } => resolve_complete(catalog, reference, (argument, value, context)),
    }
}

/// A read of the resource `uri`: the resource of that URI, else the one URI template that
/// matches it (with what its variables matched).
fn resolve_read(catalog: &Catalog, uri: &str) -> Result<Resolved, (FailureKind, String)> {
    // What is not a URI (too long, a control character, no scheme) is read by nothing,
    // and is never matched against a template.
    if let Err(why) = crate::call::content::check_uri(uri) {
        return Err((FailureKind::InvalidInput, why));
    }
    let key = format!("resource:{uri}");
    if catalog.offers.contains_key(&key) {
        return Ok(Resolved::Run(key, read_arguments(uri, Map::new())));
    }
    let mut matched: Vec<(&str, Vec<(String, String)>)> = catalog
        .offers
        .iter()
        .filter_map(|(key, tool)| match listed(tool) {
            Some(Listed::Template(_, template)) => Some((key.as_str(), template.matches(uri)?)),
            _ => None,
        })
        .collect();
    matched.sort_by(|a, b| a.0.cmp(b.0));
    let (key, variables) = match matched.len() {
        0 => {
            return Err((
                FailureKind::NotFound,
                format!("no resource {}", echoed(uri)),
            ));
        }
        1 => matched.swap_remove(0),
        _ => {
            let names: Vec<&str> = matched.iter().map(|(key, _)| *key).collect();
            return Err((
                FailureKind::InvalidInput,
                format!(
                    "{} matches more than one URI template ({}): nothing is read",
                    echoed(uri),
                    names.join(", ")
                ),
            ));
        }
    };
    let variables = variables
        .into_iter()
        .map(|(name, value)| (name, Value::String(value)))
        .collect();
    Ok(Resolved::Run(
        key.to_owned(),
        read_arguments(uri, variables),
    ))
}

/// A completion of an argument of the prompt or URI template `reference`: its owner must be
/// offered; a component that completes nothing answers no values.
fn resolve_complete(
    catalog: &Catalog,
    reference: &Reference,
    (argument, value, context): (&String, &String, &Map<String, Value>),
) -> Result<Resolved, (FailureKind, String)> {
    let (owner, key) = match reference {
        Reference::Prompt(name) => (
            format!("prompt:{name}"),
            format!("completion:prompt:{name}"),
        ),
        Reference::ResourceTemplate(uri_template) => {
            let found = catalog
                .offers
                .iter()
                .find_map(|(key, tool)| match listed(tool) {
                    Some(Listed::Template(template, _))
                        if template.uri_template == *uri_template =>
                    {
                        Some((key.clone(), format!("completion:{key}")))
                    }
                    _ => None,
                });
            found.unwrap_or_else(|| (String::new(), String::new()))
        }
    };
    if !catalog.offers.contains_key(&owner) {
        return Err((
            FailureKind::UnknownTool,
            match reference {
                Reference::Prompt(name) => format!("no prompt named {}", echoed(name)),
                Reference::ResourceTemplate(uri) => {
                    format!("no URI template {}", echoed(uri))
                }
            },
        ));
    }
    if !catalog.offers.contains_key(&key) {
        // Its component completes nothing: no values, as MCP answers it.
        return Ok(Resolved::Answered(Box::new(CallReport {
            offered: Some(Answered::Completion {
                values: Vec::new(),
                total: None,
                has_more: false,
            }),
            ..CallReport::host_answer(ToolResponse::text(String::new()))
        })));
    }
    let mut arguments = Map::new();
    arguments.insert("argument".to_owned(), Value::String(argument.clone()));
    arguments.insert("value".to_owned(), Value::String(value.clone()));
    arguments.insert("context".to_owned(), Value::Object(context.clone()));
    Ok(Resolved::Run(key, arguments))
}

/// A read's arguments: the URI, and what a template's variables matched.
fn read_arguments(uri: &str, variables: Map<String, Value>) -> Map<String, Value> {
    let mut arguments = Map::new();
    arguments.insert("uri".to_owned(), Value::String(uri.to_owned()));
    arguments.insert("variables".to_owned(), Value::Object(variables));
    arguments
}

/// What an offer in the catalog lists.
fn listed(tool: &crate::pipeline::catalog::Tool) -> Option<&Listed> {
    match &tool.executable {
        Executable::Offer(_, offer) => Some(&offer.listed),
        _ => None,
    }
}
