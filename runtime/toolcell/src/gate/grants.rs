//! What the gate hands a call: [`Grants`], exactly the authority decided, nothing wider. The
//! wasm executor turns them into a WASI context (`wasm/sandbox.rs`); a native tool gets them as
//! handles in its context.

use crate::policy::HostPattern;
use crate::tool::info::CapabilityKind;
use std::sync::Arc;
use std::time::Duration;

/// What the wall clock reads for a call not granted the clock: the Unix epoch,
/// 1970-01-01T00:00:00Z, so a tool that shows it shows plainly that it was not given the time.
pub const FIXED_WALL_CLOCK: Duration = Duration::ZERO;

/// The authority one call holds, decided by the gate. `Grants::default()` is nothing at all.
/// Its `Debug` names the variables and keys granted, never their values.
pub struct Grants {
    /// The real wall clock. Without it the wall clock reads [`FIXED_WALL_CLOCK`].
    pub clock: bool,
    /// Environment variables, by name, with their values.
    pub env: Vec<(String, String)>,
    /// `wasi:config/store` values, by key: what `get` and `get-all` answer (nothing else).
    pub config: Vec<(String, String)>,
    /// Directories the guest may open.
    pub preopens: Vec<Preopen>,
    /// The hosts its `wasi:http` requests may reach (none: every request is denied).
    pub network: Arc<Vec<HostPattern>>,
    /// The staging directories of granted files (`gate/staging.rs`): what the call writes there is
    /// carried over after it, and they are removed when the last clone of these grants goes.
    pub(crate) staged: Vec<Arc<crate::gate::staging::Staging>>,
    /// Staging directories decided but not yet filled (`gate::finish_staging`), by the
    /// directory path the guest knows.
    pub(crate) pending: Vec<(String, crate::gate::staging::Staging)>,
    /// The names a wasm guest never sees inside its preopens (`wasm/guest_fs.rs`): the deny-read
    /// list of the rules the gate decided by ([`DEFAULT_DENY_READ`] by default).
    ///
    /// [`DEFAULT_DENY_READ`]: crate::policy::files::DEFAULT_DENY_READ
    pub(crate) deny_read: crate::policy::files::DenyRead,
    /// The host's own files and directories (`hostfs/own.rs`: its policy, audit, tokens, keys
    /// and cache files, its tools directories), as they were when the call was decided: not
    /// there inside the directories granted either (`wasm/guest_fs.rs`).
    pub(crate) protected: Arc<[crate::hostfs::OwnFile]>,
    /// The workspace's credential files that have other names, by identity
    /// (`gate/secrets.rs`): an open of one under another name is refused.
    pub(crate) credentials: crate::gate::secrets::Identities,
    /// The ways the call may talk to its client, and the way to it.
    pub client: ClientGrant,
}

/// The ways one call may talk to its client (`client.*` kinds the gate granted), and the link
/// to the client of the request, if it has one. What the call may do is both: granted here
/// and offered by the link.
#[derive(Default, Clone)]
pub struct ClientGrant {
    /// The `client.*` capability kinds granted.
    pub granted: Vec<CapabilityKind>,
    /// The `client.*` kinds the policy gates and no saved rule covers: a person is asked the
    /// first time the call asks a question of one (not before the call: a call may never use
    /// it), through `approver`.
    pub gated: Vec<CapabilityKind>,
    /// The request's client, if there is one to talk to.
    pub link: Option<Arc<dyn crate::call::client::ClientLink>>,
    /// The tool's name, which labels what it asks the person.
    pub tool: String,
    /// Who decides a gated kind (the context's approver, else the runtime's), the agent and
    /// workspace the question names, and how long the call may wait for them.
    pub approval: Option<ClientApproval>,
}

/// What a call needs to ask a person about a gated way of talking to its client.
#[derive(Clone)]
pub struct ClientApproval {
    /// Who is asked.
    pub approver: Arc<dyn crate::gate::approval::Approver>,
    /// The agent whose call asks.
    pub agent: String,
    /// The workspace, where an "always" answer is saved.
    pub workspace: Option<Arc<crate::gate::workspace::Workspace>>,
    /// The call's deadline, as the longest wait.
    pub wait: std::time::Duration,
}

impl std::fmt::Debug for ClientGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientGrant")
            .field("granted", &self.granted)
            .field("gated", &self.gated)
            .field("link", &self.link.is_some())
            .field("approval", &self.approval.is_some())
            .finish_non_exhaustive()
    }
}

impl Default for Grants {
    /// Nothing at all. Its two shared lists (no hosts, no protected files) are one empty list
    /// each for the whole process, shared rather than allocated for every call that is granted
    /// nothing: an `Arc` of an empty list cannot be changed through any of its clones.
    fn default() -> Self {
        static NO_HOSTS: std::sync::LazyLock<Arc<Vec<HostPattern>>> =
            std::sync::LazyLock::new(|| Arc::new(Vec::new()));
        static NO_FILES: std::sync::LazyLock<Arc<[crate::hostfs::OwnFile]>> =
            std::sync::LazyLock::new(|| Arc::from(Vec::new()));
        Grants {
            clock: false,
            env: Vec::new(),
            config: Vec::new(),
            preopens: Vec::new(),
            network: Arc::clone(&NO_HOSTS),
            staged: Vec::new(),
            pending: Vec::new(),
            deny_read: Default::default(),
            protected: Arc::clone(&NO_FILES),
            credentials: Default::default(),
            client: ClientGrant::default(),
        }
    }
}

impl std::fmt::Debug for Grants {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |pairs: &[(String, String)]| -> Vec<String> {
            pairs.iter().map(|(name, _)| name.clone()).collect()
        };
        f.debug_struct("Grants")
            .field("clock", &self.clock)
            .field("env", &names(&self.env))
            .field("config", &names(&self.config))
            .field("preopens", &self.preopens)
            .field("network", &self.network)
            .field("staged", &self.staged.len())
            .field("pending", &self.pending.len())
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// One directory a call may open: a directory the gate opened inside the workspace, the path
/// the guest knows it by, and whether it may write.
#[derive(Debug, Clone)]
pub struct Preopen {
    pub(crate) dir: Arc<cap_std::fs::Dir>,
    /// The path the guest opens it by (relative to the workspace, `.` for the workspace).
    pub guest: String,
    /// Read-write when true, read-only otherwise.
    pub writable: bool,
}

impl Preopen {
    /// The path wasmtime opens for this preopen: the open directory itself, on Linux.
    pub(crate) fn host_path(&self) -> std::path::PathBuf {
        use std::os::fd::AsRawFd as _;
        std::path::PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
    }
}

/// Whether `offered` includes the `client.*` feature `kind` (`client.log`: the client wants
/// some level of log messages; any other kind: false).
pub(crate) fn offers(offered: &crate::call::client::Offered, kind: CapabilityKind) -> bool {
    match kind {
        CapabilityKind::ClientLog => offered.log_level.is_some(),
        CapabilityKind::ClientProgress => offered.progress,
        CapabilityKind::ClientSample => offered.sample,
        CapabilityKind::ClientElicit => offered.elicit,
        CapabilityKind::ClientElicitUrl => offered.elicit_url,
        CapabilityKind::ClientListRoots => offered.list_roots,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A grant's values never show in its `Debug` (a log line of it would leak them).
    #[test]
    fn debug_names_what_is_granted_and_shows_no_value() {
        let grants = Grants {
            env: vec![("API_KEY".to_owned(), "s3cret-env".to_owned())],
            config: vec![("TOKEN".to_owned(), "s3cret-config".to_owned())],
            ..Grants::default()
        };
        let shown = format!("{grants:?}");
        assert!(
            shown.contains("API_KEY") && shown.contains("TOKEN"),
            "{shown}"
        );
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}
