//! A component's prompts, resources and completion (`toolcell:tool@0.4.0`'s `provider`
//! interfaces), as the host reads and runs them: each interface looked up on its own, so a
//! component may export any of them, beside its tool or without one.

pub(crate) mod generated {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "provider",
        exports: { default: async },
        with: {
            "toolcell:tool/types": crate::wasm::contract::generated::toolcell::tool::types,
            "toolcell:tool/client": crate::wasm::contract::generated::toolcell::tool::client,
        },
    });
}

use crate::call::answered::{Answered, Role};
use crate::call::content::{Contents, Part};
use crate::tool::info::MAX_DESCRIPTION_BYTES;
use crate::tool::offer::{
    ClientNeed, MAX_COMPLETION_VALUE_BYTES, MAX_COMPLETION_VALUES, Offers, PromptArgument,
    PromptInfo, Reference, ResourceInfo, TemplateInfo,
};
use crate::wasm::contract::generated::toolcell::tool::types::ToolError;
use generated::exports::toolcell::tool::{completion, prompts, resources};
use wasmtime::component::InstancePre;
use wasmtime::{AsContextMut, Result};

/// The most bytes one request of a component's offers (or its declarations at load) may move
/// from the guest to the host, as wasmtime counts lifted values: what is past it is refused
/// while it is lifted, before the host holds it. A prompt's or a read's answer is capped far
/// below this (the result cap); declarations by [`MAX_OFFERS_BYTES`](crate::tool::offer::MAX_OFFERS_BYTES).
pub(crate) const MAX_OFFER_TRANSFER_BYTES: usize = 16 << 20;

/// What one request of a component's offers runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Operation {
    /// `prompts.get` of this prompt.
    Prompt(String),
    /// `resources.read`: the arguments carry the URI and what a template's variables matched.
    Read,
    /// `completion.complete` for this prompt or template.
    Complete(Reference),
}

/// The interfaces of the provider world a component exports, found once when it is linked.
pub(crate) struct OfferingPre<T: 'static> {
    pub(crate) instance_pre: InstancePre<T>,
    prompts: Option<prompts::GuestIndices>,
    resources: Option<resources::GuestIndices>,
    completion: Option<completion::GuestIndices>,
}

impl<T: 'static> Clone for OfferingPre<T> {
    fn clone(&self) -> Self {
        OfferingPre {
            instance_pre: self.instance_pre.clone(),
            prompts: self.prompts.clone(),
            resources: self.resources.clone(),
            completion: self.completion.clone(),
        }
    }
}

/// A guest's answer to an offer's request: the parts, and what they are.
pub(crate) type OfferAnswer = std::result::Result<(Vec<Part>, Answered), ToolError>;

impl<T: Send + 'static> OfferingPre<T> {
    /// The provider interfaces `instance_pre` exports, if it exports any.
    pub(crate) fn new(instance_pre: &InstancePre<T>) -> Option<OfferingPre<T>> {
        let pre = OfferingPre {
            prompts: prompts::GuestIndices::new(instance_pre).ok(),
            resources: resources::GuestIndices::new(instance_pre).ok(),
            completion: completion::GuestIndices::new(instance_pre).ok(),
            instance_pre: instance_pre.clone(),
        };
        (pre.prompts.is_some() || pre.resources.is_some() || pre.completion.is_some())
            .then_some(pre)
    }

    /// Instantiate it in `store` and read what it offers (as it declared it; the caller
    /// checks it).
    pub(crate) async fn describe(&self, mut store: impl AsContextMut<Data = T>) -> Result<Offers> {
        store
            .as_context_mut()
            .set_hostcall_fuel(MAX_OFFER_TRANSFER_BYTES);
        let instance = self.instance_pre.instantiate_async(&mut store).await?;
        let mut offers = Offers {
            completes: self.completion.is_some(),
            ..Offers::default()
        };
        if let Some(indices) = &self.prompts {
            let guest = indices.load(&mut store, &instance)?;
            offers.prompts = guest
                .call_list_prompts(&mut store)
                .await?
                .into_iter()
                .map(prompt_info)
                .collect();
        }
        if let Some(indices) = &self.resources {
            let guest = indices.load(&mut store, &instance)?;
            let listing = guest.call_list_resources(&mut store).await?;
            offers.resources = listing.resources.into_iter().map(resource_info).collect();
            offers.templates = listing.templates.into_iter().map(template_info).collect();
        }
        if let Some(indices) = &self.completion {
            // Looked up now, so that a mistyped `complete` is refused at load.
            indices.load(&mut store, &instance)?;
        }
        Ok(offers)
    }

    /// Instantiate it in `store` and run `operation` with `arguments` (the checked JSON the
    /// pipeline hands a guest: a prompt's arguments, `{uri, variables}` for a read,
    /// `{argument, value, context}` for a completion).
    pub(crate) async fn run(
        &self,
        mut store: impl AsContextMut<Data = T>,
        operation: &Operation,
        arguments: &str,
    ) -> Result<OfferAnswer> {
        let arguments: serde_json::Value = serde_json::from_str(arguments)?;
        store
            .as_context_mut()
            .set_hostcall_fuel(MAX_OFFER_TRANSFER_BYTES);
        let instance = self.instance_pre.instantiate_async(&mut store).await?;
        let missing = |what: &str| wasmtime::format_err!("the component does not export {what}");
        match operation {
            Operation::Prompt(name) => {
                let guest = self
                    .prompts
                    .as_ref()
                    .ok_or_else(|| missing("prompts"))?
                    .load(&mut store, &instance)?;
                let pairs = strings(&arguments);
                let answer = guest.call_get(&mut store, name, &pairs).await?;
                if let Ok(prompt) = &answer
                    && let Some(description) = &prompt.description
                    && description.len() > MAX_DESCRIPTION_BYTES
                {
                    return Ok(Err(ToolError::Failed(format!(
                        "the prompt's description is {} bytes; at most {MAX_DESCRIPTION_BYTES}",
                        description.len()
                    ))));
                }
                Ok(answer.map(|prompt| {
                    let mut roles = Vec::with_capacity(prompt.messages.len());
                    let mut parts = Vec::with_capacity(prompt.messages.len());
                    for message in prompt.messages {
                        roles.push(match message.role {
                            prompts::Role::User => Role::User,
                            prompts::Role::Assistant => Role::Assistant,
                        });
                        parts.push(Part::from(message.content));
                    }
                    let answered = Answered::Prompt {
                        description: prompt.description,
                        roles,
                    };
                    (parts, answered)
                }))
            }
            Operation::Read => {
                let guest = self
                    .resources
                    .as_ref()
                    .ok_or_else(|| missing("resources"))?
                    .load(&mut store, &instance)?;
                let uri = arguments["uri"].as_str().unwrap_or_default();
                let variables = strings(&arguments["variables"]);
                let answer = guest.call_read(&mut store, uri, &variables).await?;
                Ok(answer.and_then(|contents| {
                    if contents.is_empty() {
                        return Err(ToolError::Failed(
                            "the component read nothing: a read returns contents or not-found"
                                .to_owned(),
                        ));
                    }
                    let parts = contents
                        .into_iter()
                        .map(|read| Part::Resource {
                            uri: read.uri,
                            mime_type: read.mime_type,
                            contents: match read.body {
                                generated::toolcell::tool::types::ResourceContents::Text(text) => {
                                    Contents::Text(text)
                                }
                                generated::toolcell::tool::types::ResourceContents::Blob(blob) => {
                                    Contents::Blob(std::sync::Arc::from(blob))
                                }
                            },
                        })
                        .collect();
                    Ok((parts, Answered::Contents))
                }))
            }
            Operation::Complete(reference) => {
                let guest = self
                    .completion
                    .as_ref()
                    .ok_or_else(|| missing("completion"))?
                    .load(&mut store, &instance)?;
                let reference = match reference {
                    Reference::Prompt(name) => completion::Reference::Prompt(name.clone()),
                    Reference::ResourceTemplate(uri) => {
                        completion::Reference::ResourceTemplate(uri.clone())
                    }
                };
                let argument = arguments["argument"].as_str().unwrap_or_default();
                let value = arguments["value"].as_str().unwrap_or_default();
                let context = strings(&arguments["context"]);
                let answer = guest
                    .call_complete(&mut store, &reference, argument, value, &context)
                    .await?;
                Ok(answer.and_then(completed))
            }
        }
    }
}

/// A completion as the host passes it on, or why it does not.
fn completed(
    completion: completion::Completion,
) -> std::result::Result<(Vec<Part>, Answered), ToolError> {
    if completion.values.len() > MAX_COMPLETION_VALUES {
        return Err(ToolError::Failed(format!(
            "the component completed {} values; at most {MAX_COMPLETION_VALUES} are passed on",
            completion.values.len()
        )));
    }
    if let Some(long) = completion
        .values
        .iter()
        .find(|value| value.len() > MAX_COMPLETION_VALUE_BYTES)
    {
        return Err(ToolError::Failed(format!(
            "a completed value is {} bytes; at most {MAX_COMPLETION_VALUE_BYTES}",
            long.len()
        )));
    }
    // A value is shown in the person's input line: nothing there may drive their terminal.
    if completion
        .values
        .iter()
        .any(|value| value.chars().any(char::is_control))
    {
        return Err(ToolError::Failed(
            "a completed value holds a control character".to_owned(),
        ));
    }
    Ok((
        Vec::new(),
        Answered::Completion {
            values: completion.values,
            total: completion.total,
            has_more: completion.has_more,
        },
    ))
}

/// The string members of a JSON object, in its order (the checked arguments are an object of
/// strings; anything else is left out).
fn strings(value: &serde_json::Value) -> Vec<(String, String)> {
    value
        .as_object()
        .map(|object| {
            object
                .iter()
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn prompt_info(prompt: prompts::PromptInfo) -> PromptInfo {
    PromptInfo {
        name: prompt.name,
        title: prompt.title,
        description: prompt.description,
        arguments: prompt
            .arguments
            .into_iter()
            .map(|argument| PromptArgument {
                name: argument.name,
                title: argument.title,
                description: argument.description,
                required: argument.required,
            })
            .collect(),
        client_needs: prompt
            .client_needs
            .into_iter()
            .map(|need| ClientNeed {
                kind: crate::wasm::contract::client_kind(need.feature),
                required: need.required,
            })
            .collect(),
    }
}

fn resource_info(resource: resources::ResourceInfo) -> ResourceInfo {
    ResourceInfo {
        uri: resource.uri,
        name: resource.name,
        title: resource.title,
        description: resource.description,
        mime_type: resource.mime_type,
        size: resource.size,
    }
}

fn template_info(template: resources::TemplateInfo) -> TemplateInfo {
    TemplateInfo {
        uri_template: template.uri_template,
        name: template.name,
        title: template.title,
        description: template.description,
        mime_type: template.mime_type,
    }
}
