//! What a component offers beside tools (`toolcell:tool@0.4.0`'s `prompts`, `resources` and
//! `completion` interfaces), as the host keeps it: checked once at load, within the bounds
//! below, and kept in the cache's index like a tool's description.
//!
//! A prompt's `get`, a resource's `read` and a `complete` each run in a fresh instance with no
//! authority, through the pipeline a call takes (see `pipeline/offers.rs`), under a name of
//! their own that no tool can have (`prompt:NAME`, `resource:URI`, `template:NAME`,
//! `completion:prompt:NAME`, `completion:template:NAME`: a tool's name holds no `:`).

pub use crate::call::answered::{Answered, Role};
use crate::call::content::{MAX_URI_BYTES, check_uri};
use crate::tool::info::MAX_DESCRIPTION_BYTES;
use serde::{Deserialize, Serialize};

/// The most prompts one component may offer: far past any real server's, small enough that a
/// component's listing is read and kept in a bounded index entry.
pub const MAX_PROMPTS: usize = 1000;

/// The most resources one component may list (a server with more offers a template).
pub const MAX_RESOURCES: usize = 1000;

/// The most URI templates one component may offer: each read is matched against every one.
pub const MAX_TEMPLATES: usize = 100;

/// The most arguments a prompt may take (a tool's capabilities are bounded alike).
pub const MAX_PROMPT_ARGUMENTS: usize = 32;

/// The most variables a URI template may hold.
pub const MAX_TEMPLATE_VARIABLES: usize = 16;

/// The longest prompt name, argument name or template variable, in characters (a tool name's
/// limit).
pub const MAX_OFFER_NAME_CHARS: usize = 64;

/// The longest resource name or title, in bytes (a link's name is bounded alike).
pub const MAX_OFFER_TITLE_BYTES: usize = 1024;

/// The most values one completion may carry (MCP's own bound).
pub const MAX_COMPLETION_VALUES: usize = 100;

/// The longest completion value, in bytes: a value is typed into one argument.
pub const MAX_COMPLETION_VALUE_BYTES: usize = 1024;

/// The most bytes of text one component's declarations may hold in all (names, titles,
/// descriptions, URIs): they are kept in the index and the catalog, and sent whole with each
/// list, so a thousand prompts of long descriptions are refused rather than carried.
pub const MAX_OFFERS_BYTES: usize = 1 << 20;

/// The longest value of one prompt argument or completion input, in bytes: an argument is
/// typed by a person, and the whole request stays far below a call's argument limit.
pub const MAX_ARGUMENT_VALUE_BYTES: usize = 64 * 1024;

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// `^[a-zA-Z0-9_.-]{1,64}$`.
    pub name: String,
    /// A title for people.
    pub title: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Whether a `get` without it is refused.
    pub required: bool,
}

/// A prompt a component offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptInfo {
    /// `^[a-zA-Z0-9_.-]{1,64}$`, unique across the runtime's components.
    pub name: String,
    /// A title for people.
    pub title: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Its arguments, at most [`MAX_PROMPT_ARGUMENTS`].
    pub arguments: Vec<PromptArgument>,
    /// The ways its `get` talks to the client (`client.log`, `client.elicit`, ...), each
    /// decided per request by the policy of `prompt:NAME`, as a tool's are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_needs: Vec<ClientNeed>,
}

/// A way a prompt talks to the client of its `get`, and whether it can work without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientNeed {
    /// Which way: one of the `client.*` capability kinds.
    pub kind: crate::tool::info::CapabilityKind,
    /// Whether a request whose client lacks it (or whose policy refuses it) is refused before
    /// the prompt runs.
    pub required: bool,
}

/// A resource a component lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceInfo {
    /// Its URI, unique across the runtime's components.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A title for people.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// Its MIME type, if known.
    pub mime_type: Option<String>,
    /// Its size in bytes, if known.
    pub size: Option<u64>,
}

/// A URI template a component offers: a family of resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateInfo {
    /// `scheme://path/{variable}/...` (see [`Template`]).
    pub uri_template: String,
    /// Its name, unique across the runtime's components.
    pub name: String,
    /// A title for people.
    pub title: Option<String>,
    /// What it is.
    pub description: Option<String>,
    /// The MIME type of what it reads, if one.
    pub mime_type: Option<String>,
}

/// What one component offers beside its tool, as checked at load.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offers {
    /// Its prompts.
    pub prompts: Vec<PromptInfo>,
    /// The resources it lists.
    pub resources: Vec<ResourceInfo>,
    /// Its URI templates.
    pub templates: Vec<TemplateInfo>,
    /// Whether it exports `completion` (its prompts and templates are then completed by it).
    pub completes: bool,
}

/// What is completed: a prompt's argument or a template's variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", content = "name", rename_all = "snake_case")]
pub enum Reference {
    /// A prompt, by name.
    Prompt(String),
    /// A resource template, by its URI template.
    ResourceTemplate(String),
}

impl Offers {
    /// Whether it offers nothing at all.
    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty()
            && self.resources.is_empty()
            && self.templates.is_empty()
            && !self.completes
    }

    /// Check what a component declared: names, bounds, URIs and templates. The error says
    /// what is wrong, for the person who wrote the component.
    pub(crate) fn checked(self) -> Result<Offers, String> {
        if self.prompts.len() > MAX_PROMPTS {
            return Err(format!(
                "it offers {} prompts; at most {MAX_PROMPTS} are read",
                self.prompts.len()
            ));
        }
        if self.resources.len() > MAX_RESOURCES {
            return Err(format!(
                "it lists {} resources; at most {MAX_RESOURCES} are read",
                self.resources.len()
            ));
        }
        if self.templates.len() > MAX_TEMPLATES {
            return Err(format!(
                "it offers {} URI templates; at most {MAX_TEMPLATES} are read",
                self.templates.len()
            ));
        }
        let total = self.text_bytes();
        if total > MAX_OFFERS_BYTES {
            return Err(format!(
                "its prompts, resources and templates are {total} bytes of text; at most \
                 {MAX_OFFERS_BYTES} are kept"
            ));
        }
        let mut names = std::collections::HashSet::new();
        for prompt in &self.prompts {
            let at = |why: String| format!("prompt {}: {why}", echoed(&prompt.name));
            check_name("its name", &prompt.name).map_err(at)?;
            if !names.insert(prompt.name.as_str()) {
                return Err(at("offered twice".to_owned()));
            }
            check_texts(prompt.title.as_deref(), prompt.description.as_deref()).map_err(at)?;
            if prompt.arguments.len() > MAX_PROMPT_ARGUMENTS {
                return Err(at(format!(
                    "it takes {} arguments; at most {MAX_PROMPT_ARGUMENTS}",
                    prompt.arguments.len()
                )));
            }
            let mut arguments = std::collections::HashSet::new();
            for argument in &prompt.arguments {
                check_name("an argument's name", &argument.name).map_err(at)?;
                if !arguments.insert(argument.name.as_str()) {
                    return Err(at(format!(
                        "argument {} is declared twice",
                        echoed(&argument.name)
                    )));
                }
                check_texts(argument.title.as_deref(), argument.description.as_deref())
                    .map_err(at)?;
            }
        }
        let mut uris = std::collections::HashSet::new();
        for resource in &self.resources {
            let at = |why: String| format!("resource {}: {why}", echoed(&resource.uri));
            check_uri(&resource.uri).map_err(at)?;
            if !uris.insert(resource.uri.as_str()) {
                return Err(at("listed twice".to_owned()));
            }
            check_title("its name", &resource.name).map_err(at)?;
            check_texts(resource.title.as_deref(), resource.description.as_deref()).map_err(at)?;
            check_mime(resource.mime_type.as_deref()).map_err(at)?;
        }
        let mut templates = std::collections::HashSet::new();
        for template in &self.templates {
            let at = |why: String| format!("URI template {}: {why}", echoed(&template.name));
            check_title("its name", &template.name).map_err(at)?;
            if !templates.insert(template.name.as_str()) {
                return Err(at("offered twice".to_owned()));
            }
            Template::parse(&template.uri_template).map_err(at)?;
            check_texts(template.title.as_deref(), template.description.as_deref()).map_err(at)?;
            check_mime(template.mime_type.as_deref()).map_err(at)?;
        }
        Ok(self)
    }
}

impl Offers {
    /// The bytes of text its declarations hold.
    fn text_bytes(&self) -> usize {
        let text = |text: &Option<String>| text.as_ref().map_or(0, String::len);
        let prompts = self.prompts.iter().map(|prompt| {
            prompt.name.len()
                + text(&prompt.title)
                + text(&prompt.description)
                + prompt
                    .arguments
                    .iter()
                    .map(|a| a.name.len() + text(&a.title) + text(&a.description))
                    .sum::<usize>()
        });
        let resources = self.resources.iter().map(|r| {
            r.uri.len() + r.name.len() + text(&r.title) + text(&r.description) + text(&r.mime_type)
        });
        let templates = self.templates.iter().map(|t| {
            t.uri_template.len()
                + t.name.len()
                + text(&t.title)
                + text(&t.description)
                + text(&t.mime_type)
        });
        prompts.chain(resources).chain(templates).sum()
    }
}

impl PromptInfo {
    /// The JSON Schema of its arguments, which every `get` is validated against before a guest
    /// sees it: an object of strings, the required ones required, nothing else.
    pub(crate) fn arguments_schema(&self) -> serde_json::Value {
        let properties: serde_json::Map<String, serde_json::Value> = self
            .arguments
            .iter()
            .map(|argument| {
                (
                    argument.name.clone(),
                    serde_json::json!({ "type": "string", "maxLength": MAX_ARGUMENT_VALUE_BYTES }),
                )
            })
            .collect();
        let required: Vec<&str> = self
            .arguments
            .iter()
            .filter(|argument| argument.required)
            .map(|argument| argument.name.as_str())
            .collect();
        serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }
}

/// A URI template, parsed: literal text and variables, each variable between literals. The
/// level of RFC 6570 this serves is its first, within path segments: `{name}` stands for one
/// or more characters other than `/`, `?` and `#`; no operators, no modifiers, no two
/// variables side by side (where one would end is then anyone's guess).
#[derive(Debug, Clone)]
pub struct Template {
    pieces: Vec<Piece>,
    /// The pieces as a regex: each literal escaped, each variable `([^/?#]+?)`, anchored at
    /// both ends. Matched in time linear in the URI, whatever the template.
    regex: regex::Regex,
}

impl PartialEq for Template {
    fn eq(&self, other: &Self) -> bool {
        self.pieces == other.pieces
    }
}

impl Eq for Template {}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Variable(String),
}

impl Template {
    /// Parse `text`; the error says what in it is not a template this host matches.
    pub fn parse(text: &str) -> Result<Template, String> {
        if text.len() > MAX_URI_BYTES {
            return Err(format!(
                "it is {} bytes; at most {MAX_URI_BYTES}",
                text.len()
            ));
        }
        // The template with its variables blanked out must itself be a URI.
        let mut pieces = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match rest.find(['{', '}']) {
                Some(at) if rest.as_bytes()[at] == b'}' => {
                    return Err("a `}` closes no variable".to_owned());
                }
                Some(at) => {
                    if at > 0 {
                        pieces.push(Piece::Literal(rest[..at].to_owned()));
                    }
                    let after = &rest[at + 1..];
                    let Some(end) = after.find('}') else {
                        return Err("a `{` is never closed".to_owned());
                    };
                    let name = &after[..end];
                    let fits = !name.is_empty()
                        && name.len() <= MAX_OFFER_NAME_CHARS
                        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
                    if !fits {
                        return Err(format!(
                            "variable {} must be 1 to {MAX_OFFER_NAME_CHARS} characters from \
                             a-z A-Z 0-9 _ (no operators: only level 1 of RFC 6570 is served)",
                            echoed(name)
                        ));
                    }
                    if matches!(pieces.last(), Some(Piece::Variable(_))) {
                        return Err(format!(
                            "variable {} follows another with nothing between them",
                            echoed(name)
                        ));
                    }
                    if pieces
                        .iter()
                        .any(|piece| matches!(piece, Piece::Variable(other) if other == name))
                    {
                        return Err(format!("variable {} appears twice", echoed(name)));
                    }
                    pieces.push(Piece::Variable(name.to_owned()));
                    rest = &after[end + 1..];
                }
                None => {
                    pieces.push(Piece::Literal(rest.to_owned()));
                    rest = "";
                }
            }
        }
        let variables = pieces
            .iter()
            .filter(|piece| matches!(piece, Piece::Variable(_)))
            .count();
        if variables == 0 {
            return Err("it has no variable (list it as a resource instead)".to_owned());
        }
        if variables > MAX_TEMPLATE_VARIABLES {
            return Err(format!(
                "it has {variables} variables; at most {MAX_TEMPLATE_VARIABLES}"
            ));
        }
        let Some(Piece::Literal(scheme)) = pieces.first() else {
            return Err("it must begin with a scheme, not a variable".to_owned());
        };
        if !scheme.contains(':') {
            return Err("its scheme must come before any variable".to_owned());
        }
        let blanked: String = pieces
            .iter()
            .map(|piece| match piece {
                Piece::Literal(text) => text.as_str(),
                Piece::Variable(_) => "x",
            })
            .collect();
        check_uri(&blanked)?;
        let mut pattern = String::from("^");
        for piece in &pieces {
            match piece {
                Piece::Literal(text) => pattern.push_str(&regex::escape(text)),
                Piece::Variable(_) => pattern.push_str("([^/?#]+?)"),
            }
        }
        pattern.push('$');
        let regex = regex::Regex::new(&pattern)
            .map_err(|error| format!("it cannot be matched: {error}"))?;
        Ok(Template { pieces, regex })
    }

    /// The template with its variables' names left out (`test://items/{}/data`): two
    /// templates of one shape match the same URIs.
    pub fn shape(&self) -> String {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Literal(text) => text.as_str(),
                Piece::Variable(_) => "{}",
            })
            .collect()
    }

    /// Its variables, in order.
    pub fn variables(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|piece| match piece {
            Piece::Variable(name) => Some(name.as_str()),
            Piece::Literal(_) => None,
        })
    }

    /// What each variable matched in `uri`, in order, if `uri` is of this template. A
    /// variable takes the fewest characters (one at least, none of `/?#`) after which the rest
    /// still matches. A URI longer than [`MAX_URI_BYTES`], or not a URI, matches nothing.
    pub fn matches(&self, uri: &str) -> Option<Vec<(String, String)>> {
        if check_uri(uri).is_err() {
            return None;
        }
        let captures = self.regex.captures(uri)?;
        Some(
            self.variables()
                .zip(captures.iter().skip(1))
                .map(|(name, found)| {
                    (
                        name.to_owned(),
                        found.map(|m| m.as_str().to_owned()).unwrap_or_default(),
                    )
                })
                .collect(),
        )
    }
}

/// A name of a prompt or argument: `^[a-zA-Z0-9_.-]{1,64}$`.
fn check_name(what: &str, name: &str) -> Result<(), String> {
    let fits = !name.is_empty()
        && name.len() <= MAX_OFFER_NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if fits {
        Ok(())
    } else {
        Err(format!(
            "{what} {} must be 1 to {MAX_OFFER_NAME_CHARS} characters from a-z A-Z 0-9 _ - .",
            echoed(name)
        ))
    }
}

/// A name or title: not empty, bounded, plain.
fn check_title(what: &str, text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err(format!("{what} is empty"));
    }
    check_text(what, text, MAX_OFFER_TITLE_BYTES)
}

/// A title and a description, where given: bounded and plain.
fn check_texts(title: Option<&str>, description: Option<&str>) -> Result<(), String> {
    if let Some(title) = title {
        check_text("its title", title, MAX_OFFER_TITLE_BYTES)?;
    }
    if let Some(description) = description
        && description.len() > MAX_DESCRIPTION_BYTES
    {
        return Err(format!(
            "its description is {} bytes; at most {MAX_DESCRIPTION_BYTES}",
            description.len()
        ));
    }
    Ok(())
}

/// Text shown on one line: bounded, no control characters.
fn check_text(what: &str, text: &str, limit: usize) -> Result<(), String> {
    if text.len() > limit {
        return Err(format!("{what} is {} bytes; at most {limit}", text.len()));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("{what} {} holds a control character", echoed(text)));
    }
    Ok(())
}

/// A declared MIME type: short and of the form `type/subtype`.
fn check_mime(mime: Option<&str>) -> Result<(), String> {
    match mime {
        None => Ok(()),
        Some(mime)
            if mime.len() <= 255
                && mime.split_once('/').is_some_and(|(kind, sub)| {
                    !kind.is_empty()
                        && !sub.is_empty()
                        && mime
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"/+-.;=_ ".contains(&b))
                }) =>
        {
            Ok(())
        }
        Some(mime) => Err(format!("its MIME type {} is not one", echoed(mime))),
    }
}

fn echoed(text: &str) -> String {
    crate::call::names::echoed(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_matches_what_its_variables_stand_for() {
        let template = Template::parse("test://template/{id}/data").expect("a template");
        assert_eq!(
            template.matches("test://template/123/data"),
            Some(vec![("id".to_owned(), "123".to_owned())])
        );
        // A variable never spans a `/`, and takes at least one character.
        assert_eq!(template.matches("test://template/1/2/data"), None);
        assert_eq!(template.matches("test://template//data"), None);
        assert_eq!(template.matches("test://template/123/data/more"), None);
        let two = Template::parse("x://{a}-{b}").expect("a template");
        assert_eq!(
            two.matches("x://p-q-r"),
            Some(vec![
                ("a".to_owned(), "p".to_owned()),
                ("b".to_owned(), "q-r".to_owned())
            ])
        );
    }

    /// A template whose backtracking would take exponential time (sixteen variables between
    /// one-character literals) against a URI made to defeat it: the regex answers, no match.
    #[test]
    fn a_template_is_matched_in_time_linear_in_the_uri() {
        let variables: Vec<String> = (b'a'..=b'p')
            .map(|c| format!("{{{}}}", c as char))
            .collect();
        let template =
            Template::parse(&format!("h://{}!", variables.join("-"))).expect("a template");
        let uri = format!("h://{}", "-".repeat(2000));
        assert_eq!(template.matches(&uri), None);
        assert_eq!(
            template.matches(&format!("h://{}", "x".repeat(3000))),
            None,
            "too long"
        );
        assert!(
            Template::parse("x://{a}/y").expect("a").shape()
                == Template::parse("x://{b}/y").expect("b").shape()
        );
    }

    #[test]
    fn templates_this_host_cannot_match_are_refused() {
        for (text, why) in [
            ("test://{a}{b}", "follows another"),
            ("test://{+path}", "no operators"),
            ("test://{a}/{a}", "twice"),
            ("test://static", "no variable"),
            ("{scheme}://x", "scheme"),
            ("test://{a", "never closed"),
            ("test://a}", "closes no variable"),
            ("test://a b/{x}", "not a URI"),
        ] {
            let error = Template::parse(text).expect_err(text);
            assert!(error.contains(why), "{text}: {error}");
        }
    }

    #[test]
    fn offers_are_checked_for_names_twins_and_bounds() {
        let prompt = |name: &str| PromptInfo {
            name: name.to_owned(),
            title: None,
            description: None,
            arguments: Vec::new(),
            client_needs: Vec::new(),
        };
        let offers = |prompts| Offers {
            prompts,
            ..Offers::default()
        };
        assert!(offers(vec![prompt("ok.name-1")]).checked().is_ok());
        assert!(offers(vec![prompt("no spaces")]).checked().is_err());
        assert!(offers(vec![prompt("a"), prompt("a")]).checked().is_err());
        let many = (0..=MAX_PROMPTS)
            .map(|i| prompt(&format!("p{i}")))
            .collect();
        assert!(offers(many).checked().is_err());
        let resource = ResourceInfo {
            uri: "not a uri".to_owned(),
            name: "n".to_owned(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
        };
        let listed = Offers {
            resources: vec![resource],
            ..Offers::default()
        };
        assert!(listed.checked().is_err());
    }

    #[test]
    fn a_prompts_arguments_schema_requires_what_it_declares_and_nothing_else() {
        let prompt = PromptInfo {
            name: "p".to_owned(),
            title: None,
            description: None,
            arguments: vec![
                PromptArgument {
                    name: "a".to_owned(),
                    title: None,
                    description: None,
                    required: true,
                },
                PromptArgument {
                    name: "b".to_owned(),
                    title: None,
                    description: None,
                    required: false,
                },
            ],
            client_needs: Vec::new(),
        };
        let schema = prompt.arguments_schema();
        assert_eq!(schema["required"], serde_json::json!(["a"]));
        assert_eq!(schema["additionalProperties"], serde_json::json!(false));
        assert_eq!(schema["properties"]["b"]["type"], "string");
    }
}
