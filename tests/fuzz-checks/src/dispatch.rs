//! `dispatch`: the loop's `find_tool` / `call_tool` dispatch.

use serde_json::{Value, json};
use toolcell::registry::{CALL_TOOL, Dispatch, Entry, FIND_TOOL, Registry, ToolSchema, dispatch};

/// The registry the dispatch check uses: the seed's (`clock` core, `echo` not), and one more
/// tool found through `find_tool` whose name and description are not ASCII-only.
pub fn dispatch_registry() -> Registry {
    let mut entries = Registry::m2b().entries().to_vec();
    entries.push(Entry {
        schema: ToolSchema {
            name: "Zeta_tool".to_owned(),
            description: "Σίσυφος İstanbul ß: not ASCII.".to_owned(),
            parameters: json!({"type": "object"}),
        },
        core: false,
    });
    Registry::new(entries)
}

/// `dispatch` on a name and arguments split from `data`: the first byte picks the name
/// (`find_tool`, `call_tool`, `echo`, or the text up to the first NUL), the rest (UTF-8,
/// lossily) is the arguments. Checks every row of the table in `call/dispatch.rs`.
pub fn check_dispatch(data: &[u8]) -> Result<(), String> {
    let Some((&selector, rest)) = data.split_first() else {
        return Ok(());
    };
    let rest = String::from_utf8_lossy(rest);
    let (name, arguments) = match selector % 4 {
        0 => (FIND_TOOL, rest.as_ref()),
        1 => (CALL_TOOL, rest.as_ref()),
        2 => ("echo", rest.as_ref()),
        _ => rest.split_once('\0').unwrap_or((rest.as_ref(), "")),
    };
    let registry = dispatch_registry();
    let decided = dispatch(&registry, name, arguments);
    if name != FIND_TOOL && name != CALL_TOOL {
        let expected = Dispatch::Port {
            tool: name.to_owned(),
            arguments: arguments.to_owned(),
        };
        return if decided == expected {
            Ok(())
        } else {
            Err(format!("{name:?} was not routed unchanged: {decided:?}"))
        };
    }
    let parsed = serde_json::from_str::<Value>(arguments).ok();
    if name == FIND_TOOL {
        let Dispatch::Local(text) = decided else {
            return Err(format!("find_tool went to the port: {decided:?}"));
        };
        let query = parsed
            .as_ref()
            .and_then(|value| value.get("query")?.as_str())
            .map(str::to_lowercase)
            .unwrap_or_default();
        let expected: Vec<&ToolSchema> = registry
            .entries()
            .iter()
            .map(|entry| &entry.schema)
            .filter(|schema| {
                !query.is_empty()
                    && (schema.name.to_lowercase().contains(&query)
                        || schema.description.to_lowercase().contains(&query))
            })
            .collect();
        if expected.is_empty() {
            return if text == "No tool matches." {
                Ok(())
            } else {
                Err(format!("no match expected, got {text:?}"))
            };
        }
        let lines: Vec<&str> = text.split('\n').collect();
        let header = format!("{} tool(s) match:", expected.len());
        if lines.len() != expected.len() + 2
            || lines.first() != Some(&header.as_str())
            || lines.last() != Some(&"Call it with call_tool.")
        {
            return Err(format!(
                "find_tool answered {text:?}, expected {header:?} ..."
            ));
        }
        for (line, schema) in lines[1..=expected.len()].iter().zip(&expected) {
            let listed: ToolSchema = serde_json::from_str(line)
                .map_err(|error| format!("find_tool listed {line:?}: {error}"))?;
            if listed != **schema {
                return Err(format!("find_tool listed {listed:?}, expected {schema:?}"));
            }
        }
        return Ok(());
    }
    // call_tool: the port gets a known, non-core tool and exactly the arguments object.
    let call = parsed.as_ref().and_then(Value::as_object);
    let target = call
        .and_then(|call| call.get("name"))
        .and_then(Value::as_str)
        .and_then(|name| registry.get(name))
        .filter(|entry| !entry.core);
    let inner = call
        .and_then(|call| call.get("arguments"))
        .filter(|value| value.is_object());
    match (decided, target, inner) {
        (Dispatch::Port { tool, arguments }, Some(entry), Some(inner)) => {
            if tool != entry.schema.name {
                return Err(format!(
                    "call_tool routed to {tool:?}, not {:?}",
                    entry.schema.name
                ));
            }
            let routed: Value = serde_json::from_str(&arguments)
                .map_err(|error| format!("routed arguments {arguments:?} are not JSON: {error}"))?;
            if routed != *inner {
                return Err(format!("routed {routed} instead of {inner}"));
            }
            Ok(())
        }
        (Dispatch::Local(text), None, _) | (Dispatch::Local(text), _, None) => {
            if text.is_empty() {
                Err("call_tool refused with an empty text".to_owned())
            } else {
                Ok(())
            }
        }
        (decided, target, inner) => Err(format!(
            "call_tool decided {decided:?} for target {target:?} and arguments {inner:?}"
        )),
    }
}
