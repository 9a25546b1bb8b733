//! A Wassette `policy.yaml`, read into toolcell's rules for a component of plain typed exports.
//!
//! Such a component says nothing of what it needs; the runtimes that serve them ship a
//! `policy.yaml` beside each one, and toolcell reads the same file into exactly the grants it
//! names, no more:
//!
//! ```yaml
//! version: "1.0"
//! permissions:
//!   storage:
//!     allow:
//!       - uri: "fs://data/**"           # read: data/ and below; write: asked, by default
//!         access: ["read", "write"]
//!   network:
//!     allow:
//!       - host: "api.example.com"       # https only, as every toolcell host without a scheme
//!       - host: "http://127.0.0.1:8080/"
//!   environment:
//!     allow:
//!       - key: "API_KEY"                # the variable, and the `wasi:config` key of that name
//! ```
//!
//! What each part becomes (the rule of each kind the operator's policy does not set itself):
//!
//! - `storage.allow`: each `fs://PATH` (relative to the workspace; a trailing `/**` or `/*` is
//!   the directory itself) is a root of `filesystem.read` (allowed) for `read`: every call of
//!   the component's functions is given that directory, read-only. For `write` it is a root of
//!   `filesystem.write` (gated: a person is asked, as every write by default); toolcell never
//!   grants a directory for writing, so it counts for the functions whose path parameter the
//!   operator's policy ties to `filesystem.write` (each call's file, checked against it), and
//!   is said among what was left out for the others.
//!   An absolute path is left out: toolcell grants paths inside the call's workspace, and a
//!   server's tenants each have their own.
//! - `network.allow`: each `host` (a host, `host:port`, `*.domain`, or a URL whose path is
//!   dropped) is a host of `network` (allowed). A `cidr` is left out: toolcell's network layer
//!   allows hosts, by name.
//! - `environment.allow`: each `key` is a variable of `env` and a key of `config` (allowed),
//!   as Wassette gives an allowed key both ways. A key beginning `TOOLCELL_` is left out.
//! - `deny` lists, `runtime`, `resources` and `ipc` are left out, saying so: what is not
//!   allowed is denied already, and the rest is not about a wasm sandbox.
//!
//! A file that is not such a policy (no `version`, a version other than `1.x`, a part of the
//! wrong shape, a `uri` that is not `fs://`) is refused whole, and the component with it: its
//! author meant grants that could not be read. Bounded: [`MAX_POLICY_YAML_BYTES`],
//! [`MAX_POLICY_YAML_DEPTH`], [`MAX_POLICY_YAML_ENTRIES`]; YAML anchors and aliases are
//! refused before anything is built (an alias can make a small file a huge value).

use super::{Access, CapabilityKind, HostPattern, Rule};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The largest `policy.yaml` read: Wassette's are a few hundred bytes.
pub const MAX_POLICY_YAML_BYTES: u64 = 64 * 1024;

/// How deeply a `policy.yaml`'s values may nest: the format's deepest is four.
pub const MAX_POLICY_YAML_DEPTH: usize = 16;

/// How many entries one `policy.yaml` may allow, over all its lists.
pub const MAX_POLICY_YAML_ENTRIES: usize = 256;

/// The name a component's own `policy.yaml` has beside it: `fetch.policy.yaml` for
/// `fetch.wasm`, or `policy.yaml` when the component is the only one in its directory (a
/// Wassette example's layout).
pub const POLICY_YAML_NAME: &str = "policy.yaml";

/// A `policy.yaml`, read: the rules it grants, by kind, and what it names that toolcell left
/// out, each with why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyYaml {
    /// The rule of each kind it grants.
    pub rules: BTreeMap<String, Rule>,
    /// What it names that grants nothing here, and why.
    pub left_out: Vec<String>,
}

impl PolicyYaml {
    /// The rule it grants for `kind`, if any.
    pub fn rule(&self, kind: CapabilityKind) -> Option<&Rule> {
        self.rules.get(kind.name())
    }

    /// The `policy.yaml` of the component file `component`, if there is one: `STEM.policy.yaml`
    /// beside it, or `policy.yaml` in its directory when it is the only `*.wasm` there.
    pub fn beside(component: &Path) -> Option<PathBuf> {
        let dir = component.parent()?;
        let stem = component.file_stem()?;
        let mut own = stem.to_owned();
        own.push(".");
        own.push(POLICY_YAML_NAME);
        let own = dir.join(own);
        if own.is_file() {
            return Some(own);
        }
        let shared = dir.join(POLICY_YAML_NAME);
        if !shared.is_file() {
            return None;
        }
        let components = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .filter(|entry| entry.path().extension().is_some_and(|ext| ext == "wasm"))
            .take(2)
            .count();
        (components == 1).then_some(shared)
    }

    /// Read the `policy.yaml` at `path` (the host's own file from now on: no tool reads or
    /// writes it), within [`MAX_POLICY_YAML_BYTES`].
    pub fn read(path: &Path, own: &crate::hostfs::OwnFiles) -> Result<PolicyYaml, String> {
        let text = own
            .read_to_string(path, MAX_POLICY_YAML_BYTES)
            .map_err(|error| format!("reading {}: {error}", path.display()))?;
        PolicyYaml::parse(&text).map_err(|why| format!("{}: {why}", path.display()))
    }

    /// Read a `policy.yaml`'s text.
    pub fn parse(text: &str) -> Result<PolicyYaml, String> {
        if text.len() as u64 > MAX_POLICY_YAML_BYTES {
            return Err(format!("longer than {MAX_POLICY_YAML_BYTES} bytes"));
        }
        let value = yaml_value(text)?;
        let Value::Object(top) = &value else {
            return Err("not a mapping of `version` and `permissions`".to_owned());
        };
        match top.get("version") {
            Some(Value::String(version)) if version == "1" || version.starts_with("1.") => {}
            Some(Value::Number(version)) if version.as_f64().is_some_and(|v| v.trunc() == 1.0) => {}
            Some(other) => return Err(format!("version {other} is not 1.x")),
            None => return Err("it has no `version`".to_owned()),
        }
        let mut read = PolicyYaml::default();
        let Some(permissions) = top.get("permissions") else {
            return Err("it has no `permissions` (an empty one is `permissions: {}`)".to_owned());
        };
        let permissions = match permissions {
            Value::Object(permissions) => permissions.clone(),
            Value::Null => Default::default(),
            _ => return Err("`permissions` is not a mapping".to_owned()),
        };
        let mut entries = 0usize;
        for (part, body) in &permissions {
            match part.as_str() {
                "storage" => read.storage(body, &mut entries)?,
                "network" => read.network(body, &mut entries)?,
                "environment" => read.environment(body, &mut entries)?,
                other => read.left_out.push(format!(
                    "permissions.{}: not a wasm sandbox's concern (containers' runtime, \
                     resources, ipc): ignored",
                    shown(other)
                )),
            }
        }
        Ok(read)
    }

    fn storage(&mut self, body: &Value, entries: &mut usize) -> Result<(), String> {
        for (entry, at) in allowed(body, "storage", entries, &mut self.left_out)? {
            let uri = text_field(entry, "uri", &at)?;
            let Some(path) = uri.strip_prefix("fs://") else {
                return Err(format!("{at}.uri {}: not an fs:// URI", shown(uri)));
            };
            let Some(access) = entry.get("access").and_then(Value::as_array) else {
                return Err(format!("{at}.access: not a list of read and write"));
            };
            if access.is_empty() {
                return Err(format!("{at}.access is empty"));
            }
            // Absolute as written (`fs:///**` is the root, not the workspace): left out.
            let absolute = path.starts_with('/');
            let path = path
                .strip_suffix("/**")
                .or_else(|| path.strip_suffix("/*"))
                .unwrap_or(path);
            if std::path::Path::new(path)
                .components()
                .any(|part| matches!(part, std::path::Component::ParentDir))
            {
                return Err(format!(
                    "{at}.uri {}: not a path inside the workspace (it climbs out with `..`)",
                    shown(uri)
                ));
            }
            let path = if path.is_empty() || path == "**" || path == "*" {
                "."
            } else {
                path
            };
            if path.contains('*') {
                return Err(format!(
                    "{at}.uri {}: a pattern inside a path (toolcell grants directories and \
                     files, `/**` at the end is the directory)",
                    shown(uri)
                ));
            }
            if absolute || path.starts_with('/') {
                self.left_out.push(format!(
                    "{at}.uri {}: an absolute path; toolcell grants paths inside the call's \
                     workspace: write it relative to the workspace (fs://data)",
                    shown(uri)
                ));
                continue;
            }
            for way in access {
                let (kind, access) = match way.as_str() {
                    Some("read") => (CapabilityKind::FilesystemRead, Access::Allow),
                    Some("write") => {
                        self.left_out.push(format!(
                            "{at} write: no directory is granted for writing; {} is the root \
                             of a write tied to a parameter ([tools.NAME] capabilities = \
                             [{{ kind = \"filesystem.write\", argument = \"/path\" }}])",
                            shown(path)
                        ));
                        (CapabilityKind::FilesystemWrite, Access::Gated)
                    }
                    _ => return Err(format!("{at}.access {way}: not read or write")),
                };
                self.grant(kind, access, |rule| rule.roots.push(path.to_owned()));
            }
        }
        Ok(())
    }

    fn network(&mut self, body: &Value, entries: &mut usize) -> Result<(), String> {
        for (entry, at) in allowed(body, "network", entries, &mut self.left_out)? {
            if entry.get("cidr").is_some() {
                self.left_out.push(format!(
                    "{at}.cidr: toolcell's network layer allows hosts by name, not ranges"
                ));
                continue;
            }
            let host = text_field(entry, "host", &at)?;
            let pattern = host_pattern(host)
                .ok_or_else(|| format!("{at}.host {}: not a host or a URL", shown(host)))?;
            if too_wide(&pattern) {
                self.left_out.push(format!(
                    "{at}.host {}: a wildcard over every host or a whole top-level domain; a \
                     policy.yaml's hosts are allowed without asking anyone, so they must be \
                     named (`api.example.com`, `*.example.com`)",
                    shown(host)
                ));
                continue;
            }
            self.grant(CapabilityKind::Network, Access::Allow, |rule| {
                rule.hosts.push(pattern.clone());
            });
        }
        Ok(())
    }

    fn environment(&mut self, body: &Value, entries: &mut usize) -> Result<(), String> {
        for (entry, at) in allowed(body, "environment", entries, &mut self.left_out)? {
            let key = text_field(entry, "key", &at)?;
            if key.is_empty() || key.contains(['*', '=', '\0']) {
                return Err(format!("{at}.key {}: not a variable's name", shown(key)));
            }
            if key.starts_with(super::HOST_ENV_PREFIX) {
                self.left_out.push(format!(
                    "{at}.key {}: TOOLCELL_ variables configure the host itself",
                    shown(key)
                ));
                continue;
            }
            for kind in [CapabilityKind::Env, CapabilityKind::Config] {
                self.grant(kind, Access::Allow, |rule| rule.vars.push(key.to_owned()));
            }
        }
        Ok(())
    }

    /// Add to the rule of `kind` (made with `access` if it is new).
    fn grant(&mut self, kind: CapabilityKind, access: Access, add: impl FnOnce(&mut Rule)) {
        let rule = self
            .rules
            .entry(kind.name().to_owned())
            .or_insert_with(|| Rule {
                access,
                ..Rule::default()
            });
        add(rule);
    }

    /// What it became, for `toolcell describe`: each rule, and what was left out.
    pub fn shown(&self) -> Value {
        let rules: serde_json::Map<String, Value> = self
            .rules
            .iter()
            .map(|(kind, rule)| {
                let mut shown = serde_json::json!({ "access": rule.access });
                for (field, list) in [
                    ("roots", &rule.roots),
                    ("hosts", &rule.hosts),
                    ("vars", &rule.vars),
                ] {
                    if !list.is_empty() {
                        shown[field] = serde_json::json!(list);
                    }
                }
                (kind.clone(), shown)
            })
            .collect();
        serde_json::json!({ "rules": rules, "left_out": self.left_out })
    }
}

/// One entry of an `allow` list (a mapping) and where it is (`storage.allow[0]`).
type Entry<'v> = (&'v serde_json::Map<String, Value>, String);

/// `body`'s `allow` list (its `deny` list left out, saying so), each entry with where it is
/// (`storage.allow[0]`), counted against [`MAX_POLICY_YAML_ENTRIES`].
fn allowed<'v>(
    body: &'v Value,
    part: &str,
    entries: &mut usize,
    left_out: &mut Vec<String>,
) -> Result<Vec<Entry<'v>>, String> {
    let body = match body {
        Value::Object(body) => body,
        Value::Null => return Ok(Vec::new()),
        _ => return Err(format!("permissions.{part} is not a mapping")),
    };
    if body.get("deny").is_some_and(|deny| !deny.is_null()) {
        left_out.push(format!(
            "permissions.{part}.deny: what is not allowed is denied already"
        ));
    }
    let list = match body.get("allow") {
        Some(Value::Array(list)) => list,
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(_) => return Err(format!("permissions.{part}.allow is not a list")),
    };
    let mut found = Vec::with_capacity(list.len());
    for (n, entry) in list.iter().enumerate() {
        *entries += 1;
        if *entries > MAX_POLICY_YAML_ENTRIES {
            return Err(format!(
                "more than {MAX_POLICY_YAML_ENTRIES} entries are allowed"
            ));
        }
        let at = format!("permissions.{part}.allow[{n}]");
        match entry {
            Value::Object(entry) => found.push((entry, at)),
            _ => return Err(format!("{at} is not a mapping")),
        }
    }
    Ok(found)
}

/// The text field `name` of `entry` (at `at`).
fn text_field<'v>(
    entry: &'v serde_json::Map<String, Value>,
    name: &str,
    at: &str,
) -> Result<&'v str, String> {
    entry
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{at} has no text `{name}`"))
}

/// A Wassette host as toolcell's host pattern: `host`, `host:port`, `*.domain`, or a URL whose
/// path (and anything after it) is dropped; `None` when it is none of these.
fn host_pattern(host: &str) -> Option<String> {
    let host = host.trim();
    let (scheme, rest) = match host.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, host),
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    // No credentials in a host.
    if authority.is_empty() || authority.contains('@') {
        return None;
    }
    let pattern = match scheme {
        Some(scheme) => format!("{scheme}://{authority}"),
        None => authority.to_owned(),
    };
    HostPattern::parse(&pattern).ok().map(|_| pattern)
}

/// Whether a host pattern's wildcard covers every host or a whole top-level domain (`*`,
/// `*.com`): fewer than two labels after `*.`.
fn too_wide(pattern: &str) -> bool {
    let authority = pattern.split_once("://").map_or(pattern, |(_, rest)| rest);
    let Some(suffix) = authority.strip_prefix('*') else {
        return false;
    };
    let name = suffix.split(':').next().unwrap_or_default();
    let labels = name.trim_matches('.');
    labels.is_empty() || !labels.contains('.')
}

/// A name from the file, as a message shows it: quoted, cut short, controls escaped.
fn shown(text: &str) -> String {
    crate::call::names::echoed(text)
}

/// The one document of `text` as a JSON value: anchors and aliases refused first, the depth
/// bounded, every mapping key a string.
fn yaml_value(text: &str) -> Result<Value, String> {
    use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
    use yaml_rust2::scanner::Marker;
    struct Check {
        depth: usize,
        deepest: usize,
        aliases: bool,
        documents: usize,
    }
    impl MarkedEventReceiver for Check {
        fn on_event(&mut self, event: Event, _: Marker) {
            match event {
                Event::Alias(_) => self.aliases = true,
                Event::Scalar(_, _, anchor, _) if anchor > 0 => self.aliases = true,
                Event::MappingStart(anchor, _) | Event::SequenceStart(anchor, _) => {
                    self.aliases |= anchor > 0;
                    self.depth += 1;
                    self.deepest = self.deepest.max(self.depth);
                }
                Event::MappingEnd | Event::SequenceEnd => {
                    self.depth = self.depth.saturating_sub(1);
                }
                Event::DocumentStart => self.documents += 1,
                _ => {}
            }
        }
    }
    let mut check = Check {
        depth: 0,
        deepest: 0,
        aliases: false,
        documents: 0,
    };
    // The depth is only known once parsed: the parser itself recurses no deeper than its own
    // bound, and what it built is dropped here if too deep.
    Parser::new_from_str(text)
        .load(&mut check, true)
        .map_err(|error| format!("not YAML: {error}"))?;
    if check.aliases {
        return Err(
            "anchors and aliases are not read (an alias can make a small file a huge \
                    value)"
                .to_owned(),
        );
    }
    if check.deepest > MAX_POLICY_YAML_DEPTH {
        return Err(format!("nested deeper than {MAX_POLICY_YAML_DEPTH}"));
    }
    if check.documents != 1 {
        return Err(format!("{} documents: a policy is one", check.documents));
    }
    let documents = yaml_rust2::YamlLoader::load_from_str(text)
        .map_err(|error| format!("not YAML: {error}"))?;
    let document = documents
        .into_iter()
        .next()
        .ok_or_else(|| "empty".to_owned())?;
    to_json(document)
}

/// A YAML value as JSON (mapping keys must be text; a real that is not a number is refused).
fn to_json(yaml: yaml_rust2::Yaml) -> Result<Value, String> {
    use yaml_rust2::Yaml;
    Ok(match yaml {
        Yaml::Null => Value::Null,
        Yaml::Boolean(flag) => Value::Bool(flag),
        Yaml::Integer(n) => Value::from(n),
        Yaml::Real(text) => text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map(Value::Number)
            .ok_or_else(|| format!("{} is not a number", shown(&text)))?,
        Yaml::String(text) => Value::String(text),
        Yaml::Array(items) => Value::Array(
            items
                .into_iter()
                .map(to_json)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Yaml::Hash(entries) => {
            let mut map = serde_json::Map::new();
            for (key, value) in entries {
                let Yaml::String(key) = key else {
                    return Err("a mapping key that is not text".to_owned());
                };
                map.insert(key, to_json(value)?);
            }
            Value::Object(map)
        }
        Yaml::Alias(_) | Yaml::BadValue => return Err("a value that is not data".to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Wassette's own examples' shapes become exactly their grants.
    #[test]
    fn a_wassette_policy_becomes_exactly_its_grants() {
        let read = PolicyYaml::parse(
            r#"
$schema: "https://example.test/policy-v1.0.schema.json"
version: "1.0"
description: "a reader and a fetcher"
permissions:
  storage:
    allow:
      - uri: "fs://data/**"
        access: ["read"]
      - uri: "fs://out"
        access: ["read", "write"]
      - uri: "fs:///home/runner/work"
        access: ["read"]
  network:
    allow:
      - host: "https://rss.example.com/feed?x=1"
      - host: "api.example.com"
      - host: "*.example.org"
      - cidr: "10.0.0.0/8"
  environment:
    allow:
      - key: "API_KEY"
      - key: "TOOLCELL_SEAL_KEY"
  resources:
    limits: { memory: "512Mi" }
"#,
        )
        .expect("reads");
        let rule = |kind| read.rule(kind).expect("a rule").clone();
        let fs_read = rule(CapabilityKind::FilesystemRead);
        assert_eq!(fs_read.access, Access::Allow);
        assert_eq!(fs_read.roots, ["data", "out"]);
        let fs_write = rule(CapabilityKind::FilesystemWrite);
        assert_eq!(
            fs_write.access,
            Access::Gated,
            "writes are asked by default"
        );
        assert_eq!(fs_write.roots, ["out"]);
        assert_eq!(
            rule(CapabilityKind::Network).hosts,
            [
                "https://rss.example.com",
                "api.example.com",
                "*.example.org"
            ]
        );
        assert_eq!(rule(CapabilityKind::Env).vars, ["API_KEY"]);
        assert_eq!(rule(CapabilityKind::Config).vars, ["API_KEY"]);
        assert!(read.rule(CapabilityKind::Clock).is_none());
        for said in [
            "/home/runner/work",
            "cidr",
            "TOOLCELL_SEAL_KEY",
            "resources",
        ] {
            assert!(
                read.left_out.iter().any(|why| why.contains(said)),
                "{said}: {:?}",
                read.left_out
            );
        }
        // `permissions: {}` grants nothing.
        let empty = PolicyYaml::parse("version: \"1.0\"\npermissions: {}\n").expect("reads");
        assert!(empty.rules.is_empty() && empty.left_out.is_empty());
    }

    /// A wildcard over every host or a top-level domain is left out, saying why; one over a
    /// domain is kept; `*.` is no pattern at all.
    #[test]
    fn a_wildcard_over_every_host_is_left_out() {
        let yaml = |host: &str| {
            format!(
                "version: \"1.0\"\npermissions:\n  network:\n    allow:\n      - host: \"{host}\"\n"
            )
        };
        for host in ["*", "http://*", "*.com", "https://*.com:8443"] {
            let read = PolicyYaml::parse(&yaml(host)).expect(host);
            assert!(read.rules.is_empty(), "{host}: {:?}", read.rules);
            assert!(
                read.left_out.iter().any(|why| why.contains("wildcard")),
                "{host}: {:?}",
                read.left_out
            );
        }
        let kept = PolicyYaml::parse(&yaml("*.example.com")).expect("kept");
        assert_eq!(
            kept.rule(CapabilityKind::Network)
                .map(|rule| rule.hosts.clone()),
            Some(vec!["*.example.com".to_owned()])
        );
        assert!(PolicyYaml::parse(&yaml("http://*.")).is_err());
        assert!(HostPattern::parse("http://*.").is_err());
        assert!(HostPattern::parse("*x.com").is_err());
    }

    /// `fs:///**` is the root, left out, not the workspace; a path that climbs out is refused.
    #[test]
    fn the_root_is_left_out_and_a_climb_refused() {
        let root = PolicyYaml::parse(
            "version: \"1.0\"\npermissions:\n  storage:\n    allow:\n      - uri: \"fs:///**\"\n        access: [\"read\"]\n",
        )
        .expect("a policy");
        assert!(root.rules.is_empty(), "{:?}", root.rules);
        assert!(
            root.left_out.iter().any(|why| why.contains("absolute")),
            "{:?}",
            root.left_out
        );
        for uri in ["fs://a/../../x", "fs://../..", "fs://./.."] {
            let text = format!(
                "version: \"1.0\"\npermissions:\n  storage:\n    allow:\n      - uri: \"{uri}\"\n        access: [\"read\"]\n"
            );
            let refused = PolicyYaml::parse(&text).expect_err(uri);
            assert!(refused.contains("climbs out"), "{uri}: {refused}");
        }
    }

    /// What is not such a policy is refused whole, naming why; nothing hostile is built.
    #[test]
    fn what_is_not_a_policy_is_refused() {
        let bomb = "version: \"1.0\"\na: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\npermissions: {}\n"
            .to_string();
        let deep = format!(
            "version: \"1.0\"\npermissions: {{}}\nx: {}{}\n",
            "[".repeat(40),
            "]".repeat(40)
        );
        let many = format!(
            "version: \"1.0\"\npermissions:\n  environment:\n    allow:\n{}",
            "      - key: K\n".repeat(MAX_POLICY_YAML_ENTRIES + 1)
        );
        for (text, says) in [
            ("permissions: {}", "no `version`"),
            ("version: \"2.0\"\npermissions: {}", "not 1.x"),
            ("version: \"1.0\"", "no `permissions`"),
            ("version: \"1.0\"\npermissions: [1]", "not a mapping"),
            (
                "version: \"1.0\"\npermissions:\n  storage:\n    allow:\n      - uri: \"s3://b\"\n        access: [read]",
                "not an fs:// URI",
            ),
            (
                "version: \"1.0\"\npermissions:\n  storage:\n    allow:\n      - uri: \"fs://a/*/b\"\n        access: [read]",
                "a pattern inside a path",
            ),
            (
                "version: \"1.0\"\npermissions:\n  storage:\n    allow:\n      - uri: \"fs://a\"\n        access: [execute]",
                "not read or write",
            ),
            (
                "version: \"1.0\"\npermissions:\n  network:\n    allow:\n      - host: \"ftp://x\"",
                "not a host",
            ),
            (
                "version: \"1.0\"\npermissions:\n  network:\n    allow:\n      - host: \"https://user:pw@x\"",
                "not a host",
            ),
            (&bomb, "anchors and aliases"),
            (&deep, "nested deeper"),
            (&many, "entries"),
            (
                "version: \"1.0\"\npermissions: {}\n---\nversion: \"1.0\"\n",
                "documents",
            ),
            ("\"unclosed", "not YAML"),
            ("{[1]: 2}", "not text"),
        ] {
            let refused = PolicyYaml::parse(text).expect_err(says);
            assert!(refused.contains(says), "{says}: {refused}");
        }
        let long = "#".repeat(MAX_POLICY_YAML_BYTES as usize + 1);
        assert!(PolicyYaml::parse(&long).is_err());
    }
}
