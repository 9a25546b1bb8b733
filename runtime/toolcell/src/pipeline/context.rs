//! What travels with each call: who makes it and where ([`CallContext`]), and the call itself
//! ([`Call`]).
//!
//! A routed call (the agent loop's executor contract) carries the workspace, the agent and the working directory on every
//! invocation; so does this. One [`Runtime`](crate::Runtime), with one engine, serves any
//! number of agents and workspaces at once.

use crate::call::client::ClientLink;
use crate::call::limits::CallOptions;
use crate::gate::Approver;
use crate::gate::workspace::Workspace;
use crate::policy::Policy;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a working directory was refused ([`CallContext::with_cwd`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CwdError {
    /// The context has no workspace, so no directory in it.
    #[error("a working directory needs a workspace")]
    NoWorkspace,
    /// The path is not inside the workspace, or a link leads out of it.
    #[error("the working directory {cwd:?}: {why}")]
    Refused {
        /// The directory asked for.
        cwd: String,
        /// Why it is refused.
        why: String,
    },
    /// The path is a file.
    #[error("the working directory {cwd:?} is not a directory")]
    NotADirectory {
        /// The directory asked for.
        cwd: String,
    },
}

/// The agent a call is made for when the caller names none.
pub const DEFAULT_AGENT: &str = "default";

/// Who makes a call and where: the agent, its workspace and its working directory in it.
///
/// Without a workspace no file system capability can be granted. Make one with
/// [`Runtime::context`](crate::Runtime::context), which shares one [`Workspace`] (and so its
/// saved rules) between every context of the same directory.
#[derive(Debug, Clone)]
pub struct CallContext {
    agent: String,
    workspace: Option<Arc<Workspace>>,
    cwd: PathBuf,
    policy: Option<Arc<Policy>>,
    approver: Option<Arc<dyn Approver>>,
    client: Option<Arc<dyn ClientLink>>,
}

impl std::fmt::Debug for dyn ClientLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientLink")
    }
}

impl Default for CallContext {
    fn default() -> Self {
        CallContext::new(DEFAULT_AGENT, None)
    }
}

impl CallContext {
    /// Calls by `agent` in `workspace`, from its root.
    pub fn new(agent: impl Into<String>, workspace: Option<Arc<Workspace>>) -> CallContext {
        CallContext {
            agent: agent.into(),
            workspace,
            cwd: PathBuf::new(),
            policy: None,
            approver: None,
            client: None,
        }
    }

    /// This context's calls may talk to `client` (the request's client): a tool granted
    /// `client.log`, `client.sample`, ... reaches it through this link and no other. Without
    /// one, a tool's log messages and progress go nowhere and its questions are answered
    /// `unsupported`.
    pub fn with_client(mut self, client: Arc<dyn ClientLink>) -> CallContext {
        self.client = Some(client);
        self
    }

    /// The client this context's calls may talk to, if any.
    pub fn client(&self) -> Option<&Arc<dyn ClientLink>> {
        self.client.as_ref()
    }

    /// This context's gated calls asked of `approver` instead of the runtime's: the person
    /// behind this caller, and no one else. An MCP server gives each request the client that
    /// sent it this way (`toolcell-mcp`), so an answer counts only for the call that asked.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> CallContext {
        self.approver = Some(approver);
        self
    }

    /// The approver this context's calls ask, if not the runtime's.
    pub fn approver(&self) -> Option<&Arc<dyn Approver>> {
        self.approver.as_ref()
    }

    /// This context's calls decided by `policy` instead of the runtime's: each tool's rules,
    /// limits, result class and `sha256` pin, and the `[files]` rules. What the runtime
    /// protects by name (its policy, audit and tokens files) stays protected, and which tools
    /// are core (listed to a model) is still the runtime's policy's choice. A server gives
    /// each tenant its own this way; check it first with
    /// [`Runtime::check_policy`](crate::Runtime::check_policy).
    pub fn with_policy(mut self, policy: Arc<Policy>) -> CallContext {
        self.policy = Some(policy);
        self
    }

    /// The policy this context's calls are decided by, if not the runtime's.
    pub fn policy(&self) -> Option<&Arc<Policy>> {
        self.policy.as_ref()
    }

    /// This context with its working directory at `cwd`: relative paths in a call's
    /// arguments start there. `cwd` is relative to the workspace (or an absolute path inside
    /// it), and must be a directory in it that no symlink leads out of.
    pub fn with_cwd(mut self, cwd: impl AsRef<Path>) -> Result<CallContext, CwdError> {
        let Some(workspace) = &self.workspace else {
            return Err(CwdError::NoWorkspace);
        };
        let requested = cwd.as_ref().to_string_lossy();
        let resolved =
            crate::gate::resolve(workspace, &requested).map_err(|why| CwdError::Refused {
                cwd: requested.clone().into_owned(),
                why,
            })?;
        if resolved.path != resolved.dir {
            return Err(CwdError::NotADirectory {
                cwd: requested.into_owned(),
            });
        }
        self.cwd = resolved.path;
        Ok(self)
    }

    /// The agent.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The workspace, if there is one.
    pub fn workspace(&self) -> Option<&Arc<Workspace>> {
        self.workspace.as_ref()
    }

    /// The working directory, relative to the workspace (empty for its root).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }
}

/// One call a model made, with everything the pipeline needs to decide and run it.
#[derive(Debug, Clone)]
pub struct Call {
    /// The caller's id for the call (a model's `tool_use.id`).
    pub id: String,
    /// The tool as the model named it (a tool, `find_tool` or `call_tool`).
    pub name: String,
    /// The arguments, as JSON text.
    pub arguments: String,
    /// Who makes it, and where.
    pub context: CallContext,
    /// Per-call limits and the stop token.
    pub options: CallOptions,
}

impl Call {
    /// A call with the default context (no workspace) and default options.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Call {
        Call {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            context: CallContext::default(),
            options: CallOptions::default(),
        }
    }

    /// This call, made in `context`.
    pub fn in_context(mut self, context: CallContext) -> Call {
        self.context = context;
        self
    }

    /// This call, with `options`.
    pub fn with_options(mut self, options: CallOptions) -> Call {
        self.options = options;
        self
    }
}
