//! One rule applied to one resource: granted by the policy, by a rule saved in the workspace
//! or by a person's answer, or refused (or a question for a person, when one can be asked).

use crate::call::proto::DenyReason;
use crate::call::report::GrantedBy;
use crate::gate::approval::{Approval, ApprovalRequest, capability_name};
use crate::gate::{Gate, Refusal, Scope, refuse};
use crate::policy::{Access, Rule};
use crate::tool::info::CapabilityKind;

impl Gate {
    /// Apply `rule` to one resource (`covers` says whether the rule's scope includes it): who
    /// grants it, or why not.
    pub(super) fn allowed(
        &self,
        tool: &str,
        kind: CapabilityKind,
        resource: &str,
        rule: Option<&Rule>,
        scope: &Scope<'_>,
        covers: impl Fn(&Rule) -> bool,
    ) -> Result<GrantedBy, Refusal> {
        let capability = capability_name(kind);
        let Some(rule) = rule else {
            return Err(refuse(
                kind,
                resource,
                &format!("the policy grants {tool} no {capability}"),
            )
            .into());
        };
        if !covers(rule) {
            return Err(refuse(kind, resource, "it is outside what the policy allows").into());
        }
        match rule.access {
            Access::Allow => Ok(GrantedBy::Policy),
            Access::Deny => Err(refuse(kind, resource, "the policy denies it").into()),
            Access::Gated => {
                let request = ApprovalRequest {
                    agent: scope.agent.to_owned(),
                    workspace: scope.workspace.map(|workspace| workspace.root().to_owned()),
                    tool: tool.to_owned(),
                    capability: capability.to_owned(),
                    resource: resource.to_owned(),
                    timeout: scope.wait,
                };
                if scope.workspace.is_some_and(|workspace| {
                    workspace.saved_rule_covers(tool, capability, resource)
                }) {
                    return Ok(GrantedBy::SavedRule);
                }
                let answer = scope
                    .answers
                    .iter()
                    .find(|(asked, _)| asked.same_question(&request))
                    .map(|(_, answer)| *answer);
                let Some(answer) = answer else {
                    return Err(if scope.can_ask {
                        Refusal::Ask(Box::new(request))
                    } else {
                        DenyReason::ApprovalRequired {
                            capability: request.capability,
                            resource: request.resource,
                        }
                        .into()
                    });
                };
                match answer {
                    Approval::Once => Ok(GrantedBy::PersonOnce),
                    Approval::Always => {
                        if let Some(workspace) = scope.workspace {
                            workspace
                                .save_rule(tool, capability, resource)
                                .map_err(|error| {
                                    refuse(
                                        kind,
                                        resource,
                                        &format!("the rule could not be saved: {error}"),
                                    )
                                })?;
                        }
                        Ok(GrantedBy::PersonAlways)
                    }
                    Approval::Deny => Err(DenyReason::ByPerson {
                        capability: request.capability,
                        resource: request.resource,
                    }
                    .into()),
                    Approval::NoAnswer | Approval::Later => Err(DenyReason::Unanswered {
                        capability: request.capability,
                        resource: request.resource,
                    }
                    .into()),
                }
            }
        }
    }
}
