//! Signatures of plugins in registries, in cosign's keyed format, so a
//! plugin signed with `cosign sign --key` verifies here and one signed by
//! `host publish --sign` verifies with `cosign verify --key`:
//!
//! - beside manifest `sha256:<hex>`, the tag `sha256-<hex>.sig` holds an
//!   image whose layers (`application/vnd.dev.cosign.simplesigning.v1+json`)
//!   are each a payload naming that manifest digest;
//! - each layer's annotation `dev.cosignproject.cosign/signature` is the
//!   base64 of an ECDSA P-256 / SHA-256 signature (DER) of the payload;
//! - keys are PEM: public keys as `cosign.pub` or `openssl pkey -pubout`
//!   write them (SPKI), private keys for signing as PKCS#8
//!   (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256`).
//!
//! The registry and the payload are hostile input: the payload must name
//! the manifest being installed, and it is checked against the signature
//! before it is read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::Reference;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePublicKey};

const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// Far above a simple-signing payload (a few hundred bytes).
const MAX_PAYLOAD_BYTES: i64 = 64 * 1024;

/// A public key the user trusts, named for messages and the lock file.
pub struct TrustedKey {
    pub name: String,
    key: VerifyingKey,
}

impl TrustedKey {
    pub fn read(path: &Path) -> Result<TrustedKey> {
        let pem = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the trusted key {}", path.display()))?;
        let key = VerifyingKey::from_public_key_pem(&pem).with_context(|| {
            format!(
                "{} is not an ECDSA P-256 public key in PEM (as cosign.pub or `openssl pkey -pubout` write it)",
                path.display()
            )
        })?;
        let der = key.to_public_key_der().expect("a key encodes");
        let fingerprint = crate::catalog::sha256_hex(der.as_bytes());
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(TrustedKey {
            name: format!("{stem} (sha256:{})", &fingerprint[..16]),
            key,
        })
    }
}

/// The tag cosign keeps a manifest's signatures under.
fn signature_tag(reference: &Reference, manifest: &str) -> Result<Reference> {
    let hex = manifest
        .strip_prefix("sha256:")
        .context("the manifest's digest is not sha256")?;
    Ok(Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        format!("sha256-{hex}.sig"),
    ))
}

fn payload(reference: &Reference, manifest: &str) -> Vec<u8> {
    serde_json::json!({
        "critical": {
            "identity": {"docker-reference": format!("{}/{}", reference.registry(), reference.repository())},
            "image": {"docker-manifest-digest": manifest},
            "type": "cosign container image signature",
        },
        "optional": null,
    })
    .to_string()
    .into_bytes()
}

/// Which of `keys` signed `manifest` of `reference`: `None` when the
/// registry holds no signature for it; an error when it holds some and
/// none verifies with a trusted key.
pub async fn signer(
    reference: &Reference,
    manifest: &str,
    keys: &[TrustedKey],
) -> Result<Option<String>> {
    let tag = signature_tag(reference, manifest)?;
    let tag_name = tag.tag().expect("a signature tag").to_string();
    let repository = super::fetch::Repository::new(&tag)?;
    let Some((signatures, _)) = repository
        .manifest(&tag_name)
        .await
        .with_context(|| format!("cannot read the signatures at {tag}"))?
    else {
        return Ok(None);
    };
    let mut seen = 0;
    for layer in &signatures.layers {
        if layer.media_type != PAYLOAD_MEDIA_TYPE || !(0..=MAX_PAYLOAD_BYTES).contains(&layer.size)
        {
            continue;
        }
        let Some(signature) = layer
            .annotations
            .get(SIGNATURE_ANNOTATION)
            .and_then(|s| BASE64.decode(s).ok())
            .and_then(|der| Signature::from_der(&der).ok())
        else {
            continue;
        };
        seen += 1;
        let bytes = repository
            .blob(layer, MAX_PAYLOAD_BYTES as u64)
            .await
            .with_context(|| format!("cannot read a signature's payload at {tag}"))?;
        let Some(key) = keys
            .iter()
            .find(|k| k.key.verify(&bytes, &signature).is_ok())
        else {
            continue;
        };
        // Verified: now what it says can be read.
        let named = serde_json::from_slice::<serde_json::Value>(&bytes)
            .ok()
            .and_then(|p| {
                p["critical"]["image"]["docker-manifest-digest"]
                    .as_str()
                    .map(String::from)
            });
        if named.as_deref() == Some(manifest) {
            return Ok(Some(key.name.clone()));
        }
    }
    if seen == 0 {
        return Ok(None);
    }
    bail!(
        "{reference} ({manifest}) carries {seen} signature(s), none by a key you trust ({}): \
         add the publisher's public key to `[trust] keys` if you trust it",
        keys.iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Sign `manifest` of `reference` with the PKCS#8 PEM key at `key_file`
/// and push the signature where cosign keeps it.
pub async fn sign(
    client: &oci_client::Client,
    reference: &Reference,
    manifest: &str,
    key_file: &Path,
) -> Result<()> {
    let pem = std::fs::read_to_string(key_file)
        .with_context(|| format!("cannot read the signing key {}", key_file.display()))?;
    let key = SigningKey::from_pkcs8_pem(&pem).with_context(|| {
        format!(
            "{} is not an unencrypted ECDSA P-256 private key in PKCS#8 PEM \
             (`openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem`)",
            key_file.display()
        )
    })?;
    let payload = payload(reference, manifest);
    let signature: Signature = key.sign(&payload);
    let annotations = BTreeMap::from([(
        SIGNATURE_ANNOTATION.to_string(),
        BASE64.encode(signature.to_der().as_bytes()),
    )]);
    let layer = ImageLayer::new(payload, PAYLOAD_MEDIA_TYPE.to_string(), Some(annotations));
    let config = Config::oci_v1(b"{}".to_vec(), None);
    let image = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    let tag = signature_tag(reference, manifest)?;
    client
        .push(
            &tag,
            &[layer],
            config,
            &RegistryAuth::Anonymous,
            Some(image),
        )
        .await
        .with_context(|| format!("cannot push the signature to {tag}"))?;
    Ok(())
}

/// The keys `paths` name, each read and checked.
pub fn trusted(paths: &[PathBuf]) -> Result<Vec<TrustedKey>> {
    paths.iter().map(|p| TrustedKey::read(p)).collect()
}
