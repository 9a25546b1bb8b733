//! `gate_paths`: the gate's path resolution inside a workspace.

use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;
use toolcell::Workspace;
use toolcell::fuzzing::resolve;

/// The workspace the path check resolves in, made once per process in the temporary
/// directory (`toolcell-fuzz-gate-<pid>`):
///
/// ```text
/// <temp>/toolcell-fuzz-gate-<pid>/
///   outside/secret.txt
///   ws/                      the workspace
///     a.txt
///     sub/b.txt
///     sub/deeper/c.txt
///     link_in  -> sub        (stays inside)
///     sub/up   -> ..         (stays inside: the workspace root)
///     link_out -> ../outside (leads out)
///     sub/upup -> ../..      (leads out)
///     dangling -> nowhere
/// ```
pub struct GateFixture {
    /// The workspace.
    pub workspace: Workspace,
    /// Its canonical root.
    pub root: PathBuf,
    /// The canonical directory outside it that `link_out` points to.
    pub outside: PathBuf,
}

impl GateFixture {
    /// Make the layout above under `base` (emptied first) and open the workspace.
    pub fn create(base: &Path) -> Result<GateFixture, String> {
        let io = |what: &str, error: std::io::Error| format!("{what}: {error}");
        if base.exists() {
            std::fs::remove_dir_all(base).map_err(|e| io("emptying the fixture", e))?;
        }
        let ws = base.join("ws");
        for dir in [ws.join("sub/deeper"), base.join("outside")] {
            std::fs::create_dir_all(&dir).map_err(|e| io("mkdir", e))?;
        }
        for (file, text) in [
            (ws.join("a.txt"), "a"),
            (ws.join("sub/b.txt"), "b"),
            (ws.join("sub/deeper/c.txt"), "c"),
            (base.join("outside/secret.txt"), "secret"),
        ] {
            std::fs::write(&file, text).map_err(|e| io("write", e))?;
        }
        for (target, at) in [
            ("sub", "link_in"),
            ("..", "sub/up"),
            ("../outside", "link_out"),
            ("../..", "sub/upup"),
            ("nowhere", "dangling"),
        ] {
            std::os::unix::fs::symlink(target, ws.join(at)).map_err(|e| io("symlink", e))?;
        }
        let workspace = Workspace::open(&ws).map_err(|e| io("opening the workspace", e))?;
        let root = workspace.root().to_path_buf();
        let outside = base
            .join("outside")
            .canonicalize()
            .map_err(|e| io("canonicalize", e))?;
        Ok(GateFixture {
            workspace,
            root,
            outside,
        })
    }

    /// The process's fixture, made on first use. A fuzzer exits without dropping it, so this
    /// first removes the fixtures of processes that are gone.
    pub fn shared() -> Result<&'static GateFixture, String> {
        static FIXTURE: OnceLock<Result<GateFixture, String>> = OnceLock::new();
        FIXTURE
            .get_or_init(|| {
                let temp = std::env::temp_dir();
                let prefix = "toolcell-fuzz-gate-";
                for entry in std::fs::read_dir(&temp).into_iter().flatten().flatten() {
                    let name = entry.file_name();
                    let Some(pid) = name.to_str().and_then(|name| name.strip_prefix(prefix)) else {
                        continue;
                    };
                    if !Path::new("/proc").join(pid).exists() {
                        // Best effort: another process may be removing it too.
                        let _ = std::fs::remove_dir_all(entry.path());
                    }
                }
                GateFixture::create(&temp.join(format!("{prefix}{}", std::process::id())))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// The gate's `resolve` on `data` (UTF-8, lossily; a leading `@` stands for the workspace's
/// absolute root) in [`GateFixture::shared`]. Whenever it resolves, the path is relative and
/// made of plain names only, and it is canonical: the file system, asked itself, puts the
/// path (or, for a name that does not exist yet, its directory) at exactly that place inside
/// the workspace, never behind a symlink, never outside; the directory to preopen is the path
/// or its parent, and exists inside the workspace.
pub fn check_gate_paths(data: &[u8]) -> Result<(), String> {
    let fixture = GateFixture::shared()?;
    let text = String::from_utf8_lossy(data);
    let requested = match text.strip_prefix('@') {
        Some(rest) => format!("{}{rest}", fixture.root.display()),
        None => text.into_owned(),
    };
    check_resolved(fixture, &requested)
}

/// The check of [`check_gate_paths`] for one requested path.
pub fn check_resolved(fixture: &GateFixture, requested: &str) -> Result<(), String> {
    let Ok(resolved) = resolve(&fixture.workspace, requested) else {
        return Ok(());
    };
    let why = |what: String| format!("{requested:?} resolved to {resolved:?}: {what}");
    if !resolved
        .path
        .components()
        .all(|part| matches!(part, Component::Normal(_)))
    {
        return Err(why("not a plain relative path".to_owned()));
    }
    let root = &fixture.root;
    let full = root.join(&resolved.path);
    let dir = root.join(&resolved.dir);
    // The directory to preopen exists, is a directory, and is canonical inside the workspace.
    let real_dir = std::fs::canonicalize(&dir).map_err(|e| why(format!("its dir: {e}")))?;
    if real_dir != dir || !real_dir.starts_with(root) || !real_dir.is_dir() {
        return Err(why(format!("its dir is really {real_dir:?}")));
    }
    if resolved.dir != resolved.path && resolved.path.parent() != Some(resolved.dir.as_path()) {
        return Err(why("its dir is neither the path nor its parent".to_owned()));
    }
    match std::fs::symlink_metadata(&full) {
        Ok(_) => {
            let real = std::fs::canonicalize(&full).map_err(|e| why(format!("{e}")))?;
            if real != full {
                return Err(why(format!("not canonical: it is really {real:?}")));
            }
            if real.is_dir() != (resolved.dir == resolved.path) {
                return Err(why("a directory's dir must be itself".to_owned()));
            }
        }
        Err(_) => {
            // A name that does not exist yet: its directory is its parent.
            if resolved.path.parent() != Some(resolved.dir.as_path()) {
                return Err(why("a new name's dir is not its parent".to_owned()));
            }
        }
    }
    if !full.starts_with(root) || full.starts_with(&fixture.outside) {
        return Err(why("outside the workspace".to_owned()));
    }
    Ok(())
}
