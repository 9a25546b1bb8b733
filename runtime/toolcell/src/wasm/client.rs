//! The host side of the contract's `client` interface: what a guest's `log`, `progress`,
//! `features` and `ask` do.
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
}

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
            keys: HashSet::new(),
            used: ClientUse::default(),
        }
    }

    /// Granted, or gated with a person to ask.
    fn granted(&self, kind: CapabilityKind) -> bool {
        self.granted.contains(&kind) || (self.approval.is_some() && self.gated.contains(&kind))
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
                    tracing::warn!(%error, tool = %self.tool, "an approval could not be saved");
                }
                self.gated.retain(|gated| *gated != kind);
                self.granted.push(kind);
                Ok(())
            }
            Approval::Deny => Err(wit::AskError::Denied(format!(
                "a person denied {} on {resource:?}",
                kind.name()
            ))),
            Approval::NoAnswer => Err(wit::AskError::Denied(format!(
                "{} on {resource:?} needs a person's approval, and none came",
                kind.name()
            ))),
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
            self.holds(CapabilityKind::ClientLog) && wanted,
            self.used.logs < MAX_LOGS_PER_CALL,
            &self.link,
        ) else {
            self.used.dropped = self.used.dropped.saturating_add(1);
            return;
        };
        let link = Arc::clone(link);
        self.used.logs += 1;
        let logger = logger.map(|name| cut(name, MAX_LOG_MESSAGE_BYTES));
        link.log(level, logger, cut(message, MAX_LOG_MESSAGE_BYTES))
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
            self.holds(CapabilityKind::ClientProgress),
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
        // Every question is well formed and offered: now a person decides the gated kinds.
        for kind in &kinds {
            if self.gated.contains(kind) {
                self.approve(*kind).await?;
            }
        }
        self.rounds += 1;
        self.used.questions += count;
        self.used.question_bytes += bytes;
        self.keys.extend(keys);
        let keys: Vec<String> = asked.iter().map(|question| question.key.clone()).collect();
        let answers = link.ask(asked).await.map_err(|failure| match failure {
            crate::call::client::AskFailure::Unsupported(why) => wit::AskError::Unsupported(why),
            crate::call::client::AskFailure::Failed(why) => wit::AskError::Failed(why),
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

/// What a person reads of a tool's question: the tool's name first, so they can tell it from
/// the host's own approval questions.
fn labelled(tool: &str, message: &str) -> String {
    format!("[tool {tool}] {message}")
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
            if !page.url.starts_with("https://") || page.url.len() > 2048 {
                return Err(wit::AskError::Invalid(
                    "a URL for the person must be https, at most 2048 bytes".to_owned(),
                ));
            }
            (
                "elicitation/create",
                json!({
                    "mode": "url",
                    "message": labelled(tool, &page.message),
                    "url": page.url,
                    "elicitationId": format!("{tool}-{}", crate::audit::next_record_id()),
                }),
            )
        }
        wit::Request::ListRoots => ("roots/list", json!({})),
    })
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
        if kind == Some("array") && property.get("items").is_none_or(|items| !items.is_object()) {
            return Err(format!("form property {name:?} is an array without items"));
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
                    let media = crate::wasm::bindings::generated::toolcell::tool::types::Media {
                        mime_type: text(content, "mimeType")?,
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
