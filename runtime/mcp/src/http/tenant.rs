//! A tenant: who the calls made with a credential are made for (a bearer token's tenant,
//! `auth`, or an OAuth principal's, `oauth`), in which workspace, under which policy and
//! quota; and the pieces both credentials' files use to make one.

use crate::http::quota::{Limiter, Quota, QuotaConfig, Retired, Scope};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};
use toolcell::{CallContext, Runtime};

/// One tenant: who the calls made with its tokens are made for, and where.
#[derive(Debug)]
pub struct Tenant {
    /// The tenant's name: the agent its calls are audited as.
    pub name: String,
    /// Its calls' context: the agent and the tenant's workspace.
    pub context: CallContext,
    /// Its quota, shared by all its tokens, if it has one.
    pub quota: Option<Arc<Limiter>>,
}

/// The limiter for `quota` (checked here) of `tenant` in `scope`, carrying over `previous`.
pub(crate) fn limiter(
    runtime: &Runtime,
    tenant: &str,
    scope: Scope,
    quota: &QuotaConfig,
    previous: Option<&Limiter>,
) -> Result<Arc<Limiter>, String> {
    limiter_after(
        runtime,
        &format!("tenant:{tenant}"),
        tenant,
        scope,
        quota,
        previous,
        None,
    )
}

/// [`limiter`], carrying over `previous` if there is one, else restoring `retired`; `holder`
/// names the quota's state in a shared store (`tenant:NAME`, `token:SHA256`).
pub(crate) fn limiter_after(
    runtime: &Runtime,
    holder: &str,
    tenant: &str,
    scope: Scope,
    quota: &QuotaConfig,
    previous: Option<&Limiter>,
    retired: Option<&Retired>,
) -> Result<Arc<Limiter>, String> {
    let quota = Quota::new(
        quota,
        crate::http::share::calls_per_client(runtime.pool_slots()),
        runtime.meters_fuel(),
    )?;
    let (now, wall) = (Instant::now(), SystemTime::now());
    Ok(Arc::new(
        match (previous, retired) {
            (None, Some(retired)) => Limiter::restore(tenant, scope, quota, retired, now, wall),
            _ => Limiter::new(tenant, scope, quota, previous, now, wall),
        }
        .holding(holder),
    ))
}

/// The tenant `name`, its calls made in `workspace` (if any), decided by the policy file at
/// `policy` (if any; relative to `base`, the directory of the file that names it) and limited
/// by `quota`; and the policy file's path, which the caller must protect from every tool's
/// writes.
pub(crate) fn tenant(
    runtime: &Runtime,
    name: &str,
    workspace: Option<&Path>,
    policy: Option<&Path>,
    base: &Path,
    quota: Option<Arc<Limiter>>,
) -> Result<(Arc<Tenant>, Option<PathBuf>), String> {
    toolcell::registry::check_tool_name(name).map_err(|_| {
        format!(
            "tenant {}: a tenant name is 1 to 64 of a-zA-Z0-9_-",
            toolcell::registry::echoed(name)
        )
    })?;
    let workspace =
        match workspace {
            Some(dir) => Some(runtime.workspace(dir).map_err(|error| {
                format!("tenant {name:?}: workspace {}: {error}", dir.display())
            })?),
            None => None,
        };
    let mut context = CallContext::new(name, workspace);
    let mut protect = None;
    if let Some(policy) = policy {
        let path = base.join(policy);
        let loaded = toolcell::Policy::from_own_file(&path, runtime.own_files())
            .map_err(|error| format!("tenant {name:?}: {error}"))?;
        runtime
            .check_policy(&loaded)
            .map_err(|why| format!("tenant {name:?}: the policy {}: {why}", path.display()))?;
        context = context.with_policy(Arc::new(loaded));
        protect = Some(path);
    }
    Ok((
        Arc::new(Tenant {
            name: name.to_owned(),
            context,
            quota,
        }),
        protect,
    ))
}

/// The text of the server's own file at `path`, refused if longer than `max` bytes (read no
/// further), registered among `runtime`'s own files as it is read: no tool reads or writes it
/// (`toolcell::hostfs`).
pub(crate) fn read_own(runtime: &Runtime, path: &Path, max: u64) -> Result<String, String> {
    runtime
        .own_files()
        .read_to_string(path, max)
        .map_err(|error| error.to_string())
}
