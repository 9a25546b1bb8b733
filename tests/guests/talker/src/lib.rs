//! Talks to the client that made its call, as its arguments say: log messages, progress, and
//! one round of questions (sampling, a form, a URL, the roots). It declares every way of
//! talking to the client, each optional, so the host's decisions show in what it reports:
//! the features it holds, and the answers (or why there are none), as a JSON object.

use serde::Deserialize;
use serde_json::{Value, json};
use toolcell_guest::client::{self, Answer, AskError, Content, FeatureSet, Level, Request};
use toolcell_guest::{ClientFeature, Info, Tool, ToolError};

struct Talker;

#[derive(Deserialize)]
struct Log {
    level: String,
    message: String,
    #[serde(default)]
    logger: Option<String>,
    /// Send it this many times (a flood).
    #[serde(default = "one")]
    times: u32,
}

fn one() -> u32 {
    1
}

#[derive(Deserialize)]
struct Progress {
    value: f64,
    #[serde(default)]
    total: Option<f64>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize, Clone)]
struct Ask {
    key: String,
    /// Ask the model this prompt.
    #[serde(default)]
    sample: Option<String>,
    /// Ask the person this, with `schema` as the form.
    #[serde(default)]
    elicit: Option<String>,
    #[serde(default)]
    schema: Option<Value>,
    /// Send the person to this page.
    #[serde(default)]
    url: Option<String>,
    /// The sampling request's prompt (or the form's schema) padded by this many bytes (an
    /// oversized question).
    #[serde(default)]
    pad: usize,
    /// This many (empty) model hints on the sampling request: small for the guest, each a
    /// JSON object for the host.
    #[serde(default)]
    hints: usize,
}

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    logs: Vec<Log>,
    #[serde(default)]
    progress: Vec<Progress>,
    #[serde(default)]
    ask: Vec<Ask>,
    /// Ask the questions this many times (each round's keys suffixed with its number).
    #[serde(default = "one")]
    rounds: u32,
}

fn level(name: &str) -> Level {
    match name {
        "debug" => Level::Debug,
        "notice" => Level::Notice,
        "warning" => Level::Warning,
        "error" => Level::Error,
        "critical" => Level::Critical,
        "alert" => Level::Alert,
        "emergency" => Level::Emergency,
        _ => Level::Info,
    }
}

fn request(ask: Ask) -> Request {
    if let Some(prompt) = ask.sample {
        let mut text = prompt;
        text.push_str(&" ".repeat(ask.pad));
        return Request::Sample(client::Sampling {
            messages: vec![client::Message {
                role: client::Role::User,
                content: Content::Text(text),
            }],
            system_prompt: None,
            max_tokens: 100,
            temperature: None,
            stop_sequences: Vec::new(),
            model_preferences: (ask.hints > 0).then(|| client::ModelPreferences {
                hints: vec![String::new(); ask.hints],
                cost_priority: None,
                speed_priority: None,
                intelligence_priority: None,
            }),
        });
    }
    if let Some(message) = ask.elicit {
        let mut schema = ask.schema.unwrap_or_else(
            || json!({ "type": "object", "properties": { "name": { "type": "string" } } }),
        );
        if ask.pad > 0 {
            schema["properties"]["padding"] =
                json!({ "type": "string", "description": "x".repeat(ask.pad) });
        }
        return Request::Elicit(client::Form {
            message,
            requested_schema: schema.to_string(),
        });
    }
    if let Some(url) = ask.url {
        return Request::ElicitUrl(client::UrlRequest {
            message: "Open this page.".to_owned(),
            url,
        });
    }
    Request::ListRoots
}

fn answer_json(answer: Answer) -> Value {
    match answer {
        Answer::Sampled(sampled) => json!({
            "model": sampled.model,
            "text": match sampled.content { Content::Text(text) => text, _ => String::new() },
        }),
        Answer::Elicited(elicited) => json!({
            "action": match elicited.action {
                client::Action::Accept => "accept",
                client::Action::Decline => "decline",
                client::Action::Cancel => "cancel",
            },
            "content": elicited.content.and_then(|text| serde_json::from_str::<Value>(&text).ok()),
        }),
        Answer::Roots(roots) => json!(roots.into_iter().map(|root| root.uri).collect::<Vec<_>>()),
    }
}

fn error_json(error: AskError) -> Value {
    let (kind, why) = match error {
        AskError::Unsupported(why) => ("unsupported", why),
        AskError::Denied(why) => ("denied", why),
        AskError::OverLimit(why) => ("over-limit", why),
        AskError::Invalid(why) => ("invalid", why),
        AskError::Mismatch(why) => ("mismatch", why),
        AskError::Failed(why) => ("failed", why),
    };
    json!({ "kind": kind, "message": why })
}

impl Tool for Talker {
    type Args = Args;
    type Output = String;

    fn describe() -> Info {
        toolcell_guest::talks(
            toolcell_guest::info(
                "talker",
                "Logs, reports progress and asks its client questions, as its arguments say.",
                json!({
                    "type": "object",
                    "properties": {
                        "logs": { "type": "array" },
                        "progress": { "type": "array" },
                        "ask": { "type": "array" }
                    }
                }),
            ),
            &[
                ClientFeature::Log,
                ClientFeature::Progress,
                ClientFeature::Sample,
                ClientFeature::Elicit,
                ClientFeature::ElicitUrl,
                ClientFeature::ListRoots,
            ],
        )
    }

    fn call(args: Args) -> Result<String, ToolError> {
        let held = client::features();
        let features: Vec<&str> = [
            (FeatureSet::LOG, "log"),
            (FeatureSet::PROGRESS, "progress"),
            (FeatureSet::SAMPLE, "sample"),
            (FeatureSet::ELICIT, "elicit"),
            (FeatureSet::ELICIT_URL, "elicit-url"),
            (FeatureSet::LIST_ROOTS, "list-roots"),
        ]
        .into_iter()
        .filter(|(flag, _)| held.contains(*flag))
        .map(|(_, name)| name)
        .collect();
        for log in &args.logs {
            for _ in 0..log.times {
                client::log(level(&log.level), log.logger.as_deref(), &log.message);
            }
        }
        for step in &args.progress {
            client::progress(step.value, step.total, step.message.as_deref());
        }
        let mut report = json!({ "features": features });
        if !args.ask.is_empty() {
            let mut outcomes = Vec::new();
            let asks = args.ask;
            for round in 0..args.rounds {
                let questions: Vec<client::Question> = asks
                    .iter()
                    .map(|ask| client::Question {
                        key: if round == 0 {
                            ask.key.clone()
                        } else {
                            format!("{}{round}", ask.key)
                        },
                        request: request(ask.clone()),
                    })
                    .collect();
                outcomes.push(match client::ask(&questions) {
                    Ok(answers) => json!({ "answers": answers.into_iter().map(answer_json).collect::<Vec<_>>() }),
                    Err(error) => json!({ "ask_error": error_json(error) }),
                });
            }
            // One round: its outcome at the top; several: each, in order.
            if outcomes.len() == 1 {
                let only = outcomes.remove(0);
                if let Some(answers) = only.get("answers") {
                    report["answers"] = answers.clone();
                }
                if let Some(error) = only.get("ask_error") {
                    report["ask_error"] = error.clone();
                }
            } else {
                report["rounds"] = Value::Array(outcomes);
            }
        }
        Ok(report.to_string())
    }
}

toolcell_guest::export_tool!(Talker);
