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
//! Keyless signatures (a Fulcio certificate and a Rekor entry) are not verified yet: a policy
//! can only name keys.

use super::digest_of;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sigstore::cosign::verification_constraint::{PublicKeyVerifier, VerificationConstraint};
use sigstore::cosign::{SignatureLayer, simple_signing::SimpleSigning};
use sigstore::crypto::SigningScheme;
use sigstore::crypto::signing_key::SigStoreKeyPair;
use std::path::{Path, PathBuf};

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

/// The tag that holds the signatures of the manifest `digest`.
pub fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replacen(':', "-", 1))
}

/// One signature as the store keeps it: the payload that was signed, and the signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSignature {
    /// The simple-signing payload, base64.
    pub payload: String,
    /// The signature of the payload, base64 (as the annotation holds it).
    pub signature: String,
}

/// A public key signatures may be verified with.
#[derive(Debug)]
pub struct TrustedKey {
    /// `sha256:` of the key's DER encoding: how the lock file and messages name it.
    pub id: String,
    /// Where it was read from.
    pub path: PathBuf,
    verifier: PublicKeyVerifier,
}

impl TrustedKey {
    /// Read the PEM public key at `path`.
    pub fn read(path: &Path) -> Result<TrustedKey, String> {
        let why = |what: String| format!("the public key {}: {what}", path.display());
        let pem = read_key_file(path).map_err(&why)?;
        let der = pem_body(&pem).map_err(&why)?;
        let verifier = PublicKeyVerifier::try_from(&pem).map_err(|error| why(error.to_string()))?;
        Ok(TrustedKey {
            id: digest_of(&der),
            path: path.to_owned(),
            verifier,
        })
    }
}

fn read_key_file(path: &Path) -> Result<Vec<u8>, String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).map_err(|error| error.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| error.to_string())?;
    if bytes.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(format!("longer than {MAX_KEY_FILE_BYTES} bytes"));
    }
    Ok(bytes)
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
    /// It carries some, but none is by one of the keys over this digest.
    NoneValid {
        /// How many were checked.
        checked: usize,
    },
}

impl std::fmt::Display for Unverified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unverified::Unsigned => f.write_str("it is not signed"),
            Unverified::NoneValid { checked } => write!(
                f,
                "none of its {checked} signature(s) is by a key the policy names over its digest"
            ),
        }
    }
}

/// The ids of the `keys` that signed the manifest `digest`, among `signatures`; or why none did.
/// A signature counts only when its payload names `digest` and it verifies with the key.
pub fn signers(
    digest: &str,
    signatures: &[StoredSignature],
    keys: &[&TrustedKey],
) -> Result<Vec<String>, Unverified> {
    if signatures.is_empty() {
        return Err(Unverified::Unsigned);
    }
    let mut found = Vec::new();
    for stored in signatures.iter().take(MAX_SIGNATURES) {
        let Some(layer) = layer(stored) else {
            continue;
        };
        if !layer.simple_signing.satisfies_manifest_digest(digest) {
            continue;
        }
        for key in keys {
            if key.verifier.verify(&layer).unwrap_or(false) && !found.contains(&key.id) {
                found.push(key.id.clone());
            }
        }
    }
    if found.is_empty() {
        return Err(Unverified::NoneValid {
            checked: signatures.len().min(MAX_SIGNATURES),
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
    pub fn read(path: &Path) -> Result<SigningKey, String> {
        let why = |what: String| format!("the private key {}: {what}", path.display());
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
    pub fn generate(password: &[u8]) -> Result<(String, String), String> {
        let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
            .create_signer()
            .map_err(|error| error.to_string())?;
        let keys = signer
            .to_sigstore_keypair()
            .map_err(|error| error.to_string())?;
        let private = keys
            .private_key_to_encrypted_pem(password)
            .map_err(|error| error.to_string())?;
        let public = keys
            .public_key_to_pem()
            .map_err(|error| error.to_string())?;
        Ok((private.to_string(), public))
    }

    /// `sha256:` of the public key's DER encoding (as [`TrustedKey::id`]).
    pub fn id(&self) -> Result<String, String> {
        self.keys
            .public_key_to_der()
            .map(|der| digest_of(&der))
            .map_err(|error| error.to_string())
    }

    /// The signature layer for the artifact `repository` (`REGISTRY/REPOSITORY`) at `digest`:
    /// its simple-signing payload and the payload's signature, base64.
    pub fn sign(&self, repository: &str, digest: &str) -> Result<(Vec<u8>, String), String> {
        let reference: sigstore::registry::OciReference = format!("{repository}@{digest}")
            .parse()
            .map_err(|error| format!("{repository}@{digest}: {error}"))?;
        let mut simple_signing = SimpleSigning::new(&reference, digest);
        // As cosign writes it: the repository, without tag or digest.
        repository.clone_into(&mut simple_signing.critical.identity.docker_reference);
        let payload = serde_json::to_vec(&simple_signing).map_err(|error| error.to_string())?;
        let signer = self
            .keys
            .to_sigstore_signer(&self.scheme)
            .map_err(|error| error.to_string())?;
        let signature = signer.sign(&payload).map_err(|error| error.to_string())?;
        Ok((
            payload,
            base64::engine::general_purpose::STANDARD.encode(signature),
        ))
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
            }
        };
        assert_eq!(
            signers(&digest, &[stored(&ours, &digest)], &[&our_public]),
            Ok(vec![our_public.id.clone()])
        );
        assert_eq!(
            signers(&digest, &[], &[&our_public]),
            Err(Unverified::Unsigned)
        );
        assert_eq!(
            signers(&digest, &[stored(&theirs, &digest)], &[&our_public]),
            Err(Unverified::NoneValid { checked: 1 })
        );
        assert_eq!(
            signers(&digest, &[stored(&ours, &other)], &[&our_public]),
            Err(Unverified::NoneValid { checked: 1 }),
            "a signature over another digest"
        );
        let mut forged = stored(&ours, &digest);
        forged.payload = stored(&ours, &other).payload;
        assert!(signers(&digest, &[forged], &[&our_public]).is_err());
        assert_eq!(
            signers(
                &digest,
                &[stored(&theirs, &digest), stored(&ours, &digest)],
                &[&our_public, &their_public]
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
            assert!(refused.contains(PASSWORD_VARIABLE), "{refused}");
        }
        std::fs::write(dir.path().join("bad.pub"), "not a key").expect("write");
        assert!(TrustedKey::read(&dir.path().join("bad.pub")).is_err());
    }
}
