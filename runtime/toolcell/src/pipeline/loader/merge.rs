//! The catalog of the tools loaded and the native ones: each name, and each URI a resource or
//! template reads, served by one component only.

use crate::pipeline::catalog::{ByName, Catalog, Executable, Listed, Tool};
use crate::wasm::load::LoadError;
use std::collections::HashMap;
use std::sync::Arc;

/// The catalog of `wasm` tools then `natives`, in that order; a tool whose name is taken
/// already is left out, with an error.
///
/// At a reload (`serving` is the catalog before it), a name a tool still in service holds stays
/// that tool's: a component added meanwhile that calls itself the same is the one refused.
pub(crate) fn catalog(
    wasm: Vec<Arc<Tool>>,
    natives: &[Arc<Tool>],
    errors: &mut Vec<LoadError>,
    serving: Option<&Catalog>,
) -> Catalog {
    let candidates: Vec<Arc<Tool>> = wasm.into_iter().chain(natives.iter().cloned()).collect();
    let kept = |tool: &Arc<Tool>| {
        serving
            .and_then(|serving| serving.any(&tool.info.name))
            .is_some_and(|now| Arc::ptr_eq(now, tool))
    };
    let held: std::collections::HashSet<&str> = candidates
        .iter()
        .filter(|tool| kept(tool))
        .map(|tool| tool.info.name.as_str())
        .collect();
    let mut tools = ByName::default();
    // Each template's shape (its variables' names left out), and the key that holds it: the
    // ones in service first, so that a component added meanwhile is the one refused.
    let mut shapes: HashMap<String, String> = candidates
        .iter()
        .filter(|tool| kept(tool))
        .filter_map(|tool| Some((template_of(tool)?.shape(), tool.info.name.clone())))
        .collect();
    let mut order = Vec::new();
    for tool in &candidates {
        if held.contains(tool.info.name.as_str()) && !kept(tool) {
            let serving = serving
                .and_then(|serving| serving.any(&tool.info.name))
                .map_or("", |now| now.source.as_str());
            errors.push(LoadError {
                message: format!(
                    "{} is already served from {serving}",
                    named(&tool.info.name)
                ),
                source: tool.source.clone(),
                guest_stderr: String::new(),
            });
            continue;
        }
        let tool = Arc::clone(tool);
        let twin = tools
            .get(&tool.info.name)
            .map(|first| first.source.clone())
            .or_else(|| {
                // Two templates of one shape would both match every URI of it.
                let holder = shapes.get(&template_of(&tool)?.shape())?;
                (*holder != tool.info.name)
                    .then(|| candidates.iter().find(|t| t.info.name == *holder))
                    .flatten()
                    .map(|holder| holder.source.clone())
            });
        if let Some(first) = twin {
            // A completion goes with its prompt or template, whose refusal says it all.
            if tool.info.name.starts_with("completion:") {
                continue;
            }
            errors.push(LoadError {
                message: format!("{} is already loaded from {first}", named(&tool.info.name)),
                source: tool.source.clone(),
                guest_stderr: String::new(),
            });
            continue;
        }
        if let Some(template) = template_of(&tool) {
            shapes.insert(template.shape(), tool.info.name.clone());
        }
        if !matches!(tool.executable, Executable::Offer(..)) {
            order.push(tool.info.name.clone());
        }
        tools.insert(tool.info.name.clone(), tool);
    }
    settle_offers(&mut tools, errors, &kept);
    let (offers, tools): (ByName, ByName) = tools
        .into_iter()
        .partition(|(_, tool)| matches!(tool.executable, Executable::Offer(..)));
    let registry = crate::call::registry::Registry::new(
        order
            .iter()
            .filter_map(|name| tools.get(name))
            .map(|tool| crate::call::registry::Entry {
                schema: tool.info.schema(),
                core: tool.policy.core,
            })
            .collect(),
    );
    Catalog {
        registry: Arc::new(registry),
        tools,
        offers,
    }
}

/// The URI template an offer reads by, if it is one.
fn template_of(tool: &Tool) -> Option<&crate::tool::offer::Template> {
    match &tool.executable {
        Executable::Offer(_, offer) => match &offer.listed {
            Listed::Template(_, template) => Some(template),
            _ => None,
        },
        _ => None,
    }
}

/// What one component offers may not reach into another's: a listed resource whose URI
/// another component's template matches is refused (unless the resource is in service and
/// the template is new: then the template is), and a completion is kept only beside the
/// prompt or template it completes, from the same component.
fn settle_offers(
    tools: &mut ByName,
    errors: &mut Vec<LoadError>,
    kept: &dyn Fn(&Arc<Tool>) -> bool,
) {
    let templates: Vec<Arc<Tool>> = tools
        .values()
        .filter(|tool| template_of(tool).is_some())
        .cloned()
        .collect();
    let resources: Vec<Arc<Tool>> = tools
        .values()
        .filter(|tool| tool.info.name.starts_with("resource:"))
        .cloned()
        .collect();
    let mut refused: Vec<(Arc<Tool>, String)> = Vec::new();
    for resource in &resources {
        let uri = &resource.info.name["resource:".len()..];
        for template in &templates {
            if template.source == resource.source
                || template_of(template).and_then(|t| t.matches(uri)).is_none()
            {
                continue;
            }
            let (loser, winner) = if kept(resource) && !kept(template) {
                (template, resource)
            } else {
                (resource, template)
            };
            refused.push((
                Arc::clone(loser),
                format!(
                    "{} overlaps {} of {}: a URI is read by one component only",
                    named(&loser.info.name),
                    named(&winner.info.name),
                    winner.source
                ),
            ));
        }
    }
    for (loser, message) in refused {
        if tools.remove(&loser.info.name).is_some() {
            errors.push(LoadError {
                message,
                source: loser.source.clone(),
                guest_stderr: String::new(),
            });
        }
    }
    let orphans: Vec<String> = tools
        .iter()
        .filter_map(|(key, tool)| {
            let owner = key.strip_prefix("completion:")?;
            let beside = tools
                .get(owner)
                .is_some_and(|owner| owner.source == tool.source);
            (!beside).then(|| key.clone())
        })
        .collect();
    for key in orphans {
        tools.remove(&key);
    }
}

/// What a catalog key names, for a refusal: `a tool named "x"`, `a prompt named "x"`.
fn named(key: &str) -> String {
    let echoed = crate::call::names::echoed;
    match key.split_once(':') {
        Some(("prompt", name)) => format!("a prompt named {}", echoed(name)),
        Some(("resource", uri)) => format!("a resource {}", echoed(uri)),
        Some(("template", name)) => {
            format!("a URI template named {} (or of its pattern)", echoed(name))
        }
        _ => format!("a tool named {key:?}"),
    }
}
