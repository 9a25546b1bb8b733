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

pub(crate) mod files;
mod host;
pub mod yaml;

pub use host::{HostPattern, is_non_public};

use crate::policy::files::FileRules;

use crate::tool::info::CapabilityKind;

use crate::call::proto::Class;

use crate::call::limits::Limits;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

    /// A TOML error, at the line its span starts on.
    fn syntax(text: &str, error: &toml::de::Error) -> PolicyError {
        PolicyError {
            file: None,
            line: error.span().map(|span| line_of_offset(text, span.start)),
            message: error.message().trim_end().to_owned(),
        }
    }

    /// A bad value in the table `section` (`tools.fetch`), at that table's header line.
    fn in_section(text: &str, section: &str, message: String) -> PolicyError {
        let header = format!("[{section}]");
        let line = text
            .lines()
            .position(|line| line.trim_start().starts_with(&header))
            .map(|index| index + 1);
        PolicyError {
            file: None,
            line,
            message,
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

/// The line (from 1) of byte `offset` in `text`.
fn line_of_offset(text: &str, offset: usize) -> usize {
    text.as_bytes()
        .iter()
        .take(offset)
        .filter(|&&byte| byte == b'\n')
        .count()
        + 1
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

    /// Parse a policy file's text. The error names the line of anything wrong. Key files are
    /// relative to the current directory.
    pub fn from_toml(text: &str) -> Result<Policy, PolicyError> {
        Policy::from_toml_in(text, Path::new(""))
    }

    /// [`Policy::from_toml`], key files relative to `base`.
    fn from_toml_in(text: &str, base: &Path) -> Result<Policy, PolicyError> {
        let file: PolicyFile =
            toml::from_str(text).map_err(|error| PolicyError::syntax(text, &error))?;
        let mut policy = Policy::empty();
        if let Some(registry) = file.registry {
            policy.registry = RegistryRules {
                signed_by: signers(registry.signed_by, base),
                insecure: registry.insecure,
                trust_root: registry.trust_root.map(|path| base.join(path)),
            };
        }
        if let Some(files) = file.files {
            policy.read_files(text, files)?;
        }
        for (name, entry) in file.tools {
            policy.read_tool(text, base, name, entry)?;
        }
        if !file.config.is_empty() {
            let values = std::sync::Arc::new(file.config);
            for tool in policy.tools.values_mut() {
                tool.config_values = std::sync::Arc::clone(&values);
            }
            policy.config_values = values;
        }
        policy.check_signers(text)?;
        Ok(policy)
    }

    /// The `[files]` section of the policy file `text`: every protected path lies inside the
    /// workspace (kept lexically normal); the lists given replace the defaults.
    fn read_files(&mut self, text: &str, files: FilesEntry) -> Result<(), PolicyError> {
        for path in &files.protected {
            // Lexically normal: `./deploy/` is `deploy`.
            let normal: PathBuf = Path::new(path)
                .components()
                .filter(|part| !matches!(part, std::path::Component::CurDir))
                .collect();
            let inside = normal
                .components()
                .all(|part| matches!(part, std::path::Component::Normal(_)));
            if !inside || normal.as_os_str().is_empty() {
                return Err(PolicyError::in_section(
                    text,
                    "files",
                    format!("files.protected: {path:?} must be a path inside the workspace"),
                ));
            }
            self.files.protected.push(normal);
        }
        if let Some(deny_read) = files.deny_read {
            self.files.deny_read = deny_read.into();
        }
        if let Some(deny_write) = files.deny_write {
            self.files.deny_write = deny_write.into();
        }
        self.files.max_read_bytes = files.max_read_bytes;
        Ok(())
    }

    /// The `[tools.name]` section of the policy file `text` (key files relative to `base`):
    /// its network hosts parse, its `source` has a reference's shape, and its entry is a tool's
    /// policy.
    fn read_tool(
        &mut self,
        text: &str,
        base: &Path,
        name: String,
        entry: ToolEntry,
    ) -> Result<(), PolicyError> {
        for host in entry.network.iter().flat_map(|rule| &rule.hosts) {
            HostPattern::parse(host).map_err(|why| {
                PolicyError::in_section(
                    text,
                    &format!("tools.{name}"),
                    format!("tools.{name}: {why}"),
                )
            })?;
        }
        if let Some(source) = &entry.source {
            // What the reference means is the component source's to say (toolcell-oci
            // parses `oci://` ones when the runtime is built); here only its shape.
            if !source.contains("://") || source.len() > MAX_SOURCE_BYTES {
                return Err(PolicyError::in_section(
                    text,
                    &format!("tools.{name}"),
                    format!(
                        "tools.{name}.source: {source:?} is not a reference \
                         (SCHEME://..., at most {MAX_SOURCE_BYTES} bytes)"
                    ),
                ));
            }
            self.sources.push((name.clone(), source.clone()));
        }
        let tool = entry.into_policy(base).map_err(|why| {
            PolicyError::in_section(
                text,
                &format!("tools.{name}"),
                format!("tools.{name}.{why}"),
            )
        })?;
        self.tools.insert(name, tool);
        Ok(())
    }

    /// Every keyless signer (of a tool or of the registry) names a non-empty issuer and
    /// subject, and can be checked: the registry has a `trust_root`.
    fn check_signers(&self, text: &str) -> Result<(), PolicyError> {
        let keyless = self
            .tools
            .iter()
            .flat_map(|(name, tool)| {
                tool.signed_by
                    .iter()
                    .map(move |signer| (name.as_str(), signer))
            })
            .chain(
                self.registry
                    .signed_by
                    .iter()
                    .map(|signer| ("registry", signer)),
            )
            .find(|(_, signer)| matches!(signer, Signer::Identity(_)));
        let empty = self
            .tools
            .values()
            .flat_map(|tool| &tool.signed_by)
            .chain(&self.registry.signed_by)
            .any(|signer| {
                matches!(signer, Signer::Identity(identity)
                    if identity.issuer.trim().is_empty() || identity.subject.trim().is_empty())
            });
        if empty {
            return Err(PolicyError::new(
                "signed_by: a keyless signer needs a non-empty issuer and subject",
            ));
        }
        if let Some((name, signer)) = keyless
            && self.registry.trust_root.is_none()
        {
            let section = if name == "registry" {
                "registry".to_owned()
            } else {
                format!("tools.{name}")
            };
            return Err(PolicyError::in_section(
                text,
                &section,
                format!(
                    "{name}: signed_by names the keyless signer {signer}, which needs \
                     [registry] trust_root (the trusted_root.json to check it against)"
                ),
            ));
        }
        Ok(())
    }

    /// Read and parse the policy file at `path`.
    pub fn from_file(path: &std::path::Path) -> Result<Policy, PolicyError> {
        Policy::from_own_file(path, &crate::hostfs::OwnFiles::new())
    }

    /// Read and parse the policy file at `path`, registering it among the host's own files
    /// `own` as it is read, so that no tool reads or writes it (a runtime's
    /// [`own_files`](crate::Runtime::own_files), or the registry a builder is given).
    pub fn from_own_file(
        path: &std::path::Path,
        own: &crate::hostfs::OwnFiles,
    ) -> Result<Policy, PolicyError> {
        let text = own
            .read_to_string(path, MAX_POLICY_FILE_BYTES)
            .map_err(|error| PolicyError {
                file: Some(path.to_owned()),
                line: None,
                message: format!("reading it: {error}"),
            })?;
        let base = path.parent().unwrap_or(Path::new(""));
        Policy::from_toml_in(&text, base).map_err(|error| PolicyError {
            file: Some(path.to_owned()),
            ..error
        })
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    tools: std::collections::BTreeMap<String, ToolEntry>,
    #[serde(default)]
    config: BTreeMap<String, ConfigValue>,
    files: Option<FilesEntry>,
    registry: Option<RegistryEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistryEntry {
    #[serde(default)]
    signed_by: Vec<SignerEntry>,
    #[serde(default)]
    insecure: Vec<String>,
    trust_root: Option<PathBuf>,
}

/// A `signed_by` entry: a key file's path, or `{ issuer, subject }`.
#[derive(Deserialize)]
#[serde(untagged)]
enum SignerEntry {
    Key(PathBuf),
    Identity(Identity),
}

fn signers(entries: Vec<SignerEntry>, base: &Path) -> Vec<Signer> {
    entries
        .into_iter()
        .map(|entry| match entry {
            SignerEntry::Key(path) => Signer::Key(base.join(path)),
            SignerEntry::Identity(identity) => Signer::Identity(identity),
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesEntry {
    #[serde(default)]
    protected: Vec<String>,
    deny_read: Option<Vec<String>>,
    deny_write: Option<Vec<String>>,
    max_read_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolEntry {
    #[serde(default)]
    core: bool,
    #[serde(default)]
    class: Class,
    sha256: Option<String>,
    limits: Option<LimitsEntry>,
    filesystem: Option<FilesystemEntry>,
    network: Option<Rule>,
    env: Option<Rule>,
    clock: Option<Rule>,
    config: Option<Rule>,
    client: Option<ClientEntry>,
    #[serde(default)]
    capabilities: Vec<CapabilityEntry>,
    policy_yaml: Option<PathBuf>,
    source: Option<String>,
    #[serde(default)]
    signed_by: Vec<SignerEntry>,
    task: Option<TaskEntry>,
}

/// The policy's `task` of a tool ([`TaskPolicy`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskEntry {
    #[serde(default)]
    support: TaskSupport,
    after_ms: Option<u64>,
}

/// A capability the operator says a typed tool needs: `{ kind = "filesystem.read", argument =
/// "/path" }`, `{ kind = "network", fixed = "https://api.example.com" }`, `{ kind = "clock" }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CapabilityEntry {
    kind: String,
    argument: Option<String>,
    fixed: Option<String>,
}

impl CapabilityEntry {
    fn into_capability(self) -> Result<crate::tool::info::Capability, String> {
        use crate::tool::info::{Capability, ResourceRef};
        let kind = capability_kind(&self.kind).ok_or_else(|| {
            format!(
                "capabilities: {:?} is not a capability (filesystem.read, filesystem.write, \
                 network, env, config, clock)",
                self.kind
            )
        })?;
        let target = match (self.argument, self.fixed) {
            (Some(pointer), None) if pointer.is_empty() || pointer.starts_with('/') => {
                ResourceRef::Argument(pointer)
            }
            (Some(pointer), None) => {
                return Err(format!(
                    "capabilities: argument {pointer:?} is not a JSON pointer (\"/path\")"
                ));
            }
            (None, Some(fixed)) => ResourceRef::Fixed(fixed),
            (None, None) => ResourceRef::Whole,
            (Some(_), Some(_)) => {
                return Err("capabilities: give argument or fixed, not both".to_owned());
            }
        };
        Ok(Capability { kind, target })
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FilesystemEntry {
    read: Option<Rule>,
    write: Option<Rule>,
}

/// How a tool may talk to its client: `client.sample = { access = "gated" }`, ... Each
/// feature left out keeps its default ([`client_default`]).
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ClientEntry {
    log: Option<Rule>,
    progress: Option<Rule>,
    sample: Option<Rule>,
    elicit: Option<Rule>,
    elicit_url: Option<Rule>,
    list_roots: Option<Rule>,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsEntry {
    timeout_ms: Option<u64>,
    memory_mib: Option<usize>,
    fuel: Option<u64>,
}

impl ToolEntry {
    fn into_policy(self, base: &Path) -> Result<ToolPolicy, String> {
        let mut limits = Limits::default();
        if let Some(entry) = self.limits {
            if let Some(ms) = entry.timeout_ms {
                limits.timeout = Duration::from_millis(ms);
            }
            if let Some(mib) = entry.memory_mib {
                limits.memory_bytes = mib.saturating_mul(1024 * 1024);
            }
            limits.fuel = entry.fuel.or(limits.fuel);
        }
        let mut rules = HashMap::new();
        let (read, write) = self
            .filesystem
            .map(|fs| (fs.read, fs.write))
            .unwrap_or_default();
        for (kind, rule) in [
            (CapabilityKind::FilesystemRead, read),
            (CapabilityKind::FilesystemWrite, write),
            (CapabilityKind::Network, self.network),
            (CapabilityKind::Env, self.env),
            (CapabilityKind::Clock, self.clock),
            (CapabilityKind::Config, self.config),
        ]
        .into_iter()
        .chain({
            let client = self.client.unwrap_or_default();
            [
                (CapabilityKind::ClientLog, client.log),
                (CapabilityKind::ClientProgress, client.progress),
                (CapabilityKind::ClientSample, client.sample),
                (CapabilityKind::ClientElicit, client.elicit),
                (CapabilityKind::ClientElicitUrl, client.elicit_url),
                (CapabilityKind::ClientListRoots, client.list_roots),
            ]
        }) {
            if let Some(rule) = rule {
                rules.insert(kind, rule);
            }
        }
        let capabilities = self
            .capabilities
            .into_iter()
            .map(CapabilityEntry::into_capability)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ToolPolicy {
            core: self.core,
            class: self.class,
            limits,
            sha256: self.sha256.map(|digest| digest.to_lowercase()),
            rules,
            signed_by: signers(self.signed_by, base),
            capabilities,
            config_values: std::sync::Arc::default(),
            policy_yaml: self.policy_yaml.map(|path| base.join(path)),
            task: self
                .task
                .map_or_else(TaskPolicy::default, |task| TaskPolicy {
                    support: task.support,
                    after: task.after_ms.map(std::time::Duration::from_millis),
                }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
