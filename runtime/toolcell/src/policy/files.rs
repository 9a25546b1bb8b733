//! What no tool may touch whatever a policy's rules say: paths no tool may write, files no tool
//! may read, and the largest file a tool may be handed to read.
//!
//! - **Protected from writing**: anything in a `.git` (its config and hooks are code the user's
//!   git runs) or a `.toolcell` (saved rules grant authority; a planted rule would approve
//!   later calls) at any depth, the policy file and the audit file when they lie in the
//!   workspace, and the policy's own `[files] protected` list (a file with other names is
//!   handed over as a copy, so a hard link to a protected file is not written through it:
//!   `gate/staging.rs`). Directories are never granted for writing: a tool writes the files it
//!   names.
//!   What a write grant hands over can be read, so it must pass the read rules too.
//! - **Denied reading**: any path with a part that matches [`DEFAULT_DENY_READ`] (or the
//!   policy's `[files] deny_read`, which replaces it): `.env` files, private keys, credential
//!   files, `.ssh`. The gate refuses a grant that names one; and inside a directory a wasm
//!   tool is granted (`list_dir`, `glob`, `grep`), they are not there: not listed, and
//!   `no-entry` to whatever path names them, as written (`sub/../.env`) or as it resolves (a
//!   link to one) (`wasm/guest_fs.rs`). Names are what is matched: a hard link to a secret under
//!   an innocent name is that file. A native tool is handed the directory itself, and its
//!   grants bound it only as far as it uses them (`pipeline/native.rs`).
//! - **Largest read**: the policy's `[files] max_read_bytes`, checked on the file a read grant
//!   names.

use std::borrow::Cow;
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Paths, relative to the workspace, that no tool may write.
pub const ALWAYS_PROTECTED: &[&str] = &[".git", ".toolcell"];

/// Patterns of what no tool may read by default: secrets and the places credentials are kept.
/// A pattern is one path part (`*` matches any run of characters), or several joined by `/`,
/// which match consecutive parts anywhere in a path (`.config/gcloud` hides
/// `home/me/.config/gcloud/credentials.db`, not a project's `gcloud/` directory). Matched
/// ignoring ASCII case. The policy's `[files] deny_read` replaces this list.
pub const DEFAULT_DENY_READ: &[&str] = &[
    // Environment files and private keys, wherever they are.
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".ssh",
    // Package registries' tokens.
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".yarnrc.yml",
    ".cargo/credentials*",
    ".gem/credentials",
    ".m2/settings*.xml",
    ".gradle/gradle.properties",
    ".git-credentials",
    ".config/git/credentials",
    // Cloud command lines, clusters and containers.
    ".aws",
    ".azure",
    ".config/gcloud",
    ".oci",
    ".kube",
    ".docker",
    ".config/gh",
    ".config/hub",
    ".boto",
    ".s3cfg",
    ".vault-token",
    ".terraform.d/credentials*",
    ".terraformrc",
    "terraform.rc",
    "containers/auth.json",
    ".config/rclone",
    ".config/glab-cli",
    ".config/doctl",
    ".config/op",
    ".pulumi/credentials.json",
    ".huggingface",
    "huggingface/token",
    ".pgpass",
    ".my.cnf",
    // Containers' and Kubernetes' mounted secrets (`/run/secrets`, `/var/run/secrets`).
    "run/secrets",
    // Browsers' profiles: cookies, saved passwords, sessions.
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    "Library/Application Support/Google",
    "Library/Application Support/Firefox",
    "Library/Cookies",
    // Keys, keyrings and password stores.
    ".gnupg",
    ".password-store",
    ".local/share/keyrings",
    // What a person typed: shell and interpreter histories.
    ".*_history",
    ".histfile",
    "fish_history",
];

/// Patterns (as [`DEFAULT_DENY_READ`]'s) of what no tool may write by default: what runs code
/// for the user later, outside any sandbox (shell start-up files, `authorized_keys`, autostart
/// entries, hook managers, crontabs, a directory on `PATH`, direnv's `.envrc`, git's config,
/// whose aliases and pager run commands, editors' and interpreters' start-up files, Python's
/// `.pth` files, cargo's user-wide config). `.git` and `.toolcell` are protected apart, whatever
/// the policy says. The policy's `[files] deny_write` replaces this list (name a file there no
/// longer to let a tool write it).
pub const DEFAULT_DENY_WRITE: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".login",
    ".logout",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
    ".config/fish",
    ".xprofile",
    ".xinitrc",
    ".xsession",
    ".xsessionrc",
    ".pam_environment",
    ".config/environment.d",
    ".envrc",
    ".gitconfig",
    ".config/git",
    ".ssh",
    // Editors, pagers, terminals and interpreters that run their start-up files.
    ".vimrc",
    ".gvimrc",
    ".exrc",
    ".vim",
    ".config/nvim",
    ".emacs",
    ".emacs.d",
    ".config/emacs",
    ".lessfilter",
    ".tmux.conf",
    ".config/tmux",
    ".pythonrc.py",
    ".ipython",
    ".jupyter",
    ".Rprofile",
    "site-packages/*.pth",
    "site-packages/sitecustomize.py",
    "site-packages/usercustomize.py",
    // Build tools' user-wide settings that name programs to run.
    ".cargo/config",
    ".cargo/config.toml",
    ".config/autostart",
    ".config/systemd",
    "Library/LaunchAgents",
    ".local/bin",
    ".husky",
    ".githooks",
    "crontab",
    "crontabs",
    "cron.d",
];

/// The rules on files of one runtime (from the policy's `[files]` section, and the files the
/// host itself keeps).
#[derive(Debug, Clone)]
pub struct FileRules {
    /// Relative to the workspace, never written.
    pub(crate) protected: Vec<PathBuf>,
    /// Name patterns never read.
    pub(crate) deny_read: DenyRead,
    /// Name patterns never written (what runs code for the user later).
    pub(crate) deny_write: DenyRead,
    /// The largest file a read grant may name.
    pub(crate) max_read_bytes: Option<u64>,
}

impl Default for FileRules {
    fn default() -> Self {
        FileRules {
            protected: ALWAYS_PROTECTED.iter().map(PathBuf::from).collect(),
            deny_read: DenyRead::default(),
            deny_write: DenyRead::default_write(),
            max_read_bytes: None,
        }
    }
}

/// Name patterns of files no tool may read (or, for [`DEFAULT_DENY_WRITE`], write): the one
/// matcher for the gate (a path a call names) and the wasm sandbox (every path a guest names
/// inside its preopens, every name it lists: `wasm/guest_fs.rs`). Cheap to clone; by default
/// [`DEFAULT_DENY_READ`].
///
/// A one-part pattern (`.env`, `*.pem`) is matched on every part of a path relative to the
/// workspace or the granted directory. A pattern of several parts (`.config/gcloud`) names a
/// place, and is matched on the whole real path (absolute, links resolved), wherever the
/// workspace or a granted directory begins inside it: a grant of `.config` still does not show
/// `gcloud`.
#[derive(Debug, Clone)]
pub(crate) struct DenyRead(Arc<[Pattern]>);

/// One pattern, its parts lowered once.
#[derive(Debug)]
pub(crate) struct Pattern {
    text: String,
    parts: Vec<String>,
}

impl Pattern {
    fn new(text: &str) -> Pattern {
        Pattern {
            text: text.to_owned(),
            parts: text
                .to_ascii_lowercase()
                .split('/')
                .filter(|part| !part.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }

    fn is_one_part(&self) -> bool {
        self.parts.len() <= 1
    }
}

impl Default for DenyRead {
    /// [`DEFAULT_DENY_READ`], made once and shared: every call's grants start from it.
    fn default() -> Self {
        static DEFAULT: std::sync::LazyLock<DenyRead> =
            std::sync::LazyLock::new(|| DenyRead::from_patterns(DEFAULT_DENY_READ));
        DEFAULT.clone()
    }
}

impl<S: AsRef<str>> From<Vec<S>> for DenyRead {
    fn from(patterns: Vec<S>) -> Self {
        DenyRead::from_patterns(&patterns)
    }
}

impl DenyRead {
    /// [`DEFAULT_DENY_WRITE`], made once and shared.
    pub(crate) fn default_write() -> DenyRead {
        static DEFAULT: std::sync::LazyLock<DenyRead> =
            std::sync::LazyLock::new(|| DenyRead::from_patterns(DEFAULT_DENY_WRITE));
        DEFAULT.clone()
    }

    fn from_patterns<S: AsRef<str>>(patterns: &[S]) -> DenyRead {
        DenyRead(
            patterns
                .iter()
                .map(|pattern| Pattern::new(pattern.as_ref()))
                .filter(|pattern| !pattern.parts.is_empty())
                .collect(),
        )
    }

    /// True when no name is denied (a policy's `deny_read = []`).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether some pattern has several parts (and needs the real path to be matched).
    pub(crate) fn has_places(&self) -> bool {
        self.0.iter().any(|pattern| !pattern.is_one_part())
    }

    /// The one-part pattern the single path part `name` matches, if any.
    pub(crate) fn matching(&self, name: &OsStr) -> Option<&str> {
        // ASCII case is folded: on a case-insensitive file system (macOS, a casefolded ext4,
        // a network share) `.ENV` opens `.env`, and hiding `.ENV` where it is another file
        // costs nothing that matters.
        let name = name.to_string_lossy().to_ascii_lowercase();
        self.0
            .iter()
            .find(|pattern| pattern.is_one_part() && glob(&pattern.parts[0], &name))
            .map(|pattern| pattern.text.as_str())
    }

    /// The first part of the relative `path` that a one-part pattern matches, and the pattern.
    /// `.` and `..` are never matched: `sub/../.env` is caught by its `.env`.
    pub(crate) fn part_matching<'p>(&self, path: &'p Path) -> Option<(Cow<'p, str>, &str)> {
        path.components().find_map(|part| match part {
            Component::Normal(part) => self
                .matching(part)
                .map(|pattern| (part.to_string_lossy(), pattern)),
            _ => None,
        })
    }

    /// The part of the real path `real` (absolute, links resolved) at which a pattern of
    /// several parts ends, matching the parts before it, and the pattern.
    pub(crate) fn place_matching<'p>(&self, real: &'p Path) -> Option<(Cow<'p, str>, &str)> {
        if !self.has_places() {
            return None;
        }
        let parts: Vec<&OsStr> = real
            .components()
            .filter_map(|part| match part {
                Component::Normal(part) => Some(part),
                _ => None,
            })
            .collect();
        let lowered: Vec<String> = parts
            .iter()
            .map(|part| part.to_string_lossy().to_ascii_lowercase())
            .collect();
        for at in 0..parts.len() {
            for pattern in self.0.iter().filter(|pattern| !pattern.is_one_part()) {
                let Some(start) = (at + 1).checked_sub(pattern.parts.len()) else {
                    continue;
                };
                if pattern
                    .parts
                    .iter()
                    .zip(&lowered[start..=at])
                    .all(|(pattern, name)| glob(pattern, name))
                {
                    return Some((parts[at].to_string_lossy(), pattern.text.as_str()));
                }
            }
        }
        None
    }

    /// Whether the relative path `dir` is a proper beginning of a place of several parts
    /// (`.config` for `.config/gcloud`): a scan for credentials must look into it.
    pub(crate) fn passes_through(&self, dir: &Path) -> bool {
        let parts: Vec<String> = dir
            .components()
            .filter_map(|part| match part {
                Component::Normal(part) => Some(part.to_string_lossy().to_ascii_lowercase()),
                _ => None,
            })
            .collect();
        !parts.is_empty()
            && self.0.iter().any(|pattern| {
                pattern.parts.len() > parts.len()
                    && pattern
                        .parts
                        .iter()
                        .zip(&parts)
                        .all(|(pattern, name)| glob(pattern, name))
            })
    }

    /// [`Self::part_matching`] on `relative`, then [`Self::place_matching`] on `real` (when
    /// known).
    pub(crate) fn hiding<'p>(
        &self,
        relative: &'p Path,
        real: Option<&'p Path>,
    ) -> Option<(Cow<'p, str>, &str)> {
        self.part_matching(relative)
            .or_else(|| real.and_then(|real| self.place_matching(real)))
    }
}

/// True when `name` matches `pattern`, where `*` matches any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((prefix, rest)) => {
            let Some(mut remaining) = name.strip_prefix(prefix) else {
                return false;
            };
            let parts: Vec<&str> = rest.split('*').collect();
            let (last, middle) = parts.split_last().unwrap_or((&"", &[]));
            for part in middle {
                match remaining.find(part) {
                    Some(at) => remaining = &remaining[at + part.len()..],
                    None => return false,
                }
            }
            remaining.len() >= last.len() && remaining.ends_with(last)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_names() {
        for (pattern, name, expected) in [
            (".env", ".env", true),
            (".env", ".envx", false),
            (".env.*", ".env.local", true),
            (".env.*", ".env", false),
            ("*.pem", "server.pem", true),
            ("*.pem", "server.pem.bak", false),
            ("id_rsa*", "id_rsa.pub", true),
            ("*a*b*", "xaybz", true),
            ("*a*b", "xaybz", false),
            ("*a*b", "xaybzb", true),
            ("*", "", true),
        ] {
            assert_eq!(glob(pattern, name), expected, "{pattern} vs {name}");
        }
    }

    #[test]
    fn a_path_is_denied_by_any_of_its_parts() {
        let deny = DenyRead::default();
        for (path, expected) in [
            (".env", Some(".env")),
            ("sub/../.env", Some(".env")),
            ("./keys/server.pem", Some("server.pem")),
            // Case folded: on a case-insensitive file system these are the same files.
            (".ENV", Some(".ENV")),
            ("keys/Server.PEM", Some("Server.PEM")),
            (".ssh/config", Some(".ssh")),
            ("a/.ssh", Some(".ssh")),
            ("home/me/.aws/credentials", Some(".aws")),
            (".kube/config", Some(".kube")),
            (".docker/config.json", Some(".docker")),
            (".bash_history", Some(".bash_history")),
            ("notes.txt", None),
            ("sub/..", None),
            ("env/.envy", None),
        ] {
            let found = deny.part_matching(Path::new(path)).map(|(part, _)| part);
            assert_eq!(found.as_deref(), expected, "{path}");
        }
        assert_eq!(
            DenyRead::from(Vec::<String>::new()).matching(OsStr::new(".env")),
            None
        );
        // Places: several parts, matched on the real path wherever a grant begins in it.
        for (real, expected) in [
            ("/home/me/.config/gcloud/credentials.db", Some("gcloud")),
            ("/home/me/.config/gcloud", Some("gcloud")),
            ("/home/me/.cargo/credentials.toml", Some("credentials.toml")),
            ("/home/me/.m2/settings.xml", Some("settings.xml")),
            (
                "/home/me/.local/share/keyrings/login.keyring",
                Some("keyrings"),
            ),
            ("/srv/project/gcloud/notes.txt", None),
            ("/srv/project/credentials.toml", None),
            ("/home/me/.config/nvim/init.lua", None),
        ] {
            let found = deny.place_matching(Path::new(real)).map(|(part, _)| part);
            assert_eq!(found.as_deref(), expected, "{real}");
        }
    }
}
