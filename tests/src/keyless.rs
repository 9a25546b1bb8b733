//! Keyless signatures, checked offline against a trust root: a fake Sigstore (a Fulcio root and
//! intermediate CA, a Rekor log key) made here issues certificates and log promises, and each
//! way a keyless signature can be wrong is made and seen to be refused, with the reason.
//!
//! The fake is built with rcgen and ring; nothing is fetched. The same fixture signs the tool
//! the registry test in `oci.rs` pulls.

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, ExtendedKeyUsagePurpose, IsCa, Issuer,
    KeyPair, KeyUsagePurpose, PublicKeyData as _, SanType, SigningKey as _,
};
use sha2::Digest as _;
use toolcell::policy::Identity;
use toolcell_oci::signing::{Signers, StoredSignature, TrustRoot, Unverified, signers};

/// The OIDC issuer the fake Fulcio writes into its certificates.
pub(crate) const ISSUER: &str = "https://issuer.example";
/// The subject of the certificates the fake issues unless told otherwise.
pub(crate) const SUBJECT: &str = "alice@example.org";

/// When the fake log says it recorded a signature: 2026-11-01T12:00:00Z, inside the
/// certificate's day of validity.
const LOGGED_AT: i64 = 1_793_534_400;
/// A time after that day: the certificate had expired.
const AFTER_EXPIRY: i64 = 1_793_664_000;

fn base64(bytes: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// A certificate authority: its certificate (DER) and what signs with it.
struct Authority {
    der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    /// A root CA, or with `parent` an intermediate it issues.
    fn new(name: &str, parent: Option<&Authority>) -> Authority {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        if parent.is_some() {
            // As Fulcio's intermediate: the path is checked for code signing all the way up.
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        }
        let certificate = match parent {
            Some(parent) => params.signed_by(&key, &parent.issuer),
            None => params.self_signed(&key),
        }
        .expect("CA certificate");
        Authority {
            der: certificate.der().to_vec(),
            issuer: Issuer::new(params, key),
        }
    }
}

/// A fake Sigstore: a Fulcio (root and intermediate) and a Rekor log key.
pub(crate) struct Sigstore {
    root: Authority,
    intermediate: Authority,
    log: KeyPair,
}

/// How a keyless signature is made (each field a way to get it wrong).
pub(crate) struct Signing<'a> {
    /// The manifest digest the payload names.
    pub digest: &'a str,
    /// The certificate's subject (an email address).
    pub subject: &'a str,
    /// The issuer the certificate names.
    pub issuer: &'a str,
    /// Mark the certificate for code signing (Fulcio does).
    pub code_signing: bool,
    /// When the log says it recorded the signature.
    pub logged_at: i64,
    /// Write the issuer as Fulcio does today (extension v2, a DER UTF8String) rather than v1.
    pub issuer_v2: bool,
}

impl Default for Signing<'_> {
    fn default() -> Self {
        Signing {
            digest: "",
            subject: SUBJECT,
            issuer: ISSUER,
            code_signing: true,
            logged_at: LOGGED_AT,
            issuer_v2: false,
        }
    }
}

/// A signature's parts before they are stored, so a test can swap one.
pub(crate) struct Parts {
    pub payload: Vec<u8>,
    pub signature: Vec<u8>,
    pub certificate: String,
    pub body: String,
    pub logged_at: i64,
}

impl Sigstore {
    pub(crate) fn new() -> Sigstore {
        let root = Authority::new("fake fulcio root", None);
        let intermediate = Authority::new("fake fulcio intermediate", Some(&root));
        Sigstore {
            root,
            intermediate,
            log: KeyPair::generate().expect("log key"),
        }
    }

    /// The trust root file's text (Sigstore's `trusted_root.json` layout).
    pub(crate) fn trusted_root(&self) -> String {
        let log_key = self.log.subject_public_key_info();
        serde_json::json!({
            "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
            "tlogs": [{
                "baseUrl": "https://rekor.example",
                "hashAlgorithm": "SHA2_256",
                "publicKey": {
                    "rawBytes": base64(&log_key),
                    "keyDetails": "PKIX_ECDSA_P256_SHA_256",
                    "validFor": { "start": "2026-01-01T00:00:00Z" }
                },
                "logId": { "keyId": base64(sha2::Sha256::digest(&log_key)) }
            }],
            "certificateAuthorities": [{
                "subject": { "organization": "fake", "commonName": "fulcio" },
                "uri": "https://fulcio.example",
                "certChain": { "certificates": [
                    { "rawBytes": base64(&self.intermediate.der) },
                    { "rawBytes": base64(&self.root.der) }
                ] },
                "validFor": { "start": "2026-01-01T00:00:00Z" }
            }],
            "ctlogs": [],
            "timestampAuthorities": []
        })
        .to_string()
    }

    pub(crate) fn root(&self) -> TrustRoot {
        TrustRoot::from_json(self.trusted_root().as_bytes()).expect("the trust root parses")
    }

    /// A cosign payload over `digest`, signed by a fresh key Fulcio certified as `how` says,
    /// with the log's entry for it.
    pub(crate) fn parts(&self, how: &Signing<'_>) -> Parts {
        let payload = serde_json::json!({
            "critical": {
                "identity": { "docker-reference": "127.0.0.1/tools/echo" },
                "image": { "docker-manifest-digest": how.digest },
                "type": "cosign container image signature"
            },
            "optional": null
        })
        .to_string()
        .into_bytes();
        let key = KeyPair::generate().expect("signing key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        let name = how.subject.try_into().expect("an IA5 string");
        params.subject_alt_names = vec![if how.subject.starts_with("https://") {
            SanType::URI(name)
        } else {
            SanType::Rfc822Name(name)
        }];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if how.code_signing {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::CodeSigning];
        }
        params.not_before = rcgen::date_time_ymd(2026, 11, 1);
        params.not_after = rcgen::date_time_ymd(2026, 11, 2);
        params.custom_extensions = vec![if how.issuer_v2 {
            // A DER UTF8String (short: the length fits in one byte).
            let mut value = vec![0x0c, u8::try_from(how.issuer.len()).expect("short")];
            value.extend_from_slice(how.issuer.as_bytes());
            CustomExtension::from_oid_content(&[1, 3, 6, 1, 4, 1, 57264, 1, 8], value)
        } else {
            CustomExtension::from_oid_content(
                &[1, 3, 6, 1, 4, 1, 57264, 1, 1],
                how.issuer.as_bytes().to_vec(),
            )
        }];
        let certificate = pem(params
            .signed_by(&key, &self.intermediate.issuer)
            .expect("leaf certificate")
            .der());
        let signature = key.sign(&payload).expect("sign");
        let body = entry_body(&payload, &signature, &certificate);
        Parts {
            payload,
            signature,
            certificate,
            body,
            logged_at: how.logged_at,
        }
    }

    /// `parts` as the store keeps them, the log's promise signed by `log`.
    pub(crate) fn store_with(&self, parts: &Parts, log: &KeyPair) -> StoredSignature {
        let log_id = sha256_hex(&log.subject_public_key_info());
        let canonical = format!(
            r#"{{"body":"{}","integratedTime":{},"logID":"{log_id}","logIndex":7}}"#,
            parts.body, parts.logged_at
        );
        let promise = log.sign(canonical.as_bytes()).expect("log signs");
        let bundle = serde_json::json!({
            "SignedEntryTimestamp": base64(promise),
            "Payload": {
                "body": parts.body,
                "integratedTime": parts.logged_at,
                "logIndex": 7,
                "logID": log_id
            }
        });
        StoredSignature {
            payload: base64(&parts.payload),
            signature: base64(&parts.signature),
            certificate: Some(parts.certificate.clone()),
            chain: Some(pem(&self.intermediate.der) + &pem(&self.root.der)),
            bundle: Some(bundle.to_string()),
        }
    }

    /// A keyless signature made as `how` says, logged by this Sigstore's log.
    pub(crate) fn sign(&self, how: &Signing<'_>) -> StoredSignature {
        self.store_with(&self.parts(how), &self.log)
    }
}

/// The log entry (a `hashedrekord`, base64 JSON) for `signature` over `payload`.
fn entry_body(payload: &[u8], signature: &[u8], certificate: &str) -> String {
    base64(
        serde_json::json!({
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": { "hash": { "algorithm": "sha256", "value": sha256_hex(payload) } },
                "signature": {
                    "content": base64(signature),
                    "publicKey": { "content": base64(certificate) }
                }
            }
        })
        .to_string(),
    )
}

fn pem(der: &[u8]) -> String {
    let body = base64(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|chunk| std::str::from_utf8(chunk).expect("base64 is ASCII"))
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        lines.join("\n")
    )
}

fn identity(issuer: &str, subject: &str) -> Identity {
    Identity {
        issuer: issuer.to_owned(),
        subject: subject.to_owned(),
    }
}

/// Who among `allowed` signed `digest` with `signature`, against `root`.
fn check(
    root: &TrustRoot,
    digest: &str,
    signature: StoredSignature,
    allowed: &[Identity],
) -> Result<Vec<String>, Unverified> {
    let identities: Vec<&Identity> = allowed.iter().collect();
    signers(
        digest,
        &[signature],
        Signers {
            keys: &[],
            identities: &identities,
            root: Some(root),
        },
    )
}

/// The reason a keyless signature was refused (panics if it was not).
fn refused(result: Result<Vec<String>, Unverified>) -> String {
    match result {
        Err(Unverified::NoneValid {
            keyless: Some(why), ..
        }) => why,
        other => panic!("expected a keyless refusal, got {other:?}"),
    }
}

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const OTHER: &str = "sha256:fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210";

#[test]
fn a_keyless_signature_counts_for_exactly_the_identity_its_certificate_names() {
    let sigstore = Sigstore::new();
    let root = sigstore.root();
    let alice = identity(ISSUER, SUBJECT);
    let signed = || {
        sigstore.sign(&Signing {
            digest: DIGEST,
            ..Signing::default()
        })
    };
    assert_eq!(
        check(&root, DIGEST, signed(), std::slice::from_ref(&alice)),
        Ok(vec![format!("{SUBJECT} (issuer {ISSUER})")])
    );
    // Another subject, or the same subject from another issuer: not who the policy named.
    for other in [
        identity(ISSUER, "mallory@example.org"),
        identity("https://other-issuer.example", SUBJECT),
    ] {
        let why = refused(check(&root, DIGEST, signed(), &[other]));
        assert!(
            why.contains(&format!("signed by {SUBJECT} (issuer {ISSUER})")),
            "{why}"
        );
    }
    // A subject that only starts like the named one is another subject.
    let prefixed = sigstore.sign(&Signing {
        digest: DIGEST,
        subject: "alice@example.org.evil.example",
        ..Signing::default()
    });
    refused(check(&root, DIGEST, prefixed, std::slice::from_ref(&alice)));
    // A CI workflow's identity: a URI subject, the issuer in Fulcio's current extension.
    let workflow = "https://github.com/acme/echo/.github/workflows/release.yml@refs/heads/main";
    let from_ci = sigstore.sign(&Signing {
        digest: DIGEST,
        subject: workflow,
        issuer_v2: true,
        ..Signing::default()
    });
    assert_eq!(
        check(&root, DIGEST, from_ci, &[identity(ISSUER, workflow)]),
        Ok(vec![format!("{workflow} (issuer {ISSUER})")])
    );
    // A signature over another digest is not looked at.
    assert_eq!(
        check(&root, OTHER, signed(), std::slice::from_ref(&alice)),
        Err(Unverified::NoneValid {
            checked: 1,
            keyless: None
        })
    );
}

#[test]
fn a_keyless_signature_is_refused_unless_a_trusted_ca_and_a_trusted_log_vouch_for_it() {
    let sigstore = Sigstore::new();
    let root = sigstore.root();
    let alice = [identity(ISSUER, SUBJECT)];
    let how = Signing {
        digest: DIGEST,
        ..Signing::default()
    };

    // A certificate from another Fulcio (same subject, same issuer, a valid log promise by
    // the trusted log): refused, the CA is not in the trust root.
    let impostor = Sigstore {
        log: KeyPair::generate().expect("unused"),
        ..Sigstore::new()
    };
    let forged = sigstore.store_with(&impostor.parts(&how), &sigstore.log);
    let why = refused(check(&root, DIGEST, forged, &alice));
    assert!(why.contains("not one the trust root's CAs issued"), "{why}");

    // A promise by a log the trust root does not name.
    let unlogged = sigstore.store_with(&sigstore.parts(&how), &impostor.log);
    let why = refused(check(&root, DIGEST, unlogged, &alice));
    assert!(why.contains("a log the trust root does not name"), "{why}");

    // A promise whose time was changed after the log signed it.
    let mut moved = sigstore.sign(&how);
    moved.bundle = moved
        .bundle
        .map(|bundle| bundle.replace(&LOGGED_AT.to_string(), &(LOGGED_AT + 1).to_string()));
    let why = refused(check(&root, DIGEST, moved, &alice));
    assert!(why.contains("does not verify with the log's key"), "{why}");

    // A true promise about another signature (by the same certificate) over this payload.
    let parts = sigstore.parts(&how);
    let mut other = sigstore.store_with(&parts, &sigstore.log);
    let second = sigstore.store_with(
        &Parts {
            payload: parts.payload.clone(),
            signature: parts.signature.clone(),
            certificate: parts.certificate.clone(),
            body: entry_body(b"something else", &parts.signature, &parts.certificate),
            logged_at: LOGGED_AT,
        },
        &sigstore.log,
    );
    other.bundle = second.bundle;
    let why = refused(check(&root, DIGEST, other, &alice));
    assert!(why.contains("records another payload"), "{why}");

    // A signature by another key than the certificate's, logged as if it were right.
    let mut parts = sigstore.parts(&how);
    parts.signature = KeyPair::generate()
        .expect("key")
        .sign(&parts.payload)
        .expect("sign");
    parts.body = entry_body(&parts.payload, &parts.signature, &parts.certificate);
    let why = refused(check(
        &root,
        DIGEST,
        sigstore.store_with(&parts, &sigstore.log),
        &alice,
    ));
    assert!(
        why.contains("does not verify with its certificate's key"),
        "{why}"
    );

    // Logged after the certificate expired.
    let late = sigstore.sign(&Signing {
        logged_at: AFTER_EXPIRY,
        ..how
    });
    let why = refused(check(&root, DIGEST, late, &alice));
    assert!(why.contains("valid when the log recorded it"), "{why}");

    // A certificate not for code signing.
    let not_code = sigstore.sign(&Signing {
        digest: DIGEST,
        code_signing: false,
        ..Signing::default()
    });
    let why = refused(check(&root, DIGEST, not_code, &alice));
    assert!(why.contains("for code signing"), "{why}");

    // A genuine certificate, log promise and signature, with a forged certificate (another
    // identity) in the same annotation: the certificate is one PEM block or nothing, so no
    // check can read one block while another reads the other.
    let genuine = sigstore.sign(&how);
    let forged_identity = sigstore
        .sign(&Signing {
            digest: DIGEST,
            subject: "mallory@example.org",
            ..Signing::default()
        })
        .certificate
        .expect("a certificate");
    let original = genuine.certificate.clone().expect("a certificate");
    for smuggled in [
        format!(" {original}{forged_identity}"),
        format!("{forged_identity}{original}"),
        format!("junk\n{original}"),
    ] {
        let mut two = genuine.clone();
        two.certificate = Some(smuggled);
        let why = refused(check(&root, DIGEST, two, &alice));
        assert!(why.contains("not exactly one PEM certificate"), "{why}");
    }

    // A log key or a CA the trust root says was retired before the entry's time.
    for (path, field) in [("tlogs", "publicKey"), ("certificateAuthorities", "")] {
        let mut json: serde_json::Value =
            serde_json::from_str(&sigstore.trusted_root()).expect("json");
        let entry = &mut json[path][0];
        let valid_for = if field.is_empty() {
            &mut entry["validFor"]
        } else {
            &mut entry[field]["validFor"]
        };
        valid_for["end"] = serde_json::json!("2026-10-01T00:00:00Z");
        let retired = TrustRoot::from_json(json.to_string().as_bytes()).expect("parses");
        let why = refused(check(&retired, DIGEST, sigstore.sign(&how), &alice));
        assert!(
            why.contains("not in use") || why.contains("not one the trust root's CAs issued"),
            "{path}: {why}"
        );
    }

    // No log promise at all.
    let mut bare = sigstore.sign(&Signing {
        digest: DIGEST,
        ..Signing::default()
    });
    bare.bundle = None;
    let why = refused(check(&root, DIGEST, bare, &alice));
    assert!(why.contains("no transparency-log bundle"), "{why}");
}

#[test]
fn a_trust_root_that_could_verify_nothing_is_refused() {
    let sigstore = Sigstore::new();
    assert!(TrustRoot::from_json(b"not json").is_err());
    let mut json: serde_json::Value = serde_json::from_str(&sigstore.trusted_root()).expect("json");
    json["tlogs"] = serde_json::json!([]);
    let why = TrustRoot::from_json(json.to_string().as_bytes()).expect_err("no log");
    assert!(why.to_string().contains("no transparency log"), "{why}");
    // A policy naming a keyless signer without a trust root is refused where it is read.
    let why = toolcell::Policy::from_toml(
        "[tools.echo]\nsigned_by = [{ issuer = \"https://issuer.example\", subject = \"a@b.c\" }]\n",
    )
    .expect_err("no trust root");
    assert!(why.to_string().contains("trust_root"), "{why}");
    let why = toolcell::Policy::from_toml(
        "[registry]\ntrust_root = \"r.json\"\nsigned_by = [{ issuer = \"\", subject = \"\" }]\n",
    )
    .expect_err("an empty identity");
    assert!(why.to_string().contains("non-empty"), "{why}");
}
