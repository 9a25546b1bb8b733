//! The gate's decision for a file system capability: the path resolved inside the call's
//! workspace and checked against the files no tool may touch, then granted as a directory, or
//! as one file in a staging directory of its own.

use crate::call::report::GrantedBy;
use crate::gate::files;
use crate::gate::grants::Preopen;
use crate::gate::paths::{display, open_contained_dir, resolve_from, within_root};
use crate::gate::staging::Staging;
use crate::gate::{Call, Deciding, Gate, Refusal, Scope, open_failed, refuse};
use crate::policy::Rule;
use crate::tool::info::{CapabilityKind, ResourceRef};
use cap_std::fs::Dir;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// What one filesystem capability grants: a directory, or one file (staged).
enum FsGrant {
    Dir(Preopen),
    File {
        /// The directory holding it, as the guest knows it.
        guest: String,
        /// That directory, opened (contained) in the workspace.
        dir: Dir,
        name: std::ffi::OsString,
        writable: bool,
    },
}

impl Gate {
    /// A file system capability: a directory preopened (two capabilities on one directory
    /// share one preopen), or one file added to the staging directory of its directory.
    pub(super) fn decide_filesystem(
        &self,
        call: &Call<'_>,
        capability: &crate::tool::info::Capability,
        rule: Option<&Rule>,
        arguments: &mut Value,
        deciding: &mut Deciding,
    ) -> Result<(), Refusal> {
        let kind = capability.kind;
        let (grant, shown, by) = self.filesystem(
            call.tool, capability, rule, call.scope, arguments, &call.own,
        )?;
        match grant {
            // Two capabilities on one directory share one preopen: a call holds
            // at most one descriptor per directory it was granted.
            FsGrant::Dir(preopen) => {
                match deciding
                    .grants
                    .preopens
                    .iter_mut()
                    .find(|p| p.guest == preopen.guest)
                {
                    // Read and write granted on it: it is writable.
                    Some(held) => held.writable |= preopen.writable,
                    None => deciding.grants.preopens.push(preopen),
                }
            }
            FsGrant::File {
                guest,
                dir,
                name,
                writable,
            } => {
                let staged = &mut deciding.staged;
                let staging = match staged.iter_mut().find(|(at, _)| *at == guest) {
                    Some((_, staging)) => staging,
                    None => {
                        let grants_dir = call
                            .scope
                            .workspace
                            .ok_or_else(|| refuse(kind, &shown, "no workspace"))?
                            .staging_pool()
                            .and_then(|pool| Staging::new(pool, dir))
                            .map_err(|error| {
                                open_failed(kind, &shown, "cannot stage it", &error)
                            })?;
                        staged.push((guest, grants_dir));
                        let last = staged.len() - 1;
                        &mut staged[last].1
                    }
                };
                staging.add(&name, writable);
            }
        }
        deciding.record(kind, &shown, by);
        Ok(())
    }

    fn filesystem(
        &self,
        tool: &str,
        capability: &crate::tool::info::Capability,
        rule: Option<&Rule>,
        scope: &Scope<'_>,
        arguments: &mut Value,
        own: &[crate::hostfs::OwnFile],
    ) -> Result<(FsGrant, String, GrantedBy), Refusal> {
        let (kind, target) = (capability.kind, &capability.target);
        let Some(workspace) = scope.workspace else {
            return Err(refuse(kind, "", "no workspace is open").into());
        };
        // A path the arguments name is relative to the call's working directory, like a
        // shell's; a fixed one, and the whole workspace, to the workspace itself.
        let (requested, base) = match target {
            ResourceRef::Argument(pointer) => match arguments.pointer(pointer) {
                None | Some(Value::Null) => (".".to_owned(), scope.cwd),
                Some(Value::String(path)) => (path.clone(), scope.cwd),
                Some(_) => {
                    return Err(refuse(kind, pointer, "the path argument is not a string").into());
                }
            },
            ResourceRef::Fixed(path) => (path.clone(), Path::new("")),
            ResourceRef::Whole => (".".to_owned(), Path::new("")),
        };
        let resolved = resolve_from(workspace, base, &requested)
            .map_err(|why| refuse(kind, &requested, &why))?;
        let shown = display(&resolved.path);
        let is_dir = resolved.path == resolved.dir;
        scope
            .files
            .unwrap_or(&self.files)
            .check(workspace, kind, &resolved.path, is_dir)
            .map_err(|why| refuse(kind, &shown, &why))?;
        // The host's own files and views, decided on the directory as opened (and the file in
        // it), which no later swap of a path component changes, before anyone is asked.
        let dir = open_contained_dir(workspace, &resolved.dir)
            .map_err(|error| open_failed(kind, &shown, "cannot open its directory", &error))?;
        let name = (!is_dir).then(|| resolved.path.file_name()).flatten();
        let rules = scope.files.unwrap_or(&self.files);
        files::check_host(own, workspace, kind, &resolved.path, &dir, name)
            .and_then(|()| files::check_credential_link(rules, workspace, &resolved.path))
            .map_err(|why| refuse(kind, &shown, &why))?;
        let by = self.allowed(tool, kind, &shown, rule, scope, |rule| {
            rule.roots
                .iter()
                .any(|root| within_root(workspace, root, &resolved.path))
        })?;
        if let ResourceRef::Argument(pointer) = target
            && let Some(slot) = arguments.pointer_mut(pointer)
        {
            *slot = Value::String(shown.clone());
        }
        let writable = kind == CapabilityKind::FilesystemWrite;
        let guest = display(&resolved.dir);
        let grant = match resolved.path.file_name() {
            // A file (or a new one): just that file, in a staging directory (`gate/staging.rs`).
            Some(name) if !is_dir => FsGrant::File {
                guest,
                dir,
                name: name.to_owned(),
                writable,
            },
            // A directory: that directory.
            _ => FsGrant::Dir(Preopen {
                dir: Arc::new(dir),
                guest,
                writable,
            }),
        };
        Ok((grant, shown, by))
    }
}
