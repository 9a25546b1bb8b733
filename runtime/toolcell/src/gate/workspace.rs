//! A workspace: the directory a call's paths resolve in, and the "always" rules a person saved
//! for it.
//!
//! One [`Runtime`](crate::Runtime) serves any number of workspaces at once; each call names its
//! own in its [`CallContext`](crate::CallContext). A workspace's saved rules are its own: an
//! approval given in one is never honoured in another.

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::gate::staging::StagingPool;

/// Where "always" rules are saved, relative to the workspace.
pub const PERMISSIONS_FILE: &str = ".toolcell/permissions.toml";

/// The directory calls work in: every path a tool names is resolved inside it.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    pub(crate) dir: Dir,
    saved: Mutex<SavedRules>,
    /// `.toolcell/grants`, where file grants are staged (`gate/staging.rs`), opened on first
    /// use, with the staging directories kept for reuse.
    staging: std::sync::OnceLock<Arc<StagingPool>>,
    /// The last look at where its credentials are kept (`gate/secrets.rs`).
    secrets: crate::gate::secrets::SecretScan,
}

impl Workspace {
    /// Open the workspace at `path` (it must be a directory), with the rules saved in it.
    ///
    /// Staging directories that no live process holds (left by one killed mid-call) are
    /// removed first (`gate/staging.rs`); one that cannot be is left for the next open.
    pub fn open(path: &Path) -> io::Result<Workspace> {
        let root = path.canonicalize()?;
        let dir = Dir::open_ambient_dir(&root, ambient_authority())?;
        if let Some(view) = crate::hostfs::host_view(&dir) {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "it is on {view}, which shows the host itself, not files: a workspace \
                     must hold files"
                ),
            ));
        }
        if let Err(error) = crate::gate::staging::sweep(&dir) {
            tracing::warn!(
                workspace = %root.display(),
                "could not remove every staging directory a dead process left: {error}"
            );
        }
        let saved = Mutex::new(SavedRules::load(&dir));
        Ok(Workspace {
            root,
            dir,
            saved,
            staging: std::sync::OnceLock::new(),
            secrets: crate::gate::secrets::SecretScan::default(),
        })
    }

    /// The identities of this workspace's credential files that have other names, under
    /// `deny`'s patterns (`gate/secrets.rs`).
    pub(crate) fn credential_identities(
        &self,
        deny: &crate::policy::files::DenyRead,
    ) -> crate::gate::secrets::Identities {
        self.secrets.identities(&self.root, deny)
    }

    /// `.toolcell/grants` in this workspace (made on first use), and its staging directories
    /// kept for reuse.
    pub(crate) fn staging_pool(&self) -> io::Result<&Arc<StagingPool>> {
        if let Some(pool) = self.staging.get() {
            return Ok(pool);
        }
        let dir = crate::gate::staging::open_grants_dir(&self.dir)?;
        Ok(self.staging.get_or_init(|| Arc::new(StagingPool::new(dir))))
    }

    /// The workspace's canonical path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when a rule saved in this workspace covers `tool` using `capability` on
    /// `resource`.
    pub(crate) fn saved_rule_covers(&self, tool: &str, capability: &str, resource: &str) -> bool {
        crate::sync::lock(&self.saved).covers(tool, capability, resource)
    }

    /// Save an "always" rule in this workspace.
    pub(crate) fn save_rule(&self, tool: &str, capability: &str, resource: &str) -> io::Result<()> {
        crate::sync::lock(&self.saved).add(&self.dir, tool, capability, resource)
    }
}

/// The "always" rules saved in the workspace.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedRules {
    #[serde(default)]
    allow: Vec<SavedRule>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SavedRule {
    tool: String,
    capability: String,
    resource: String,
}

impl SavedRules {
    /// The saved rules, or none if the file is missing, unreadable, a symlink or malformed.
    fn load(root: &Dir) -> SavedRules {
        let read = || -> Option<SavedRules> {
            let dir = open_private_dir(root)?;
            if dir.symlink_metadata("permissions.toml").ok()?.is_symlink() {
                return None;
            }
            toml::from_str(&dir.read_to_string("permissions.toml").ok()?).ok()
        };
        read().unwrap_or_default()
    }

    /// True when a saved rule covers this request: the same tool and capability, and the same
    /// resource or a directory above it.
    fn covers(&self, tool: &str, capability: &str, resource: &str) -> bool {
        self.allow.iter().any(|rule| {
            rule.tool == tool
                && rule.capability == capability
                && (rule.resource == resource
                    || rule.resource == "."
                    || Path::new(resource).starts_with(&rule.resource))
        })
    }

    /// Save a rule: written to a new file (mode 0600) and renamed over the old one, inside
    /// `.toolcell/`, never through a symlink.
    fn add(&mut self, root: &Dir, tool: &str, capability: &str, resource: &str) -> io::Result<()> {
        self.allow.push(SavedRule {
            tool: tool.to_owned(),
            capability: capability.to_owned(),
            resource: resource.to_owned(),
        });
        let text = toml::to_string(self).map_err(io::Error::other)?;
        match root.symlink_metadata(".toolcell") {
            Ok(meta) if meta.is_symlink() || !meta.is_dir() => {
                return Err(io::Error::other(".toolcell is not a plain directory"));
            }
            Ok(_) => {}
            Err(_) => root.create_dir(".toolcell")?,
        }
        let dir =
            open_private_dir(root).ok_or_else(|| io::Error::other("cannot open .toolcell"))?;
        let temp = format!(".permissions.{}.tmp", std::process::id());
        let mut options = cap_std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        cap_std::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = (|| {
            let mut file = dir.open_with(&temp, &options)?;
            io::Write::write_all(&mut file, text.as_bytes())?;
            file.sync_all()?;
            dir.rename(&temp, &dir, "permissions.toml")
        })();
        if written.is_err() {
            let _ = dir.remove_file(&temp);
        }
        written
    }
}

/// `.toolcell/` in the workspace, if it is a plain directory (never a symlink).
fn open_private_dir(root: &Dir) -> Option<Dir> {
    let meta = root.symlink_metadata(".toolcell").ok()?;
    if meta.is_symlink() || !meta.is_dir() {
        return None;
    }
    root.open_dir(".toolcell").ok()
}
