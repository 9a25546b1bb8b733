//! The access gate: what one call is granted, decided before anything is instantiated.
//!
//! For each capability a tool declares, the gate resolves the resource from the call's
//! arguments (the capability's JSON pointer), asks the policy, and returns either the grants
//! that call holds or a typed denial:
//!
//! - a path is contained by the host: a relative path starts from the call's working
//!   directory, `..` is refused, an absolute path must lie in the call's workspace, and the
//!   path is canonicalized through `cap-std` relative to the workspace
//!   directory, so a symlink that leads out is refused, never followed. The argument the tool
//!   receives is rewritten to that canonical path, so the tool opens exactly what was checked;
//! - `Allow` grants; `Deny`, or no rule at all, denies; `Gated` grants if an "always" rule
//!   saved in the call's workspace covers the resource or a person approves, and otherwise (headless) denies with
//!   [`DenyReason::ApprovalRequired`];
//! - the grant is exactly the resource decided: a directory that a path names is preopened
//!   itself; a file is handed over alone, in a private staging directory (`gate/staging.rs`), never
//!   with its siblings; read-only for reads, read-write for writes;
//! - paths no tool may write (`.git`, `.toolcell`, the policy and audit files, the policy's
//!   own list) and files no tool may read (`.env*`, private keys, the policy's list; larger
//!   than the policy's maximum) are refused whatever the rules say (`policy/files.rs`); the grants
//!   carry that deny-read list, so inside a granted directory those files are not there for
//!   a wasm guest (`wasm/guest_fs.rs`).
//!
//! The gate decides for every tool alike, wasm or native: executors receive its grants and
//! never decide anything themselves.
//!
//! The clock is the one capability that degrades instead of denying: a tool not granted it
//! runs with the fixed wall clock. A `network` capability names a URL; the policy's hosts must
//! cover it, and the call's `wasi:http` requests may then reach those hosts only (`wasm/net.rs`).
//!
//! This file holds `Gate::decide`, which takes a call's capabilities in the order declared, and
//! what every decision shares (the call's scope, the refusals); the decision for each kind of
//! capability is in `kinds.rs` and `filesystem.rs`, and one rule applied to one resource (the
//! policy's, a saved rule, a person's answer) in `rules.rs`.

use crate::call::report::Granted;
use crate::call::report::GrantedBy;
mod approval;
mod files;
mod filesystem;
pub(crate) mod grants;
mod kinds;
mod paths;
mod rules;
pub(crate) mod secrets;
pub(crate) mod staging;
pub(crate) mod workspace;

pub(crate) use approval::{Answers, escaped_line};
pub use approval::{
    Approval, ApprovalRequest, Approver, FixedApprover, capability_name, shown_on_a_terminal,
    shown_to_a_person,
};
pub(crate) use paths::resolve;

use crate::call::proto::DenyReason;
use crate::gate::grants::{Grants, Preopen};
use crate::gate::staging::Staging;
use crate::gate::workspace::Workspace;
use crate::policy::files::FileRules;
use crate::policy::{Access, Rule, ToolPolicy};
use crate::tool::info::{CapabilityKind, ResourceRef, ToolInfo};
use serde_json::Value;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Where one call's paths resolve: its workspace (none: no file system at all) and its working
/// directory inside it.
pub(crate) struct Scope<'a> {
    /// The agent whose call it is (what an approval request names).
    pub(crate) agent: &'a str,
    pub(crate) workspace: Option<&'a Workspace>,
    /// Relative to the workspace, already checked to lie inside it ("" for its root).
    pub(crate) cwd: &'a Path,
    /// The rules on files of the call's own policy, if its context has one (else the
    /// runtime's). The files the runtime protects by name are protected either way.
    pub(crate) files: Option<&'a FileRules>,
    /// What a person already answered for this call.
    pub(crate) answers: &'a [(ApprovalRequest, Approval)],
    /// Whether someone can be asked: a gated resource no answer covers is then
    /// [`Refusal::Ask`], else [`DenyReason::ApprovalRequired`].
    pub(crate) can_ask: bool,
    /// How long an approver may wait ([`ApprovalRequest::timeout`]).
    pub(crate) wait: Duration,
}

/// The access gate of one runtime: the same for every workspace, and, if a person can be
/// asked, its approver (a call's context may bring its own). Saved rules live with each
/// workspace.
///
/// The gate itself never waits: a gated resource that no saved rule and no answer covers is
/// [`Refusal::Ask`], and the pipeline asks (awaiting the approver, within the call's deadline
/// and stop) and decides again with the answer.
pub(crate) struct Gate {
    approver: Option<Arc<dyn Approver>>,
    files: FileRules,
    /// The host's own files: no grant reaches them (`hostfs/own.rs`).
    own: crate::hostfs::OwnFiles,
}

/// Put the files of `grants`' pending staging directories in place and hand the directories
/// over as preopens. The pipeline calls this once it holds the call's write locks, so what is
/// staged is what the call will see.
pub(crate) fn finish_staging(grants: &mut Grants) -> Result<(), Refusal> {
    for (guest, mut staging) in std::mem::take(&mut grants.pending) {
        staging.finish().map_err(|error| {
            open_failed(
                CapabilityKind::FilesystemRead,
                &guest,
                "cannot stage its files",
                &error,
            )
        })?;
        if grants.preopens.iter().any(|preopen| preopen.guest == guest) {
            // A directory grant of the same directory already holds these files.
            continue;
        }
        grants.preopens.push(Preopen {
            dir: Arc::clone(&staging.dir),
            guest,
            writable: staging.writable(),
        });
        grants.staged.push(Arc::new(staging));
    }
    Ok(())
}

/// What a person is asked about for a way of talking to the client, as an approval's
/// resource (and a saved rule's): what the tool would reach.
pub(crate) fn client_resource(kind: CapabilityKind) -> &'static str {
    match kind {
        CapabilityKind::ClientSample => "your model",
        CapabilityKind::ClientElicit => "a form for you",
        CapabilityKind::ClientElicitUrl => "a web page for you",
        CapabilityKind::ClientListRoots => "your roots",
        CapabilityKind::ClientLog => "log messages",
        CapabilityKind::ClientProgress => "progress",
        _ => "",
    }
}

impl Gate {
    pub(crate) fn new(
        approver: Option<Arc<dyn Approver>>,
        files: FileRules,
        own: crate::hostfs::OwnFiles,
    ) -> Gate {
        Gate {
            approver,
            files,
            own,
        }
    }

    /// The runtime's approver, if a person can be asked.
    pub(crate) fn approver(&self) -> Option<&Arc<dyn Approver>> {
        self.approver.as_ref()
    }

    /// The host's own files, which no grant reaches.
    pub(crate) fn own_files(&self) -> &crate::hostfs::OwnFiles {
        &self.own
    }

    /// Decide one call in `scope`: the grants it holds and why each was given, or why it may
    /// not run. May rewrite path arguments in `arguments` to the canonical paths (relative to
    /// the workspace) that were checked. Each capability is decided in the order the tool
    /// declares them; the first refusal ends the decision.
    pub(crate) fn decide(
        &self,
        tool: &str,
        info: &ToolInfo,
        policy: &ToolPolicy,
        scope: &Scope<'_>,
        arguments: &mut Value,
    ) -> Result<(Grants, Vec<Granted>), Refusal> {
        let call = Call {
            tool,
            info,
            policy,
            scope,
            own: self.own.snapshot(),
        };
        let mut deciding = Deciding::default();
        for capability in &info.capabilities {
            let kind = capability.kind;
            let rule = policy.rule(kind);
            match kind {
                CapabilityKind::ClientLog
                | CapabilityKind::ClientProgress
                | CapabilityKind::ClientSample
                | CapabilityKind::ClientElicit
                | CapabilityKind::ClientElicitUrl
                | CapabilityKind::ClientListRoots => {
                    self.decide_client(&call, kind, rule, &mut deciding)?;
                }
                CapabilityKind::Clock => deciding.clock(rule),
                CapabilityKind::FilesystemRead | CapabilityKind::FilesystemWrite => {
                    self.decide_filesystem(&call, capability, rule, arguments, &mut deciding)?;
                }
                CapabilityKind::Env => {
                    self.decide_env(&call, capability, rule, arguments, &mut deciding)?;
                }
                CapabilityKind::Config => {
                    self.decide_config(&call, capability, rule, arguments, &mut deciding)?;
                }
                CapabilityKind::Network if capability.target == ResourceRef::Whole => {
                    self.decide_hosts(&call, rule, &mut deciding)?;
                }
                CapabilityKind::Network => {
                    self.decide_url(&call, capability, rule, arguments, &mut deciding)?;
                }
            }
        }
        Ok(self.finish(call, deciding))
    }

    /// The grants decided, with what no grant reaches: the staging directories still to fill,
    /// the deny-read list, the credential files with other names, the host's own files.
    fn finish(&self, call: Call<'_>, deciding: Deciding) -> (Grants, Vec<Granted>) {
        let Deciding {
            mut grants,
            granted,
            staged,
        } = deciding;
        let scope = call.scope;
        grants.pending = staged;
        // What the rules deny reading is not there inside the directories granted either, nor
        // are the credential files with other names in the workspace (a hard link planted
        // under an innocent name: `gate/secrets.rs`).
        grants.deny_read = scope.files.unwrap_or(&self.files).deny_read.clone();
        if !grants.preopens.is_empty()
            && !grants.deny_read.is_empty()
            && let Some(workspace) = scope.workspace
        {
            grants.credentials = workspace.credential_identities(&grants.deny_read);
        }
        grants.protected = call.own;
        (grants, granted)
    }
}

/// Why the gate did not grant a call what it needs.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The decision was no.
    Denied(DenyReason),
    /// The decision could not be carried out: the host ran out of file descriptors opening
    /// what was granted. Not a denial, so it is not reported as one.
    Exhausted(String),
    /// A person must be asked this before the gate can decide (boxed: a refusal is a
    /// `Result`'s error, which should stay small).
    Ask(Box<ApprovalRequest>),
}

impl From<DenyReason> for Refusal {
    fn from(reason: DenyReason) -> Refusal {
        Refusal::Denied(reason)
    }
}

/// A refusal for `error`, met while opening a grant of `kind` on `resource`: out of
/// descriptors, or a denial saying what failed.
fn open_failed(kind: CapabilityKind, resource: &str, what: &str, error: &io::Error) -> Refusal {
    let exhausted = [rustix::io::Errno::MFILE, rustix::io::Errno::NFILE]
        .iter()
        .any(|errno| error.raw_os_error() == Some(errno.raw_os_error()));
    if exhausted {
        Refusal::Exhausted(format!(
            "the host ran out of file descriptors opening {resource}: {error}"
        ))
    } else {
        Refusal::Denied(refuse(kind, resource, &format!("{what}: {error}")))
    }
}

/// A denial of `capability` on `resource`, and why. Every refusal the gate makes on a
/// resource comes through here.
#[cold]
fn refuse(kind: CapabilityKind, resource: &str, why: &str) -> DenyReason {
    DenyReason::Capability {
        capability: capability_name(kind).to_owned(),
        resource: resource.to_owned(),
        why: why.to_owned(),
    }
}

/// One call as the gate decides it: the tool, its policy, where its paths resolve, and the
/// host's own files as they were when the decision began.
struct Call<'a> {
    tool: &'a str,
    info: &'a ToolInfo,
    policy: &'a ToolPolicy,
    scope: &'a Scope<'a>,
    own: Arc<[crate::hostfs::OwnFile]>,
}

/// What one call's decision has granted so far.
#[derive(Default)]
struct Deciding {
    grants: Grants,
    /// Why each grant was given, in the order given.
    granted: Vec<Granted>,
    /// Staging directories for granted files, by the directory path the guest knows.
    staged: Vec<(String, Staging)>,
}

impl Deciding {
    /// Note that `kind` on `resource` was granted, and `by` what.
    fn record(&mut self, kind: CapabilityKind, resource: &str, by: GrantedBy) {
        self.granted.push(Granted {
            capability: capability_name(kind).to_owned(),
            resource: resource.to_owned(),
            by,
        });
    }

    /// The real wall clock, if the rule allows it; else the tool runs with the fixed one.
    fn clock(&mut self, rule: Option<&Rule>) {
        self.grants.clock = rule.is_some_and(|rule| rule.access == Access::Allow);
        if self.grants.clock {
            self.record(CapabilityKind::Clock, "", GrantedBy::Policy);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Component;

    /// A question shows what a file is called, even when its name tries to hide it.
    #[test]
    fn a_question_shows_what_a_person_cannot_see() {
        let question = |resource: &str| {
            ApprovalRequest {
                agent: "team-a".to_owned(),
                workspace: None,
                tool: "write_file".to_owned(),
                capability: "filesystem.write".to_owned(),
                resource: resource.to_owned(),
                timeout: Duration::ZERO,
            }
            .to_string()
        };
        assert_eq!(
            question("notes.txt"),
            r#"agent team-a: write_file wants filesystem.write on "notes.txt""#
        );
        for (hidden, shown) in [
            (
                "ok.txt\u{3164}\u{3164}.bashrc",
                r"ok.txt\u{3164}\u{3164}.bashrc",
            ),
            ("a\u{202E}txt.exe", r"a\u{202e}txt.exe"),
            ("a\u{200B}b", r"a\u{200b}b"),
            ("a\u{00A0}b", r"a\u{a0}b"),
            ("line\nbreak", r"line\nbreak"),
            ("quote\"d", r#"quote\"d"#),
        ] {
            let asked = question(hidden);
            assert!(
                asked.ends_with(&format!("\"{shown}\"")),
                "{hidden:?}: {asked}"
            );
        }
    }

    /// Capabilities on one directory share one preopen, so a call holds one descriptor per
    /// directory however many capabilities name it.
    #[test]
    fn capabilities_on_one_directory_share_one_preopen() {
        let temp = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir_all(temp.path().join("a")).expect("mkdir");
        let workspace = Workspace::open(temp.path()).expect("workspace");
        let info = (0..crate::tool::info::MAX_CAPABILITIES).fold(
            ToolInfo::new("t", "d", serde_json::json!({})),
            |info, i| {
                let target = if i % 2 == 0 {
                    ResourceRef::Fixed("a".to_owned())
                } else {
                    ResourceRef::Argument("/path".to_owned())
                };
                info.capability(CapabilityKind::FilesystemRead, target)
            },
        );
        let policy = crate::Policy::from_toml(
            "[tools.t]\nfilesystem.read = { access = \"allow\", roots = [\".\"] }\n",
        )
        .expect("policy")
        .tool("t");
        let scope = Scope {
            agent: "agent",
            workspace: Some(&workspace),
            cwd: Path::new(""),
            files: None,
            answers: &[],
            can_ask: false,
            wait: Duration::ZERO,
        };
        let mut arguments = serde_json::json!({ "path": "a/." });
        let (grants, granted) =
            Gate::new(None, FileRules::default(), crate::hostfs::OwnFiles::new())
                .decide("t", &info, &policy, &scope, &mut arguments)
                .expect("allowed");
        assert_eq!(granted.len(), crate::tool::info::MAX_CAPABILITIES);
        assert_eq!(grants.preopens.len(), 1, "one directory, one preopen");
        assert_eq!(grants.preopens[0].guest, "a");
    }

    /// Every path of up to four components from an alphabet of names, symlinks that stay
    /// inside, symlinks that lead out, a dangling one, `.` and `..`, relative and absolute:
    /// whatever `resolve` accepts really lies in the workspace, as the filesystem itself says.
    #[test]
    fn no_path_made_of_these_parts_resolves_outside_the_workspace() {
        let temp = tempfile::tempdir().expect("temp dir");
        let ws = temp.path().join("ws");
        std::fs::create_dir_all(ws.join("a")).expect("mkdir");
        std::fs::create_dir_all(temp.path().join("outside")).expect("mkdir");
        std::fs::write(ws.join("a/f.txt"), "in").expect("write");
        std::fs::write(temp.path().join("outside/f.txt"), "out").expect("write");
        let link = |target: &str, at: &str| {
            std::os::unix::fs::symlink(target, ws.join(at)).expect("symlink");
        };
        link("a", "link_in");
        link("../outside", "link_out");
        link("..", "a/up");
        link("../..", "a/upup");
        link("nowhere", "dangling");
        let workspace = Workspace::open(&ws).expect("workspace");
        let root = workspace.root().to_path_buf();

        let parts = [
            "a", "f.txt", "link_in", "link_out", "up", "upup", "dangling", "new.txt", ".", "..",
        ];
        let mut paths: Vec<String> = vec![String::new()];
        let mut frontier: Vec<String> = vec![String::new()];
        for _ in 0..4 {
            frontier = frontier
                .iter()
                .flat_map(|base| {
                    parts.iter().map(move |part| {
                        if base.is_empty() {
                            (*part).to_owned()
                        } else {
                            format!("{base}/{part}")
                        }
                    })
                })
                .collect();
            paths.extend(frontier.iter().cloned());
        }
        let absolute: Vec<String> = paths
            .iter()
            .filter(|path| path.matches('/').count() < 3)
            .map(|path| format!("{}/{path}", root.display()))
            .collect();
        paths.extend(absolute);

        let mut accepted = 0;
        for requested in &paths {
            let Ok(resolved) = resolve(&workspace, requested) else {
                continue;
            };
            accepted += 1;
            assert!(
                resolved.path.is_relative()
                    && resolved
                        .path
                        .components()
                        .all(|c| matches!(c, Component::Normal(_))),
                "{requested:?} resolved to {resolved:?}"
            );
            // The directory to preopen, as the kernel resolves it, is inside the workspace.
            let dir = std::fs::canonicalize(root.join(&resolved.dir)).expect("the dir exists");
            assert!(dir.starts_with(&root), "{requested:?}: {dir:?}");
            // So is the path itself, if it exists; if not, nothing is there, not even a link.
            let full = root.join(&resolved.path);
            match std::fs::canonicalize(&full) {
                Ok(real) => assert!(real.starts_with(&root), "{requested:?}: {real:?}"),
                Err(_) => assert!(
                    full.symlink_metadata().is_err(),
                    "{requested:?}: {full:?} is a link to nowhere"
                ),
            }
        }
        // Not vacuous: many paths are fine, and the inside links are followed where they
        // stay inside.
        assert!(
            accepted > 300,
            "only {accepted} of {} accepted",
            paths.len()
        );
        for (requested, canonical) in [
            ("link_in/f.txt", "a/f.txt"),
            ("a/up/a/f.txt", "a/f.txt"),
            ("./a/./f.txt", "a/f.txt"),
            ("a/new.txt", "a/new.txt"),
        ] {
            let resolved = resolve(&workspace, requested).expect(requested);
            assert_eq!(resolved.path, Path::new(canonical), "{requested}");
        }
        for refused in [
            "link_out/f.txt",
            "a/upup/outside/f.txt",
            "dangling",
            "a/../a",
        ] {
            assert!(resolve(&workspace, refused).is_err(), "{refused}");
        }
    }
}
