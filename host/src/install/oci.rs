//! Components in OCI registries, in the layout wasm tooling uses (wkg,
//! wash, wassette, oras): an image manifest whose config is
//! `application/vnd.wasm.config.v0+json` and whose one layer is the
//! component, `application/wasm`. The registry API is `oci-client`'s.
//!
//! A registry on a loopback address is spoken to over plain HTTP, as
//! docker and oras do; any other only over TLS.

use anyhow::{Context, Result, bail};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

/// A component pulled from a registry.
pub struct Pulled {
    pub bytes: Vec<u8>,
    /// `sha256:…` of the manifest it came in.
    pub manifest: String,
}

/// `registry/repository:tag` or `…@sha256:…`, as after `oci://`.
pub fn reference(text: &str) -> Result<Reference> {
    text.parse().with_context(|| {
        format!("`oci://{text}` is not a registry reference: write oci://registry/repository:tag or oci://registry/repository@sha256:<digest>")
    })
}

pub fn client(reference: &Reference) -> Client {
    super::use_ring();
    let registry = reference.resolve_registry().to_string();
    let protocol = if super::fetch::is_loopback(&registry) {
        ClientProtocol::HttpsExcept(vec![registry])
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig {
        protocol,
        ..Default::default()
    })
}

/// The component `reference` names: its manifest, then its one wasm layer
/// (at most `max_bytes`, its digest checked), each bounded as it streams.
pub async fn pull(reference: &Reference, max_bytes: u64) -> Result<Pulled> {
    let repository = super::fetch::Repository::new(reference)?;
    let named = reference
        .digest()
        .or(reference.tag())
        .unwrap_or("latest")
        .to_string();
    let Some((manifest, digest)) = repository.manifest(&named).await? else {
        bail!("{reference} is not in its registry: check the repository and tag");
    };
    if let Some(wanted) = reference.digest()
        && wanted != digest
    {
        bail!("the registry answered {reference} with manifest {digest}: not the one named");
    }
    let layers: Vec<_> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == LAYER_MEDIA_TYPE)
        .collect();
    let [layer] = layers[..] else {
        bail!(
            "{reference} is not a wasm component artifact: it has {} `{LAYER_MEDIA_TYPE}` layers, one is needed \
             (publish one with `host publish FILE oci://…`, wkg or oras)",
            layers.len()
        );
    };
    let bytes = repository
        .blob(layer, max_bytes)
        .await
        .with_context(|| format!("cannot fetch the component of {reference}"))?;
    Ok(Pulled {
        bytes,
        manifest: digest,
    })
}

/// Push `bytes` as a component artifact to `reference`; the manifest's
/// digest, computed here from the bytes pushed (never taken from the
/// registry's answer: a registry in the middle could name another
/// artifact, and a signature would then be made for that one), once the
/// registry has shown it holds exactly those bytes under that digest.
pub async fn push(reference: &Reference, bytes: Vec<u8>) -> Result<String> {
    let client = client(reference);
    let registry = reference.resolve_registry();
    let (auth, hint) = match super::auth::lookup(registry).await? {
        Some((login, at)) => (
            RegistryAuth::Basic(login.username, login.password),
            format!("with the login found in {at}"),
        ),
        None => (
            RegistryAuth::Anonymous,
            format!("without a login; if it needs one, run `host login {registry}`"),
        ),
    };
    client
        .store_auth_if_needed(reference.resolve_registry(), &auth)
        .await;
    let layer = ImageLayer::new(bytes, LAYER_MEDIA_TYPE.to_string(), None);
    // The wasm OCI config: what the artifact is, and its layer's digest.
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer.sha256_digest()],
    });
    let config = Config::new(
        config.to_string().into_bytes(),
        CONFIG_MEDIA_TYPE.to_string(),
        None,
    );
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    let body = serde_json::to_vec(&manifest).expect("a manifest serialises");
    let digest = format!("sha256:{}", crate::catalog::sha256_hex(&body));
    let failed = |what: &str| format!("cannot push {what} to {reference} ({hint})");
    client
        .push_blob(reference, layer.data.clone(), &manifest.layers[0].digest)
        .await
        .with_context(|| failed("the component"))?;
    client
        .push_blob(reference, config.data.clone(), &manifest.config.digest)
        .await
        .with_context(|| failed("the config"))?;
    let media_type = oci_client::manifest::OCI_IMAGE_MEDIA_TYPE;
    client
        .push_manifest_raw(reference, body, media_type.parse().expect("a header value"))
        .await
        .with_context(|| failed("the manifest"))?;
    let stored = reference.clone_with_digest(digest.clone());
    let back = super::fetch::Repository::new(reference)?
        .manifest(&digest)
        .await
        .with_context(|| format!("pushed to {reference} but cannot read {digest} back"))?;
    match back {
        Some((_, back_digest)) if back_digest == digest => {}
        Some((_, other)) => bail!(
            "the registry answered {stored} with other bytes ({other}): it does not hold what \
             was pushed; nothing was signed"
        ),
        None => bail!("the registry does not hold {stored} after the push: nothing was signed"),
    }
    Ok(digest)
}
