//! Components of plain typed exports: one tool per function served, each under its own policy
//! (the operator's, then the component's `policy.yaml`), and how the index remembers them.

use crate::pipeline::catalog::{Executable, Loader, Tool};
use crate::pipeline::loader::admit::check_provenance;
use crate::pipeline::loader::find::{FoundPlace, Provenance};
use crate::wasm::index::{Index, IndexEntry};
use crate::wasm::lazy::LazyCode;
use crate::wasm::load::LoadError;
use std::path::PathBuf;
use std::sync::Arc;

impl Loader {
    /// The tools of a component of plain typed exports (from `source`, whose sha256 is
    /// `digest`, its code `code`): one per function served, each under its own policy (the
    /// capabilities its calls need are the policy's to say: such a component says nothing of
    /// them; the `policy.yaml` its embedder named or the one beside its file), and the
    /// functions left out, as errors naming them. A pin or a signature the policy requires
    /// holds for every one of its tools, or the component is refused.
    pub(super) fn typed_tools_of(
        &self,
        source: &str,
        provenance: Option<Provenance>,
        code: Arc<LazyCode>,
        reflected: crate::wasm::typed::Reflected,
        digest: String,
    ) -> Result<(Vec<Arc<Tool>>, Vec<LoadError>), LoadError> {
        let beside = self.policy_yaml_of(source, &code);
        let refuse = |message: String| LoadError::new(source, message);
        let mut tools = Vec::new();
        // Each policy.yaml read once, for every function that names it.
        let mut yamls: Vec<(PathBuf, crate::policy::yaml::PolicyYaml)> = Vec::new();
        for function in reflected.functions {
            let name = function.info.name.clone();
            let mut policy = self.policy.tool(&name);
            if let Some(path) = policy.policy_yaml.clone().or_else(|| beside.clone()) {
                let known = yamls.iter().position(|(at, _)| *at == path);
                let index = match known {
                    Some(index) => index,
                    None => {
                        let read = crate::policy::yaml::PolicyYaml::read(&path, &self.own)
                            .map_err(|why| refuse(format!("its policy.yaml: {why}")))?;
                        yamls.push((path, read));
                        yamls.len() - 1
                    }
                };
                // The operator's policy decides each kind it names; the yaml, the rest. A
                // yaml's environment key is one grant made two ways (the variable and the
                // `wasi:config` key): an operator who decides either decides both, so that
                // `env = { access = "deny" }` is not undone by the yaml's `config`.
                use crate::tool::info::CapabilityKind::{Config, Env};
                let environment_decided =
                    policy.rules.contains_key(&Env) || policy.rules.contains_key(&Config);
                for (kind, rule) in &yamls[index].1.rules {
                    if let Some(kind) = crate::policy::capability_kind(kind) {
                        if matches!(kind, Env | Config) && environment_decided {
                            continue;
                        }
                        policy.rules.entry(kind).or_insert_with(|| rule.clone());
                    }
                }
            }
            let signers = check_provenance(
                &self.policy,
                self.source.as_deref(),
                &name,
                &policy,
                provenance.as_ref(),
            )
            .map_err(&refuse)?;
            if let Some(pin) = &policy.sha256
                && *pin != digest
            {
                return Err(refuse(format!(
                    "its sha256 is {digest}, but the policy pins {name} to {pin}"
                )));
            }
            let mut info = function.info.clone();
            info.capabilities = crate::wasm::typed::capabilities_of(&policy);
            let info = info
                .checked()
                .map_err(|why| refuse(format!("the policy's capabilities of {name}: {why}")))?;
            tools.push(Arc::new(Tool {
                info,
                schemas: tokio::sync::OnceCell::new(),
                policy,
                source: source.to_owned(),
                digest: Some(digest.clone()),
                artifact: provenance.as_ref().map(|from| from.digest.clone()),
                signers,
                executable: Executable::Typed(Arc::clone(&code), function),
            }));
        }
        let left_out = reflected
            .left_out
            .into_iter()
            .map(|left| {
                LoadError::new(
                    format!("{source}#{}", left.function),
                    format!("left out: {}", left.why),
                )
            })
            .collect();
        Ok((tools, left_out))
    }

    /// The `policy.yaml` of the component loaded as `source`: the one the embedder named, or
    /// the one beside its file.
    fn policy_yaml_of(&self, source: &str, code: &LazyCode) -> Option<PathBuf> {
        self.policy_yamls
            .iter()
            .find(|(named, _)| named == source)
            .map(|(_, path)| path.clone())
            .or_else(|| {
                code.file()
                    .and_then(crate::policy::yaml::PolicyYaml::beside)
            })
    }
}

/// Remember a component of plain typed exports (its digest, its functions as `reflected`) in
/// the index of its place, or in `by_digest` when it has none, as a contract component's
/// description is remembered.
pub(super) fn remember_typed(
    (indexes, by_digest): (&mut [Index], Option<&mut Index>),
    place: &FoundPlace<'_>,
    digest: &str,
    reflected: &crate::wasm::typed::Reflected,
) {
    let kept = crate::wasm::typed::Indexed::of(reflected);
    let Some(first) = kept.functions.first() else {
        return;
    };
    let entry = |source: &str, identity: &str| IndexEntry {
        source: source.to_owned(),
        identity: identity.to_owned(),
        sha256: digest.to_owned(),
        info: Some(first.info.clone()),
        typed: Some(kept.clone()),
        offers: None,
    };
    if let Some((slot, identity)) = place.indexed
        && let Some(index) = indexes.get_mut(*slot)
    {
        index.put(entry(place.source, identity));
    }
    if let Some(index) = by_digest
        && place.indexed.is_none()
    {
        index.put(entry(digest, digest));
    }
}
