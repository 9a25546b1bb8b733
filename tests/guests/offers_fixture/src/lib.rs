//! The MCP conformance suite's prompts, resources and completion (`@modelcontextprotocol/
//! conformance`: `prompts-*`, `resources-*`, `completion-complete`), offered by one component of
//! `toolcell:tool@0.4.0`'s `provider` world: the names and URIs are the suite's, and each answer
//! is made from what was asked (the arguments, the URI's variable), never from the test's
//! expected values; `test_input_required_result_prompt` asks the person for the context it
//! is made from. See `tests/src/offers.rs` and `tests/src/conformance.rs`.

wit_bindgen::generate!({ world: "provider", path: "../../../wit" });

use exports::toolcell::tool::completion::{Completion, Guest as Completes, Reference};
use exports::toolcell::tool::prompts::{
    Argument, Guest as Prompts, Message, Prompt, PromptInfo, Role,
};
use exports::toolcell::tool::resources::{
    Contents, Guest as Resources, Listing, ResourceInfo, TemplateInfo,
};
use toolcell::tool::client::{self, Action, Answer, AskError, Elicited, Form, Question, Request};
use toolcell::tool::types::{
    ClientFeature, ClientNeed, EmbeddedResource, Media, Part, ResourceContents, ToolError,
};

struct Fixture;

/// A 1×1 red PNG.
const PIXEL: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\
      \x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\
      \x89\x00\x00\x00\x0d\x49\x44\x41\x54\x78\xda\x63\xfc\xcf\xc0\xf0\
      \x1f\x00\x05\x05\x02\x00\x5f\xc8\xf1\xd2\x00\x00\x00\x00\x49\x45\
      \x4e\x44\xae\x42\x60\x82";

/// The values `test_prompt_with_arguments`'s arguments are completed from.
const WORDS: &[&str] = &["test", "testing", "tested", "value", "valid"];

fn prompt(name: &str, description: &str, arguments: Vec<Argument>) -> PromptInfo {
    PromptInfo {
        name: name.to_owned(),
        title: None,
        description: Some(description.to_owned()),
        arguments,
        client_needs: Vec::new(),
    }
}

fn argument(name: &str, description: &str, required: bool) -> Argument {
    Argument {
        name: name.to_owned(),
        title: None,
        description: Some(description.to_owned()),
        required,
    }
}

fn user(content: Part) -> Message {
    Message {
        role: Role::User,
        content,
    }
}

/// Ask the person what context the prompt should use: the prompt's text, made from their
/// answer, or why there is none (a client that cannot be asked gets a prompt that says so).
fn ask_context() -> Result<String, ToolError> {
    let form = Request::Elicit(Form {
        message: "What context should the prompt use?".to_owned(),
        requested_schema:
            r#"{"type":"object","properties":{"context":{"type":"string"}},"required":["context"]}"#
                .to_owned(),
    });
    let asked = client::ask(&[Question {
        key: "user_context".to_owned(),
        request: form,
    }]);
    match asked.map(|mut answers| answers.pop()) {
        Ok(Some(Answer::Elicited(Elicited {
            action: Action::Accept,
            content: Some(content),
        }))) => Ok(format!("Answer in this context: {content}")),
        Ok(_) => Ok("Answer without any particular context: the person gave none.".to_owned()),
        Err(AskError::Unsupported(_) | AskError::Denied(_)) => {
            Ok("Answer without any particular context: the person could not be asked.".to_owned())
        }
        Err(error) => Err(ToolError::Failed(format!(
            "asking for the context: {error:?}"
        ))),
    }
}

fn given<'a>(arguments: &'a [(String, String)], name: &str) -> Option<&'a str> {
    arguments
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

impl Prompts for Fixture {
    fn list_prompts() -> Vec<PromptInfo> {
        vec![
            prompt("test_simple_prompt", "A prompt of one message.", Vec::new()),
            prompt(
                "test_prompt_with_arguments",
                "A prompt filled from two arguments.",
                vec![
                    argument("arg1", "The first argument.", true),
                    argument("arg2", "The second argument.", true),
                ],
            ),
            prompt(
                "test_prompt_with_embedded_resource",
                "A prompt that embeds the resource it is given.",
                vec![argument("resourceUri", "The URI to embed.", true)],
            ),
            prompt(
                "test_prompt_with_image",
                "A prompt with an image.",
                Vec::new(),
            ),
            PromptInfo {
                client_needs: vec![ClientNeed {
                    feature: ClientFeature::Elicit,
                    required: false,
                }],
                ..prompt(
                    "test_input_required_result_prompt",
                    "A prompt built around the context the person gives when asked.",
                    Vec::new(),
                )
            },
        ]
    }

    fn get(name: String, arguments: Vec<(String, String)>) -> Result<Prompt, ToolError> {
        let messages = match name.as_str() {
            "test_simple_prompt" => vec![user(Part::Text(
                "This is a simple prompt for testing.".to_owned(),
            ))],
            "test_prompt_with_arguments" => {
                let first = given(&arguments, "arg1").unwrap_or_default();
                let second = given(&arguments, "arg2").unwrap_or_default();
                vec![user(Part::Text(format!(
                    "Prompt with arguments: arg1='{first}', arg2='{second}'"
                )))]
            }
            "test_prompt_with_embedded_resource" => {
                let uri = given(&arguments, "resourceUri").unwrap_or_default();
                vec![
                    user(Part::Resource(EmbeddedResource {
                        uri: uri.to_owned(),
                        mime_type: Some("text/plain".to_owned()),
                        contents: ResourceContents::Text(format!("The contents of {uri}.")),
                    })),
                    user(Part::Text(
                        "Please process the embedded resource above.".to_owned(),
                    )),
                ]
            }
            "test_prompt_with_image" => vec![
                user(Part::Image(Media {
                    mime_type: "image/png".to_owned(),
                    data: PIXEL.to_vec(),
                })),
                user(Part::Text("Please analyze the image above.".to_owned())),
            ],
            "test_input_required_result_prompt" => vec![user(Part::Text(ask_context()?))],
            other => return Err(ToolError::NotFound(format!("no prompt {other}"))),
        };
        Ok(Prompt {
            description: None,
            messages,
        })
    }
}

fn resource(uri: &str, name: &str, mime_type: &str) -> ResourceInfo {
    ResourceInfo {
        uri: uri.to_owned(),
        name: name.to_owned(),
        title: None,
        description: Some(format!("The suite's {name}.")),
        mime_type: Some(mime_type.to_owned()),
        size: None,
    }
}

impl Resources for Fixture {
    fn list_resources() -> Listing {
        Listing {
            resources: vec![
                resource("test://static-text", "static-text", "text/plain"),
                resource("test://static-binary", "static-binary", "image/png"),
                resource("test://watched-resource", "watched-resource", "text/plain"),
            ],
            templates: vec![TemplateInfo {
                uri_template: "test://template/{id}/data".to_owned(),
                name: "template-data".to_owned(),
                title: None,
                description: Some("Data of the item `id`.".to_owned()),
                mime_type: Some("application/json".to_owned()),
            }],
        }
    }

    fn read(uri: String, variables: Vec<(String, String)>) -> Result<Vec<Contents>, ToolError> {
        let text = |mime: &str, text: String| Contents {
            uri: uri.clone(),
            mime_type: Some(mime.to_owned()),
            body: ResourceContents::Text(text),
        };
        let contents = match uri.as_str() {
            "test://static-text" => text(
                "text/plain",
                "This is the content of the static text resource.".to_owned(),
            ),
            "test://static-binary" => Contents {
                uri: uri.clone(),
                mime_type: Some("image/png".to_owned()),
                body: ResourceContents::Blob(PIXEL.to_vec()),
            },
            "test://watched-resource" => text(
                "text/plain",
                "A resource a client may subscribe to.".to_owned(),
            ),
            _ => match given(&variables, "id") {
                Some(id) => text(
                    "application/json",
                    format!(
                        "{{\"id\":\"{id}\",\"templateTest\":true,\"data\":\"Data for ID: {id}\"}}"
                    ),
                ),
                None => return Err(ToolError::NotFound(format!("no resource {uri}"))),
            },
        };
        Ok(vec![contents])
    }
}

impl Completes for Fixture {
    fn complete(
        reference: Reference,
        argument: String,
        value: String,
        _context: Vec<(String, String)>,
    ) -> Result<Completion, ToolError> {
        let values: Vec<String> = match (&reference, argument.as_str()) {
            (Reference::Prompt(name), "arg1" | "arg2") if name == "test_prompt_with_arguments" => {
                WORDS
                    .iter()
                    .filter(|word| word.starts_with(value.as_str()))
                    .map(|word| (*word).to_owned())
                    .collect()
            }
            (Reference::ResourceTemplate(_), "id") => {
                (1..=3).map(|n| format!("{value}{n}")).collect()
            }
            _ => Vec::new(),
        };
        Ok(Completion {
            total: Some(values.len() as u32),
            values,
            has_more: false,
        })
    }
}

export!(Fixture);
