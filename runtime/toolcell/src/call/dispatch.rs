//! The two calls an agent loop answers itself (`find_tool`, `call_tool`), and the route of
//! every other call to the port.
//!
//! | `name` | `arguments` | result |
//! |---|---|---|
//! | `find_tool` | `{"query": q}` with matches | `Local`: `"<n> tool(s) match:\n"`, one compact JSON schema a line, `"Call it with call_tool."` |
//! | `find_tool` | no match, or not JSON with a string `query` | `Local("No tool matches.")` |
//! | `call_tool` | `{"name": n, "arguments": a}`, `n` known and not core | `Port { tool: n, arguments: a as JSON text }` |
//! | `call_tool` | `n` is a core tool | `Local`: call it directly |
//! | `call_tool` | `n` unknown, or `name` missing | `Local`: `No tool named "<n>"; did you mean ...?` (at most three names) |
//! | `call_tool` | arguments not a JSON object | `Local`: `... needs a JSON object ...` |
//! | anything else | anything | `Port { tool: name, arguments }` unchanged: the port decides |

use crate::call::names;
use crate::call::registry::Registry;
pub use crate::call::registry::{CALL_TOOL, FIND_TOOL};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// What [`dispatch`] decided for one call (more ways may come: match with a wildcard arm).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dispatch {
    /// Answered here, without the port: this text is the tool result.
    Local(String),
    /// For the port: call `tool` with these JSON `arguments`.
    Port {
        /// The tool to call.
        tool: String,
        /// Its arguments, as JSON text.
        arguments: String,
    },
}

/// Decide what one call the model made becomes. See the module docs for the table.
pub fn dispatch(registry: &Registry, name: &str, arguments: &str) -> Dispatch {
    match route(registry, name, arguments) {
        Routed::Local(text) => Dispatch::Local(text),
        Routed::Port { tool, arguments } => Dispatch::Port {
            tool: tool.into_owned(),
            arguments: arguments.into_owned(),
        },
    }
}

/// [`Dispatch`] as the pipeline takes it: a call for the port that is not `call_tool`'s
/// borrows its name and arguments instead of copying them (most calls).
pub(crate) enum Routed<'a> {
    /// Answered here, without the port: this text is the tool result.
    Local(String),
    /// For the port: call `tool` with these JSON `arguments`.
    Port {
        /// The tool to call.
        tool: Cow<'a, str>,
        /// Its arguments, as JSON text.
        arguments: Cow<'a, str>,
    },
}

/// [`dispatch`], borrowing what it passes on unchanged: the one home of the table.
pub(crate) fn route<'a>(registry: &Registry, name: &'a str, arguments: &'a str) -> Routed<'a> {
    match name {
        FIND_TOOL => Routed::Local(find_tool(registry, arguments)),
        CALL_TOOL => match call_tool(registry, arguments) {
            Dispatch::Local(text) => Routed::Local(text),
            Dispatch::Port { tool, arguments } => Routed::Port {
                tool: Cow::Owned(tool),
                arguments: Cow::Owned(arguments),
            },
        },
        _ => Routed::Port {
            tool: Cow::Borrowed(name),
            arguments: Cow::Borrowed(arguments),
        },
    }
}

fn find_tool(registry: &Registry, arguments: &str) -> String {
    let query = serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|value| value.get("query")?.as_str().map(str::to_owned));
    let matches = query.map(|query| registry.find(&query)).unwrap_or_default();
    if matches.is_empty() {
        return "No tool matches.".to_owned();
    }
    let mut text = format!("{} tool(s) match:\n", matches.len());
    for schema in matches {
        // A `ToolSchema` is strings and a JSON value: serializing it cannot fail.
        text.push_str(&serde_json::to_string(schema).unwrap_or_default());
        text.push('\n');
    }
    text.push_str("Call it with call_tool.");
    text
}

fn call_tool(registry: &Registry, arguments: &str) -> Dispatch {
    let Some(call) = serde_json::from_str::<Map<String, Value>>(arguments).ok() else {
        return Dispatch::Local(format!(
            "{CALL_TOOL} needs a JSON object: {{\"name\": \"<tool>\", \"arguments\": {{...}}}}."
        ));
    };
    let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
    let Some(entry) = registry.get(name) else {
        let suggested = names::did_you_mean(&registry.nearest(name));
        let stop = if suggested.is_empty() { "." } else { "" };
        return Dispatch::Local(format!(
            "No tool named {}{suggested}{stop} Use {FIND_TOOL} to search for one.",
            names::echoed(name),
        ));
    };
    if entry.core {
        return Dispatch::Local(format!(
            "\"{name}\" is a core tool: call it directly, not through {CALL_TOOL}."
        ));
    }
    match call.get("arguments") {
        Some(arguments @ Value::Object(_)) => Dispatch::Port {
            tool: name.to_owned(),
            arguments: arguments.to_string(),
        },
        _ => Dispatch::Local(format!(
            "{CALL_TOOL} needs a JSON object as \"arguments\" for \"{name}\", one that fits \
             its schema."
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(text: &str) -> Dispatch {
        Dispatch::Local(text.to_owned())
    }

    fn port(tool: &str, arguments: &str) -> Dispatch {
        Dispatch::Port {
            tool: tool.to_owned(),
            arguments: arguments.to_owned(),
        }
    }

    /// Every row of the table, exactly: `(name, arguments, expected)`.
    #[test]
    fn every_row_of_the_dispatch_table() {
        let echo_line =
            serde_json::to_string(&crate::call::registry::echo_schema()).expect("schema");
        let clock_line =
            serde_json::to_string(&crate::call::registry::clock_schema()).expect("schema");
        let rows: Vec<(&str, &str, Dispatch)> = vec![
            // find_tool with matches: count, one compact schema a line, the hint.
            (
                FIND_TOOL,
                r#"{"query":"ECHO"}"#,
                local(&format!(
                    "1 tool(s) match:\n{echo_line}\nCall it with call_tool."
                )),
            ),
            (
                FIND_TOOL,
                r#"{"query":"RE"}"#,
                local(&format!(
                    "2 tool(s) match:\n{clock_line}\n{echo_line}\nCall it with call_tool."
                )),
            ),
            // find_tool without a match, or without a usable query.
            (FIND_TOOL, r#"{"query":"zzz"}"#, local("No tool matches.")),
            (FIND_TOOL, r#"{"query":""}"#, local("No tool matches.")),
            (FIND_TOOL, r#"{"query":7}"#, local("No tool matches.")),
            (FIND_TOOL, r#"{}"#, local("No tool matches.")),
            (FIND_TOOL, "not json", local("No tool matches.")),
            // call_tool of a known, non-core tool: its arguments as compact JSON text.
            (
                CALL_TOOL,
                r#"{"name":"echo","arguments":{ "text" : "hi" }}"#,
                port("echo", r#"{"text":"hi"}"#),
            ),
        ];
        for (name, arguments, expected) in rows {
            assert_eq!(
                dispatch(&Registry::m2b(), name, arguments),
                expected,
                "dispatch({name:?}, {arguments:?})"
            );
        }
    }

    /// The `Local` rows whose wording is for a model: checked by what they must contain.
    #[test]
    fn call_tool_refusals_say_why() {
        let rows: &[(&str, &str)] = &[
            (r#"{"name":"clock","arguments":{}}"#, "core tool"),
            (r#"{"name":"clock","arguments":{}}"#, "call it directly"),
            (
                r#"{"name":"nope","arguments":{}}"#,
                r#"No tool named "nope""#,
            ),
            (
                r#"{"name":"ecoh","arguments":{}}"#,
                r#"No tool named "ecoh"; did you mean echo? Use find_tool"#,
            ),
            (r#"{"arguments":{}}"#, r#"No tool named """#),
            (r#"{"name":7,"arguments":{}}"#, r#"No tool named """#),
            ("[1,2]", "needs a JSON object"),
            ("not json", "needs a JSON object"),
            (r#""echo""#, "needs a JSON object"),
            (
                r#"{"name":"echo","arguments":"text"}"#,
                "needs a JSON object",
            ),
            (r#"{"name":"echo","arguments":[1]}"#, "needs a JSON object"),
            (r#"{"name":"echo"}"#, "needs a JSON object"),
        ];
        for (arguments, needle) in rows {
            match dispatch(&Registry::m2b(), CALL_TOOL, arguments) {
                Dispatch::Local(text) => assert!(
                    text.contains(needle),
                    "call_tool {arguments}: {text:?} lacks {needle:?}"
                ),
                other => panic!("call_tool {arguments}: expected Local, got {other:?}"),
            }
        }
    }

    /// Any other name goes to the port unchanged, known to the registry or not, valid JSON or not.
    #[test]
    fn every_other_name_goes_to_the_port_unchanged() {
        for (name, arguments) in [
            ("echo", r#"{ "text": "x" }"#),
            ("clock", "{}"),
            ("no_such_tool", "{}"),
            ("echo", "not json at all"),
            ("", ""),
        ] {
            assert_eq!(
                dispatch(&Registry::m2b(), name, arguments),
                port(name, arguments)
            );
        }
    }
}
