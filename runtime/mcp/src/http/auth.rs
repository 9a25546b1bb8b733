//! Who may call over HTTP, and as which tenant: static bearer tokens from a file.
//!
//! Past the house's 700 lines only by its unit tests, kept beside the code they test.
//!
//! The file is TOML, one `[[token]]` table per token. A token is stored as the hex SHA-256 of
//! its text, never the text, so the file can be read by whoever deploys the server without
//! handing out the tokens:
//!
//! ```toml
//! [[token]]
//! sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"  # sha256sum of the token
//! tenant = "team-a"
//! workspace = "/srv/team-a"     # optional: the tenant's files (none: no file tool is granted)
//! policy = "team-a.toml"        # optional: its own policy (relative to this file's directory)
//! ```
//!
//! Quotas ([`crate::http::quota`]) are set per tenant, in a `[quota.TENANT]` table that all its tokens
//! share, and per token, with `quota = { ... }` in its `[[token]]` table (or a `[token.quota]`
//! table after it); a call must fit both:
//!
//! ```toml
//! [quota.team-a]
//! rate = 5                      # calls a second (bursts of 5 by default)
//! in_flight = 2                 # calls running at once
//! daily_ms = 600000             # tool running time per UTC day
//!
//! [[token]]
//! sha256 = "…"
//! tenant = "team-a"
//! quota = { rate = 1, burst = 2 }   # this token alone: slower still
//! ```
//!
//! The file is read again on SIGHUP ([`Tokens::reload`]): tokens, tenants and quotas change
//! for the next request; a file that cannot be read keeps the one in use. A quota keeps what it
//! has used across reloads, by tenant name or by token, even through a file without it: calls
//! still running under a quota that a reload dropped count again when a later one restores it.
//!
//! `toolcell token` prints a fresh random token and its table. A tenant is an agent of its own
//! (the audit line names it) with its own workspace, whose saved rules are its own; a call made
//! with tenant A's token is resolved in A's workspace and can name nothing outside it. A tenant
//! with a `policy` has its calls decided by that policy alone (its rules, limits, pins and
//! `[files]`), not the server's `--policy`; which tools are listed (`core`) stays the server's.
//! The tokens file and every tenant's policy file are protected from every tool's writes.
//! Presented tokens are hashed and compared with every stored hash in constant time.

use crate::http::config_error::ConfigError;
use crate::http::quota::{Limiter, QuotaConfig, Retired, Scope};
use crate::http::tenant::{Tenant, limiter_after, read_own, tenant};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use subtle::ConstantTimeEq as _;
use toolcell::Runtime;

/// The longest tokens file read: far more tokens than a server has tenants.
pub const MAX_TOKENS_FILE_BYTES: u64 = 1 << 20;

/// The shortest token `toolcell token` makes and a tokens file may hold the hash of: 32 random
/// bytes, as hex, is 64 characters; a hash says nothing of length, so this is advice.
pub const TOKEN_BYTES: usize = 32;

/// The tokens a server accepts, each with its tenant.
#[derive(Debug)]
pub struct Tokens {
    entries: Vec<Entry>,
    /// The tenants' policy files protected when the server started (canonical paths): a file
    /// read again may name these only (see [`Tokens::reload`]).
    protected: Arc<Vec<PathBuf>>,
    /// The states of quotas that a reload dropped, by whose they were, for a later reload that
    /// restores one to count the calls still running under it. Bounded: at most one per
    /// tenant or token named in a file read, and each is forgotten at the first reload after
    /// nothing holds it (no call it admitted runs).
    retired: BTreeMap<Holder, Retired>,
}

/// Whose a quota is, the key its state is carried over by from one file to the next.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Holder {
    /// A tenant's, by its name.
    Tenant(String),
    /// A token's, by its hash (whichever tenant it names).
    Token([u8; 32]),
}

#[derive(Debug)]
struct Entry {
    hash: [u8; 32],
    tenant: Arc<Tenant>,
    /// The token's own quota, if it has one.
    quota: Option<Arc<Limiter>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokensFile {
    #[serde(default)]
    token: Vec<TokenEntry>,
    /// Each tenant's quota, by tenant name.
    #[serde(default)]
    quota: BTreeMap<String, QuotaConfig>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenEntry {
    sha256: String,
    tenant: String,
    workspace: Option<PathBuf>,
    policy: Option<PathBuf>,
    quota: Option<QuotaConfig>,
}

impl Tokens {
    /// Read the tokens file at `path`, opening each tenant's workspace in `runtime` (one
    /// [`Workspace`](toolcell::Workspace) per directory, shared by tenants that name the same
    /// one). The file and every tenant's policy file are protected from every tool's writes.
    pub fn load(path: &Path, runtime: &mut Runtime) -> Result<Tokens, ConfigError> {
        let (mut tokens, policies) = Tokens::read(path, runtime, None)?;
        runtime.protect(path);
        let mut protected = Vec::new();
        for policy in policies {
            runtime.protect(&policy);
            protected.push(policy.canonicalize().unwrap_or(policy));
        }
        tokens.protected = Arc::new(protected);
        Ok(tokens)
    }

    /// Read the tokens file at `path` again (on SIGHUP), for the requests that come next: a
    /// tenant or token still there keeps what it has used of its quota ([`crate::http::quota`]).
    ///
    /// A tenant's policy file protects what that tenant's tools may write, so it must itself be
    /// protected from every tool's writes; that list is fixed once the server runs. A file that
    /// names a policy file the server did not protect at start is refused (restart the server
    /// to add one), as is any file that [`Tokens::load`] would refuse: the caller keeps these
    /// tokens.
    pub fn reload(&self, path: &Path, runtime: &Runtime) -> Result<Tokens, ConfigError> {
        let (mut tokens, policies) = Tokens::read(path, runtime, Some(self))?;
        for policy in policies {
            let canonical = policy.canonicalize().unwrap_or_else(|_| policy.clone());
            if !self.protected.contains(&canonical) {
                return Err(ConfigError::UnprotectedPolicy {
                    file: path.to_owned(),
                    policy,
                });
            }
        }
        tokens.protected = Arc::clone(&self.protected);
        Ok(tokens)
    }

    /// The file at `path`, its tenants' quotas carrying over `previous`'s state; and the policy
    /// files it names.
    fn read(
        path: &Path,
        runtime: &Runtime,
        previous: Option<&Tokens>,
    ) -> Result<(Tokens, Vec<PathBuf>), ConfigError> {
        let why = |what: String| ConfigError::TokensFile {
            file: path.to_owned(),
            why: what,
        };
        let text = read_own(runtime, path, MAX_TOKENS_FILE_BYTES).map_err(why)?;
        let parsed: TokensFile = toml::from_str(&text).map_err(|error| why(error.to_string()))?;
        check_tables(&parsed).map_err(why)?;
        let mut entries: Vec<Entry> = Vec::new();
        let mut reading = Reading {
            runtime,
            previous,
            base: path.parent().unwrap_or(Path::new(".")),
            quotas: &parsed.quota,
            tenants: Vec::new(),
            policies: Vec::new(),
        };
        for entry in &parsed.token {
            let hash = token_hash(entry, &entries).map_err(why)?;
            let tenant = reading.tenant(entry).map_err(why)?;
            let quota = reading.token_quota(entry, hash, &tenant).map_err(why)?;
            entries.push(Entry {
                hash,
                tenant,
                quota,
            });
        }
        let policies = reading.policies;
        let retired = previous.map(|previous| previous.retire(&entries));
        let tokens = Tokens {
            entries,
            protected: Arc::default(),
            retired: retired.unwrap_or_default(),
        };
        Ok((tokens, policies))
    }

    /// The quotas to keep as retired once `entries` (the file read again) replace these: every
    /// one of these or of those retired before that `entries` have no quota for, while
    /// something still holds its state.
    fn retire(&self, entries: &[Entry]) -> BTreeMap<Holder, Retired> {
        let quotas = |entry: &Entry| {
            [
                (
                    Holder::Tenant(entry.tenant.name.clone()),
                    entry.tenant.quota.clone(),
                ),
                (Holder::Token(entry.hash), entry.quota.clone()),
            ]
        };
        let kept: BTreeSet<Holder> = entries
            .iter()
            .flat_map(quotas)
            .filter_map(|(holder, quota)| quota.map(|_| holder))
            .collect();
        let kept = |holder: &Holder| kept.contains(holder);
        let mut retired: BTreeMap<Holder, Retired> = self
            .retired
            .iter()
            .filter(|(holder, retired)| retired.is_held() && !kept(holder))
            .map(|(holder, retired)| (holder.clone(), retired.clone()))
            .collect();
        for (holder, quota) in self.entries.iter().flat_map(quotas) {
            if let Some(quota) = quota
                && !kept(&holder)
            {
                retired.insert(holder, quota.retire());
            }
        }
        retired
    }

    /// The state of `holder`'s quota that a reload dropped, if it is kept.
    fn retired(&self, holder: &Holder) -> Option<&Retired> {
        self.retired.get(holder)
    }

    /// The tenant whose token `presented` is, if any. Every stored hash is compared, each in
    /// constant time, so how long this takes says nothing about which one matched.
    pub fn check(&self, presented: &str) -> Option<Arc<Tenant>> {
        self.check_with_quota(presented).map(|(tenant, _)| tenant)
    }

    /// [`Tokens::check`], with the token's own quota, if it has one.
    pub fn check_with_quota(&self, presented: &str) -> Option<(Arc<Tenant>, Option<Arc<Limiter>>)> {
        let hash: [u8; 32] = sha256(presented.as_bytes());
        let mut found = None;
        for entry in &self.entries {
            if bool::from(entry.hash.ct_eq(&hash)) {
                found = Some((Arc::clone(&entry.tenant), entry.quota.clone()));
            }
        }
        found
    }

    /// Every tenant's quota, each once.
    pub fn tenant_quotas(&self) -> Vec<Arc<Limiter>> {
        let mut quotas: Vec<Arc<Limiter>> = Vec::new();
        for entry in &self.entries {
            if let Some(quota) = &entry.tenant.quota
                && !quotas.iter().any(|known| Arc::ptr_eq(known, quota))
            {
                quotas.push(Arc::clone(quota));
            }
        }
        quotas
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none (a loaded file always has one).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes).into()
}

fn parse_hash(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The operator's token for `/metrics`: a file holding its SHA-256 as 64 hex digits (and
/// nothing else but white space), as `sha256sum` prints it (`toolcell token --metrics` makes
/// one). The file is protected from every tool's writes.
#[derive(Debug)]
pub struct MetricsToken([u8; 32]);

/// The longest metrics token file read: one hash and a name, as `sha256sum` prints them.
pub const MAX_METRICS_TOKEN_FILE_BYTES: u64 = 4096;

impl MetricsToken {
    /// Read the file at `path`.
    pub fn load(path: &Path, runtime: &mut Runtime) -> Result<MetricsToken, ConfigError> {
        let why = |what: String| ConfigError::MetricsTokenFile {
            file: path.to_owned(),
            why: what,
        };
        let text = read_own(runtime, path, MAX_METRICS_TOKEN_FILE_BYTES).map_err(why)?;
        // `sha256sum` writes `HASH  -`: the first word is the hash.
        let hash = text
            .split_whitespace()
            .next()
            .and_then(parse_hash)
            .ok_or_else(|| why("expected the token's SHA-256 as 64 hex digits".to_owned()))?;
        runtime.protect(path);
        Ok(MetricsToken(hash))
    }

    /// Whether `presented` is the operator's token (compared in constant time).
    pub fn check(&self, presented: &str) -> bool {
        bool::from(self.0.ct_eq(&sha256(presented.as_bytes())))
    }

    /// A fresh random token and the line to keep in the metrics token file.
    pub fn new_token() -> std::io::Result<(String, String)> {
        let token = toolcell::digest::hex(&toolcell::digest::random::<TOKEN_BYTES>()?);
        let line = format!("{}\n", toolcell::digest::hex(&sha256(token.as_bytes())));
        Ok((token, line))
    }
}

/// A fresh random token for `tenant`, and the `[[token]]` table that accepts it.
pub fn new_token(tenant: &str, workspace: Option<&Path>) -> std::io::Result<(String, String)> {
    let token = toolcell::digest::hex(&toolcell::digest::random::<TOKEN_BYTES>()?);
    let mut table = format!(
        "[[token]]\nsha256 = \"{}\"\ntenant = {}\n",
        toolcell::digest::hex(&sha256(token.as_bytes())),
        toml_string(tenant)
    );
    if let Some(dir) = workspace {
        table.push_str(&format!(
            "workspace = {}\n",
            toml_string(&dir.to_string_lossy())
        ));
    }
    Ok((token, table))
}

fn toml_string(text: &str) -> String {
    // A TOML basic string is JSON's string syntax for everything we write here.
    serde_json::Value::String(text.to_owned()).to_string()
}

/// A tokens file has at least one `[[token]]` table, and every `[quota.TENANT]` table names a
/// tenant one of them names.
fn check_tables(parsed: &TokensFile) -> Result<(), String> {
    if parsed.token.is_empty() {
        return Err("no [[token]] tables: nobody could call".to_owned());
    }
    if let Some(name) = parsed
        .quota
        .keys()
        .find(|name| !parsed.token.iter().any(|entry| entry.tenant == **name))
    {
        return Err(format!(
            "[quota.{name}]: no [[token]] names the tenant {name:?}"
        ));
    }
    Ok(())
}

/// The SHA-256 of the token a `[[token]]` table names: 64 hex digits, not one of `entries`'
/// already.
fn token_hash(entry: &TokenEntry, entries: &[Entry]) -> Result<[u8; 32], String> {
    let hash = parse_hash(&entry.sha256).ok_or_else(|| {
        format!(
            "tenant {:?}: sha256 must be 64 hex digits (the SHA-256 of the token)",
            entry.tenant
        )
    })?;
    if entries.iter().any(|known| known.hash == hash) {
        return Err(format!(
            "tenant {:?}: a token is listed twice",
            entry.tenant
        ));
    }
    Ok(hash)
}

/// One reading of a tokens file ([`Tokens::read`]): where it is read, and the tenants it has
/// made so far.
struct Reading<'a> {
    runtime: &'a Runtime,
    /// The tokens read before, whose quotas' state carries over.
    previous: Option<&'a Tokens>,
    /// The directory of the file: what its paths are relative to.
    base: &'a Path,
    /// The file's `[quota.TENANT]` tables.
    quotas: &'a BTreeMap<String, QuotaConfig>,
    /// Each tenant once, with the workspace and policy its first table named.
    tenants: Vec<(Arc<Tenant>, Option<PathBuf>, Option<PathBuf>)>,
    /// The policy files the tenants name.
    policies: Vec<PathBuf>,
}

impl Reading<'_> {
    /// The tenant a `[[token]]` table names: the one made already (which must have the same
    /// workspace and policy), or a new one with its `[quota.TENANT]`, its state carried over.
    fn tenant(&mut self, entry: &TokenEntry) -> Result<Arc<Tenant>, String> {
        if let Some((tenant, workspace, policy)) = self
            .tenants
            .iter()
            .find(|(tenant, ..)| tenant.name == entry.tenant)
        {
            if *workspace != entry.workspace || *policy != entry.policy {
                return Err(format!(
                    "tenant {:?} is given two workspaces or policies",
                    entry.tenant
                ));
            }
            return Ok(Arc::clone(tenant));
        }
        let quota = match self.quotas.get(&entry.tenant) {
            Some(config) => {
                let before = self.previous.and_then(|tokens| {
                    tokens
                        .entries
                        .iter()
                        .find(|known| known.tenant.name == entry.tenant)
                        .and_then(|known| known.tenant.quota.as_deref())
                });
                let retired = self
                    .previous
                    .and_then(|tokens| tokens.retired(&Holder::Tenant(entry.tenant.clone())));
                Some(
                    limiter_after(
                        self.runtime,
                        &format!("tenant:{}", entry.tenant),
                        &entry.tenant,
                        Scope::Tenant,
                        config,
                        before,
                        retired,
                    )
                    .map_err(|error| format!("[quota.{}]: {error}", entry.tenant))?,
                )
            }
            None => None,
        };
        let (tenant, policy) = tenant(
            self.runtime,
            &entry.tenant,
            entry.workspace.as_deref(),
            entry.policy.as_deref(),
            self.base,
            quota,
        )?;
        self.policies.extend(policy);
        self.tenants.push((
            Arc::clone(&tenant),
            entry.workspace.clone(),
            entry.policy.clone(),
        ));
        Ok(tenant)
    }

    /// The token's own quota, if its table gives one, its state carried over from the same
    /// token's before.
    fn token_quota(
        &self,
        entry: &TokenEntry,
        hash: [u8; 32],
        tenant: &Tenant,
    ) -> Result<Option<Arc<Limiter>>, String> {
        let Some(config) = &entry.quota else {
            return Ok(None);
        };
        let before = self.previous.and_then(|tokens| {
            tokens
                .entries
                .iter()
                .find(|known| known.hash == hash)
                .and_then(|known| known.quota.as_deref())
        });
        let retired = self
            .previous
            .and_then(|tokens| tokens.retired(&Holder::Token(hash)));
        limiter_after(
            self.runtime,
            &format!("token:{}", toolcell::digest::hex(&hash)),
            &tenant.name,
            Scope::Token,
            config,
            before,
            retired,
        )
        .map(Some)
        .map_err(|error| format!("tenant {:?}: a token's quota: {error}", tenant.name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Instant, SystemTime};

    fn runtime() -> Runtime {
        Runtime::builder()
            .builtin_tools(false)
            .cache_dir(None)
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_token_maps_to_its_tenant_and_nothing_else_does() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (a_dir, b_dir) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a_dir).expect("a");
        std::fs::create_dir(&b_dir).expect("b");
        let (a_token, a_table) = new_token("team-a", Some(&a_dir)).expect("token");
        let (b_token, b_table) = new_token("team-b", Some(&b_dir)).expect("token");
        let file = dir.path().join("tokens.toml");
        std::fs::write(&file, format!("{a_table}\n{b_table}")).expect("file");
        assert!(
            !std::fs::read_to_string(&file)
                .expect("file")
                .contains(&a_token)
        );
        let mut runtime = runtime();
        let tokens = Tokens::load(&file, &mut runtime).expect("tokens");
        assert_eq!(tokens.len(), 2);
        let a = tokens.check(&a_token).expect("a's token");
        assert_eq!(a.name, "team-a");
        assert_eq!(
            a.context.workspace().map(|w| w.root().to_owned()),
            Some(a_dir.canonicalize().expect("a"))
        );
        assert_eq!(tokens.check(&b_token).expect("b's token").name, "team-b");
        for wrong in [
            "",
            &a_token[1..],
            &format!("{a_token} "),
            &a_token.to_uppercase(),
        ] {
            assert!(tokens.check(wrong).is_none(), "{wrong:?}");
        }
    }

    #[test]
    fn a_bad_tokens_file_is_refused_with_its_reason() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut runtime = runtime();
        let hash = "a".repeat(64);
        for (text, why) in [
            ("", "no [[token]]"),
            (
                "[[token]]\nsha256 = \"abc\"\ntenant = \"a\"\n",
                "64 hex digits",
            ),
            (
                &format!("[[token]]\nsha256 = \"{hash}\"\ntenant = \"a b\"\n"),
                "tenant name",
            ),
            (
                &format!(
                    "[[token]]\nsha256 = \"{hash}\"\ntenant = \"a\"\n[[token]]\nsha256 = \"{hash}\"\ntenant = \"b\"\n"
                ),
                "listed twice",
            ),
            (
                &format!(
                    "[[token]]\nsha256 = \"{hash}\"\ntenant = \"a\"\nworkspace = \"/nonexistent/x\"\n"
                ),
                "workspace",
            ),
            (
                &format!("[[token]]\nsha256 = \"{hash}\"\ntenant = \"a\"\nrole = \"admin\"\n"),
                "unknown field",
            ),
            (
                &format!("[[token]]\nsha256 = \"{hash}\"\ntenant = \"a\"\n[quota.b]\nrate = 1\n"),
                "[quota.b]: no [[token]] names the tenant",
            ),
            (
                &format!("[[token]]\nsha256 = \"{hash}\"\ntenant = \"a\"\n[quota.a]\nrate = 0\n"),
                "[quota.a]: rate must be",
            ),
            (
                &format!("[[token]]\nsha256 = \"{hash}\"\ntenant = \"a\"\n[quota.a]\nrates = 1\n"),
                "unknown field `rates`",
            ),
            (
                &format!(
                    "[[token]]\nsha256 = \"{hash}\"\ntenant = \"a\"\nquota = {{ in_flight = 99 }}\n"
                ),
                "a token's quota: in_flight must be 1 to 16",
            ),
            (
                &format!(
                    "[[token]]\nsha256 = \"{hash}\"\ntenant = \"a\"\n[quota.a]\ndaily_fuel = 5\n"
                ),
                "does not meter fuel",
            ),
        ] {
            let file = dir.path().join("tokens.toml");
            std::fs::write(&file, text).expect("file");
            let refused = Tokens::load(&file, &mut runtime).expect_err(text);
            assert!(refused.to_string().contains(why), "{text:?}: {refused}");
        }
    }

    #[test]
    fn a_file_read_again_keeps_quota_state_and_refuses_a_new_policy_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (a_token, a_table) = new_token("a", None).expect("token");
        let (b_token, b_table) = new_token("b", None).expect("token");
        let file = dir.path().join("tokens.toml");
        let policy = dir.path().join("a.toml");
        std::fs::write(&policy, "").expect("policy");
        std::fs::write(
            &file,
            format!("{a_table}policy = \"a.toml\"\n{b_table}[quota.a]\nin_flight = 1\n"),
        )
        .expect("file");
        let mut runtime = runtime();
        let tokens = Tokens::load(&file, &mut runtime).expect("tokens");
        let (a, none) = tokens.check_with_quota(&a_token).expect("a");
        assert!(none.is_none(), "a's token has no quota of its own");
        let quota = a.quota.clone().expect("a's quota");
        let held = crate::http::quota::admit(&[&quota], 1, Instant::now(), SystemTime::now())
            .expect("a call of a");
        // Raised to 2, and b's token gets a quota of its own.
        std::fs::write(
            &file,
            format!(
                "{a_table}policy = \"a.toml\"\n{b_table}quota = {{ rate = 1 }}\n[quota.a]\nin_flight = 2\n"
            ),
        )
        .expect("file");
        let reloaded = tokens.reload(&file, &runtime).expect("read again");
        let a = reloaded.check(&a_token).expect("a");
        let quota = a.quota.clone().expect("a's quota");
        assert_eq!(
            quota.usage(SystemTime::now()).0,
            1,
            "the call in flight is kept"
        );
        let second = crate::http::quota::admit(&[&quota], 1, Instant::now(), SystemTime::now())
            .expect("a second call, under the new bound");
        assert!(
            crate::http::quota::admit(&[&quota], 1, Instant::now(), SystemTime::now()).is_err()
        );
        drop((held, second));
        let (_, b_quota) = reloaded.check_with_quota(&b_token).expect("b");
        assert!(b_quota.is_some());
        // A policy file the server did not protect at start is refused.
        std::fs::write(dir.path().join("b.toml"), "").expect("policy");
        std::fs::write(
            &file,
            format!("{a_table}policy = \"a.toml\"\n{b_table}policy = \"b.toml\"\n"),
        )
        .expect("file");
        let refused = reloaded
            .reload(&file, &runtime)
            .expect_err("a new policy file");
        assert!(
            refused
                .to_string()
                .contains("was not named when the server started"),
            "{refused}"
        );
    }

    #[test]
    fn a_quota_dropped_and_restored_still_counts_the_calls_it_admitted() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("tokens.toml");
        let (a_token, a_table) = new_token("a", None).expect("token");
        let (_, b_table) = new_token("b", None).expect("token");
        let tenant_quota = format!("{a_table}{b_table}[quota.a]\nin_flight = 2\n");
        let token_quota = format!("{a_table}quota = {{ in_flight = 2 }}\n{b_table}");
        let no_quota = format!("{a_table}{b_table}");
        let no_tenant = b_table.clone();
        // What the reloads in between drop, the file with the quota, one without it, and
        // whose quota it is.
        for (dropped, with, without, scope) in [
            (
                "the tenant's quota",
                &tenant_quota,
                &no_quota,
                Scope::Tenant,
            ),
            ("the tenant", &tenant_quota, &no_tenant, Scope::Tenant),
            ("the token's quota", &token_quota, &no_quota, Scope::Token),
            ("the token", &token_quota, &no_tenant, Scope::Token),
        ] {
            let quota = |tokens: &Tokens| {
                let (tenant, token) = tokens.check_with_quota(&a_token).expect("a's token");
                match scope {
                    Scope::Tenant => tenant.quota.clone(),
                    Scope::Token => token,
                }
                .expect("a's quota")
            };
            let admit = |tokens: &Tokens| {
                crate::http::quota::admit(&[&quota(tokens)], 1, Instant::now(), SystemTime::now())
            };
            let reload = |tokens: &Tokens, text: &str| {
                std::fs::write(&file, text).expect("file");
                tokens.reload(&file, &runtime()).expect("read again")
            };
            std::fs::write(&file, with).expect("file");
            let mut tokens = Tokens::load(&file, &mut runtime()).expect("tokens");
            let first = admit(&tokens).expect("a first call");
            let second = admit(&tokens).expect("a second call");
            // Twice without: the state is carried by what was retired, not by the file before.
            tokens = reload(&tokens, without);
            tokens = reload(&tokens, without);
            tokens = reload(&tokens, with);
            let refused = admit(&tokens).expect_err(dropped);
            assert_eq!(
                refused.kind,
                crate::http::quota::Kind::InFlight,
                "{dropped}"
            );
            drop(first);
            let third = admit(&tokens).expect(dropped);
            assert!(
                admit(&tokens).is_err(),
                "{dropped}: the second and third run"
            );
            drop((second, third));
            // Once no call runs, a dropped quota is forgotten at the next reload, and restored
            // afresh: what is kept is bounded by the calls still running.
            tokens = reload(&tokens, without);
            tokens = reload(&tokens, without);
            assert!(tokens.retired.is_empty(), "{dropped}: {:?}", tokens.retired);
            tokens = reload(&tokens, with);
            let _held = [admit(&tokens), admit(&tokens)].map(|held| held.expect(dropped));
            assert!(admit(&tokens).is_err(), "{dropped}: the bound still holds");
        }
    }
}
