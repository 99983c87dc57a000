//! Reading from registries and servers the way `host install` needs:
//! every answer is hostile input, so every body is bounded while it
//! streams (a manifest, a token, an error's text), and every redirect is
//! held to the rules of the first URL.
//!
//! The OCI distribution API is spoken here for reads (manifests and blobs,
//! with the anonymous bearer-token dance registries ask for) because
//! `oci-client` reads whole bodies, errors included, into memory.

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;

use super::auth::Credentials;

/// Far above any image manifest (a few KiB; cosign's with many signatures
/// stay under 100 KiB).
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// A token answer, or the part of an error's text worth showing.
const MAX_SMALL_BYTES: usize = 64 << 10;
const MAX_ERROR_SHOWN: usize = 4 << 10;

/// `127.0.0.1:5000`, `[::1]:5000`, `localhost:5000`: this machine.
pub fn is_loopback(host_port: &str) -> bool {
    let host = match host_port.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => host_port,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The HTTP client every read of `host install` goes through.
pub fn client() -> Result<reqwest::Client> {
    super::use_ring();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::custom(each_hop_checked))
        .build()
        .context("cannot make an HTTPS client")
}

/// A redirect is followed only where the first URL could have gone: to
/// https, or to plain HTTP on this machine from plain HTTP on this machine
/// (never from https: that would be a downgrade), at most 5 times.
fn each_hop_checked(attempt: reqwest::redirect::Attempt) -> reqwest::redirect::Action {
    let to = attempt.url().clone();
    let all_plain_here = attempt.previous().iter().all(plain_here);
    if attempt.previous().len() > 5 {
        attempt.error("more than 5 redirects")
    } else if to.scheme() == "https" || (plain_here(&to) && all_plain_here) {
        attempt.follow()
    } else {
        attempt.error(format!(
            "a redirect to {to} was refused: plain HTTP is taken only on this machine, and never after https"
        ))
    }
}

fn plain_here(url: &reqwest::Url) -> bool {
    url.scheme() == "http" && url.host_str().is_some_and(is_loopback)
}

/// `response`'s body, at most `max` bytes; past that, an error naming
/// `what`.
pub async fn bounded(mut response: reqwest::Response, max: usize, what: &str) -> Result<Vec<u8>> {
    if response.content_length().is_some_and(|n| n > max as u64) {
        bail!("{what} is larger than the {max} bytes taken");
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .with_context(|| format!("reading {what}"))?
    {
        if bytes.len() + chunk.len() > max {
            bail!("{what} is larger than the {max} bytes taken");
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// `response` when it succeeded; else an error with its status and the
/// start of its text (bounded; what a terminal is shown is made printable
/// where errors are printed).
pub async fn succeeded(response: reqwest::Response, what: &str) -> Result<reqwest::Response> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let text = first_bytes(response, MAX_ERROR_SHOWN).await;
    let text = String::from_utf8_lossy(&text);
    bail!("{what}: the server answered {status}: {}", text.trim())
}

/// Up to `max` bytes of `response`'s body, the rest left unread.
async fn first_bytes(mut response: reqwest::Response, max: usize) -> Vec<u8> {
    let mut bytes = Vec::new();
    while bytes.len() < max {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                bytes.extend_from_slice(&chunk[..chunk.len().min(max - bytes.len())])
            }
            _ => break,
        }
    }
    bytes
}

/// What of an image manifest is read: its layers.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    #[serde(default)]
    pub layers: Vec<Layer>,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub struct Layer {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
    #[serde(default)]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// A manifest's bytes as read: parsed, its layers' digests plain
/// `sha256:<64 hex>` (they become URLs).
pub fn parse_manifest(bytes: &[u8]) -> Result<Manifest> {
    let manifest: Manifest =
        serde_json::from_slice(bytes).context("the manifest is not an OCI image manifest")?;
    if let Some(bad) = manifest.layers.iter().find(|l| !is_digest(&l.digest)) {
        bail!(
            "the manifest names a layer by `{}`, not a sha256 digest",
            bad.digest.chars().take(80).collect::<String>()
        );
    }
    Ok(manifest)
}

pub fn is_digest(text: &str) -> bool {
    text.strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A repository of a registry, read anonymously until the registry asks
/// for a login; then with the one Podman's and Docker's files hold for it
/// ([`super::auth`]).
pub struct Repository {
    http: reqwest::Client,
    /// `https://registry/v2/repository` (`http://` on this machine).
    base: String,
    shown: String,
    registry: String,
    token: tokio::sync::Mutex<Option<String>>,
    login: tokio::sync::OnceCell<Option<(Credentials, String)>>,
}

impl Repository {
    pub fn new(reference: &oci_client::Reference) -> Result<Repository> {
        Repository::at(reference.resolve_registry(), reference.repository())
    }

    /// `repository` (a path, or empty for the registry itself) of `registry`.
    fn at(registry: &str, repository: &str) -> Result<Repository> {
        let scheme = if is_loopback(registry) {
            "http"
        } else {
            "https"
        };
        Ok(Repository {
            http: client()?,
            base: format!("{scheme}://{registry}/v2/{repository}"),
            shown: format!("{registry}/{repository}"),
            registry: registry.to_string(),
            token: tokio::sync::Mutex::new(None),
            login: tokio::sync::OnceCell::new(),
        })
    }

    /// Whether `registry` takes `login` (its API's root, `/v2/`, read with
    /// it), as `podman login` checks before saving one.
    pub async fn check_login(registry: &str, login: Credentials) -> Result<()> {
        let repository = Repository::at(registry, "")?;
        let given = (login, "standard input".to_string());
        repository.login.set(Some(given)).expect("a new cell");
        let what = format!("{registry}'s API");
        let response = repository
            .get(&repository.base, None)
            .await
            .with_context(|| what.clone())?;
        succeeded(response, &what).await.map(drop)
    }

    /// The manifest `tag_or_digest` names, with the digest of its bytes;
    /// `None` when the registry has none by that name.
    pub async fn manifest(&self, tag_or_digest: &str) -> Result<Option<(Manifest, String)>> {
        let what = format!("the manifest {}:{tag_or_digest}", self.shown);
        let url = format!("{}/manifests/{tag_or_digest}", self.base);
        let accept = "application/vnd.oci.image.manifest.v1+json, \
                      application/vnd.docker.distribution.manifest.v2+json";
        let response = self
            .get(&url, Some(accept))
            .await
            .with_context(|| what.clone())?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let response = succeeded(response, &what).await?;
        let bytes = bounded(response, MAX_MANIFEST_BYTES, &what).await?;
        let digest = format!("sha256:{}", crate::catalog::sha256_hex(&bytes));
        let manifest = parse_manifest(&bytes).with_context(|| what.clone())?;
        Ok(Some((manifest, digest)))
    }

    /// Blob `layer`: no more than its declared size (and `max`), its
    /// digest checked.
    pub async fn blob(&self, layer: &Layer, max: u64) -> Result<Vec<u8>> {
        let what = format!("{} of {}", layer.digest, self.shown);
        if layer.size < 0 || layer.size as u64 > max {
            bail!("{what} is {} bytes, more than the {max} taken", layer.size);
        }
        let url = format!("{}/blobs/{}", self.base, layer.digest);
        let response = self.get(&url, None).await.with_context(|| what.clone())?;
        let response = succeeded(response, &what).await?;
        let bytes = bounded(response, layer.size as usize, &what).await?;
        let digest = format!("sha256:{}", crate::catalog::sha256_hex(&bytes));
        if digest != layer.digest {
            bail!("{what} arrived as {digest}: the digest does not match, nothing was used");
        }
        Ok(bytes)
    }

    /// GET `url`, with the registry's token once one was asked for; a `401`
    /// gets a token (anonymous, or for the login when there is one) or the
    /// login itself, and tries again once.
    async fn get(&self, url: &str, accept: Option<&str>) -> Result<reqwest::Response> {
        enum Auth {
            Bearer(String),
            Basic(Credentials),
        }
        let send = |auth: Option<Auth>| {
            let mut request = self.http.get(url);
            if let Some(accept) = accept {
                request = request.header(reqwest::header::ACCEPT, accept);
            }
            match auth {
                Some(Auth::Bearer(token)) => request = request.bearer_auth(token),
                Some(Auth::Basic(login)) => {
                    request = request.basic_auth(login.username, Some(login.password))
                }
                None => {}
            }
            request.send()
        };
        let token = self.token.lock().await.clone();
        let response = send(token.map(Auth::Bearer)).await?;
        if response.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        let challenge = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .unwrap_or_default();
        let login = self.login().await?;
        let retried = if challenge.starts_with("Bearer ") {
            match self.token_for(&challenge, login.map(|(c, _)| c)).await? {
                Some(token) => {
                    *self.token.lock().await = Some(token.clone());
                    send(Some(Auth::Bearer(token))).await?
                }
                None => response,
            }
        } else if let Some((credentials, _)) = login {
            send(Some(Auth::Basic(credentials.clone()))).await?
        } else {
            response
        };
        if retried.status() == reqwest::StatusCode::UNAUTHORIZED {
            return Err(self.login_needed(login.map(|(_, at)| at.as_str())));
        }
        Ok(retried)
    }

    /// The login for this registry, looked up once, when it first asks.
    async fn login(&self) -> Result<Option<&(Credentials, String)>> {
        let found = self
            .login
            .get_or_try_init(|| super::auth::lookup(&self.registry))
            .await?;
        Ok(found.as_ref())
    }

    /// What to do when the registry refuses: log in (and where logins are
    /// read from), or log in again.
    fn login_needed(&self, used: Option<&str>) -> anyhow::Error {
        let registry = &self.registry;
        match used {
            Some(at) => anyhow!(
                "{registry} refused the login found in {at}: run `host login {registry}` \
                 (or `podman login {registry}`) again"
            ),
            None => {
                let files: Vec<String> = super::auth::auth_files()
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect();
                anyhow!(
                    "{registry} asks for a login: run `host login {registry}` (or `podman login \
                     {registry}`); none was found in {}",
                    files.join(", ")
                )
            }
        }
    }

    /// The token a `Bearer realm=…,service=…,scope=…` challenge offers,
    /// asked with the login when there is one (anonymously else); `None`
    /// when the challenge names no realm or the realm refuses.
    async fn token_for(
        &self,
        challenge: &str,
        login: Option<&Credentials>,
    ) -> Result<Option<String>> {
        let params = challenge.strip_prefix("Bearer ").unwrap_or(challenge);
        let param = |name: &str| -> Option<String> {
            params.split(',').find_map(|part| {
                let (key, value) = part.trim().split_once('=')?;
                (key == name).then(|| value.trim_matches('"').to_string())
            })
        };
        let Some(realm) = param("realm") else {
            return Ok(None);
        };
        let mut url = reqwest::Url::parse(&realm)
            .map_err(|_| anyhow!("the registry names a token service that is not a URL"))?;
        if url.scheme() != "https" && !plain_here(&url) {
            bail!("the registry's token service {url} is plain HTTP to another machine: refused");
        }
        for name in ["service", "scope"] {
            if let Some(value) = param(name) {
                url.query_pairs_mut().append_pair(name, &value);
            }
        }
        let what = format!("a token from {}", url.host_str().unwrap_or("the registry"));
        let mut request = self.http.get(url.clone());
        if let Some(login) = login {
            request = request.basic_auth(&login.username, Some(&login.password));
        }
        let response = request.send().await?;
        if response.status() == reqwest::StatusCode::UNAUTHORIZED {
            return Ok(None);
        }
        let response = succeeded(response, &what).await?;
        let bytes = bounded(response, MAX_SMALL_BYTES, &what).await?;
        #[derive(Deserialize)]
        struct Answer {
            token: Option<String>,
            access_token: Option<String>,
        }
        let answer: Answer =
            serde_json::from_slice(&bytes).with_context(|| format!("{what} is not JSON"))?;
        Ok(answer.token.or(answer.access_token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_is_spoken_to_in_plain_http() {
        for here in [
            "127.0.0.1:5000",
            "localhost:5000",
            "[::1]:5000",
            "127.0.0.2",
            "LOCALHOST",
        ] {
            assert!(is_loopback(here), "{here}");
        }
        for there in [
            "ghcr.io",
            "10.0.0.5:5000",
            "localhost.example.com:5000",
            "127.0.0.1.nip.io",
        ] {
            assert!(!is_loopback(there), "{there}");
        }
    }

    #[test]
    fn manifests_name_layers_by_digest_only() {
        let good = format!(
            r#"{{"layers":[{{"mediaType":"application/wasm","digest":"sha256:{}","size":3}}]}}"#,
            "a".repeat(64)
        );
        assert_eq!(parse_manifest(good.as_bytes()).unwrap().layers.len(), 1);
        for bad in [
            r#"{"layers":[{"mediaType":"x","digest":"sha256:../../x","size":3}]}"#,
            r#"{"layers":[{"mediaType":"x","digest":"md5:00","size":3}]}"#,
            "not json",
        ] {
            assert!(parse_manifest(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
