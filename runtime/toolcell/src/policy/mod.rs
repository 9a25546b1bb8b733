//! What each tool is allowed: whether it is core, which capabilities its calls may be granted
//! and for which resources, its limits, the class of its results, and a digest pin.
//!
//! A policy is a TOML file (`toolcell.toml`, given with `--policy`), or the embedded default
//! ([`Policy::embedded_default`], `runtime/toolcell/src/policy/default-policy.toml`). No entry means no
//! authority: a tool the policy does not name runs with nothing granted, and a capability a
//! tool's entry does not name is denied.
//!
//! ```toml
//! [tools.read_file]
//! core = true                       # in the model's tools array
//! class = "internal"                # public | internal | confidential
//! sha256 = "…"                      # refuse the component if its digest differs
//! filesystem.read = { access = "allow", roots = ["."] }       # relative to the workspace
//! filesystem.write = { access = "gated", roots = ["notes"] }  # ask a person first
//! network = { access = "allow", hosts = ["https://*.example.org", "http://127.0.0.1:8080"] }
//! # allow_private = true in a network rule lets its names resolve to private addresses
//! env = { access = "allow", vars = ["LANG"] }
//! clock = { access = "allow" }
//! limits = { timeout_ms = 10000, memory_mib = 128, fuel = 1000000000 }
//!
//! source = "oci://ghcr.io/acme/read_file:1.2"   # load it from a registry (see `oci`)
//! signed_by = ["keys/acme.pub"]     # refuse it unless signed by one of these keys
//!
//! [registry]                        # for tools pulled from registries
//! signed_by = ["keys/team.pub"]     # every pulled tool must be signed by one of these
//! insecure = ["registry.internal:5000"]  # plain HTTP allowed (loopback registries always are)
//! trust_root = "sigstore/trusted_root.json"  # Fulcio CAs and Rekor keys, for keyless signers
//!
//! [tools.fetch]                     # a keyless signer: who signed, vouched for by Fulcio
//! source = "oci://ghcr.io/acme/fetch:2"
//! signed_by = [{ issuer = "https://token.actions.githubusercontent.com",
//!   subject = "https://github.com/acme/fetch/.github/workflows/release.yml@refs/heads/main" }]
//!
//! [files]                           # for every tool, whatever its rules say
//! protected = ["deploy/", "Makefile"]   # never written (besides .git, .toolcell, policy, audit)
//! deny_read = [".env", ".env.*", "*.pem"] # never read (replaces the default list)
//! deny_write = [".bashrc", ".envrc"]     # never written (replaces the default list)
//! max_read_bytes = 10485760         # the largest file a tool may be handed to read
//! ```
//!
//! Unknown keys are errors that name their line. Key files are relative to the policy file's
//! directory. A pulled tool with a `signed_by` of its own must meet both lists, each on its
//! own.
//!
//! This file holds the policy's types and what they answer; `read.rs` reads a policy file
//! section by section into them, by way of the file's shape (`entries.rs`).

mod entries;
pub(crate) mod files;
mod host;
mod read;
pub mod yaml;

pub use host::{HostPattern, is_non_public};

use crate::policy::files::FileRules;

use crate::tool::info::CapabilityKind;

use crate::call::proto::Class;

use crate::call::limits::Limits;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// What a policy says about one capability for one resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Access {
    /// Never.
    #[default]
    Deny,
    /// Only with a person's approval (a saved "always" rule counts).
    Gated,
    /// Without asking.
    Allow,
}

/// A policy's rule for one capability of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Allow, Gated or Deny.
    pub access: Access,
    /// For the file system: the directories, relative to the workspace, the rule covers (and
    /// everything below them). None covers nothing.
    #[serde(default)]
    pub roots: Vec<String>,
    /// For the network: the hosts the rule covers.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// For the network: whether these hosts may resolve to non-public addresses (private,
    /// loopback, link-local such as a cloud's metadata service, ...). Off by default: only a
    /// host written as that very IP address (or `localhost`, on loopback) reaches one.
    #[serde(default)]
    pub allow_private: bool,
    /// For the environment: the variables the rule covers, by name.
    #[serde(default)]
    pub vars: Vec<String>,
}

/// The policy of one tool. `ToolPolicy::default()` is: not core, nothing granted, public
/// results, the default [`Limits`], no digest pin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    /// True when the tool goes in the model's `tools` array.
    pub core: bool,
    /// The class of the tool's results.
    pub class: Class,
    /// The limits every call of the tool runs under (a caller may override them per call).
    pub limits: Limits,
    /// If set, the component must have this sha256 (hex), or it is refused at load.
    pub sha256: Option<String>,
    /// The rule for each capability the policy names.
    pub rules: HashMap<CapabilityKind, Rule>,
    /// If not empty, the tool loads only if it was pulled from a registry with a signature
    /// by one of these signers.
    pub signed_by: Vec<Signer>,
    /// For a tool of plain typed exports (which says nothing of what it needs): the
    /// capabilities the operator says a call of it needs, each on a resource an argument names
    /// or a fixed one. A tool of toolcell's contract declares its own, and these are ignored.
    pub capabilities: Vec<crate::tool::info::Capability>,
    /// The values `wasi:config/store` answers for the keys a `config` rule grants, by key
    /// (the policy's `[config]`; a key without one reads the server's environment variable of
    /// its name).
    pub config_values: std::sync::Arc<BTreeMap<String, ConfigValue>>,
    /// For a tool of plain typed exports: the Wassette `policy.yaml` whose grants it may have
    /// (for the kinds this policy does not set itself), instead of the one beside its
    /// component ([`yaml`]).
    pub policy_yaml: Option<PathBuf>,
    /// Whether and when a call of the tool becomes a task, where a front end offers tasks
    /// (the policy's `task`).
    pub task: TaskPolicy,
}

/// Whether and when a call of a tool becomes a task, for a front end that offers tasks (MCP's
/// tasks extension, SEP-2663): the policy's `task = { support = "required", after_ms = 0 }`.
/// The host runs every call, so any call can become a task without the tool knowing; the
/// operator says which may, which must, and how soon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskPolicy {
    /// Whether a call may, must or must not become a task.
    pub support: TaskSupport,
    /// How long a call runs before it becomes a task; `None` for the front end's own default
    /// (`toolcell-mcp`'s `TASK_AFTER`), zero for a task from the start (its questions then
    /// wait in the task, `input_required`).
    pub after: Option<std::time::Duration>,
}

/// Whether a call of a tool may become a task ([`TaskPolicy::support`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskSupport {
    /// Never: every call is answered directly, however long it runs.
    Forbidden,
    /// For a client that takes tasks, once the call has run a while; directly for others.
    #[default]
    Optional,
    /// Only as a task: a client that does not take tasks is refused (MCP's
    /// missing-capability error), before the call runs.
    Required,
}

/// Where a `wasi:config` value comes from (the policy's `[config]` table).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ConfigValue {
    /// This text.
    Text(String),
    /// The server's environment variable of this name, read when a call is granted it.
    Env {
        /// The variable's name.
        env: String,
    },
}

impl ConfigValue {
    /// The value now (`None`: an environment variable that is not set).
    pub fn resolve(&self) -> Option<String> {
        match self {
            ConfigValue::Text(text) => Some(text.clone()),
            ConfigValue::Env { env } => std::env::var(env).ok(),
        }
    }
}

/// Who may have signed a tool (an entry of a policy's `signed_by`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signer {
    /// Whoever holds the private half of this public key (a PEM file).
    Key(PathBuf),
    /// A keyless (Fulcio) signer: the certificate the trust root's CA issued names this
    /// identity, and the signature was logged in a transparency log the trust root names.
    Identity(Identity),
}

/// A keyless signer's identity, as Fulcio writes it into the signing certificate. Both parts
/// must match exactly (no patterns: a pattern is one typo from trusting everyone).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The OIDC issuer that vouched for the signer (`https://token.actions.githubusercontent.com`).
    pub issuer: String,
    /// The certificate's subject: an email address or a URI (a CI workflow's, say).
    pub subject: String,
}

impl std::fmt::Display for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Signer::Key(path) => write!(f, "{}", path.display()),
            Signer::Identity(identity) => write!(f, "{identity}"),
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (issuer {})", self.subject, self.issuer)
    }
}

/// What holds for tools pulled from registries (`[registry]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryRules {
    /// Every pulled tool must be signed by one of these signers.
    pub signed_by: Vec<Signer>,
    /// Registries (`host[:port]`) that may be reached over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// The Sigstore trust root (`trusted_root.json`, as `cosign --trusted-root` reads it):
    /// the Fulcio certificate authorities and Rekor keys keyless signers are checked against.
    /// Required when any `signed_by` names an identity; read from this file only, never
    /// fetched, so a server with no internet verifies the same.
    pub trust_root: Option<PathBuf>,
}

/// The longest `source` reference a policy may give a tool.
pub const MAX_SOURCE_BYTES: usize = 4096;

/// Why a policy was refused: the file (when read from one), the line (always for TOML syntax
/// and unknown or mistyped keys; for a bad value, the line of its `[tools.NAME]`, `[files]` or
/// `[registry]` header when there is one) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct PolicyError {
    file: Option<PathBuf>,
    line: Option<usize>,
    message: String,
}

impl PolicyError {
    pub(crate) fn new(message: impl Into<String>) -> PolicyError {
        PolicyError {
            file: None,
            line: None,
            message: message.into(),
        }
    }

    /// The policy file, when the policy was read from one.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// The line (from 1) the error is at, when it can be told.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// What is wrong, without the file and line.
    pub fn message(&self) -> &str {
        &self.message
    }

    fn render(&self) -> String {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => {
                format!("{}: line {line}: {}", file.display(), self.message)
            }
            (Some(file), None) => format!("{}: {}", file.display(), self.message),
            (None, Some(line)) => format!("line {line}: {}", self.message),
            (None, None) => self.message.clone(),
        }
    }
}

impl Rule {
    /// A rule with this access and nothing covered yet.
    pub fn new(access: Access) -> Rule {
        Rule {
            access,
            ..Rule::default()
        }
    }

    /// This rule, also covering the directories `roots` (relative to the workspace).
    pub fn roots<S: Into<String>>(mut self, roots: impl IntoIterator<Item = S>) -> Rule {
        self.roots.extend(roots.into_iter().map(Into::into));
        self
    }

    /// This rule, also covering the hosts `hosts` (`[scheme://]host[:port]`, `*.` allowed).
    pub fn hosts<S: Into<String>>(mut self, hosts: impl IntoIterator<Item = S>) -> Rule {
        self.hosts.extend(hosts.into_iter().map(Into::into));
        self
    }

    /// This rule, also covering the environment variables `vars`.
    pub fn vars<S: Into<String>>(mut self, vars: impl IntoIterator<Item = S>) -> Rule {
        self.vars.extend(vars.into_iter().map(Into::into));
        self
    }
}

impl ToolPolicy {
    /// This policy with the tool in (or out of) the model's `tools` array.
    pub fn core(mut self, core: bool) -> ToolPolicy {
        self.core = core;
        self
    }

    /// This policy with `rule` for `capability` (replacing any).
    pub fn rule_for(mut self, capability: CapabilityKind, rule: Rule) -> ToolPolicy {
        self.rules.insert(capability, rule);
        self
    }

    /// This policy with every call limited by `limits` (a caller may override per call).
    pub fn limits(mut self, limits: Limits) -> ToolPolicy {
        self.limits = limits;
        self
    }

    /// The rule for `capability`, if the policy names one.
    pub fn rule(&self, capability: CapabilityKind) -> Option<&Rule> {
        self.rules.get(&capability)
    }
}

/// The policy of every tool, by name, and the rules on files that hold for every tool.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    tools: HashMap<String, ToolPolicy>,
    files: FileRules,
    registry: RegistryRules,
    /// The tools the policy loads from a registry: (tool, `oci://` reference), by name.
    sources: Vec<(String, String)>,
    /// The `[config]` table: `wasi:config` values by key.
    config_values: std::sync::Arc<BTreeMap<String, ConfigValue>>,
}

/// The prefix of the environment variables that configure the host itself (its seal key, its
/// cache's key and directory): no policy grants a tool one (the gate refuses it per call; a
/// `policy.yaml` naming one leaves it out).
pub const HOST_ENV_PREFIX: &str = "TOOLCELL_";

/// The longest policy file read: hundreds of tools' rules fit in a few kilobytes; a file past
/// this is a mistake (or an attack on the parser), refused before it is read whole.
pub const MAX_POLICY_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The embedded default policy's text.
pub const DEFAULT_POLICY: &str = include_str!("default-policy.toml");

impl Policy {
    /// A policy that grants nothing to anyone and makes no tool core.
    pub fn empty() -> Policy {
        Policy::default()
    }

    /// The policy the `toolcell` binary ships with ([`DEFAULT_POLICY`]): `clock` is core and
    /// reads the real clock; `read_file` and `list_dir` read the workspace; `write_file` writes
    /// it with a person's approval; nothing else is granted.
    pub fn embedded_default() -> Policy {
        // The embedded text is parsed by a unit test, so this cannot fail in a released build.
        Policy::from_toml(DEFAULT_POLICY).unwrap_or_default()
    }

    /// The rules for tools pulled from registries.
    pub fn registry(&self) -> &RegistryRules {
        &self.registry
    }

    /// The tools the policy loads from registries: `(tool, oci:// reference)`, by tool name.
    pub fn sources(&self) -> &[(String, String)] {
        &self.sources
    }

    /// This policy with `tool`'s entry set to `policy`: how code extends a policy (the
    /// embedded default, say) without writing TOML. Checked as the same entry in a file would
    /// be (its hosts); a `source` cannot be set this way.
    pub fn with_tool(mut self, tool: &str, policy: ToolPolicy) -> Result<Policy, PolicyError> {
        for host in policy.rules.values().flat_map(|rule| &rule.hosts) {
            HostPattern::parse(host)
                .map_err(|why| PolicyError::new(format!("tools.{tool}: {why}")))?;
        }
        if policy
            .signed_by
            .iter()
            .any(|signer| matches!(signer, Signer::Identity(_)))
            && self.registry.trust_root.is_none()
        {
            return Err(PolicyError::new(format!(
                "{tool}: signed_by names a keyless signer, which needs [registry] trust_root"
            )));
        }
        self.tools.insert(tool.to_owned(), policy);
        Ok(self)
    }

    /// True when some tool's limits include fuel, which needs an engine that meters it.
    pub fn sets_fuel(&self) -> bool {
        self.tools.values().any(|tool| tool.limits.fuel.is_some())
    }

    /// The rules on files every tool is held to (`[files]`: protected paths, the read
    /// deny-list, the largest read).
    pub(crate) fn files(&self) -> &FileRules {
        &self.files
    }

    /// The files that decide which signatures count: every key `signed_by` names, and the
    /// trust root.
    pub fn trust_files(&self) -> Vec<PathBuf> {
        self.tools
            .values()
            .flat_map(|tool| &tool.signed_by)
            .chain(&self.registry.signed_by)
            .filter_map(|signer| match signer {
                Signer::Key(path) => Some(path.clone()),
                Signer::Identity(_) => None,
            })
            .chain(self.registry.trust_root.clone())
            .collect()
    }

    /// True if the policy says anything about where tools come from or who signed them
    /// (`source`, `signed_by`, `[registry]`): what is decided once, when tools load.
    pub fn decides_provenance(&self) -> bool {
        !self.sources.is_empty()
            || self.registry != RegistryRules::default()
            || self.tools.values().any(|tool| !tool.signed_by.is_empty())
    }

    /// Whether it says what a tool's calls need, which is read once at load: `capabilities`
    /// or `policy_yaml` in a tool's entry (a typed tool's capabilities are made from them when
    /// it loads).
    pub fn decides_needs(&self) -> bool {
        self.tools
            .values()
            .any(|tool| !tool.capabilities.is_empty() || tool.policy_yaml.is_some())
    }

    /// The `policy.yaml` files its tool entries name (`policy_yaml`).
    pub(crate) fn policy_yamls(&self) -> impl Iterator<Item = &Path> {
        self.tools
            .values()
            .filter_map(|tool| tool.policy_yaml.as_deref())
    }

    /// The entry of `tool`, if the policy has one.
    pub fn entry(&self, tool: &str) -> Option<&ToolPolicy> {
        self.tools.get(tool)
    }

    /// The policy of `tool`: its entry, or the default (nothing) if it has none.
    pub fn tool(&self, tool: &str) -> ToolPolicy {
        self.tools.get(tool).cloned().unwrap_or_else(|| ToolPolicy {
            // The policy's `[config]` values are every tool's (a typed tool granted a key by
            // its policy.yaml has no entry here).
            config_values: std::sync::Arc::clone(&self.config_values),
            ..ToolPolicy::default()
        })
    }
}

/// The kind a policy names (`filesystem.read`, ...).
pub(crate) fn capability_kind(name: &str) -> Option<CapabilityKind> {
    Some(match name {
        "filesystem.read" => CapabilityKind::FilesystemRead,
        "filesystem.write" => CapabilityKind::FilesystemWrite,
        "network" => CapabilityKind::Network,
        "env" => CapabilityKind::Env,
        "config" => CapabilityKind::Config,
        "clock" => CapabilityKind::Clock,
        "client.log" => CapabilityKind::ClientLog,
        "client.progress" => CapabilityKind::ClientProgress,
        "client.sample" => CapabilityKind::ClientSample,
        "client.elicit" => CapabilityKind::ClientElicit,
        "client.elicit_url" => CapabilityKind::ClientElicitUrl,
        "client.list_roots" => CapabilityKind::ClientListRoots,
        _ => return None,
    })
}

/// What the gate decides for a client feature the policy does not name: log messages and
/// progress are allowed (they tell the person what is happening and carry nothing back);
/// asking the model or the person, or reading their roots, asks the person first (a tool that
/// samples spends their tokens, one that elicits or reads roots learns what they tell it); a
/// URL a tool chose is never shown unless the policy allows it (a phishing channel).
pub(crate) fn client_default(kind: CapabilityKind) -> Access {
    match kind {
        CapabilityKind::ClientLog | CapabilityKind::ClientProgress => Access::Allow,
        CapabilityKind::ClientElicitUrl => Access::Deny,
        _ => Access::Gated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_embedded_default_parses_and_says_what_its_docs_say() {
        let policy = Policy::from_toml(DEFAULT_POLICY).expect("the default policy parses");
        let clock = policy.tool("clock");
        assert!(clock.core);
        assert_eq!(
            clock.rule(CapabilityKind::Clock).map(|rule| rule.access),
            Some(Access::Allow)
        );
        let read = policy.tool("read_file");
        assert_eq!(read.class, Class::Internal);
        assert_eq!(
            read.rule(CapabilityKind::FilesystemRead),
            Some(&Rule {
                access: Access::Allow,
                roots: vec![".".to_owned()],
                ..Rule::default()
            })
        );
        let write = policy.tool("write_file");
        assert_eq!(
            write
                .rule(CapabilityKind::FilesystemWrite)
                .map(|rule| rule.access),
            Some(Access::Gated)
        );
        assert!(!policy.tool("echo").core);
        assert!(policy.tool("echo").rules.is_empty());
        assert!(
            policy.tool("unknown").rules.is_empty(),
            "no entry, no authority"
        );
    }

    #[test]
    fn the_book_shows_the_embedded_default_as_it_is() {
        let chapter = include_str!("../../../../docs/policy.md");
        assert!(
            chapter.contains(&format!("```toml,policy\n{DEFAULT_POLICY}```")),
            "docs/policy.md's copy of the default policy differs from default-policy.toml"
        );
    }

    #[test]
    fn every_key_of_the_format_parses() {
        let policy = Policy::from_toml(
            r#"
            [tools.fetch]
            core = true
            class = "confidential"
            sha256 = "ABCDEF"
            filesystem.read = { access = "allow", roots = ["src"] }
            filesystem.write = { access = "gated", roots = ["notes"] }
            network = { access = "allow", hosts = ["https://*.example.org"] }
            env = { access = "deny", vars = ["HOME"] }
            clock = { access = "allow" }
            limits = { timeout_ms = 250, memory_mib = 8, fuel = 99 }
            "#,
        )
        .expect("parses");
        let fetch = policy.tool("fetch");
        assert!(fetch.core);
        assert_eq!(fetch.class, Class::Confidential);
        assert_eq!(fetch.sha256.as_deref(), Some("abcdef"));
        assert_eq!(fetch.rules.len(), 5);
        assert_eq!(
            fetch.limits,
            Limits {
                timeout: Duration::from_millis(250),
                memory_bytes: 8 << 20,
                fuel: Some(99),
            }
        );
        // Fuel anywhere in a policy needs a metering engine; the default policy sets none.
        assert!(policy.sets_fuel());
        assert!(!Policy::embedded_default().sets_fuel());
    }

    #[test]
    fn unknown_keys_are_errors_that_name_the_line() {
        for (text, line) in [
            (
                "[tools.a]\ncore = true\nfilesytem.read = { access = \"allow\" }\n",
                3,
            ),
            ("[tools.a]\nclock = { access = \"allow\", rootz = [] }\n", 2),
            ("[tools.a]\nclock = { access = \"sometimes\" }\n", 2),
            ("[toolz.a]\n", 1),
        ] {
            let error = Policy::from_toml(text).expect_err("refused");
            assert_eq!(error.line(), Some(line), "{text:?}: {error}");
            assert!(
                error.to_string().contains(&format!("line {line}")),
                "{text:?}: {error}"
            );
        }
    }
}
