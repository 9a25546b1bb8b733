//! Tools from OCI registries, pinned by digest and verified by signature.
//!
//! A tool source may be `oci://REGISTRY/REPOSITORY:TAG` or `oci://REGISTRY/REPOSITORY@sha256:…`
//! (`--tools`, repeatable, or `source` in a tool's policy entry). The component is a wasm OCI
//! artifact as the CNCF layout has it: config `application/vnd.wasm.config.v0+json`, exactly one
//! `application/wasm` layer.
//!
//! - **Pull** (`toolcell pull REF`, [`pull`]): the tag is resolved to its manifest's digest, the
//!   manifest and the layer are fetched and each is checked against its digest before anything
//!   is kept; cosign signatures (the `sha256-HEX.sig` tag) come along. Everything is stored by
//!   digest in the [`Store`]; from then on loading needs no network.
//! - **Lock** (`toolcell.lock` in the workspace, [`Lock`]): each pulled tag's manifest digest,
//!   component digest and signer. Loading a tag reads the lock, never the registry. A pull that
//!   finds a locked tag moved to another digest is refused until `toolcell pull --update`.
//! - **Push** (`toolcell push FILE REF`, [`push`]): the component as a wasm OCI artifact. The
//!   config's creation time is the epoch, so the same bytes push to the same digest. That
//!   digest is computed here over the manifest bytes pushed; a registry reporting another is
//!   refused ([`OciError::DigestMismatch`]).
//! - **Limits**: the HTTP is toolcell's own (`wire.rs`, on `reqwest`; `oci-client` gives the
//!   types), so that every body a registry or its token endpoint sends is read through a stream
//!   that stops at a named limit ([`MAX_MANIFEST_BYTES`], [`MAX_TOKEN_BYTES`],
//!   [`MAX_ERROR_BODY_BYTES`], a layer's declared size): past it, [`OciError::TooLarge`].
//! - **Signatures** ([`signing`]): cosign's simple-signing format, made (`toolcell sign --key`)
//!   and verified (policy `signed_by`) in process with the `sigstore` crate: by a public key,
//!   or keyless (a Fulcio certificate naming an issuer and subject, and a Rekor bundle) against
//!   a trust root file, offline. [`attach`] pushes a signature made elsewhere.
//!
//! Plain HTTP is used only for a loopback registry, or one the policy or the command line names
//! as insecure. Registry credentials come from `$TOOLCELL_REGISTRY_TOKEN` (a bearer token),
//! `$TOOLCELL_REGISTRY_USERNAME` and `$TOOLCELL_REGISTRY_PASSWORD` (only for the registry
//! `$TOOLCELL_REGISTRY` names), or docker's `config.json`
//! (`$DOCKER_CONFIG`, else `~/.docker`), in that order.

mod error;
mod registry;
pub mod signing;
mod source;
mod store;
mod wire;

pub use error::{Limit, OciError};
pub use registry::{
    PULL_TIMEOUT, PUSH_TIMEOUT, PullOptions, PullProgress, Pulled, SIGN_TIMEOUT, attach,
    credentials, pull, push, sign,
};
pub use source::OciSource;
pub use store::{Lock, LockEntry, Store};
pub use wire::{CONNECT_TIMEOUT, MAX_ERROR_BODY_BYTES, MAX_TOKEN_BYTES, READ_TIMEOUT};

use oci_client::Reference;
use sha2::Digest as _;
use std::fmt;
use toolcell::limits::MAX_COMPONENT_BYTES;

/// How a tool source names a registry artifact.
pub const OCI_SCHEME: &str = "oci://";

/// The lock file's name, in the workspace's root.
pub const LOCK_FILE: &str = "toolcell.lock";

/// The wasm OCI artifact's config media type.
pub const WASM_CONFIG_MEDIA_TYPE: &str = oci_wasm::WASM_MANIFEST_CONFIG_MEDIA_TYPE;

/// The wasm OCI artifact's layer media type.
pub const WASM_LAYER_MEDIA_TYPE: &str = oci_wasm::WASM_LAYER_MEDIA_TYPE;

/// The largest manifest (or signature manifest) read from the store or from a registry: the
/// distribution specification lets registries refuse manifests over 4 MiB, and ours has two
/// descriptors. A registry's manifest is read through a stream that stops here, so a registry
/// that sends an endless one (chunked, no `Content-Length`) cannot grow toolcell past it.
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;

/// A reference to a tool in a registry: a registry, a repository, and a tag or a digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRef {
    reference: Reference,
}

impl ToolRef {
    /// Parse `oci://REGISTRY/REPOSITORY:TAG` or `oci://REGISTRY/REPOSITORY@sha256:HEX` (the
    /// scheme may be left out). The registry must be named (no default registry is assumed),
    /// and so must a tag or a digest (no default `latest`).
    pub fn parse(text: &str) -> Result<ToolRef, OciError> {
        let rest = text.strip_prefix(OCI_SCHEME).unwrap_or(text);
        let bad = |why: &str| OciError::InvalidReference {
            reference: text.to_owned(),
            why: format!(
                "{why}: write oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST"
            ),
        };
        let (registry, path) = rest.split_once('/').ok_or_else(|| bad("no repository"))?;
        if !(registry.contains('.') || registry.contains(':') || registry == "localhost") {
            return Err(bad("no registry host"));
        }
        let last = path.rsplit('/').next().unwrap_or(path);
        if !last.contains(':') && !last.contains('@') {
            return Err(bad("no tag or digest"));
        }
        let reference: Reference = rest.parse().map_err(|error| bad(&format!("{error}")))?;
        if let Some(digest) = reference.digest() {
            check_digest(digest).map_err(|_| bad(&format!("{digest:?} is not a sha256 digest")))?;
        }
        Ok(ToolRef { reference })
    }

    /// The registry's host (and port).
    pub fn registry(&self) -> &str {
        self.reference.registry()
    }

    /// The repository.
    pub fn repository(&self) -> &str {
        self.reference.repository()
    }

    /// The tag, if the reference names one.
    pub fn tag(&self) -> Option<&str> {
        self.reference.tag()
    }

    /// The digest, if the reference names one.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// This reference's artifact at `digest` (same registry and repository).
    pub fn at(&self, digest: &str) -> ToolRef {
        ToolRef {
            reference: Reference::with_digest(
                self.registry().to_owned(),
                self.repository().to_owned(),
                digest.to_owned(),
            ),
        }
    }

    /// The reference as the lock file keys it (without `oci://`).
    pub fn key(&self) -> String {
        self.reference.whole()
    }

    /// Whether the registry is on loopback (`localhost`, 127.0.0.0/8, `::1`), where plain HTTP
    /// is allowed.
    pub fn is_loopback(&self) -> bool {
        is_loopback_host(self.registry())
    }

    pub(crate) fn oci(&self) -> &Reference {
        &self.reference
    }
}

impl fmt::Display for ToolRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{OCI_SCHEME}{}", self.reference.whole())
    }
}

/// Whether `registry` (a host, with or without a port) is loopback.
pub fn is_loopback_host(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.rsplit_once(':').map_or(registry, |(host, _)| host),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `digest` is `sha256:` and 64 lowercase hex digits (the only algorithm toolcell accepts: what
/// it stores and pins by).
pub fn check_digest(digest: &str) -> Result<(), OciError> {
    match digest.strip_prefix("sha256:") {
        Some(hex)
            if hex.len() == 64
                && hex
                    .bytes()
                    .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte)) =>
        {
            Ok(())
        }
        _ => Err(OciError::InvalidReference {
            reference: digest.to_owned(),
            why: "not a sha256 digest (sha256: and 64 lowercase hex digits)".to_owned(),
        }),
    }
}

/// The `sha256:HEX` digest of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!(
        "sha256:{}",
        toolcell::digest::hex(&sha2::Sha256::digest(bytes))
    )
}

/// The one component layer of a wasm artifact's `manifest`, checked: the config and layer
/// media types, one layer, a size within [`MAX_COMPONENT_BYTES`], a sha256 digest.
pub(crate) fn component_layer(
    manifest: &oci_client::manifest::OciImageManifest,
) -> Result<&oci_client::manifest::OciDescriptor, String> {
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "it is not a wasm component artifact: its config is {:?}, not {WASM_CONFIG_MEDIA_TYPE}",
            manifest.config.media_type
        ));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(format!(
            "a wasm component artifact has one layer; this one has {}",
            manifest.layers.len()
        ));
    };
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(format!(
            "its layer is {:?}, not {WASM_LAYER_MEDIA_TYPE}",
            layer.media_type
        ));
    }
    check_digest(&layer.digest)?;
    if layer.urls.as_ref().is_some_and(|urls| !urls.is_empty()) {
        // A client would fetch these from wherever they point, plain HTTP included.
        return Err("its layer names URLs to fetch it from elsewhere: refused".to_owned());
    }
    if u64::try_from(layer.size).map_or(true, |size| size > MAX_COMPONENT_BYTES) {
        return Err(format!(
            "its layer is {} bytes; a component may be at most {MAX_COMPONENT_BYTES}",
            layer.size
        ));
    }
    Ok(layer)
}

/// A component read from the store for loading: where it came from and its bytes.
#[derive(Debug)]
pub struct Stored {
    /// `oci://REGISTRY/REPOSITORY@sha256:…` (the tag, if it was named by one, after a space).
    pub source: String,
    /// The manifest's digest (what signatures sign).
    pub digest: String,
    /// The component.
    pub bytes: Vec<u8>,
}

/// The component `reference` names, from `store` alone (no network): a digest reference
/// directly, a tag through `lock`. Every byte is checked against its digest again.
pub fn load(reference: &ToolRef, store: &Store, lock: Option<&Lock>) -> Result<Stored, OciError> {
    let digest = match reference.digest() {
        Some(digest) => digest.to_owned(),
        None => lock
            .and_then(|lock| lock.get(&reference.key()))
            .map(|entry| entry.digest.clone())
            .ok_or_else(|| OciError::NotPulled {
                reference: reference.to_string(),
                why: format!("not in {LOCK_FILE}"),
            })?,
    };
    let not_pulled = |why: OciError| OciError::NotPulled {
        reference: reference.to_string(),
        why: why.to_string(),
    };
    let manifest = store.manifest(&digest).map_err(not_pulled)?;
    let layer = component_layer(&manifest).map_err(|why| OciError::Invalid {
        reference: reference.to_string(),
        why: format!("the stored manifest: {why}"),
    })?;
    let bytes = store
        .read(&layer.digest, MAX_COMPONENT_BYTES)
        .map_err(not_pulled)?;
    let at = reference.at(&digest);
    let source = match reference.tag() {
        Some(tag) if reference.digest().is_none() => format!("{at} ({tag})"),
        _ => at.to_string(),
    };
    Ok(Stored {
        source,
        digest,
        bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_a_registry_and_a_tag_or_digest() {
        let digest = format!("sha256:{}", "a".repeat(64));
        for good in [
            "oci://127.0.0.1:5000/tools/echo:1.0",
            "localhost:5000/echo:latest",
            "ghcr.io/acme/tools/grep:v2",
            &format!("oci://registry.example.com/echo@{digest}"),
        ] {
            ToolRef::parse(good).unwrap_or_else(|why| panic!("{good}: {why}"));
        }
        for (bad, why) in [
            ("oci://echo:1.0", "no repository"),
            ("oci://acme/echo:1.0", "no registry host"),
            ("oci://ghcr.io/acme/echo", "no tag or digest"),
            ("oci://ghcr.io/acme/echo@sha256:abc", "invalid reference"),
            ("oci://ghcr.io/acme/echo@md5:abc", ""),
        ] {
            let refused = ToolRef::parse(bad).expect_err(bad);
            assert!(refused.to_string().contains(why), "{bad}: {refused}");
        }
        let parsed = ToolRef::parse("oci://127.0.0.1:5000/tools/echo:1.0").expect("ref");
        assert_eq!(
            (parsed.registry(), parsed.repository(), parsed.tag()),
            ("127.0.0.1:5000", "tools/echo", Some("1.0"))
        );
        assert_eq!(parsed.to_string(), "oci://127.0.0.1:5000/tools/echo:1.0");
    }

    #[test]
    fn only_loopback_registries_are_loopback() {
        for host in [
            "localhost:5000",
            "127.0.0.1:5000",
            "127.3.4.5",
            "[::1]:5000",
            "LOCALHOST",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "localhost.example.com:5000",
            "10.0.0.1:5000",
            "[::2]:5000",
            "ghcr.io",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
