//! Prompts, resources and completion, as MCP serves what the runtime's components offer
//! beside tools (`toolcell::offers`).
//!
//! The lists are the catalog's, as the components declared them at load. Each `prompts/get`,
//! `resources/read` and `completion/complete` is one [`Runtime::offer`]: the pipeline a call
//! takes (policy, validation, gate, a fresh instance with no grants, limits, parts checks, the
//! cap, the audit), entered and counted by the front as a call is (the client's share, its
//! quotas), stopped when its request is cancelled, inside a span of its own. Its answer is
//! shaped here; a failure is a protocol error: an unknown prompt, invalid arguments and a
//! resource not found are `-32602` (a resource's with `data.uri`, SEP-2164), anything else
//! the guest did is `-32603` with the host's text.
//!
//! `resources/subscribe` and `unsubscribe` (2025-11-25) are answered `{}` for a URI that is
//! served: a component's resources are read afresh each time and never change on their own,
//! so no `notifications/resources/updated` is ever sent. `resources` is declared only when
//! something is offered, and `prompts` and `completions` likewise.

use crate::front;
use crate::{McpServer, STDIO_CLIENT, content, talk, trace};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{
    CompleteRequestParams, CompleteResult, CompletionInfo, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate, Role,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::{Map, Value};
use std::sync::Arc;
use toolcell::content::{Contents, Part};
use toolcell::offers::{Answered, OfferRequest, Reference};
use toolcell::{CallOptions, CallReport, FailureKind, StopToken, ToolResponse};

/// What a request of a component's offers was answered: its run's report, or (a prompt's
/// `get` in the stateless era) the questions its client must answer first.
pub(crate) enum OfferAnswer {
    Report(Box<CallReport>),
    Instead(rmcp::model::InputRequiredResult),
}

/// What a prompt's `get` carries back from an earlier round (2026-07-28): its `requestState`
/// and its `inputResponses`.
#[derive(Default)]
pub(crate) struct Carried<'a> {
    pub(crate) state: Option<&'a str>,
    pub(crate) responses: Option<&'a rmcp::model::InputResponses>,
}

impl McpServer {
    /// Run `request` (the method `method`) for the client of `context`, as a call runs: the
    /// report, the questions the client must answer first (a prompt that asks its client, in
    /// the stateless era), or the protocol error its failure is. A prompt talks to its client
    /// as a tool does (`talk.rs`), as far as its component declared and the policy grants.
    async fn answer_offer(
        &self,
        method: &'static str,
        request: OfferRequest,
        carried: Carried<'_>,
        context: &RequestContext<RoleServer>,
    ) -> Result<OfferAnswer, McpError> {
        let front = front::from_front(&context.extensions).cloned();
        let call_context = front
            .as_ref()
            .and_then(|front| front.context())
            .unwrap_or_else(|| self.runtime.default_context());
        let owner = front.as_ref().map_or(STDIO_CLIENT, |front| front.client());
        let stateless = context
            .protocol_version()
            .is_some_and(|version| !version.has_initialize());
        let capabilities = match front.as_ref().filter(|_| !stateless) {
            Some(front) => front
                .session_capabilities()
                .or_else(|| context.client_capabilities()),
            None => context.client_capabilities(),
        };
        let key = key_of(&request);
        // What a question is sealed with: the prompt's arguments, as they run.
        let arguments = match &request {
            OfferRequest::GetPrompt { arguments, .. } => {
                Value::Object(arguments.clone()).to_string()
            }
            _ => "{}".to_owned(),
        };
        let talk = self
            .talk(talk::Asking {
                name: &key,
                arguments: &arguments,
                owner,
                base: call_context.clone(),
                capabilities: capabilities.as_ref(),
                stateless,
                front: front.as_ref(),
                peer: Some(&context.peer),
                meta: &context.meta,
                request_state: carried.state,
                input_responses: carried.responses,
                session_level: self.session_level.get(),
            })
            .await?;
        let link: Arc<dyn toolcell::client::ClientLink> = talk.link.clone();
        let call_context = talk.context.clone().with_client(link);
        let id = context.id.to_string();
        let stop = StopToken::new();
        let options = CallOptions {
            stop: Some(stop.clone()),
            ..CallOptions::default()
        };
        let started = std::time::Instant::now();
        let entered = front.as_ref().map(|front| front.enter(&id, stop.clone()));
        let span = trace::offer_span(method, &key, owner, &context.extensions, &context.meta);
        let runtime = Arc::clone(&self.runtime);
        let mut run = Box::pin(tracing::Instrument::instrument(
            async move { runtime.offer(&id, &request, &call_context, &options).await },
            span,
        ));
        let report = tokio::select! {
            report = &mut run => report,
            () = context.ct.cancelled() => {
                stop.stop();
                run.await
            }
        };
        if let Some(front) = &front {
            front.ended(&self.runtime, &report, started).await;
        }
        drop(entered);
        if let Some(instead) = self
            .instead_of_result(
                &talk,
                owner,
                &key,
                &arguments,
                capabilities.as_ref(),
                &report,
            )
            .await
        {
            return instead.map(OfferAnswer::Instead);
        }
        Ok(OfferAnswer::Report(Box::new(report)))
    }

    /// The report of an offer's request that cannot ask its client (a read, a completion).
    async fn offer_report(
        &self,
        method: &'static str,
        request: OfferRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallReport, McpError> {
        match self
            .answer_offer(method, request, Carried::default(), context)
            .await?
        {
            OfferAnswer::Report(report) => Ok(*report),
            OfferAnswer::Instead(_) => Err(McpError::internal_error(
                "a read or a completion asked its client, which it may not",
                None,
            )),
        }
    }

    /// `prompts/list`: every prompt the components offer, by name.
    pub(crate) fn prompt_list(&self) -> ListPromptsResult {
        ListPromptsResult {
            prompts: self
                .runtime
                .prompts()
                .into_iter()
                .map(|prompt| {
                    let arguments = prompt
                        .arguments
                        .into_iter()
                        .map(|argument| {
                            let mut out =
                                PromptArgument::new(argument.name).with_required(argument.required);
                            out.title = argument.title;
                            out.description = argument.description;
                            out
                        })
                        .collect::<Vec<_>>();
                    let mut out = Prompt::new(
                        prompt.name,
                        prompt.description,
                        (!arguments.is_empty()).then_some(arguments),
                    );
                    out.title = prompt.title;
                    out
                })
                .collect(),
            ..ListPromptsResult::default()
        }
    }

    /// `resources/list`: every resource the components list, by URI.
    pub(crate) fn resource_list(&self) -> ListResourcesResult {
        ListResourcesResult {
            resources: self
                .runtime
                .resources()
                .into_iter()
                .map(|resource| {
                    let mut out = Resource::new(resource.uri, resource.name);
                    out.title = resource.title;
                    out.description = resource.description;
                    out.mime_type = resource.mime_type;
                    out.size = resource.size;
                    out
                })
                .collect(),
            ..ListResourcesResult::default()
        }
    }

    /// `resources/templates/list`: every URI template the components offer, by name.
    pub(crate) fn template_list(&self) -> ListResourceTemplatesResult {
        ListResourceTemplatesResult {
            resource_templates: self
                .runtime
                .resource_templates()
                .into_iter()
                .map(|template| {
                    let mut out = ResourceTemplate::new(template.uri_template, template.name);
                    out.title = template.title;
                    out.description = template.description;
                    out.mime_type = template.mime_type;
                    out
                })
                .collect(),
            ..ListResourceTemplatesResult::default()
        }
    }

    /// `prompts/get`.
    pub(crate) async fn prompt(
        &self,
        request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let offer = OfferRequest::GetPrompt {
            name: request.name,
            arguments: request.arguments.unwrap_or_default(),
        };
        let carried = Carried {
            state: request.request_state.as_deref(),
            responses: request.input_responses.as_ref(),
        };
        let report = match self
            .answer_offer("prompts/get", offer, carried, context)
            .await?
        {
            OfferAnswer::Report(report) => *report,
            OfferAnswer::Instead(input) => return Ok(input.into()),
        };
        let report = self.succeeded(report, None)?;
        let Some(Answered::Prompt { description, roles }) = report.offered else {
            return Err(McpError::internal_error(
                "the prompt's answer is not a prompt",
                None,
            ));
        };
        let messages = report
            .parts
            .iter()
            .zip(roles)
            .map(|(part, role)| {
                let role = match role {
                    toolcell::offers::Role::Assistant => Role::Assistant,
                    _ => Role::User,
                };
                PromptMessage::new(role, content::block(part))
            })
            .collect();
        let mut result = GetPromptResult::new(messages);
        result.description = description;
        Ok(result.into())
    }

    /// `resources/read`.
    pub(crate) async fn read(
        &self,
        request: ReadResourceRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<ReadResourceResult, McpError> {
        let uri = request.uri;
        let offer = OfferRequest::ReadResource { uri: uri.clone() };
        let report = self.offer_report("resources/read", offer, context).await?;
        let report = self.succeeded(report, Some(&uri))?;
        let contents = report
            .parts
            .iter()
            .filter_map(|part| match part {
                Part::Resource {
                    uri,
                    mime_type,
                    contents: Contents::Text(text),
                } => Some(ResourceContents::TextResourceContents {
                    uri: uri.clone(),
                    mime_type: mime_type.clone(),
                    text: text.clone(),
                    meta: None,
                }),
                Part::Resource {
                    uri,
                    mime_type,
                    contents: Contents::Blob(blob),
                } => Some(ResourceContents::BlobResourceContents {
                    uri: uri.clone(),
                    mime_type: mime_type.clone(),
                    blob: STANDARD.encode(blob),
                    meta: None,
                }),
                _ => None,
            })
            .collect::<Vec<_>>();
        if contents.is_empty() {
            return Err(McpError::internal_error(
                "the component read nothing it could pass on",
                None,
            ));
        }
        Ok(ReadResourceResult::new(contents))
    }

    /// `completion/complete`.
    pub(crate) async fn completion(
        &self,
        request: CompleteRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let reference = match request.r#ref {
            rmcp::model::Reference::Prompt(prompt) => Reference::Prompt(prompt.name),
            rmcp::model::Reference::Resource(template) => Reference::ResourceTemplate(template.uri),
            _ => {
                return Err(McpError::invalid_params(
                    "a completion's ref is a prompt or a resource template",
                    None,
                ));
            }
        };
        let given: Map<String, Value> = request
            .context
            .and_then(|context| context.arguments)
            .unwrap_or_default()
            .into_iter()
            .map(|(name, value)| (name, Value::String(value)))
            .collect();
        let offer = OfferRequest::Complete {
            reference,
            argument: request.argument.name,
            value: request.argument.value,
            context: given,
        };
        let report = self
            .offer_report("completion/complete", offer, context)
            .await?;
        let report = self.succeeded(report, None)?;
        let Some(Answered::Completion {
            values,
            total,
            has_more,
        }) = report.offered
        else {
            return Err(McpError::internal_error(
                "the completion's answer is not a completion",
                None,
            ));
        };
        let completion = CompletionInfo::with_pagination(values, total, has_more)
            .map_err(|why| McpError::internal_error(why, None))?;
        Ok(CompleteResult::new(completion))
    }

    /// The report of a request that answered, or the protocol error of one that did not: for
    /// a read of `uri`, a resource not found is `-32602` with `data.uri` (SEP-2164).
    fn succeeded(&self, report: CallReport, uri: Option<&str>) -> Result<CallReport, McpError> {
        match &report.response {
            ToolResponse::Result { .. } => Ok(report),
            ToolResponse::Failed {
                kind: FailureKind::NotFound,
                ..
            } if uri.is_some() => Err(McpError::invalid_params(
                "Resource not found",
                Some(serde_json::json!({ "uri": uri })),
            )),
            ToolResponse::Failed {
                kind: FailureKind::UnknownTool | FailureKind::InvalidInput | FailureKind::NotFound,
                ..
            } => Err(McpError::invalid_params(
                self.runtime.model_text(&report.response),
                None,
            )),
            ToolResponse::Denied { .. } => Err(McpError::invalid_request(
                self.runtime.model_text(&report.response),
                None,
            )),
            _ => Err(McpError::internal_error(
                self.runtime.model_text(&report.response),
                None,
            )),
        }
    }

    /// Whether `uri` is a resource the components serve (listed, or of a template): what a
    /// subscription may be for.
    pub(crate) fn serves_uri(&self, uri: &str) -> bool {
        self.runtime
            .resources()
            .iter()
            .any(|resource| resource.uri == uri)
            || self.runtime.resource_templates().iter().any(|template| {
                toolcell::offers::Template::parse(&template.uri_template)
                    .is_ok_and(|parsed| parsed.matches(uri).is_some())
            })
    }
}

/// The catalog key a request runs as, for its span (`prompt:NAME`, `resource:URI`, ...).
fn key_of(request: &OfferRequest) -> String {
    match request {
        OfferRequest::GetPrompt { name, .. } => format!("prompt:{name}"),
        OfferRequest::ReadResource { uri } => format!("resource:{uri}"),
        OfferRequest::Complete {
            reference: Reference::Prompt(name),
            ..
        } => format!("completion:prompt:{name}"),
        OfferRequest::Complete {
            reference: Reference::ResourceTemplate(uri),
            ..
        } => format!("completion:template:{uri}"),
        _ => "offer".to_owned(),
    }
}
