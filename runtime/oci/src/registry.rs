//! Talking to a registry: credentials, pull, push, and pushing signatures. The HTTP itself is
//! [`crate::wire`]'s, which reads every body within a limit.
//!
//! Longer than the house's 700 lines: pull, push, sign and attach, each with the wrapper that
//! holds it to its overall deadline (`*_within`), over one `Wire`.

use crate::error::OciError;
use crate::signing::{
    MAX_SIGNATURE_PAYLOAD_BYTES, MAX_SIGNATURES, SIGNATURE_MEDIA_TYPE, Signers, SigningKey,
    StoredSignature, TrustRoot, TrustedKey, signature_tag,
};
use crate::wire::{Wire, WireError};
use crate::{Lock, LockEntry, Store, ToolRef, check_digest, component_layer, digest_of};
use base64::Engine as _;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use std::collections::BTreeMap;
use std::time::Duration;
use toolcell::limits::MAX_COMPONENT_BYTES;
use toolcell::policy::Identity;

/// The longest a whole pull may take: a registry that trickles bytes (each read within
/// [`READ_TIMEOUT`](crate::READ_TIMEOUT)) must still end. A 256 MiB component at 1 MB/s takes under 5 minutes.
pub const PULL_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// The longest a whole push may take: the same bound as a pull's, for the same component.
pub const PUSH_TIMEOUT: Duration = PULL_TIMEOUT;

/// The longest signing may take: a digest resolved, the signature manifest read and its layers
/// (each at most `MAX_SIGNATURE_PAYLOAD_BYTES`) fetched and pushed again. Small transfers: a
/// registry that keeps it longer is stalling.
pub const SIGN_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The one registry (`host[:port]`) the credentials in the environment are for. Without it
/// they are not sent anywhere: a token for one registry must not reach whatever registry a
/// reference or a policy happens to name.
pub const REGISTRY_VARIABLE: &str = "TOOLCELL_REGISTRY";

/// A bearer token for the registry [`REGISTRY_VARIABLE`] names (a CI job's short-lived token,
/// say).
pub const TOKEN_VARIABLE: &str = "TOOLCELL_REGISTRY_TOKEN";

/// A user name and password for the registry [`REGISTRY_VARIABLE`] names.
pub const USERNAME_VARIABLE: &str = "TOOLCELL_REGISTRY_USERNAME";
/// See [`USERNAME_VARIABLE`].
pub const PASSWORD_VARIABLE: &str = "TOOLCELL_REGISTRY_PASSWORD";

/// The longest docker `config.json` read.
pub const MAX_DOCKER_CONFIG_BYTES: u64 = 1 << 20;

/// What a pull reports while it downloads a component: a front end draws progress with it (the
/// CLI's bar). Called from the pulling task; each call should return at once.
pub trait PullProgress: Send + Sync + std::fmt::Debug {
    /// The download of `repository`'s component starts; it declares `total` bytes.
    fn start(&self, repository: &str, total: u64);
    /// `received` bytes of it have arrived.
    fn advance(&self, received: u64);
    /// It ended, read whole or not.
    fn finish(&self);
}

/// How a pull goes.
#[derive(Debug, Default)]
pub struct PullOptions {
    /// Accept a locked tag that now resolves to another digest, and lock the new one.
    pub update: bool,
    /// Registries (`host[:port]`) that may be reached over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// Told of the bytes as they come, if given.
    pub progress: Option<std::sync::Arc<dyn PullProgress>>,
    /// Keys whose signatures, if present and valid, are recorded in the lock as its signers.
    pub keys: Vec<TrustedKey>,
    /// Keyless identities recorded the same way (checked against `trust_root`).
    pub identities: Vec<Identity>,
    /// The trust root keyless signatures are checked against.
    pub trust_root: Option<TrustRoot>,
}

impl PullOptions {
    /// Who, among the signers these options name, signed `digest` (none is not an error here:
    /// the policy decides at load whether a signature is required).
    fn signers(&self, digest: &str, signatures: &[StoredSignature]) -> Vec<String> {
        let keys: Vec<&TrustedKey> = self.keys.iter().collect();
        let identities: Vec<&Identity> = self.identities.iter().collect();
        crate::signing::signers(
            digest,
            signatures,
            Signers {
                keys: &keys,
                identities: &identities,
                root: self.trust_root.as_ref(),
            },
        )
        .unwrap_or_default()
    }
}

/// What a pull did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    /// The manifest's digest.
    pub digest: String,
    /// The component layer's digest.
    pub component: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// How many signatures were found.
    pub signatures: usize,
    /// The keys (of [`PullOptions::keys`]) whose signatures verified.
    pub signers: Vec<String>,
    /// Nothing was fetched: the artifact was in the store already and the registry was not
    /// asked (a digest reference), or could not be reached (a locked tag).
    pub offline: bool,
}

/// The credentials for `registry`: from the environment if `$TOOLCELL_REGISTRY` names it,
/// else docker's `config.json`, else none.
pub fn credentials(registry: &str) -> Result<RegistryAuth, OciError> {
    let ours = std::env::var(REGISTRY_VARIABLE).is_ok_and(|named| named == registry);
    if ours {
        if let Some(token) = std::env::var(TOKEN_VARIABLE).ok().filter(|t| !t.is_empty()) {
            return Ok(RegistryAuth::Bearer(token));
        }
        if let (Ok(user), Ok(password)) = (
            std::env::var(USERNAME_VARIABLE),
            std::env::var(PASSWORD_VARIABLE),
        ) {
            return Ok(RegistryAuth::Basic(user, password));
        }
    } else if std::env::var_os(TOKEN_VARIABLE).is_some()
        || std::env::var_os(USERNAME_VARIABLE).is_some()
    {
        tracing::warn!(
            "${TOKEN_VARIABLE} or ${USERNAME_VARIABLE} is set, but ${REGISTRY_VARIABLE} does \
             not name {registry}: not sent to it"
        );
    }
    let Some(path) = docker_config_path() else {
        return Ok(RegistryAuth::Anonymous);
    };
    let text = match toolcell::hostfs::read_bounded_text(&path, MAX_DOCKER_CONFIG_BYTES) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(RegistryAuth::Anonymous);
        }
        Err(error) => {
            return Err(OciError::local(&path, error));
        }
    };
    docker_credentials(&text, registry).map_err(|why| OciError::local(&path, why))
}

/// What `reference`'s registry sent (or what was given to push) that is not what it must be.
fn invalid(reference: &ToolRef, why: impl std::fmt::Display) -> OciError {
    OciError::Invalid {
        reference: reference.to_string(),
        why: why.to_string(),
    }
}

/// The client for `reference`'s registry (whose making fails only on what the environment
/// says: a proxy that cannot be used, say).
fn wire_for(
    reference: &ToolRef,
    insecure: &[String],
    auth: RegistryAuth,
) -> Result<Wire, OciError> {
    Wire::new(reference, insecure, auth).map_err(|why| OciError::Unreachable {
        reference: reference.to_string(),
        why,
    })
}

/// `$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`.
fn docker_config_path() -> Option<std::path::PathBuf> {
    std::env::var_os("DOCKER_CONFIG")
        .filter(|dir| !dir.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| dirs::home_dir().map(|home| home.join(".docker")))
        .map(|dir| dir.join("config.json"))
}

#[derive(serde::Deserialize, Default)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
    #[serde(default, rename = "credHelpers")]
    cred_helpers: BTreeMap<String, String>,
    #[serde(default, rename = "credsStore")]
    creds_store: Option<String>,
}

#[derive(serde::Deserialize, Default)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
}

/// The credentials a docker `config.json` holds for `registry`.
fn docker_credentials(text: &str, registry: &str) -> Result<RegistryAuth, String> {
    let config: DockerConfig = serde_json::from_str(text).map_err(|error| error.to_string())?;
    let entry = config.auths.iter().find_map(|(key, auth)| {
        let host = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default();
        (host == registry).then_some(auth)
    });
    let Some(entry) = entry else {
        if let Some(helper) = config
            .cred_helpers
            .get(registry)
            .or(config.creds_store.as_ref())
        {
            tracing::warn!(
                registry,
                helper,
                "docker credential helpers are not run; set {TOKEN_VARIABLE} or add an auths entry"
            );
        }
        return Ok(RegistryAuth::Anonymous);
    };
    if let Some(token) = &entry.identitytoken {
        return Ok(RegistryAuth::Bearer(token.clone()));
    }
    if let (Some(user), Some(password)) = (&entry.username, &entry.password) {
        return Ok(RegistryAuth::Basic(user.clone(), password.clone()));
    }
    let Some(auth) = &entry.auth else {
        return Ok(RegistryAuth::Anonymous);
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .map_err(|_| format!("the auth of {registry} is not base64"))?;
    let decoded =
        String::from_utf8(decoded).map_err(|_| format!("the auth of {registry} is not text"))?;
    let (user, password) = decoded
        .split_once(':')
        .ok_or_else(|| format!("the auth of {registry} is not USER:PASSWORD"))?;
    Ok(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
}

/// A registry's error about `reference`, with the fix when it is one of credentials.
fn explain(reference: &ToolRef, auth: &RegistryAuth, error: WireError) -> OciError {
    if error.denied() {
        let given = match auth {
            RegistryAuth::Anonymous => format!(
                "no credentials were found for {} (docker's config.json, ${TOKEN_VARIABLE}, \
                 ${USERNAME_VARIABLE})",
                reference.registry()
            ),
            _ => "the credentials given were refused".to_owned(),
        };
        return OciError::Denied {
            reference: reference.to_string(),
            why: format!("{given} ({error})"),
        };
    }
    error.about(reference)
}

/// Pull `reference` into `store`: resolve a tag (refused if `lock` pins it elsewhere, unless
/// [`PullOptions::update`]), fetch the manifest and the component, check each against its
/// digest, fetch the signatures, keep them, and lock a tag.
///
/// Every body the registry sends is read within a limit, whatever its `Content-Length` says
/// or leaves unsaid: manifests and the signature manifest within
/// [`MAX_MANIFEST_BYTES`](crate::MAX_MANIFEST_BYTES), the component within the size its
/// manifest declares (at most [`MAX_COMPONENT_BYTES`]), a token endpoint's answer within
/// [`MAX_TOKEN_BYTES`](crate::MAX_TOKEN_BYTES), an error's body within
/// [`MAX_ERROR_BODY_BYTES`](crate::MAX_ERROR_BODY_BYTES). A body past its limit is
/// [`OciError::TooLarge`], naming the limit.
pub async fn pull(
    reference: &ToolRef,
    store: &Store,
    lock: Option<&mut Lock>,
    options: &PullOptions,
) -> Result<Pulled, OciError> {
    // Nothing is kept until it is checked, and the lock is written last: stopping anywhere
    // leaves the store and the lock as they were, or with only checked blobs added.
    within(
        reference,
        "pull",
        PULL_TIMEOUT,
        pull_within(reference, store, lock, options),
    )
    .await
}

/// `operation` on `reference`, stopped at `limit` ([`OciError::TimedOut`]): a registry that
/// trickles bytes, each within [`READ_TIMEOUT`](crate::READ_TIMEOUT), must still let the operation end.
async fn within<T>(
    reference: &ToolRef,
    operation: &'static str,
    limit: Duration,
    run: impl Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    tokio::time::timeout(limit, run).await.unwrap_or_else(|_| {
        Err(OciError::TimedOut {
            reference: reference.to_string(),
            operation,
            limit,
        })
    })
}

async fn pull_within(
    reference: &ToolRef,
    store: &Store,
    lock: Option<&mut Lock>,
    options: &PullOptions,
) -> Result<Pulled, OciError> {
    let locked = reference
        .tag()
        .and(lock.as_deref())
        .and_then(|lock| lock.get(&reference.key()))
        .cloned();
    // A digest already stored needs nothing from the network: bytes are named by their digest.
    if let Some(digest) = reference.digest()
        && let Ok(pulled) = stored(store, digest, options)
    {
        return Ok(pulled);
    }
    let auth = credentials(reference.registry())?;
    let wire = wire_for(reference, &options.insecure, auth.clone())?;
    // A tag resolved by reading its manifest (the registry reports no digest) brings its bytes.
    let (digest, mut read) = match (reference.digest(), reference.tag()) {
        (Some(digest), _) => (digest.to_owned(), None),
        (None, tag) => match wire.resolve(tag.unwrap_or("latest")).await {
            Ok(resolved) => resolved,
            Err(error) => {
                // A locked tag whose artifact is stored still loads: say so, and go on.
                if let Some(entry) = &locked
                    && error.unreachable()
                    && let Ok(mut pulled) = stored(store, &entry.digest, options)
                {
                    tracing::warn!(%reference, "{error}; using the locked {}", entry.digest);
                    pulled.offline = true;
                    return Ok(pulled);
                }
                return Err(explain(reference, &auth, error));
            }
        },
    };
    check_digest(&digest).map_err(|_| {
        invalid(
            reference,
            format!("the registry answered {digest:?}, not a sha256 digest"),
        )
    })?;
    if let Some(entry) = &locked
        && entry.digest != digest
        && !options.update
    {
        return Err(OciError::TagMoved {
            reference: reference.to_string(),
            locked: entry.digest.clone(),
            now: digest,
        });
    }
    let at = reference.at(&digest);
    let (manifest, component) = if store.has(&digest) {
        let manifest = store.manifest(&digest)?;
        let layer = component_layer(&manifest)
            .map_err(|why| invalid(reference, why))?
            .clone();
        if !store.has(&layer.digest) {
            fetch_component(&wire, &at, &layer, store, options.progress.as_deref())
                .await
                .map_err(|error| explain(reference, &auth, error))?;
        }
        (manifest, layer)
    } else {
        let raw = match read.take() {
            Some(raw) => raw,
            None => wire
                .manifest(&digest, &[OCI_IMAGE_MEDIA_TYPE], "the registry's manifest")
                .await
                .map_err(|error| explain(reference, &auth, error))?,
        };
        if digest_of(&raw) != digest {
            return Err(invalid(
                reference,
                format!(
                    "the manifest the registry sent is {}, not {digest}",
                    digest_of(&raw)
                ),
            ));
        }
        let manifest: OciImageManifest = serde_json::from_slice(&raw)
            .map_err(|error| invalid(reference, format!("its manifest: {error}")))?;
        let layer = component_layer(&manifest)
            .map_err(|why| invalid(reference, why))?
            .clone();
        // The component first, the manifest after: a stored manifest means a stored component.
        fetch_component(&wire, &at, &layer, store, options.progress.as_deref())
            .await
            .map_err(|error| explain(reference, &auth, error))?;
        store.write(&digest, &raw)?;
        (manifest, layer)
    };
    drop(manifest);
    let signatures = fetch_signatures(&wire, reference, &auth, &digest).await?;
    if let Some(signatures) = &signatures {
        store.write_signatures(&digest, signatures)?;
    }
    let mut pulled = stored(store, &digest, options)?;
    pulled.offline = false;
    pulled.component = component.digest;
    if let (Some(lock), Some(_)) = (lock, reference.tag()) {
        lock.set(LockEntry {
            reference: reference.key(),
            digest: digest.clone(),
            component: pulled.component.clone(),
            signers: pulled.signers.clone(),
        });
        lock.save()?;
    }
    Ok(pulled)
}

/// What the store holds of the manifest `digest`, as a [`Pulled`] (offline).
fn stored(store: &Store, digest: &str, options: &PullOptions) -> Result<Pulled, OciError> {
    let manifest = store.manifest(digest)?;
    let layer = component_layer(&manifest)
        .map_err(|why| OciError::local(store.root(), format!("the manifest {digest}: {why}")))?;
    let component = store.read(&layer.digest, MAX_COMPONENT_BYTES)?;
    let signatures = store.signatures(digest)?;
    let signers = options.signers(digest, &signatures);
    Ok(Pulled {
        digest: digest.to_owned(),
        component: layer.digest.clone(),
        bytes: component.len() as u64,
        signatures: signatures.len(),
        signers,
        offline: true,
    })
}

/// Fetch the component `layer` of `at` into `store`, at most its declared size, checked
/// against its digest before it is kept.
async fn fetch_component(
    wire: &Wire,
    at: &ToolRef,
    layer: &oci_client::manifest::OciDescriptor,
    store: &Store,
    progress: Option<&dyn PullProgress>,
) -> Result<(), WireError> {
    let declared = u64::try_from(layer.size).unwrap_or(0);
    if let Some(progress) = progress {
        progress.start(at.repository(), declared);
    }
    let bytes = fetch_blob(wire, layer, MAX_COMPONENT_BYTES, progress).await;
    if let Some(progress) = progress {
        progress.finish();
    }
    store
        .write(&layer.digest, &bytes?)
        .map_err(|error| WireError::Malformed(error.to_string()))
}

/// The blob `layer` of the wire's repository: no more than it declares (and at most `max`
/// bytes) is read, and it is checked against its digest before it is returned; `progress`, if
/// any, is told of the bytes.
async fn fetch_blob(
    wire: &Wire,
    layer: &oci_client::manifest::OciDescriptor,
    max: u64,
    progress: Option<&dyn PullProgress>,
) -> Result<Vec<u8>, WireError> {
    let declared = u64::try_from(layer.size).unwrap_or(0).min(max);
    let mut response = wire.blob(&layer.digest).await?;
    let more = || {
        WireError::Malformed(format!(
            "the registry sent more than the {declared} bytes its manifest declares for {}",
            layer.digest
        ))
    };
    if response
        .content_length()
        .is_some_and(|length| length > declared)
    {
        return Err(more());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(declared).unwrap_or(0).min(1 << 24));
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| WireError::Transfer {
            what: "its layer",
            error,
        })?
    {
        if (bytes.len() + chunk.len()) as u64 > declared {
            return Err(more());
        }
        bytes.extend_from_slice(&chunk);
        if let Some(progress) = progress {
            progress.advance(bytes.len() as u64);
        }
    }
    let actual = digest_of(&bytes);
    if actual != layer.digest {
        return Err(WireError::Malformed(format!(
            "the layer the registry sent is {actual}, not {} as its manifest says: refused, \
             nothing kept",
            layer.digest
        )));
    }
    Ok(bytes)
}

/// The signatures of the manifest `digest` (its `.sig` tag); `None` if they could not be read
/// (the stored ones, if any, are kept), an empty list if there are none. A signature manifest
/// longer than [`MAX_MANIFEST_BYTES`](crate::MAX_MANIFEST_BYTES) is an error.
async fn fetch_signatures(
    wire: &Wire,
    reference: &ToolRef,
    auth: &RegistryAuth,
    digest: &str,
) -> Result<Option<Vec<StoredSignature>>, OciError> {
    let raw = match wire
        .manifest(
            &signature_tag(digest),
            &[OCI_IMAGE_MEDIA_TYPE],
            "its signature manifest",
        )
        .await
    {
        Ok(raw) => raw,
        Err(error) if error.not_found() => return Ok(Some(Vec::new())),
        Err(error @ WireError::TooLarge { .. }) => return Err(explain(reference, auth, error)),
        Err(error) => {
            tracing::warn!(%reference, "its signatures could not be read: {error}");
            return Ok(None);
        }
    };
    let manifest: OciImageManifest = serde_json::from_slice(&raw)
        .map_err(|error| invalid(reference, format!("its signature manifest: {error}")))?;
    let mut signatures = Vec::new();
    for layer in manifest
        .layers
        .iter()
        .filter(|layer| layer.media_type == SIGNATURE_MEDIA_TYPE)
        .take(MAX_SIGNATURES)
    {
        let Some(annotations) = &layer.annotations else {
            continue;
        };
        if u64::try_from(layer.size).map_or(true, |size| size > MAX_SIGNATURE_PAYLOAD_BYTES)
            || check_digest(&layer.digest).is_err()
        {
            continue;
        }
        let payload = match fetch_blob(wire, layer, MAX_SIGNATURE_PAYLOAD_BYTES, None).await {
            Ok(payload) => payload,
            Err(why) => {
                tracing::warn!(%reference, "a signature layer could not be read: {why}");
                continue;
            }
        };
        // Without a signature annotation, or with an oversized one, it is no signature.
        signatures.extend(StoredSignature::from_annotations(&payload, annotations));
    }
    Ok(Some(signatures))
}

/// Push the component `bytes` to `reference` (a tag) as a wasm OCI artifact; returns the
/// manifest's digest. The bytes must be a component (what toolcell can load).
///
/// The digest is computed here, over the exact manifest bytes pushed (canonical JSON, as
/// `oci-client` wrote it, so the same component pushes to the same digest as before); a
/// registry that reports another for them (`Docker-Content-Digest` on the `PUT`, or else on a
/// `HEAD` of the tag) is [`OciError::DigestMismatch`], and nothing is printed as pushed.
pub async fn push(
    bytes: Vec<u8>,
    reference: &ToolRef,
    insecure: &[String],
) -> Result<String, OciError> {
    within(
        reference,
        "push",
        PUSH_TIMEOUT,
        push_within(bytes, reference, insecure),
    )
    .await
}

async fn push_within(
    bytes: Vec<u8>,
    reference: &ToolRef,
    insecure: &[String],
) -> Result<String, OciError> {
    use oci_wasm::ToConfig as _;
    let tag = reference
        .tag()
        .filter(|_| reference.digest().is_none())
        .ok_or_else(|| OciError::InvalidReference {
            reference: reference.to_string(),
            why: "a push names a tag (oci://REGISTRY/REPOSITORY:TAG), not a digest".to_owned(),
        })?;
    let auth = credentials(reference.registry())?;
    let wire = wire_for(reference, insecure, auth.clone())?;
    let (mut config, layer) = oci_wasm::WasmConfig::from_raw_component(bytes, None)
        .map_err(|error| invalid(reference, format!("not a component: {error:#}")))?;
    // The same bytes always push to the same digest.
    config.created = Default::default();
    let config = config
        .to_config()
        .map_err(|error| invalid(reference, format!("its config: {error:#}")))?;
    let layers = [layer];
    let mut manifest = OciImageManifest::build(&layers, &config, None);
    manifest.media_type = Some(oci_wasm::WASM_MANIFEST_MEDIA_TYPE.to_owned());
    let refused = |error| explain(reference, &auth, error);
    for layer in &layers {
        wire.push_blob(&layer.sha256_digest(), layer.data.clone())
            .await
            .map_err(refused)?;
    }
    wire.push_blob(&manifest.config.digest, config.data.clone())
        .await
        .map_err(refused)?;
    let manifest = OciManifest::Image(manifest);
    let media_type = manifest.content_type().to_owned();
    let mut body = Vec::new();
    serde::Serialize::serialize(
        &manifest,
        &mut serde_json::Serializer::with_formatter(
            &mut body,
            olpc_cjson::CanonicalFormatter::new(),
        ),
    )
    .map_err(|error| invalid(reference, format!("its manifest: {error}")))?;
    wire.push_manifest(tag, body, &media_type)
        .await
        .map_err(refused)
}

/// Sign the artifact `reference` names with `key` and push the signature to its `.sig` tag,
/// beside the signatures already there. Returns the signed digest and the signature's tag.
pub async fn sign(
    reference: &ToolRef,
    key: &SigningKey,
    insecure: &[String],
) -> Result<(String, String), OciError> {
    within(
        reference,
        "sign",
        SIGN_TIMEOUT,
        sign_within(reference, key, insecure),
    )
    .await
}

async fn sign_within(
    reference: &ToolRef,
    key: &SigningKey,
    insecure: &[String],
) -> Result<(String, String), OciError> {
    let auth = credentials(reference.registry())?;
    let wire = wire_for(reference, insecure, auth.clone())?;
    let digest = match reference.digest() {
        Some(digest) => digest.to_owned(),
        None => {
            let (digest, _) = wire
                .resolve(reference.tag().unwrap_or("latest"))
                .await
                .map_err(|error| explain(reference, &auth, error))?;
            // As cosign warns: a tag is whatever the registry says it is right now.
            tracing::warn!(
                "signing {digest}, what the registry says {reference} is now; sign \
                 {}@{digest} to be sure of the bytes",
                reference.repository()
            );
            digest
        }
    };
    check_digest(&digest)?;
    let repository = format!("{}/{}", reference.registry(), reference.repository());
    let (payload, signature) = key.sign(&repository, &digest)?;
    let signature = StoredSignature {
        payload: base64::engine::general_purpose::STANDARD.encode(payload),
        signature,
        ..StoredSignature::default()
    };
    let tag = attach_with(&wire, &auth, reference, &digest, &signature).await?;
    Ok((digest, tag))
}

/// Push `signature` (made elsewhere: a keyless one, say) to the `.sig` tag of the manifest
/// `digest` in `reference`'s repository, beside the signatures already there. Returns the tag.
pub async fn attach(
    reference: &ToolRef,
    digest: &str,
    signature: &StoredSignature,
    insecure: &[String],
) -> Result<String, OciError> {
    check_digest(digest)?;
    let auth = credentials(reference.registry())?;
    let wire = wire_for(reference, insecure, auth.clone())?;
    attach_with(&wire, &auth, reference, digest, signature).await
}

/// Push `signature` to the `.sig` tag of `digest`, after the signature layers already there
/// (read within [`MAX_MANIFEST_BYTES`](crate::MAX_MANIFEST_BYTES), at most
/// [`MAX_SIGNATURES`] of them, each within [`MAX_SIGNATURE_PAYLOAD_BYTES`]). What is there but
/// cannot be read is an error, not a reason to start the tag afresh and drop it.
async fn attach_with(
    wire: &Wire,
    auth: &RegistryAuth,
    reference: &ToolRef,
    digest: &str,
    signature: &StoredSignature,
) -> Result<String, OciError> {
    let payload = base64::engine::general_purpose::STANDARD
        .decode(&signature.payload)
        .map_err(|_| invalid(reference, "the signature's payload is not base64"))?;
    let tag = signature_tag(digest);
    let refused = |error| explain(reference, auth, error);
    // The layers already there stay (cosign appends, too); this one joins them.
    let mut layers = Vec::new();
    match wire
        .manifest(&tag, &[OCI_IMAGE_MEDIA_TYPE], "its signature manifest")
        .await
    {
        Ok(raw) => {
            let existing: OciImageManifest = serde_json::from_slice(&raw)
                .map_err(|error| invalid(reference, format!("its signature manifest: {error}")))?;
            let signature_layers: Vec<_> = existing
                .layers
                .iter()
                .filter(|layer| layer.media_type == SIGNATURE_MEDIA_TYPE)
                .collect();
            if signature_layers.len() >= MAX_SIGNATURES {
                return Err(invalid(
                    reference,
                    format!(
                        "{tag} holds {} signatures already, the most read (MAX_SIGNATURES) is \
                         {MAX_SIGNATURES}: not signed",
                        signature_layers.len()
                    ),
                ));
            }
            for layer in signature_layers {
                if u64::try_from(layer.size).map_or(true, |size| size > MAX_SIGNATURE_PAYLOAD_BYTES)
                {
                    tracing::warn!(
                        %reference,
                        "a signature layer of {} bytes is dropped: at most \
                         {MAX_SIGNATURE_PAYLOAD_BYTES} are read",
                        layer.size
                    );
                    continue;
                }
                check_digest(&layer.digest)
                    .map_err(|why| invalid(reference, format!("a layer of {tag}: {why}")))?;
                let data = fetch_blob(wire, layer, MAX_SIGNATURE_PAYLOAD_BYTES, None)
                    .await
                    .map_err(refused)?;
                if data != payload {
                    layers.push(ImageLayer::new(
                        data,
                        SIGNATURE_MEDIA_TYPE.to_owned(),
                        layer.annotations.clone(),
                    ));
                }
            }
        }
        Err(error) if error.not_found() => {}
        Err(error) => return Err(refused(error)),
    }
    layers.push(ImageLayer::new(
        payload,
        SIGNATURE_MEDIA_TYPE.to_owned(),
        Some(signature.annotations()),
    ));
    let config = Config::oci_v1(b"{}".to_vec(), None);
    let mut manifest = OciImageManifest::build(&layers, &config, None);
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
    // Not canonical JSON (as `push` writes): it leaves the newlines of a PEM certificate (a
    // keyless signature's annotation) unescaped, and a registry rightly refuses that as invalid
    // JSON. serde_json escapes them.
    for layer in &layers {
        wire.push_blob(&layer.sha256_digest(), layer.data.clone())
            .await
            .map_err(refused)?;
    }
    wire.push_blob(&manifest.config.digest, config.data.clone())
        .await
        .map_err(refused)?;
    let body = serde_json::to_vec(&manifest).map_err(|error| invalid(reference, error))?;
    wire.push_manifest(&tag, body, OCI_IMAGE_MEDIA_TYPE)
        .await
        .map_err(refused)?;
    let at = oci_client::Reference::with_tag(
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        tag,
    );
    Ok(at.whole())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An operation past its overall limit ends, typed (push and sign are wrapped alike).
    #[tokio::test]
    async fn an_operation_past_its_limit_is_stopped_and_says_which() {
        let reference = ToolRef::parse("oci://127.0.0.1:1/tools/echo:1").expect("a reference");
        let stalled = within(
            &reference,
            "push",
            Duration::from_millis(20),
            std::future::pending::<Result<(), OciError>>(),
        )
        .await;
        assert_eq!(
            stalled,
            Err(OciError::TimedOut {
                reference: reference.to_string(),
                operation: "push",
                limit: Duration::from_millis(20),
            })
        );
    }

    #[test]
    fn docker_config_credentials_are_found_by_registry() {
        let auth = base64::engine::general_purpose::STANDARD.encode("user:secret");
        let text = format!(
            r#"{{"auths": {{"127.0.0.1:5000": {{"auth": "{auth}"}},
                "https://index.docker.io/v1/": {{"auth": "{auth}"}},
                "ghcr.io": {{"identitytoken": "tok"}}}}}}"#
        );
        assert!(matches!(
            docker_credentials(&text, "127.0.0.1:5000"),
            Ok(RegistryAuth::Basic(user, password)) if user == "user" && password == "secret"
        ));
        assert!(matches!(
            docker_credentials(&text, "index.docker.io"),
            Ok(RegistryAuth::Basic(..))
        ));
        assert!(matches!(
            docker_credentials(&text, "ghcr.io"),
            Ok(RegistryAuth::Bearer(token)) if token == "tok"
        ));
        assert!(matches!(
            docker_credentials(&text, "127.0.0.1:5001"),
            Ok(RegistryAuth::Anonymous)
        ));
        assert!(docker_credentials("{\"auths\": {\"r\": {\"auth\": \"!!\"}}}", "r").is_err());
        assert!(docker_credentials("not json", "r").is_err());
    }
}
