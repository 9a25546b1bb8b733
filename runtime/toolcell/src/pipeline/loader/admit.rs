//! Admitting a component of the contract under the policy: its tool and offers, each under the
//! policy of its name, with the pin, the source's name and the signatures that policy requires.

use crate::pipeline::catalog::{Executable, Loader, Offer, Schemas, Tool};
use crate::pipeline::loader::find::{FoundPlace, Provenance};
use crate::pipeline::source::ComponentSource;
use crate::policy::{Policy, ToolPolicy};
use crate::tool::info::ToolInfo;
use crate::tool::offer::Offers;
use crate::wasm::index::{Index, IndexEntry};
use crate::wasm::lazy::LazyCode;
use crate::wasm::load::LoadError;
use std::sync::Arc;

impl Loader {
    /// The tool (if `described` holds one) and the offers of a component of the contract,
    /// remembered in the index, each under the policy of its name, with the pin and signatures
    /// that policy requires.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish(
        &self,
        (indexes, by_digest): (&mut [Index], Option<&mut Index>),
        found: &FoundPlace<'_>,
        (digest, code): (String, Arc<LazyCode>),
        described: Option<(ToolInfo, tokio::sync::OnceCell<Schemas>)>,
        offers: Option<Offers>,
    ) -> Result<(Vec<Arc<Tool>>, Vec<LoadError>), LoadError> {
        let FoundPlace {
            source,
            indexed,
            provenance,
        } = *found;
        let info = described.as_ref().map(|(info, _)| info.clone());
        // Remembered, whether or not the policy lets it load: it said this about itself.
        let entry = |source: &str, identity: &str| IndexEntry {
            source: source.to_owned(),
            identity: identity.to_owned(),
            sha256: digest.clone(),
            info: info.clone(),
            typed: None,
            offers: offers.clone(),
        };
        if let Some((slot, identity)) = &indexed
            && let Some(index) = indexes.get_mut(*slot)
        {
            index.put(entry(source, identity));
        }
        if let Some(index) = by_digest
            && indexed.is_none()
        {
            index.put(entry(&digest, &digest));
        }
        let refuse = |message: String| LoadError::new(source.as_str(), message);
        let mut made = Vec::new();
        let mut left_out = Vec::new();
        let artifact = provenance.map(|from| from.digest.clone());
        if let Some((info, schemas)) = described {
            let (policy, signers) = self
                .admitted(&info.name, &digest, provenance)
                .map_err(refuse)?;
            made.push(Arc::new(Tool {
                info,
                schemas,
                policy,
                source: source.clone(),
                digest: Some(digest.clone()),
                artifact: artifact.clone(),
                signers,
                executable: Executable::Wasm(Arc::clone(&code)),
            }));
        }
        // The name a policy's `source` gave a pulled component is its tool's: an offer is
        // held to the signatures, not to that name.
        let unnamed = provenance.map(|from| Provenance {
            digest: from.digest.clone(),
            named: None,
        });
        // A component the policy pulls under a name (`[tools.X] source`) is held to that
        // entry's signatures and pin whether or not it has a tool of that name: its offers
        // are served only if it passes them.
        if offers.is_some()
            && let Some(named) = provenance.and_then(|from| from.named.as_deref())
        {
            self.admitted(named, &digest, provenance).map_err(refuse)?;
        }
        for (key, offer) in offers.as_ref().map(Offer::all_of).unwrap_or_default() {
            // One offer the policy refuses leaves the component's others in service.
            let (policy, signers) = match self.admitted(&key, &digest, unnamed.as_ref()) {
                Ok(admitted) => admitted,
                Err(why) => {
                    left_out.push(refuse(why));
                    continue;
                }
            };
            made.push(Arc::new(Tool {
                info: offer.info(&key),
                schemas: tokio::sync::OnceCell::new(),
                policy,
                source: source.clone(),
                digest: Some(digest.clone()),
                artifact: artifact.clone(),
                signers,
                executable: Executable::Offer(Arc::clone(&code), Arc::new(offer)),
            }));
        }
        Ok((made, left_out))
    }

    /// The policy of the tool or offer `name` of a component whose sha256 is `digest`, and
    /// who signed it, if the policy lets it load: its pin holds, its signatures verify.
    fn admitted(
        &self,
        name: &str,
        digest: &str,
        provenance: Option<&Provenance>,
    ) -> Result<(ToolPolicy, Vec<String>), String> {
        let policy = self.policy.tool(name);
        let signers = check_provenance(
            &self.policy,
            self.source.as_deref(),
            name,
            &policy,
            provenance,
        )?;
        if let Some(pin) = &policy.sha256
            && pin != digest
        {
            return Err(format!(
                "its sha256 is {digest}, but the policy pins {name} to {pin}"
            ));
        }
        Ok((policy, signers))
    }
}

/// Whether the tool `name`, loaded from where `provenance` says (a registry, or `None`
/// for anywhere else), may load under `policy`: the name the policy's `source` gave it,
/// and the signatures it requires. Its signers, as the source verified them (none when no
/// signature was required); the error names the tool.
pub(super) fn check_provenance(
    policy_file: &Policy,
    source: Option<&dyn ComponentSource>,
    name: &str,
    policy: &ToolPolicy,
    provenance: Option<&Provenance>,
) -> Result<Vec<String>, String> {
    if let Some(Provenance {
        named: Some(named), ..
    }) = provenance
        && named != name
    {
        return Err(format!(
            "the policy's tools.{named}.source is a component that calls itself {name:?}"
        ));
    }
    if let Some((_, source)) = policy_file.sources().iter().find(|(tool, _)| tool == name)
        && provenance.and_then(|from| from.named.as_deref()) != Some(name)
    {
        // The policy's entry (its grants) is for the artifact it names, not for whatever
        // component calls itself the same.
        return Err(format!(
            "the policy loads {name} from {source}; a component of that name from elsewhere \
             does not get its entry"
        ));
    }
    // Each list that applies must be satisfied on its own: the tool's, and for a pulled tool
    // the registry's (a vendor's key does not stand in for the team's, nor the other way).
    let mut groups: Vec<(&str, &[crate::policy::Signer])> = Vec::new();
    if !policy.signed_by.is_empty() {
        groups.push(("its policy's signed_by", &policy.signed_by));
    }
    if provenance.is_some() && !policy_file.registry().signed_by.is_empty() {
        groups.push(("[registry] signed_by", &policy_file.registry().signed_by));
    }
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let Some(provenance) = provenance else {
        return Err(format!(
            "{name} must be signed (its policy's signed_by), and only a tool pulled from a \
             registry carries a signature"
        ));
    };
    let source = source.ok_or_else(|| format!("{name}: this runtime has no component source"))?;
    let mut signers: Vec<String> = Vec::new();
    for (list, required) in groups {
        let required: Vec<&crate::policy::Signer> = required.iter().collect();
        let named = required
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        let found = source
            .check_signed(
                &provenance.digest,
                &required,
                policy_file.registry().trust_root.as_deref(),
            )
            .map_err(|why| {
                format!(
                    "{name} ({}) is refused: {why} ({list}: {named})",
                    provenance.digest
                )
            })?;
        for signer in found {
            if !signers.contains(&signer) {
                signers.push(signer);
            }
        }
    }
    Ok(signers)
}
