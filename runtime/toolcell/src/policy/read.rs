//! Reading a policy file: its TOML parsed into the file's shape ([`super::entries`]), then each
//! section read and checked in turn (`[registry]`, `[files]`, each `[tools.NAME]`, `[config]`,
//! and the signers they name), every error at the line of what is wrong.

use crate::policy::entries::{FilesEntry, PolicyFile, ToolEntry, signers};
use crate::policy::{
    HostPattern, MAX_POLICY_FILE_BYTES, MAX_SOURCE_BYTES, Policy, PolicyError, RegistryRules,
    Signer,
};
use std::path::{Path, PathBuf};

impl PolicyError {
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

impl Policy {
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
}
