//! Cosign-compatible signatures, made and verified in process with the `sigstore` crate.
//!
//! A signature of the artifact with manifest digest `sha256:HEX` lives at the tag
//! `sha256-HEX.sig` of the same repository: an image whose layers
//! (`application/vnd.dev.cosign.simplesigning.v1+json`) each hold a simple-signing payload naming
//! that digest, with the base64 signature of the payload in the annotation
//! `dev.cosignproject.cosign/signature`. That is what `cosign sign --key` writes and what
//! `cosign verify --key` reads (with `--insecure-ignore-tlog`: toolcell does not upload to a
//! transparency log).
//!
//! Keys are PEM files: a public key (`cosign.pub`) to verify, and a private key to sign, either
//! cosign's encrypted format (`cosign generate-key-pair`, `toolcell keygen`; the password from
//! `$COSIGN_PASSWORD`) or plain PKCS#8. ECDSA P-256 (cosign's default), P-384 and Ed25519.
//!
//! Keyless signatures (`cosign sign` without `--key`) are verified offline against a trust
//! root file ([`TrustRoot`], Sigstore's `trusted_root.json`): the signing certificate, in the
//! annotation `dev.sigstore.cosign/certificate`, must chain to one of its Fulcio CAs for code
//! signing at the time the transparency log recorded the signature; the log's promise (the
//! Rekor bundle in `dev.sigstore.cosign/bundle`) must be signed by one of its Rekor keys and
//! record this very signature, certificate and payload; the payload must verify with the
//! certificate's key; and the certificate's subject and OIDC issuer must be exactly an
//! [`Identity`] the policy names. Nothing is fetched: the log's inclusion proof is not
//! checked online (as `cosign verify --offline`).
//!
//! Longer than the house's 700 lines on purpose: keys, the trust root's JSON and the keyless
//! checks (certificate chain, transparency-log entry) are every path to a verified signer,
//! kept in one file so that a reader sees them all together.

use crate::OciError;
use crate::digest_of;
use base64::Engine as _;
use rustls::pki_types::{CertificateDer, UnixTime};
use serde::{Deserialize, Serialize};
use sigstore::cosign::signature_layers::CertificateSubject;
use sigstore::cosign::verification_constraint::{PublicKeyVerifier, VerificationConstraint};
use sigstore::cosign::{SignatureLayer, simple_signing::SimpleSigning};
use sigstore::crypto::signing_key::SigStoreKeyPair;
use sigstore::crypto::{CosignVerificationKey, Signature, SigningScheme};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use toolcell::policy::Identity;
use x509_cert::der::Decode as _;

/// The media type of a signature layer.
pub const SIGNATURE_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";

/// The annotation that holds a layer's signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// The most signature layers read for one artifact: far more signers than any policy names.
pub const MAX_SIGNATURES: usize = 32;

/// The largest signature payload read (a simple-signing payload is a few hundred bytes).
pub const MAX_SIGNATURE_PAYLOAD_BYTES: u64 = 64 << 10;

/// The longest key file read.
pub const MAX_KEY_FILE_BYTES: u64 = 64 << 10;

/// The environment variable that holds an encrypted private key's password (cosign's).
pub const PASSWORD_VARIABLE: &str = "COSIGN_PASSWORD";

/// The annotation that holds a keyless signature's certificate (PEM).
pub const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";

/// The annotation that holds a keyless certificate's chain (PEM, intermediates first).
pub const CHAIN_ANNOTATION: &str = "dev.sigstore.cosign/chain";

/// The annotation that holds the transparency log's signed promise (the Rekor bundle, JSON).
pub const BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";

/// The longest annotation value kept from a signature layer: a certificate chain or a Rekor
/// bundle is a few KiB; more is an attempt to fill the store.
pub const MAX_ANNOTATION_BYTES: usize = 64 << 10;

/// The longest trust root file read (Sigstore's public-good one is about 7 KiB).
pub const MAX_TRUST_ROOT_BYTES: u64 = 1 << 20;

/// The most certificates taken from a signature's chain annotation (Fulcio's chain is two).
pub const MAX_CHAIN_CERTIFICATES: usize = 8;

/// The extended key usage a Fulcio certificate must have: code signing (1.3.6.1.5.5.7.3.3),
/// as the DER bytes of the OID.
const CODE_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];

/// Fulcio's OIDC issuer extension, version 2 (a DER UTF8String).
const ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";

/// Fulcio's OIDC issuer extension, version 1 (the raw bytes of the URL); deprecated.
const ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";

/// The tag that holds the signatures of the manifest `digest`.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// One signature as the store keeps it: the payload that was signed, the signature, and for a
/// keyless signature the certificate, its chain and the transparency log's bundle.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSignature {
    /// The simple-signing payload, base64.
    pub payload: String,
    /// The signature of the payload, base64 (as the annotation holds it).
    pub signature: String,
    /// The signing certificate (PEM), for a keyless signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    /// Its chain (PEM), as the signer attached it; untrusted, used only to build a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// The Rekor bundle (JSON), the log's signed promise that it recorded the signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle: Option<String>,
}

impl StoredSignature {
    /// This signature from a signature layer's annotations (`None` without a signature, or
    /// if an annotation is longer than [`MAX_ANNOTATION_BYTES`]).
    pub fn from_annotations(
        payload: &[u8],
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Option<StoredSignature> {
        let get = |name: &str| -> Result<Option<String>, ()> {
            match annotations.get(name) {
                Some(value) if value.len() > MAX_ANNOTATION_BYTES => Err(()),
                value => Ok(value.cloned()),
            }
        };
        Some(StoredSignature {
            payload: base64::engine::general_purpose::STANDARD.encode(payload),
            signature: get(SIGNATURE_ANNOTATION).ok()??,
            certificate: get(CERTIFICATE_ANNOTATION).ok()?,
            chain: get(CHAIN_ANNOTATION).ok()?,
            bundle: get(BUNDLE_ANNOTATION).ok()?,
        })
    }

    /// The annotations of this signature's layer, as cosign writes them.
    pub fn annotations(&self) -> std::collections::BTreeMap<String, String> {
        [
            (SIGNATURE_ANNOTATION, Some(&self.signature)),
            (CERTIFICATE_ANNOTATION, self.certificate.as_ref()),
            (CHAIN_ANNOTATION, self.chain.as_ref()),
            (BUNDLE_ANNOTATION, self.bundle.as_ref()),
        ]
        .into_iter()
        .filter_map(|(name, value)| Some((name.to_owned(), value?.clone())))
        .collect()
    }
}

/// A public key signatures may be verified with.
#[derive(Debug)]
pub struct TrustedKey {
    /// `sha256:` of the key's DER encoding: how the lock file and messages name it.
    pub id: String,
    /// Where it was read from.
    pub path: PathBuf,
    verifier: PublicKeyVerifier,
    key: CosignVerificationKey,
}

impl TrustedKey {
    /// Read the PEM public key at `path`.
    pub fn read(path: &Path) -> Result<TrustedKey, OciError> {
        let why = |what: String| OciError::local(path, format!("the public key: {what}"));
        let pem = read_key_file(path).map_err(&why)?;
        let der = pem_body(&pem).map_err(&why)?;
        let verifier = PublicKeyVerifier::try_from(&pem).map_err(|error| why(error.to_string()))?;
        let key =
            CosignVerificationKey::try_from_pem(&pem).map_err(|error| why(error.to_string()))?;
        Ok(TrustedKey {
            id: digest_of(&der),
            path: path.to_owned(),
            verifier,
            key,
        })
    }

    /// Whether `signature` (base64) is this key's signature of `message` (a blob, such as an
    /// audit chain's head: see [`SigningKey::sign_blob`]).
    pub fn verifies_blob(&self, message: &[u8], signature: &str) -> bool {
        self.key
            .verify_signature(Signature::Base64Encoded(signature.as_bytes()), message)
            .is_ok()
    }
}

fn read_key_file(path: &Path) -> Result<Vec<u8>, String> {
    read_bounded(path, MAX_KEY_FILE_BYTES)
}

/// The bytes of `path`, if it is a regular file of at most `max` ([`toolcell::hostfs::read_bounded`]).
fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    toolcell::hostfs::read_bounded(path, max).map_err(|error| error.to_string())
}

/// The DER bytes of a PEM document's first block.
fn pem_body(pem: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "not PEM text".to_owned())?;
    let body: String = text
        .lines()
        .skip_while(|line| !line.starts_with("-----BEGIN "))
        .skip(1)
        .take_while(|line| !line.starts_with("-----END "))
        .collect();
    if body.is_empty() {
        return Err("not a PEM key".to_owned());
    }
    base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .map_err(|_| "not a PEM key".to_owned())
}

/// Why a signature requirement was not met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unverified {
    /// The artifact carries no signature at all.
    Unsigned,
    /// It carries some, but none is by one of the signers over this digest.
    NoneValid {
        /// How many were checked.
        checked: usize,
        /// Why the first keyless signature among them did not count, if one was checked.
        keyless: Option<String>,
    },
}

impl std::fmt::Display for Unverified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unverified::Unsigned => f.write_str("it is not signed"),
            Unverified::NoneValid { checked, keyless } => {
                write!(
                    f,
                    "none of its {checked} signature(s) is by a signer the policy names over \
                     its digest"
                )?;
                match keyless {
                    Some(why) => write!(f, " (a keyless one: {why})"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for Unverified {}

/// Whom a signature may be by: keys, and keyless identities checked against a trust root.
#[derive(Debug, Default, Clone, Copy)]
pub struct Signers<'a> {
    /// Public keys.
    pub keys: &'a [&'a TrustedKey],
    /// Keyless identities (they count only with `root`).
    pub identities: &'a [&'a Identity],
    /// The trust root keyless signatures are checked against.
    pub root: Option<&'a TrustRoot>,
}

/// Who, among `allowed`, signed the manifest `digest` with one of `signatures`: key ids
/// (`sha256:…`) and identities (`SUBJECT (issuer ISSUER)`); or why no one did. A signature
/// counts only when its payload names `digest` and it verifies as the module docs say.
pub fn signers(
    digest: &str,
    signatures: &[StoredSignature],
    allowed: Signers<'_>,
) -> Result<Vec<String>, Unverified> {
    if signatures.is_empty() {
        return Err(Unverified::Unsigned);
    }
    let mut found = Vec::new();
    let mut keyless_failure = None;
    for stored in signatures.iter().take(MAX_SIGNATURES) {
        let Some(layer) = layer(stored) else {
            continue;
        };
        if !layer.simple_signing.satisfies_manifest_digest(digest) {
            continue;
        }
        for key in allowed.keys {
            if key.verifier.verify(&layer).unwrap_or(false) && !found.contains(&key.id) {
                found.push(key.id.clone());
            }
        }
        if let (Some(root), Some(_), false) = (
            allowed.root,
            &stored.certificate,
            allowed.identities.is_empty(),
        ) {
            match root.identity_of(stored, &layer.raw_data) {
                Ok(identity) if allowed.identities.contains(&&identity) => {
                    let id = identity.to_string();
                    if !found.contains(&id) {
                        found.push(id);
                    }
                }
                Ok(identity) => {
                    keyless_failure.get_or_insert_with(|| {
                        format!("signed by {identity}, not an identity the policy names")
                    });
                }
                Err(why) => {
                    keyless_failure.get_or_insert(why.to_string());
                }
            }
        }
    }
    if found.is_empty() {
        return Err(Unverified::NoneValid {
            checked: signatures.len().min(MAX_SIGNATURES),
            keyless: keyless_failure,
        });
    }
    Ok(found)
}

/// The signature layer `stored` describes, if its payload is a simple-signing document.
fn layer(stored: &StoredSignature) -> Option<SignatureLayer> {
    let payload = base64::engine::general_purpose::STANDARD
        .decode(&stored.payload)
        .ok()?;
    let simple_signing: SimpleSigning = serde_json::from_slice(&payload).ok()?;
    Some(SignatureLayer {
        simple_signing,
        oci_digest: digest_of(&payload),
        certificate_signature: None,
        bundle: None,
        signature: Some(stored.signature.clone()),
        raw_data: payload,
    })
}

/// What keyless signatures are checked against: Fulcio's certificate authorities and the
/// transparency logs' keys, read from a Sigstore `trusted_root.json` (as `cosign
/// --trusted-root` takes it; `sigstore/root-signing` publishes the public-good one).
pub struct TrustRoot {
    /// Where it was read from.
    pub path: PathBuf,
    /// The CAs' root certificates (the last of each chain), DER, and when the CA was valid.
    roots: Vec<(CertificateDer<'static>, Window)>,
    /// The CAs' other certificates, DER, and when their CA was valid.
    intermediates: Vec<(CertificateDer<'static>, Window)>,
    /// The logs' keys, by log id (hex sha256 of the key's DER), as Rekor bundles name them,
    /// and when each key was in use.
    logs: HashMap<String, (CosignVerificationKey, Window)>,
}

/// When a CA or a log key was in use (`validFor`), in seconds since the epoch: a retired one
/// vouches only for what it did while it served.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    start: Option<u64>,
    end: Option<u64>,
}

impl Window {
    fn parse(valid_for: Option<&ValidFor>) -> Result<Window, String> {
        let seconds = |text: &Option<String>| -> Result<Option<u64>, String> {
            text.as_deref()
                .map(|text| {
                    humantime::parse_rfc3339_weak(text)
                        .ok()
                        .and_then(|time| time.duration_since(std::time::UNIX_EPOCH).ok())
                        .map(|since| since.as_secs())
                        .ok_or_else(|| format!("validFor: {text:?} is not an RFC 3339 time"))
                })
                .transpose()
        };
        Ok(match valid_for {
            Some(valid_for) => Window {
                start: seconds(&valid_for.start)?,
                end: seconds(&valid_for.end)?,
            },
            None => Window::default(),
        })
    }

    fn contains(self, time: u64) -> bool {
        self.start.is_none_or(|start| start <= time) && self.end.is_none_or(|end| time <= end)
    }
}

impl std::fmt::Debug for TrustRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustRoot")
            .field("path", &self.path)
            .field("certificate_authorities", &self.roots.len())
            .field("logs", &self.logs.len())
            .finish()
    }
}

/// The parts of `trusted_root.json` read (the file has more: CT logs, timestamp authorities).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TrustedRootFile {
    #[serde(default)]
    tlogs: Vec<TransparencyLog>,
    #[serde(default)]
    certificate_authorities: Vec<CertificateAuthority>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TransparencyLog {
    public_key: PublicKey,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PublicKey {
    raw_bytes: String,
    valid_for: Option<ValidFor>,
}

#[derive(Deserialize)]
struct ValidFor {
    start: Option<String>,
    end: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CertificateAuthority {
    cert_chain: CertChain,
    valid_for: Option<ValidFor>,
}

#[derive(Deserialize)]
struct CertChain {
    certificates: Vec<RawBytes>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytes {
    raw_bytes: String,
}

/// A Rekor bundle, as cosign writes it into [`BUNDLE_ANNOTATION`].
#[derive(Deserialize)]
#[serde(rename_all = "PascalCase")]
struct RekorBundle {
    signed_entry_timestamp: String,
    payload: RekorPayload,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RekorPayload {
    body: String,
    integrated_time: i64,
    log_index: i64,
    #[serde(rename = "logID")]
    log_id: String,
}

impl TrustRoot {
    /// Read the trust root at `path`.
    pub fn read(path: &Path) -> Result<TrustRoot, OciError> {
        let why = |what: String| OciError::local(path, format!("the trust root: {what}"));
        let bytes = read_bounded(path, MAX_TRUST_ROOT_BYTES).map_err(&why)?;
        let mut root = TrustRoot::parse(&bytes).map_err(&why)?;
        root.path = path.to_owned();
        Ok(root)
    }

    /// Parse a `trusted_root.json`.
    pub fn from_json(bytes: &[u8]) -> Result<TrustRoot, OciError> {
        TrustRoot::parse(bytes).map_err(|why| OciError::Local {
            path: "the trust root".to_owned(),
            why,
        })
    }

    fn parse(bytes: &[u8]) -> Result<TrustRoot, String> {
        let file: TrustedRootFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        let decode = |raw: &RawBytes| {
            base64::engine::general_purpose::STANDARD
                .decode(&raw.raw_bytes)
                .map_err(|_| "a rawBytes field is not base64".to_owned())
        };
        let mut root = TrustRoot {
            path: PathBuf::new(),
            roots: Vec::new(),
            intermediates: Vec::new(),
            logs: HashMap::new(),
        };
        for authority in &file.certificate_authorities {
            let mut chain = authority
                .cert_chain
                .certificates
                .iter()
                .map(decode)
                .collect::<Result<Vec<_>, _>>()?;
            let Some(last) = chain.pop() else {
                continue;
            };
            let window = Window::parse(authority.valid_for.as_ref())?;
            let anchor = CertificateDer::from(last);
            webpki::anchor_from_trusted_cert(&anchor)
                .map_err(|error| format!("a certificate authority's root: {error}"))?;
            root.roots.push((anchor, window));
            root.intermediates.extend(
                chain
                    .into_iter()
                    .map(|der| (CertificateDer::from(der), window)),
            );
        }
        for log in &file.tlogs {
            let window = Window::parse(log.public_key.valid_for.as_ref())?;
            let der = base64::engine::general_purpose::STANDARD
                .decode(&log.public_key.raw_bytes)
                .map_err(|_| "a rawBytes field is not base64".to_owned())?;
            let spki = x509_cert::spki::SubjectPublicKeyInfoOwned::from_der(&der)
                .map_err(|error| format!("a transparency log's key: {error}"))?;
            let key = CosignVerificationKey::try_from(&spki)
                .map_err(|error| format!("a transparency log's key: {error}"))?;
            let id = digest_of(&der);
            let hex = id.trim_start_matches("sha256:").to_owned();
            root.logs.insert(hex, (key, window));
        }
        if root.roots.is_empty() || root.logs.is_empty() {
            return Err(
                "it names no certificate authority or no transparency log: no keyless \
                 signature could verify"
                    .to_owned(),
            );
        }
        Ok(root)
    }

    /// The identity that made the keyless signature `stored` over `payload`, if everything
    /// the module docs list holds; otherwise why not.
    pub fn identity_of(
        &self,
        stored: &StoredSignature,
        payload: &[u8],
    ) -> Result<Identity, String> {
        let pem = stored
            .certificate
            .as_deref()
            .ok_or("it has no certificate")?;
        // One decoding for every check: the chain, the log entry, the key and the identity all
        // see these very bytes (two PEM parsers could each pick another block).
        let der = single_pem_certificate(pem).map_err(|why| format!("its certificate {why}"))?;
        let certificate = x509_cert::Certificate::from_der(&der)
            .map_err(|error| format!("its certificate: {error}"))?;
        let signature = base64::engine::general_purpose::STANDARD
            .decode(&stored.signature)
            .map_err(|_| "its signature is not base64".to_owned())?;

        // The log's promise: signed by a log the root names, about this very signature.
        let bundle: RekorBundle = serde_json::from_str(
            stored
                .bundle
                .as_deref()
                .ok_or("it has no transparency-log bundle")?,
        )
        .map_err(|error| format!("its transparency-log bundle: {error}"))?;
        let (log, log_window) = self
            .logs
            .get(&bundle.payload.log_id.to_lowercase())
            .ok_or("its transparency-log entry is from a log the trust root does not name")?;
        // The payload's canonical JSON (RFC 8785): keys sorted, no spaces; the strings are
        // base64 and hex, so serde_json's escaping is the canonical one.
        let canonical = format!(
            r#"{{"body":{},"integratedTime":{},"logID":{},"logIndex":{}}}"#,
            serde_json::Value::from(bundle.payload.body.as_str()),
            bundle.payload.integrated_time,
            serde_json::Value::from(bundle.payload.log_id.as_str()),
            bundle.payload.log_index,
        );
        log.verify_signature(
            Signature::Base64Encoded(bundle.signed_entry_timestamp.as_bytes()),
            canonical.as_bytes(),
        )
        .map_err(|_| "its transparency-log promise does not verify with the log's key")?;
        check_log_entry(&bundle.payload.body, &signature, &der, payload)?;

        // The certificate: issued by a CA the root names, for code signing, valid when the
        // log recorded the signature.
        let integrated = u64::try_from(bundle.payload.integrated_time)
            .map_err(|_| "its transparency-log time is before 1970")?;
        if !log_window.contains(integrated) {
            return Err(
                "its transparency-log key was not in use when the entry says it was made"
                    .to_owned(),
            );
        }
        let intermediates: Vec<CertificateDer<'static>> = self
            .intermediates
            .iter()
            .filter(|(_, window)| window.contains(integrated))
            .map(|(der, _)| der.clone())
            .chain(
                stored
                    .chain
                    .as_deref()
                    .map(pem_certificates)
                    .unwrap_or_default(),
            )
            .collect();
        let anchors = self
            .roots
            .iter()
            .filter(|(_, window)| window.contains(integrated))
            .filter_map(|(root, _)| webpki::anchor_from_trusted_cert(root).ok())
            .collect::<Vec<_>>();
        let leaf = CertificateDer::from(der.as_slice());
        webpki::EndEntityCert::try_from(&leaf)
            .map_err(|error| format!("its certificate: {error}"))?
            .verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                &anchors,
                &intermediates,
                UnixTime::since_unix_epoch(std::time::Duration::from_secs(integrated)),
                webpki::KeyUsage::required(CODE_SIGNING),
                None,
                None,
            )
            .map_err(|error| {
                format!(
                    "its certificate is not one the trust root's CAs issued for code signing, \
                     valid when the log recorded it ({error})"
                )
            })?;

        // The signature, by the certificate's key.
        CosignVerificationKey::try_from(&certificate.tbs_certificate.subject_public_key_info)
            .map_err(|error| format!("its certificate's key: {error}"))?
            .verify_signature(Signature::Raw(&signature), payload)
            .map_err(|_| "its signature does not verify with its certificate's key")?;

        let subject = match CertificateSubject::from_certificate(&certificate)
            .map_err(|error| format!("its certificate names no subject: {error}"))?
        {
            CertificateSubject::Email(subject) | CertificateSubject::Uri(subject) => subject,
        };
        Ok(Identity {
            issuer: issuer_of(&certificate)?,
            subject,
        })
    }
}

/// Check that the Rekor entry `body` (base64 JSON, a `hashedrekord`) records `signature`, by
/// the certificate `der`, over `payload`: a log promise about another signature is no promise.
fn check_log_entry(body: &str, signature: &[u8], der: &[u8], payload: &[u8]) -> Result<(), String> {
    let not_this = |what: &str| format!("its transparency-log entry records another {what}");
    let body = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| "its transparency-log entry is not base64")?;
    let entry: serde_json::Value =
        serde_json::from_slice(&body).map_err(|_| "its transparency-log entry is not JSON")?;
    if entry["kind"] != "hashedrekord" {
        return Err("its transparency-log entry is not a hashedrekord".to_owned());
    }
    let spec = &entry["spec"];
    let hash = &spec["data"]["hash"];
    let payload_hex = digest_of(payload);
    if hash["algorithm"] != "sha256"
        || hash["value"].as_str().map(str::to_lowercase).as_deref()
            != Some(payload_hex.trim_start_matches("sha256:"))
    {
        return Err(not_this("payload"));
    }
    let decoded = |value: &serde_json::Value| {
        value
            .as_str()
            .and_then(|text| base64::engine::general_purpose::STANDARD.decode(text).ok())
    };
    if decoded(&spec["signature"]["content"]).as_deref() != Some(signature) {
        return Err(not_this("signature"));
    }
    let logged_certificate = decoded(&spec["signature"]["publicKey"]["content"])
        .and_then(|pem| String::from_utf8(pem).ok())
        .and_then(|pem| single_pem_certificate(&pem).ok());
    if logged_certificate.as_deref() != Some(der) {
        return Err(not_this("certificate"));
    }
    Ok(())
}

/// The OIDC issuer Fulcio wrote into `certificate`.
fn issuer_of(certificate: &x509_cert::Certificate) -> Result<String, String> {
    let extensions = certificate
        .tbs_certificate
        .extensions
        .as_deref()
        .unwrap_or_default();
    let find = |oid: &str| {
        extensions
            .iter()
            .find(|extension| extension.extn_id.to_string() == oid)
            .map(|extension| extension.extn_value.as_bytes())
    };
    if let Some(value) = find(ISSUER_V2) {
        return x509_cert::der::asn1::Utf8StringRef::from_der(value)
            .map(|text| text.as_str().to_owned())
            .map_err(|_| "its certificate's issuer extension is not a UTF8String".to_owned());
    }
    if let Some(value) = find(ISSUER_V1) {
        return String::from_utf8(value.to_vec())
            .map_err(|_| "its certificate's issuer extension is not UTF-8".to_owned());
    }
    Err("its certificate names no OIDC issuer".to_owned())
}

/// The DER of the one certificate `pem` holds: exactly one `CERTIFICATE` block and nothing
/// else but surrounding whitespace, or an error.
fn single_pem_certificate(pem: &str) -> Result<Vec<u8>, String> {
    let text = pem.trim();
    let body = text
        .strip_prefix("-----BEGIN CERTIFICATE-----")
        .and_then(|rest| rest.strip_suffix("-----END CERTIFICATE-----"))
        .filter(|body| !body.contains("-----"))
        .ok_or("is not exactly one PEM certificate")?;
    let base64: String = body.split_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(base64)
        .map_err(|_| "is not base64 inside its PEM lines".to_owned())
}

/// The certificates in `pem` (at most [`MAX_CHAIN_CERTIFICATES`]), DER.
fn pem_certificates(pem: &str) -> Vec<CertificateDer<'static>> {
    let mut certificates = Vec::new();
    let mut body = None::<String>;
    for line in pem.lines().map(str::trim) {
        match (&mut body, line) {
            (None, "-----BEGIN CERTIFICATE-----") => body = Some(String::new()),
            (Some(text), "-----END CERTIFICATE-----") => {
                if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(text.as_bytes()) {
                    certificates.push(CertificateDer::from(der));
                }
                body = None;
                if certificates.len() == MAX_CHAIN_CERTIFICATES {
                    break;
                }
            }
            (Some(text), line) => text.push_str(line),
            (None, _) => {}
        }
    }
    certificates
}

/// A private key to sign with.
pub struct SigningKey {
    keys: SigStoreKeyPair,
    scheme: SigningScheme,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("scheme", &self.scheme.to_string())
            .finish_non_exhaustive()
    }
}

impl SigningKey {
    /// Read the private key at `path`: cosign's encrypted PEM (the password from
    /// `$COSIGN_PASSWORD`, empty if unset) or a plain PKCS#8 PEM.
    pub fn read(path: &Path) -> Result<SigningKey, OciError> {
        let why = |what: String| OciError::local(path, format!("the private key: {what}"));
        let pem = read_key_file(path).map_err(&why)?;
        let encrypted = std::str::from_utf8(&pem)
            .map_err(|_| why("not PEM text".to_owned()))?
            .contains("ENCRYPTED");
        let keys = if encrypted {
            let password = std::env::var(PASSWORD_VARIABLE).unwrap_or_default();
            SigStoreKeyPair::from_encrypted_pem(&pem, password.as_bytes())
                .map_err(|error| why(format!("{error} (is ${PASSWORD_VARIABLE} its password?)")))?
        } else {
            SigStoreKeyPair::from_pem(&pem).map_err(|error| why(error.to_string()))?
        };
        let scheme = [
            SigningScheme::ECDSA_P256_SHA256_ASN1,
            SigningScheme::ECDSA_P384_SHA384_ASN1,
            SigningScheme::ED25519,
        ]
        .into_iter()
        .find(|scheme| keys.to_sigstore_signer(scheme).is_ok())
        .ok_or_else(|| why("only ECDSA P-256, P-384 and Ed25519 keys sign".to_owned()))?;
        Ok(SigningKey { keys, scheme })
    }

    /// A fresh ECDSA P-256 key pair (cosign's default): the private key encrypted with
    /// `password` in cosign's format, and the public key, both PEM.
    pub fn generate(password: &[u8]) -> Result<(String, String), OciError> {
        let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
            .create_signer()
            .map_err(key_failed)?;
        let keys = signer.to_sigstore_keypair().map_err(key_failed)?;
        let private = keys
            .private_key_to_encrypted_pem(password)
            .map_err(key_failed)?;
        let public = keys.public_key_to_pem().map_err(key_failed)?;
        Ok((private.to_string(), public))
    }

    /// `sha256:` of the public key's DER encoding (as [`TrustedKey::id`]).
    pub fn id(&self) -> Result<String, OciError> {
        self.keys
            .public_key_to_der()
            .map(|der| digest_of(&der))
            .map_err(key_failed)
    }

    /// This key's signature of `message` (a blob, such as an audit chain's head), base64: what
    /// [`TrustedKey::verifies_blob`] checks with the public key.
    pub fn sign_blob(&self, message: &[u8]) -> Result<String, OciError> {
        let signer = self
            .keys
            .to_sigstore_signer(&self.scheme)
            .map_err(key_failed)?;
        let signature = signer.sign(message).map_err(key_failed)?;
        Ok(base64::engine::general_purpose::STANDARD.encode(signature))
    }

    /// The signature layer for the artifact `repository` (`REGISTRY/REPOSITORY`) at `digest`:
    /// its simple-signing payload and the payload's signature, base64.
    pub fn sign(&self, repository: &str, digest: &str) -> Result<(Vec<u8>, String), OciError> {
        let reference = format!("{repository}@{digest}")
            .parse::<sigstore::registry::OciReference>()
            .map_err(|error| OciError::InvalidReference {
                reference: format!("{repository}@{digest}"),
                why: error.to_string(),
            })?;
        let mut simple_signing = SimpleSigning::new(&reference, digest);
        // As cosign writes it: the repository, without tag or digest.
        repository.clone_into(&mut simple_signing.critical.identity.docker_reference);
        let payload = serde_json::to_vec(&simple_signing).map_err(key_failed)?;
        let signer = self
            .keys
            .to_sigstore_signer(&self.scheme)
            .map_err(key_failed)?;
        let signature = signer.sign(&payload).map_err(key_failed)?;
        Ok((
            payload,
            base64::engine::general_purpose::STANDARD.encode(signature),
        ))
    }
}

/// A signing key that could not be made or used.
fn key_failed(error: impl std::fmt::Display) -> OciError {
    OciError::Local {
        path: "the signing key".to_owned(),
        why: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_pair(dir: &Path, name: &str) -> (SigningKey, TrustedKey) {
        let (private, public) = SigningKey::generate(b"").expect("generate");
        let (private_path, public_path) = (
            dir.join(format!("{name}.key")),
            dir.join(format!("{name}.pub")),
        );
        std::fs::write(&private_path, private).expect("write");
        std::fs::write(&public_path, public).expect("write");
        (
            SigningKey::read(&private_path).expect("private"),
            TrustedKey::read(&public_path).expect("public"),
        )
    }

    fn by<'a>(keys: &'a [&'a TrustedKey]) -> Signers<'a> {
        Signers {
            keys,
            ..Signers::default()
        }
    }

    #[test]
    fn a_signature_counts_only_by_its_key_and_over_its_digest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ours, our_public) = key_pair(dir.path(), "ours");
        let (theirs, their_public) = key_pair(dir.path(), "theirs");
        assert_eq!(ours.id().expect("id"), our_public.id);
        let digest = digest_of(b"manifest");
        let other = digest_of(b"other manifest");
        let stored = |key: &SigningKey, digest: &str| {
            let (payload, signature) = key.sign("127.0.0.1:5000/echo", digest).expect("sign");
            StoredSignature {
                payload: base64::engine::general_purpose::STANDARD.encode(payload),
                signature,
                ..StoredSignature::default()
            }
        };
        assert_eq!(
            signers(&digest, &[stored(&ours, &digest)], by(&[&our_public])),
            Ok(vec![our_public.id.clone()])
        );
        assert_eq!(
            signers(&digest, &[], by(&[&our_public])),
            Err(Unverified::Unsigned)
        );
        assert_eq!(
            signers(&digest, &[stored(&theirs, &digest)], by(&[&our_public])),
            Err(Unverified::NoneValid {
                checked: 1,
                keyless: None
            })
        );
        assert_eq!(
            signers(&digest, &[stored(&ours, &other)], by(&[&our_public])),
            Err(Unverified::NoneValid {
                checked: 1,
                keyless: None
            }),
            "a signature over another digest"
        );
        let mut forged = stored(&ours, &digest);
        forged.payload = stored(&ours, &other).payload;
        assert!(signers(&digest, &[forged], by(&[&our_public])).is_err());
        assert_eq!(
            signers(
                &digest,
                &[stored(&theirs, &digest), stored(&ours, &digest)],
                by(&[&our_public, &their_public])
            )
            .map(|ids| ids.len()),
            Ok(2)
        );
    }

    #[test]
    fn a_wrong_password_or_a_bad_key_file_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (private, _) = SigningKey::generate(b"right").expect("generate");
        let path = dir.path().join("k.key");
        std::fs::write(&path, private).expect("write");
        // The test does not set COSIGN_PASSWORD: the empty password is tried, and fails.
        if std::env::var_os(PASSWORD_VARIABLE).is_none() {
            let refused = SigningKey::read(&path).expect_err("wrong password");
            assert!(refused.to_string().contains(PASSWORD_VARIABLE), "{refused}");
        }
        std::fs::write(dir.path().join("bad.pub"), "not a key").expect("write");
        assert!(TrustedKey::read(&dir.path().join("bad.pub")).is_err());
    }
}
