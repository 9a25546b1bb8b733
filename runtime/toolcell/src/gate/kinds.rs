//! The gate's decision for each kind of capability but the file system's (`filesystem.rs`):
//! a way of talking to the client, an environment variable, a `wasi:config` key, the hosts a
//! tool reaches, one URL.

use crate::call::report::GrantedBy;
use crate::gate::{Call, Deciding, Gate, Refusal, client_resource, refuse};
use crate::policy::{Access, HOST_ENV_PREFIX, HostPattern, Rule};
use crate::tool::info::{CapabilityKind, ResourceRef};
use serde_json::Value;
use std::sync::Arc;

impl Gate {
    /// A way to talk to the client: granted whole, by the policy's rule or the feature's
    /// default. An optional one refused is withheld (the tool runs and is told `denied` when it
    /// asks); a required one refused refuses the call.
    pub(super) fn decide_client(
        &self,
        call: &Call<'_>,
        kind: CapabilityKind,
        rule: Option<&Rule>,
        deciding: &mut Deciding,
    ) -> Result<(), Refusal> {
        let (tool, scope) = (call.tool, call.scope);
        let fallback = Rule::new(crate::policy::client_default(kind));
        let rule = rule.unwrap_or(&fallback);
        let required = call.info.required_client.contains(&kind);
        let resource = client_resource(kind);
        // An optional gated question is decided when the call first asks one
        // (`wasm/client.rs`), unless a saved rule already covers it; gated log
        // messages and progress are decided here, before the call, as any
        // capability.
        let a_question = !matches!(
            kind,
            CapabilityKind::ClientLog | CapabilityKind::ClientProgress
        );
        if rule.access == Access::Gated
            && a_question
            && !required
            && !scope
                .workspace
                .is_some_and(|workspace| workspace.saved_rule_covers(tool, kind.name(), resource))
        {
            deciding.grants.client.gated.push(kind);
            return Ok(());
        }
        match self.allowed(tool, kind, resource, Some(rule), scope, |_| true) {
            Ok(by) => {
                deciding.grants.client.granted.push(kind);
                deciding.record(kind, resource, by);
            }
            Err(Refusal::Ask(request)) => return Err(Refusal::Ask(request)),
            Err(refusal) if required => return Err(refusal),
            Err(_) => {}
        }
        Ok(())
    }

    /// An environment variable the tool names: never one of the host's own (`TOOLCELL_`),
    /// granted with its value if the server has it.
    pub(super) fn decide_env(
        &self,
        call: &Call<'_>,
        capability: &crate::tool::info::Capability,
        rule: Option<&Rule>,
        arguments: &Value,
        deciding: &mut Deciding,
    ) -> Result<(), Refusal> {
        let kind = capability.kind;
        let name = resource_text(&capability.target, arguments)
            .ok_or_else(|| refuse(kind, "", "the tool names no variable"))?;
        if name.starts_with(HOST_ENV_PREFIX) {
            return Err(refuse(
                kind,
                &name,
                "TOOLCELL_ variables configure the host itself (a seal key, a \
                 cache key): no tool is given one",
            )
            .into());
        }
        let by = self.allowed(call.tool, kind, &name, rule, call.scope, |rule| {
            rule.vars.iter().any(|var| var == &name)
        })?;
        deciding.record(kind, &name, by);
        if let Ok(value) = std::env::var(&name) {
            deciding.grants.env.push((name, value));
        }
        Ok(())
    }

    /// A `wasi:config` key the tool names, granted with the operator's value, or the server's
    /// variable of the key's name.
    pub(super) fn decide_config(
        &self,
        call: &Call<'_>,
        capability: &crate::tool::info::Capability,
        rule: Option<&Rule>,
        arguments: &Value,
        deciding: &mut Deciding,
    ) -> Result<(), Refusal> {
        let kind = capability.kind;
        let key = resource_text(&capability.target, arguments)
            .ok_or_else(|| refuse(kind, "", "the tool names no config key"))?;
        let by = self.allowed(call.tool, kind, &key, rule, call.scope, |rule| {
            rule.vars.iter().any(|var| var == &key)
        })?;
        deciding.record(kind, &key, by);
        // The operator's value, or the server's variable of the key's name; never
        // recorded (the audit names the key only).
        let value = match call.policy.config_values.get(&key) {
            Some(source) => source.resolve(),
            None if !key.starts_with(HOST_ENV_PREFIX) => std::env::var(&key).ok(),
            None => None,
        };
        if let Some(value) = value {
            deciding.grants.config.push((key, value));
        }
        Ok(())
    }

    /// The hosts the rule names, whole (a typed tool's network rule, or its
    /// policy.yaml's): granted as the policy allows them; a person asked sees them.
    pub(super) fn decide_hosts(
        &self,
        call: &Call<'_>,
        rule: Option<&Rule>,
        deciding: &mut Deciding,
    ) -> Result<(), Refusal> {
        let kind = CapabilityKind::Network;
        let hosts = rule.map(|rule| rule.hosts.join(", ")).unwrap_or_default();
        let by = self.allowed(call.tool, kind, &hosts, rule, call.scope, |rule| {
            !rule.hosts.is_empty()
        })?;
        deciding.record(kind, &hosts, by);
        let allow_private = rule.is_some_and(|rule| rule.allow_private);
        deciding.grants.network = Arc::new(
            rule.map(|rule| {
                rule.hosts
                    .iter()
                    .filter_map(|h| HostPattern::parse(h).ok())
                    .map(|pattern| pattern.allowing_private(allow_private))
                    .collect()
            })
            .unwrap_or_default(),
        );
        Ok(())
    }

    /// The http or https URL the tool names: its destination (scheme, host, port) granted if
    /// the policy's hosts cover it, or a person approves it.
    pub(super) fn decide_url(
        &self,
        call: &Call<'_>,
        capability: &crate::tool::info::Capability,
        rule: Option<&Rule>,
        arguments: &Value,
        deciding: &mut Deciding,
    ) -> Result<(), Refusal> {
        let kind = capability.kind;
        let url = resource_text(&capability.target, arguments)
            .ok_or_else(|| refuse(kind, "", "the tool names no URL"))?;
        let (scheme, host, port) =
            url_destination(&url).ok_or_else(|| refuse(kind, &url, "not an http or https URL"))?;
        let allow_private = rule.is_some_and(|rule| rule.allow_private);
        let patterns: Vec<HostPattern> = rule
            .map(|rule| {
                rule.hosts
                    .iter()
                    .filter_map(|h| HostPattern::parse(h).ok())
                    .map(|pattern| pattern.allowing_private(allow_private))
                    .collect()
            })
            .unwrap_or_default();
        let destination = format!("{scheme}://{host}:{port}");
        let by = self.allowed(call.tool, kind, &destination, rule, call.scope, |_| {
            patterns.iter().any(|p| p.matches(&scheme, &host, port))
        })?;
        deciding.record(kind, &destination, by);
        // The policy's own allowance covers its hosts (redirects among them
        // included); a person's approval, or a rule saved from one, covers the
        // destination they saw and nothing else.
        deciding.grants.network = Arc::new(if by == GrantedBy::Policy {
            patterns
        } else {
            let bracketed = if host.contains(':') {
                format!("[{host}]")
            } else {
                host.clone()
            };
            HostPattern::parse(&format!("{scheme}://{bracketed}:{port}"))
                .map(|exact| vec![exact.allowing_private(allow_private)])
                .unwrap_or_default()
        });
        Ok(())
    }
}

/// The scheme, host and port an http(s) URL leads to.
fn url_destination(url: &str) -> Option<(String, String, u16)> {
    let uri: http::Uri = url.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    let host = uri
        .host()?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "http" { 80 } else { 443 });
    Some((scheme, host, port))
}

/// The resource text a capability names: its argument's string value, or its fixed value.
fn resource_text(target: &ResourceRef, arguments: &Value) -> Option<String> {
    match target {
        ResourceRef::Argument(pointer) => arguments.pointer(pointer)?.as_str().map(str::to_owned),
        ResourceRef::Fixed(resource) => Some(resource.clone()),
        ResourceRef::Whole => None,
    }
}
