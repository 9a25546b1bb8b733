//! `policy`: the policy parser.

use toolcell::Policy;
use toolcell::fuzzing::file_rules;
use toolcell::policy::ToolPolicy;

/// `Policy::from_toml` on `data` (UTF-8, lossily): it answers `Ok` or `Err` and never panics;
/// it answers the same twice; a policy it accepts says what the TOML says about each tool it
/// names (`core`, the lower-cased `sha256`, a rule for each capability named), and nothing
/// about a tool it does not name.
pub fn check_policy(data: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(data);
    let first = Policy::from_toml(&text);
    let second = Policy::from_toml(&text);
    let policy = match (first, second) {
        (Err(one), Err(two)) if one == two => {
            return if one.message().is_empty() {
                Err("an empty error".to_owned())
            } else {
                Ok(())
            };
        }
        (Ok(policy), Ok(again)) => {
            if file_rules(&policy) != file_rules(&again) || policy.sets_fuel() != again.sets_fuel()
            {
                return Err("two parses of the same text differ".to_owned());
            }
            policy
        }
        (one, two) => {
            return Err(format!(
                "two parses of the same text differ: {:?} / {:?}",
                one.err(),
                two.err()
            ));
        }
    };
    let table: toml::Table = toml::from_str(&text)
        .map_err(|error| format!("the policy parsed but the TOML does not: {error}"))?;
    let tools = match table.get("tools") {
        Some(toml::Value::Table(tools)) => tools.clone(),
        Some(_) => return Err("the policy parsed with a `tools` that is no table".to_owned()),
        None => toml::Table::new(),
    };
    for (name, entry) in &tools {
        let tool = policy.tool(name);
        let core = entry
            .get("core")
            .and_then(toml::Value::as_bool)
            .unwrap_or(false);
        if tool.core != core {
            return Err(format!(
                "tools.{name}: core is {core} but parsed as {}",
                tool.core
            ));
        }
        let sha256 = entry
            .get("sha256")
            .and_then(toml::Value::as_str)
            .map(str::to_lowercase);
        if tool.sha256 != sha256 {
            return Err(format!(
                "tools.{name}: sha256 {sha256:?} parsed as {:?}",
                tool.sha256
            ));
        }
        let named = ["network", "env", "clock"]
            .iter()
            .filter(|key| entry.get(**key).is_some())
            .count()
            + entry
                .get("filesystem")
                .and_then(toml::Value::as_table)
                .map_or(0, |fs| {
                    ["read", "write"]
                        .iter()
                        .filter(|key| fs.get(**key).is_some())
                        .count()
                });
        if tool.rules.len() != named {
            return Err(format!(
                "tools.{name}: {named} capabilities named, {} rules parsed",
                tool.rules.len()
            ));
        }
    }
    let unnamed = (0..)
        .map(|n| format!("fuzz-unnamed-{n}"))
        .find(|name| !tools.contains_key(name))
        .unwrap_or_default();
    if policy.tool(&unnamed) != ToolPolicy::default() {
        return Err(format!(
            "a tool the policy does not name has {:?}",
            policy.tool(&unnamed)
        ));
    }
    Ok(())
}
