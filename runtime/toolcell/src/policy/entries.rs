//! A policy file's shape, as its TOML is parsed (unknown keys refused): the file, its
//! `[registry]`, `[files]` and `[tools.NAME]` entries, and how a tool's entry becomes its
//! [`ToolPolicy`].

use crate::call::limits::Limits;
use crate::call::proto::Class;
use crate::policy::{
    ConfigValue, Identity, Rule, Signer, TaskPolicy, TaskSupport, ToolPolicy, capability_kind,
};
use crate::tool::info::CapabilityKind;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyFile {
    #[serde(default)]
    pub(super) tools: std::collections::BTreeMap<String, ToolEntry>,
    #[serde(default)]
    pub(super) config: BTreeMap<String, ConfigValue>,
    pub(super) files: Option<FilesEntry>,
    pub(super) registry: Option<RegistryEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RegistryEntry {
    #[serde(default)]
    pub(super) signed_by: Vec<SignerEntry>,
    #[serde(default)]
    pub(super) insecure: Vec<String>,
    pub(super) trust_root: Option<PathBuf>,
}

/// A `signed_by` entry: a key file's path, or `{ issuer, subject }`.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum SignerEntry {
    Key(PathBuf),
    Identity(Identity),
}

pub(super) fn signers(entries: Vec<SignerEntry>, base: &Path) -> Vec<Signer> {
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
pub(super) struct FilesEntry {
    #[serde(default)]
    pub(super) protected: Vec<String>,
    pub(super) deny_read: Option<Vec<String>>,
    pub(super) deny_write: Option<Vec<String>>,
    pub(super) max_read_bytes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolEntry {
    #[serde(default)]
    core: bool,
    #[serde(default)]
    class: Class,
    sha256: Option<String>,
    limits: Option<LimitsEntry>,
    filesystem: Option<FilesystemEntry>,
    pub(super) network: Option<Rule>,
    env: Option<Rule>,
    clock: Option<Rule>,
    config: Option<Rule>,
    client: Option<ClientEntry>,
    #[serde(default)]
    capabilities: Vec<CapabilityEntry>,
    policy_yaml: Option<PathBuf>,
    pub(super) source: Option<String>,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsEntry {
    timeout_ms: Option<u64>,
    memory_mib: Option<usize>,
    fuel: Option<u64>,
}

impl ToolEntry {
    pub(super) fn into_policy(self, base: &Path) -> Result<ToolPolicy, String> {
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
