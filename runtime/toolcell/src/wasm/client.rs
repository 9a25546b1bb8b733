//! The host side of the contract's `client` interface: what a guest's `log`, `progress`,
//! `features` and `ask` do.
//!
//! Past the house's 700 lines: the host side of the whole `client` interface (log, progress,
//! sampling, elicitation, roots), each way bounded and checked, sharing one seat per call; split
//! by way, each file would import the seat's internals.
//!
//! A call's [`ClientSeat`] holds what the gate granted, what the request's client offers, and
//! the call's counts. Everything a guest says is checked and bounded here before any of it
//! reaches the [`ClientLink`]; everything the client answers is checked and bounded here before
//! any of it reaches the guest. The generated `Host` trait is implemented on the call's state
//! in `wasm/sandbox.rs`, which calls the seat. Messages the guest may not send are dropped and counted, never
//! an error (a log line must not change what a tool does); questions it may not ask are a typed
//! `ask-error` it can handle.

use crate::call::client::{
    ClientLink, ClientUse, LogLevel, MAX_ANSWER_BYTES, MAX_ASK_ROUNDS_PER_CALL,
    MAX_LOG_MESSAGE_BYTES, MAX_LOGS_PER_CALL, MAX_PROGRESS_PER_CALL, MAX_QUESTION_BYTES,
    MAX_QUESTIONS_PER_CALL, Offered, Question,
};
use crate::gate::grants::ClientGrant;
use crate::tool::info::CapabilityKind;
use crate::wasm::bindings::generated::toolcell::tool::client as wit;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::Arc;

/// The longest key a question may have: a tool's name's bound.
const MAX_QUESTION_KEY_CHARS: usize = 64;

/// One call's seat at its client: what it holds and what it has used.
pub(crate) struct ClientSeat {
    link: Option<Arc<dyn ClientLink>>,
    granted: Vec<CapabilityKind>,
    /// Gated kinds a person has not yet been asked about in this call.
    gated: Vec<CapabilityKind>,
    approval: Option<crate::gate::grants::ClientApproval>,
    offered: Offered,
    tool: String,
    last_progress: Option<f64>,
    rounds: u32,
    keys: HashSet<String>,
    pub(crate) used: ClientUse,
    /// The client's link said the call's questions go back with its answer: the instance
    /// stops at this `ask` ([`InputRequired`]).
    pub(crate) input_required: bool,
}

/// What stops an instance whose questions go back to its client with the call's answer (MCP
/// 2026-07-28): the call's report says [`FailureKind::InputRequired`](crate::FailureKind), and
/// the server sends the questions.
#[derive(Debug)]
pub(crate) struct InputRequired;

impl std::fmt::Display for InputRequired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the call's questions go back to its client")
    }
}

impl std::error::Error for InputRequired {}

impl ClientSeat {
    /// The seat of a call granted `grant`.
    pub(crate) fn new(grant: &ClientGrant) -> ClientSeat {
        let offered = grant
            .link
            .as_ref()
            .map(|link| link.offers())
            .unwrap_or_default();
        ClientSeat {
            link: grant.link.clone(),
            granted: grant.granted.clone(),
            gated: grant.gated.clone(),
            approval: grant.approval.clone(),
            offered,
            tool: grant.tool.clone(),
            last_progress: None,
            rounds: 0,
            input_required: false,
            keys: HashSet::new(),
            used: ClientUse::default(),
        }
    }

    /// Granted, or (a question's kind) gated with a person to ask at its first question.
    fn granted(&self, kind: CapabilityKind) -> bool {
        self.granted.contains(&kind) || (self.approval.is_some() && self.gated.contains(&kind))
    }

    /// Granted before the call: what log messages and progress need (they are never asked
    /// about mid-call).
    fn granted_now(&self, kind: CapabilityKind) -> bool {
        self.link.is_some()
            && self.granted.contains(&kind)
            && crate::gate::grants::offers(&self.offered, kind)
    }

    /// Ask the person whether the tool may use the gated `kind`, once per call: a yes grants
    /// it for the rest of the call ("always" saves it for the workspace), anything else is
    /// `denied`.
    async fn approve(&mut self, kind: CapabilityKind) -> Result<(), wit::AskError> {
        use crate::gate::{Approval, ApprovalRequest};
        let Some(approval) = &self.approval else {
            return Err(wit::AskError::Denied(format!(
                "{} on {:?} needs a person's approval, and none can be asked here",
                kind.name(),
                crate::gate::client_resource(kind)
            )));
        };
        let resource = crate::gate::client_resource(kind);
        let request = ApprovalRequest {
            agent: approval.agent.clone(),
            workspace: approval
                .workspace
                .as_ref()
                .map(|workspace| workspace.root().to_owned()),
            tool: self.tool.clone(),
            capability: kind.name().to_owned(),
            resource: resource.to_owned(),
            timeout: approval.wait,
        };
        self.used.approvals += 1;
        let answer = approval.approver.ask(&request).await;
        match answer {
            Approval::Once | Approval::Always => {
                if answer == Approval::Always
                    && let Some(workspace) = &approval.workspace
                    && let Err(error) = workspace.save_rule(&self.tool, kind.name(), resource)
                {
                    // As the gate: an "always" that cannot be kept is not taken as a yes.
                    self.gated.retain(|gated| *gated != kind);
                    return Err(wit::AskError::Failed(format!(
                        "the approval of {} could not be saved: {error}",
                        kind.name()
                    )));
                }
                self.gated.retain(|gated| *gated != kind);
                self.granted.push(kind);
                Ok(())
            }
            // Refused for the rest of the call: the person is not asked again.
            Approval::Deny => {
                self.gated.retain(|gated| *gated != kind);
                Err(wit::AskError::Denied(format!(
                    "a person denied {} on {resource:?}",
                    kind.name()
                )))
            }
            // The question goes back with the call's answer: the instance is stopped on the
            // way out (`sandbox.rs`), and the call runs again with the person's answer.
            Approval::Later => {
                self.input_required = true;
                Err(wit::AskError::Failed(
                    "the person's approval goes back to the client".to_owned(),
                ))
            }
            Approval::NoAnswer => {
                self.gated.retain(|gated| *gated != kind);
                Err(wit::AskError::Denied(format!(
                    "{} on {resource:?} needs a person's approval, and none came",
                    kind.name()
                )))
            }
        }
    }

    /// Granted, offered, and there is a client to reach.
    fn holds(&self, kind: CapabilityKind) -> bool {
        self.link.is_some()
            && self.granted(kind)
            && crate::gate::grants::offers(&self.offered, kind)
    }

    pub(crate) async fn log(&mut self, level: LogLevel, logger: Option<String>, message: String) {
        let wanted = self.offered.log_level.is_some_and(|least| level >= least);
        let (true, true, Some(link)) = (
            self.granted_now(CapabilityKind::ClientLog) && wanted,
            self.used.logs < MAX_LOGS_PER_CALL,
            &self.link,
        ) else {
            self.used.dropped = self.used.dropped.saturating_add(1);
            return;
        };
        let link = Arc::clone(link);
        self.used.logs += 1;
        // The logger is always the tool's (`NAME` or `NAME.LOGGER`): a tool cannot log as the
        // host or as another tool.
        let logger = match logger {
            Some(name) => format!("{}.{}", self.tool, cut(name, MAX_LOG_MESSAGE_BYTES)),
            None => self.tool.clone(),
        };
        link.log(level, Some(logger), cut(message, MAX_LOG_MESSAGE_BYTES))
            .await;
    }

    pub(crate) async fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) {
        let rising = progress.is_finite() && self.last_progress.is_none_or(|last| progress > last);
        let sane_total = total.is_none_or(f64::is_finite);
        let (true, true, true, Some(link)) = (
            self.granted_now(CapabilityKind::ClientProgress),
            rising && sane_total,
            self.used.progress < MAX_PROGRESS_PER_CALL,
            &self.link,
        ) else {
            self.used.dropped = self.used.dropped.saturating_add(1);
            return;
        };
        let link = Arc::clone(link);
        self.last_progress = Some(progress);
        self.used.progress += 1;
        let message = message.map(|text| cut(text, MAX_LOG_MESSAGE_BYTES));
        link.progress(progress, total, message).await;
    }

    pub(crate) fn features(&self) -> wit::FeatureSet {
        let mut features = wit::FeatureSet::empty();
        for (kind, flag) in [
            (CapabilityKind::ClientLog, wit::FeatureSet::LOG),
            (CapabilityKind::ClientProgress, wit::FeatureSet::PROGRESS),
            (CapabilityKind::ClientSample, wit::FeatureSet::SAMPLE),
            (CapabilityKind::ClientElicit, wit::FeatureSet::ELICIT),
            (CapabilityKind::ClientElicitUrl, wit::FeatureSet::ELICIT_URL),
            (CapabilityKind::ClientListRoots, wit::FeatureSet::LIST_ROOTS),
        ] {
            if self.holds(kind) {
                features |= flag;
            }
        }
        features
    }

    /// Check every question, then ask them all in one round and check every answer.
    pub(crate) async fn ask(
        &mut self,
        questions: Vec<wit::Question>,
    ) -> Result<Vec<wit::Answer>, wit::AskError> {
        if questions.is_empty() {
            return Ok(Vec::new());
        }
        if self.rounds >= MAX_ASK_ROUNDS_PER_CALL {
            return Err(wit::AskError::OverLimit(format!(
                "a call may ask at most {MAX_ASK_ROUNDS_PER_CALL} rounds of questions"
            )));
        }
        let count = u32::try_from(questions.len()).unwrap_or(u32::MAX);
        if self.used.questions.saturating_add(count) > MAX_QUESTIONS_PER_CALL {
            return Err(wit::AskError::OverLimit(format!(
                "a call may ask at most {MAX_QUESTIONS_PER_CALL} questions"
            )));
        }
        let mut kinds = Vec::with_capacity(questions.len());
        let mut asked = Vec::with_capacity(questions.len());
        let mut bytes = 0u64;
        let mut keys = HashSet::new();
        for question in questions {
            check_key(&question.key)?;
            if self.keys.contains(&question.key) || !keys.insert(question.key.clone()) {
                return Err(wit::AskError::Invalid(format!(
                    "the key {:?} was already asked in this call",
                    question.key
                )));
            }
            let kind = kind_of(&question.request);
            if !self.granted(kind) {
                return Err(wit::AskError::Denied(format!(
                    "the policy does not let {} use {}",
                    self.tool,
                    kind.name()
                )));
            }
            if !self.holds(kind) {
                return Err(wit::AskError::Unsupported(format!(
                    "this request's client does not offer {}",
                    kind.name()
                )));
            }
            let estimate = estimated_bytes(&question.request)?;
            if estimate > MAX_QUESTION_BYTES {
                return Err(wit::AskError::OverLimit(format!(
                    "question {:?} is about {estimate} bytes as JSON; at most \
                     {MAX_QUESTION_BYTES} are sent",
                    question.key
                )));
            }
            let (method, params) = mcp_request(&self.tool, question.request)?;
            let size = params.to_string().len();
            if size > MAX_QUESTION_BYTES {
                return Err(wit::AskError::OverLimit(format!(
                    "question {:?} is {size} bytes as JSON; at most {MAX_QUESTION_BYTES} are sent",
                    question.key
                )));
            }
            bytes += size as u64;
            kinds.push(kind);
            asked.push(Question {
                key: question.key,
                method,
                params,
            });
        }
        let Some(link) = self.link.clone() else {
            return Err(wit::AskError::Unsupported("no client to ask".to_owned()));
        };
        // The round counts from here, whatever the person says.
        self.rounds += 1;
        self.used.questions += count;
        self.used.question_bytes += bytes;
        self.keys.extend(keys);
        // Every question is well formed and offered: now a person decides the gated kinds.
        for kind in &kinds {
            if self.gated.contains(kind) {
                self.approve(*kind).await?;
            }
        }
        let keys: Vec<String> = asked.iter().map(|question| question.key.clone()).collect();
        let answers = link.ask(asked).await.map_err(|failure| match failure {
            crate::call::client::AskFailure::Unsupported(why) => wit::AskError::Unsupported(why),
            crate::call::client::AskFailure::Mismatch(why) => wit::AskError::Mismatch(why),
            crate::call::client::AskFailure::InputRequired => {
                // The instance is stopped on the way out (`sandbox.rs`): the tool never
                // reads this.
                self.input_required = true;
                wit::AskError::Failed("the questions go back to the client".to_owned())
            }
            other => wit::AskError::Failed(other.to_string()),
        })?;
        if answers.len() != kinds.len() {
            return Err(wit::AskError::Failed(format!(
                "the client gave {} answers to {} questions",
                answers.len(),
                kinds.len()
            )));
        }
        let mut converted = Vec::with_capacity(answers.len());
        for ((answer, kind), key) in answers.into_iter().zip(kinds).zip(keys) {
            let size = answer.to_string().len();
            self.used.answer_bytes += size as u64;
            if size > MAX_ANSWER_BYTES {
                return Err(wit::AskError::OverLimit(format!(
                    "the answer to {key:?} is {size} bytes; at most {MAX_ANSWER_BYTES} are passed on"
                )));
            }
            converted.push(
                answer_of(kind, answer).map_err(|why| {
                    wit::AskError::Failed(format!("the answer to {key:?}: {why}"))
                })?,
            );
        }
        Ok(converted)
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let end = text.floor_char_boundary(max.saturating_sub(3));
        text.truncate(end);
        text.push_str("...");
    }
    text
}

fn check_key(key: &str) -> Result<(), wit::AskError> {
    let fits = !key.is_empty()
        && key.len() <= MAX_QUESTION_KEY_CHARS
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits {
        Ok(())
    } else {
        Err(wit::AskError::Invalid(format!(
            "a question's key must be 1 to {MAX_QUESTION_KEY_CHARS} characters from a-z A-Z \
             0-9 _ - (it was {})",
            crate::call::names::echoed(key)
        )))
    }
}

fn kind_of(request: &wit::Request) -> CapabilityKind {
    match request {
        wit::Request::Sample(_) => CapabilityKind::ClientSample,
        wit::Request::Elicit(_) => CapabilityKind::ClientElicit,
        wit::Request::ElicitUrl(_) => CapabilityKind::ClientElicitUrl,
        wit::Request::ListRoots => CapabilityKind::ClientListRoots,
    }
}

/// What a person reads of a tool's question: every line begins with the tool's name, so they
/// can tell it from the host's own questions (which begin `toolcell:`) however the tool breaks
/// its lines, and control, invisible and reordering characters are written `\u{...}`.
/// A prompt's questions are labelled as its (`[prompt NAME]`), a tool's as its (`[tool NAME]`).
fn labelled(tool: &str, message: &str) -> String {
    let label = match tool.strip_prefix("prompt:") {
        Some(prompt) => format!("[prompt {prompt}]"),
        None => format!("[tool {tool}]"),
    };
    crate::gate::shown_on_a_terminal(message)
        .lines()
        .map(|line| format!("{label} {line}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Refuse a form schema whose words could pass for the host's: a string (a title, a
/// description, an option's name) holding a control, invisible or reordering character, or
/// the host's own prefix.
fn check_schema_words(value: &Value) -> Result<(), String> {
    match value {
        Value::String(text) => {
            if crate::gate::shown_on_a_terminal(text) != *text {
                return Err(format!(
                    "the form's schema holds a control or invisible character: {}",
                    crate::gate::shown_on_a_terminal(text)
                ));
            }
            if text.to_ascii_lowercase().contains("toolcell:") {
                return Err(
                    "the form's schema may not speak as the host (\"toolcell:\")".to_owned(),
                );
            }
            Ok(())
        }
        Value::Array(items) => items.iter().try_for_each(check_schema_words),
        Value::Object(map) => map.iter().try_for_each(|(key, value)| {
            check_schema_words(&Value::String(key.clone()))?;
            check_schema_words(value)
        }),
        _ => Ok(()),
    }
}

/// Most messages, model hints and stop sequences one sampling question may carry: a
/// conversation a tool builds for one question, not a transcript.
const MAX_SAMPLING_MESSAGES: usize = 64;
/// Most model hints or stop sequences in one sampling question.
const MAX_SAMPLING_LIST: usize = 16;
/// What each element adds to a question's JSON beyond its text: keys, quotes, braces.
const JSON_OVERHEAD_PER_ELEMENT: usize = 64;

/// A question's size as JSON, estimated from what the guest handed over before any of it is
/// converted (a JSON value can be tens of times its text), with its lists' lengths bounded:
/// an upper bound close enough to refuse what could not be sent.
fn estimated_bytes(request: &wit::Request) -> Result<usize, wit::AskError> {
    let media = |media: &crate::wasm::bindings::generated::toolcell::tool::types::Media| {
        media.data.len().div_ceil(3) * 4 + media.mime_type.len()
    };
    Ok(match request {
        wit::Request::Sample(sampling) => {
            if sampling.messages.len() > MAX_SAMPLING_MESSAGES
                || sampling.stop_sequences.len() > MAX_SAMPLING_LIST
                || sampling
                    .model_preferences
                    .as_ref()
                    .is_some_and(|preferences| preferences.hints.len() > MAX_SAMPLING_LIST)
            {
                return Err(wit::AskError::OverLimit(format!(
                    "a sampling question may carry at most {MAX_SAMPLING_MESSAGES} messages and \
                     {MAX_SAMPLING_LIST} model hints and stop sequences"
                )));
            }
            let messages: usize = sampling
                .messages
                .iter()
                .map(|message| {
                    JSON_OVERHEAD_PER_ELEMENT
                        + match &message.content {
                            wit::Content::Text(text) => text.len(),
                            wit::Content::Image(image) | wit::Content::Audio(image) => media(image),
                        }
                })
                .sum();
            let lists: usize = sampling
                .stop_sequences
                .iter()
                .chain(
                    sampling
                        .model_preferences
                        .iter()
                        .flat_map(|preferences| preferences.hints.iter()),
                )
                .map(|text| text.len() + JSON_OVERHEAD_PER_ELEMENT)
                .sum();
            messages + lists + sampling.system_prompt.as_ref().map_or(0, String::len)
        }
        wit::Request::Elicit(form) => form.message.len() + form.requested_schema.len(),
        wit::Request::ElicitUrl(page) => page.message.len() + page.url.len(),
        wit::Request::ListRoots => 0,
    })
}

/// The MCP request that asks `request`, checked.
fn mcp_request(tool: &str, request: wit::Request) -> Result<(&'static str, Value), wit::AskError> {
    Ok(match request {
        wit::Request::Sample(sampling) => ("sampling/createMessage", sampling_params(sampling)?),
        wit::Request::Elicit(form) => {
            let schema: Value = serde_json::from_str(&form.requested_schema).map_err(|error| {
                wit::AskError::Invalid(format!("the requested schema is not JSON: {error}"))
            })?;
            check_form_schema(&schema).map_err(wit::AskError::Invalid)?;
            check_schema_words(&schema).map_err(wit::AskError::Invalid)?;
            (
                "elicitation/create",
                json!({
                    "mode": "form",
                    "message": labelled(tool, &form.message),
                    "requestedSchema": schema,
                }),
            )
        }
        wit::Request::ElicitUrl(page) => {
            check_page_url(&page.url).map_err(wit::AskError::Invalid)?;
            (
                "elicitation/create",
                json!({
                    "mode": "url",
                    "message": labelled(tool, &page.message),
                    "url": page.url,
                    "elicitationId": elicitation_id(tool),
                }),
            )
        }
        wit::Request::ListRoots => ("roots/list", json!({})),
    })
}

/// A URL elicitation's id: the tool's name and 16 random bytes (or, if the system has no
/// randomness to give, a counter): it names one page to the client, and tells it nothing else.
fn elicitation_id(tool: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    match crate::digest::random::<16>() {
        Ok(bytes) => format!("{tool}-{}", crate::digest::hex(&bytes)),
        Err(_) => format!(
            "{tool}-{}",
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ),
    }
}

/// A page a person may be sent to: `https`, at most 2048 bytes, with a host and no user
/// information (`https://bank.example@evil.example/` reads as the bank and goes elsewhere), and
/// nothing but visible ASCII (a space or a control hides where it goes).
fn check_page_url(url: &str) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("a URL for the person {why}"));
    if url.len() > 2048 {
        return refuse("may have at most 2048 bytes");
    }
    if !url.bytes().all(|b| b.is_ascii_graphic()) {
        return refuse("must be visible ASCII (spaces and other characters percent-encoded)");
    }
    let Some(rest) = url.strip_prefix("https://") else {
        return refuse("must be https");
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') || authority.contains('\\') {
        return refuse("must name a host, without user information");
    }
    Ok(())
}

/// A form's schema as MCP allows it: an object of flat properties (strings, numbers,
/// integers, booleans, enums, arrays of enum values).
fn check_form_schema(schema: &Value) -> Result<(), String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("a form's schema must be an object schema (\"type\": \"object\")".to_owned());
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Err("a form's schema must list its properties".to_owned());
    };
    for (name, property) in properties {
        let kind = property.get("type").and_then(Value::as_str);
        let flat = matches!(
            kind,
            Some("string" | "number" | "integer" | "boolean" | "array")
        );
        if !flat {
            return Err(format!(
                "form property {name:?} must be a string, number, integer, boolean or array of \
                 enum values"
            ));
        }
        if kind == Some("array") {
            let items = property.get("items").and_then(Value::as_object);
            let of_values = items.is_some_and(|items| {
                items.get("type").is_none_or(|kind| kind == "string")
                    && (items.contains_key("enum") || items.contains_key("anyOf"))
            });
            if !of_values {
                return Err(format!(
                    "form property {name:?} is an array of something else than enum values"
                ));
            }
        }
    }
    Ok(())
}

fn sampling_params(sampling: wit::Sampling) -> Result<Value, wit::AskError> {
    if sampling.messages.is_empty() {
        return Err(wit::AskError::Invalid(
            "a sampling request needs at least one message".to_owned(),
        ));
    }
    let messages: Vec<Value> = sampling
        .messages
        .into_iter()
        .map(|message| {
            json!({
                "role": role_name(message.role),
                "content": content_json(message.content),
            })
        })
        .collect();
    let mut params = Map::new();
    params.insert("messages".to_owned(), Value::Array(messages));
    params.insert("maxTokens".to_owned(), json!(sampling.max_tokens));
    if let Some(system) = sampling.system_prompt {
        params.insert("systemPrompt".to_owned(), json!(system));
    }
    if let Some(temperature) = sampling.temperature.filter(|t| t.is_finite()) {
        params.insert("temperature".to_owned(), json!(temperature));
    }
    if !sampling.stop_sequences.is_empty() {
        params.insert("stopSequences".to_owned(), json!(sampling.stop_sequences));
    }
    if let Some(preferences) = sampling.model_preferences {
        let mut object = Map::new();
        let hints: Vec<Value> = preferences
            .hints
            .into_iter()
            .map(|name| json!({ "name": name }))
            .collect();
        object.insert("hints".to_owned(), Value::Array(hints));
        for (key, value) in [
            ("costPriority", preferences.cost_priority),
            ("speedPriority", preferences.speed_priority),
            ("intelligencePriority", preferences.intelligence_priority),
        ] {
            if let Some(value) = value.filter(|v| (0.0..=1.0).contains(v)) {
                object.insert(key.to_owned(), json!(value));
            }
        }
        params.insert("modelPreferences".to_owned(), Value::Object(object));
    }
    Ok(Value::Object(params))
}

fn role_name(role: wit::Role) -> &'static str {
    match role {
        wit::Role::User => "user",
        wit::Role::Assistant => "assistant",
    }
}

fn content_json(content: wit::Content) -> Value {
    match content {
        wit::Content::Text(text) => json!({ "type": "text", "text": text }),
        wit::Content::Image(media) => json!({
            "type": "image", "data": STANDARD.encode(&media.data), "mimeType": media.mime_type,
        }),
        wit::Content::Audio(media) => json!({
            "type": "audio", "data": STANDARD.encode(&media.data), "mimeType": media.mime_type,
        }),
    }
}

/// The client's answer to a question of `kind`, as the guest receives it.
fn answer_of(kind: CapabilityKind, answer: Value) -> Result<wit::Answer, String> {
    let text = |value: &Value, key: &str| -> Result<String, String> {
        value
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("no {key:?} string"))
    };
    match kind {
        CapabilityKind::ClientSample => {
            let role = match answer.get("role").and_then(Value::as_str) {
                Some("user") => wit::Role::User,
                Some("assistant") => wit::Role::Assistant,
                _ => return Err("no role".to_owned()),
            };
            let content = answer.get("content").ok_or("no content")?;
            // A content may be one block or (MCP 2025-11-25) a list of them: the first is kept.
            let content = match content {
                Value::Array(blocks) => blocks.first().ok_or("empty content")?,
                block => block,
            };
            let content = match content.get("type").and_then(Value::as_str) {
                Some("text") => wit::Content::Text(text(content, "text")?),
                Some(kind @ ("image" | "audio")) => {
                    let data = STANDARD
                        .decode(text(content, "data")?)
                        .map_err(|error| format!("its data is not base64: {error}"))?;
                    let mime_type = text(content, "mimeType")?;
                    let allowed = if kind == "image" {
                        crate::call::content::IMAGE_TYPES
                    } else {
                        crate::call::content::AUDIO_TYPES
                    };
                    if !allowed.contains(&mime_type.as_str()) {
                        return Err(format!("its {kind} type is not one the host allows"));
                    }
                    let media = crate::wasm::bindings::generated::toolcell::tool::types::Media {
                        mime_type,
                        data,
                    };
                    if kind == "image" {
                        wit::Content::Image(media)
                    } else {
                        wit::Content::Audio(media)
                    }
                }
                _ => return Err("content of a kind a tool is not given".to_owned()),
            };
            Ok(wit::Answer::Sampled(wit::Sampled {
                role,
                content,
                model: text(&answer, "model")?,
                stop_reason: answer
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            }))
        }
        CapabilityKind::ClientElicit | CapabilityKind::ClientElicitUrl => {
            let action = match answer.get("action").and_then(Value::as_str) {
                Some("accept") => wit::Action::Accept,
                Some("decline") => wit::Action::Decline,
                Some("cancel") => wit::Action::Cancel,
                _ => return Err("no action of accept, decline or cancel".to_owned()),
            };
            let content = match answer.get("content") {
                None | Some(Value::Null) => None,
                Some(object @ Value::Object(_)) => Some(object.to_string()),
                Some(_) => return Err("its content is not an object".to_owned()),
            };
            Ok(wit::Answer::Elicited(wit::Elicited { action, content }))
        }
        _ => {
            let roots = answer
                .get("roots")
                .and_then(Value::as_array)
                .ok_or("no roots list")?;
            roots
                .iter()
                .map(|root| {
                    Ok(wit::Root {
                        uri: text(root, "uri")?,
                        name: root.get("name").and_then(Value::as_str).map(str::to_owned),
                    })
                })
                .collect::<Result<Vec<_>, String>>()
                .map(wit::Answer::Roots)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_text_is_cut_on_a_character_boundary() {
        let cut_text = cut("é".repeat(MAX_LOG_MESSAGE_BYTES), MAX_LOG_MESSAGE_BYTES);
        assert!(cut_text.len() <= MAX_LOG_MESSAGE_BYTES);
        assert!(cut_text.ends_with("..."));
        assert_eq!(cut("short".to_owned(), 100), "short");
    }

    #[test]
    fn a_form_schema_must_be_flat() {
        assert!(
            check_form_schema(&json!({
                "type": "object",
                "properties": { "name": { "type": "string" },
                                "tags": { "type": "array", "items": { "enum": ["a"] } } }
            }))
            .is_ok()
        );
        for refused in [
            json!({ "type": "array" }),
            json!({ "type": "object" }),
            json!({ "type": "object", "properties": { "nested": { "type": "object" } } }),
            json!({ "type": "object", "properties": { "list": { "type": "array" } } }),
        ] {
            assert!(check_form_schema(&refused).is_err(), "{refused}");
        }
    }

    #[test]
    fn answers_are_read_by_their_questions_kind() {
        let sampled = answer_of(
            CapabilityKind::ClientSample,
            json!({ "role": "assistant", "content": { "type": "text", "text": "hi" },
                    "model": "m", "stopReason": "endTurn" }),
        )
        .expect("a sampling answer");
        assert!(matches!(sampled, wit::Answer::Sampled(ref s) if s.model == "m"));
        let elicited = answer_of(
            CapabilityKind::ClientElicit,
            json!({ "action": "accept", "content": { "name": "Alice" } }),
        )
        .expect("an elicitation answer");
        assert!(matches!(elicited,
            wit::Answer::Elicited(ref e) if e.content.as_deref() == Some(r#"{"name":"Alice"}"#)));
        let roots = answer_of(
            CapabilityKind::ClientListRoots,
            json!({ "roots": [{ "uri": "file:///r", "name": "R" }] }),
        )
        .expect("roots");
        assert!(matches!(roots, wit::Answer::Roots(ref r) if r.len() == 1));
        for (kind, wrong) in [
            (CapabilityKind::ClientSample, json!({ "action": "accept" })),
            (CapabilityKind::ClientElicit, json!({ "role": "user" })),
            (
                CapabilityKind::ClientElicit,
                json!({ "action": "accept", "content": 5 }),
            ),
            (
                CapabilityKind::ClientListRoots,
                json!({ "roots": [{ "name": 1 }] }),
            ),
        ] {
            assert!(answer_of(kind, wrong.clone()).is_err(), "{wrong}");
        }
    }
}
