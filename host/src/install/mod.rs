//! `host install`, `host uninstall` and `host publish`: plugins from OCI
//! registries ([`oci`]), `https://` URLs and files, into the plugins
//! folder, recorded in its lock file ([`lock`]).
//!
//! What arrives is hostile input. Its size is bounded while it streams; a
//! registry's digests are checked as it streams; it is loaded exactly as
//! `serve` would load it (compiled into the cache, linked against what
//! this host offers, asked for its tools) before it lands in the folder,
//! and it lands there by a rename, so a running host sees the old file or
//! the new one. Nothing in an artifact sets a policy: what a plugin may do
//! is the user's config alone.

pub mod auth;
mod claim;
pub(crate) mod fetch;
mod lock;
pub mod oci;
pub mod preview;
mod signature;
pub mod update;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};

use crate::catalog::{Loader, Plugin, sha256_hex};
pub use claim::Choice;
pub use lock::{Entry, Lock};

/// Far above any plugin's size (the bundled ones are 1-12 MB).
const MAX_PLUGIN_BYTES: u64 = 128 << 20;

/// Where a plugin comes from.
pub enum Source {
    /// `oci://registry/repository:tag` or `…@sha256:…`.
    Oci(oci_client::Reference),
    /// `https://…/x.wasm` (`http://` only on this machine).
    Url(reqwest::Url),
    File(PathBuf),
}

impl Source {
    pub fn parse(text: &str) -> Result<Source> {
        if let Some(rest) = text.strip_prefix("oci://") {
            return Ok(Source::Oci(oci::reference(rest)?));
        }
        if text.starts_with("https://") || text.starts_with("http://") {
            let url =
                reqwest::Url::parse(text).with_context(|| format!("`{text}` is not a URL"))?;
            let here = url.host_str().is_some_and(fetch::is_loopback);
            if url.scheme() == "http" && !here {
                bail!(
                    "`{text}` is plain HTTP to another machine: use https:// (plain HTTP is taken from this machine only)"
                );
            }
            return Ok(Source::Url(url));
        }
        if text.contains("://") {
            bail!("`{text}`: a plugin comes from oci://…, https://… or a file path");
        }
        Ok(Source::File(PathBuf::from(text)))
    }

    /// The name a component that declares none is installed under.
    fn default_name(&self) -> String {
        let stem = |s: &str| {
            s.rsplit('/')
                .next()
                .unwrap_or(s)
                .trim_end_matches(".wasm")
                .to_string()
        };
        match self {
            Source::Oci(r) => stem(r.repository()),
            Source::Url(u) => stem(u.path()),
            Source::File(p) => p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// The component's bytes, the manifest it came in and who signed it
    /// (registries), as `trust` requires.
    async fn fetch(&self, trust: &Trust) -> Result<Fetched> {
        let path = match self {
            Source::Oci(reference) => {
                let pulled = oci::pull(reference, MAX_PLUGIN_BYTES).await?;
                let signer = if trust.keys.is_empty() {
                    None
                } else {
                    signature::signer(reference, &pulled.manifest, &trust.keys).await?
                };
                if trust.required && signer.is_none() {
                    bail!(
                        "{reference} ({}) carries no signature by a key you trust, and `[trust] require_signatures` \
                         is on: ask its publisher to sign it (`host publish --sign`, `cosign sign --key`) and add \
                         their public key to `[trust] keys`",
                        pulled.manifest
                    );
                }
                return Ok(Fetched {
                    bytes: pulled.bytes,
                    manifest: Some(pulled.manifest),
                    signer,
                });
            }
            Source::Url(url) if trust.required => bail!(
                "{url} cannot carry a signature (registry artifacts do), and `[trust] require_signatures` is on: \
                 install it from a registry where it is signed"
            ),
            Source::Url(url) => {
                return Ok(Fetched {
                    bytes: download(url).await?,
                    manifest: None,
                    signer: None,
                });
            }
            Source::File(path) => path,
        };
        if trust.required {
            bail!(
                "{} cannot carry a signature (registry artifacts do), and `[trust] require_signatures` is on",
                path.display()
            );
        }
        Ok(Fetched {
            bytes: read_bounded(path)?,
            manifest: None,
            signer: None,
        })
    }
}

/// What a source gave.
struct Fetched {
    bytes: Vec<u8>,
    manifest: Option<String>,
    signer: Option<String>,
}

/// Whose signatures are taken (`[trust]`), the keys read.
struct Trust {
    keys: Vec<signature::TrustedKey>,
    required: bool,
}

impl Trust {
    fn of(loader: &Loader) -> Result<Trust> {
        Ok(Trust {
            keys: signature::trusted(&loader.config().trusted_keys(&loader.places))?,
            required: loader.config().trust.require_signatures,
        })
    }
}

/// A plugin file's bytes: a regular file (a pipe or `/dev/zero` would
/// never end), read no further than a plugin may be.
fn read_bounded(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let cannot = || format!("cannot read {}", path.display());
    let file = crate::platform::open_regular(path, true).with_context(cannot)?;
    let mut bytes = Vec::new();
    file.take(MAX_PLUGIN_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(cannot)?;
    if bytes.len() as u64 > MAX_PLUGIN_BYTES {
        bail!(
            "{} is more than a plugin may have ({MAX_PLUGIN_BYTES} bytes)",
            path.display()
        );
    }
    Ok(bytes)
}

/// Rustls speaks with ring's cryptography (installed once per process).
fn use_ring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

async fn download(url: &reqwest::Url) -> Result<Vec<u8>> {
    let what = format!("{url}");
    let response = fetch::client()?
        .get(url.clone())
        .send()
        .await
        .with_context(|| format!("cannot fetch {url}"))?;
    let response = fetch::succeeded(response, &what).await?;
    fetch::bounded(response, MAX_PLUGIN_BYTES as usize, &what).await
}

/// A plugin put in the folder.
pub struct Installed {
    pub entry: Entry,
    pub file: PathBuf,
    pub plugin: Arc<Plugin>,
}

/// Install what `text` names into the loader's plugins folder, under the
/// name `choice` and the source give (see [`claim`]).
pub async fn install(loader: &Loader, text: &str, choice: &Choice) -> Result<Installed> {
    let source = Source::parse(text)?;
    let fetched = source.fetch(&Trust::of(loader)?).await?;
    put(loader, text, &source, fetched, choice).await
}

/// Install again exactly what the lock file lists: each source fetched
/// (a registry's by the manifest recorded), its digest the recorded one.
pub async fn install_locked(loader: &Loader) -> Result<Vec<Installed>> {
    let lock = Lock::read(&loader.plugins_dir)?;
    if lock.plugins.is_empty() {
        bail!(
            "{} lists no plugin: give what to install (oci://…, https://… or a file)",
            Lock::path(&loader.plugins_dir).display()
        );
    }
    let trust = Trust::of(loader)?;
    let mut done = Vec::new();
    for entry in lock.plugins {
        let source = match (Source::parse(&entry.source)?, &entry.manifest) {
            (Source::Oci(r), Some(manifest)) => Source::Oci(r.clone_with_digest(manifest.clone())),
            (source, _) => source,
        };
        let fetched = source.fetch(&trust).await?;
        let digest = digest_of(&fetched.bytes);
        if digest != entry.digest {
            bail!(
                "{} now holds {digest}, not the {} the lock file names for `{}`: nothing was changed for it; \
                 `host install {}` takes what it holds now",
                entry.source,
                entry.digest,
                entry.name,
                entry.source
            );
        }
        // The lock names it: its name and grants were accepted when it
        // was first installed.
        let choice = Choice {
            name: Some(entry.name.clone()),
            replace: true,
            yes: true,
        };
        done.push(put(loader, &entry.source, &source, fetched, &choice).await?);
    }
    Ok(done)
}

fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// `bytes`, checked by loading them, renamed into the folder as
/// `<name>.wasm`, and recorded in the lock file.
async fn put(
    loader: &Loader,
    text: &str,
    source: &Source,
    fetched: Fetched,
    choice: &Choice,
) -> Result<Installed> {
    let Fetched {
        bytes,
        manifest,
        signer,
    } = fetched;
    let dir = &loader.plugins_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let name = claim::name(choice, &source.default_name(), text, &bytes)?;
    let file = dir.join(format!("{name}.wasm"));
    if claim::may_take(dir, &name, &file, text, choice)? {
        claim::accept(&loader.grants(&name), text, choice)?;
    }
    let digest = digest_of(&bytes);
    let plugin = loader
        .try_bytes(&name, &file, bytes.clone())
        .await
        .map_err(|e| anyhow!("{text} was not installed: it does not load in this host: {e:#}"))?;
    let partial = dir.join(format!(".{name}.wasm.partial"));
    std::fs::write(&partial, &bytes)
        .and_then(|()| std::fs::rename(&partial, &file))
        .with_context(|| format!("cannot write {}", file.display()))?;
    let mut lock = Lock::read(dir)?;
    let replaced = lock
        .get(&name)
        .map(|old| old.replaced_by(text, &digest))
        .unwrap_or_default();
    let entry = Entry {
        name,
        source: text.to_string(),
        digest,
        manifest,
        signer,
        replaced,
    };
    lock.put(entry.clone());
    lock.write(dir)?;
    Ok(Installed {
        entry,
        file,
        plugin,
    })
}

/// Take plugin `name` out of the folder and the lock file.
pub fn uninstall(plugins_dir: &Path, name: &str) -> Result<PathBuf> {
    // A name, never a path: `../x` must not reach outside the folder.
    claim::check_name(name, &format!("`{name}`")).map_err(|_| {
        anyhow!("`{name}` is not a plugin name: `host list plugins` shows the names")
    })?;
    let mut lock = Lock::read(plugins_dir)?;
    let recorded = lock.remove(name);
    let file = plugins_dir.join(format!("{name}.wasm"));
    match std::fs::remove_file(&file) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && recorded.is_some() => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "no plugin `{name}` in {}: `host list plugins` shows what is there",
                plugins_dir.display()
            )
        }
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", file.display())),
    }
    if recorded.is_some() {
        lock.write(plugins_dir)?;
    }
    Ok(file)
}

/// Push the component `file` to `target` (`oci://…`), signed with the
/// PKCS#8 PEM key `sign` if given; the manifest's digest.
pub async fn publish(file: &Path, target: &str, sign: Option<&Path>) -> Result<String> {
    let Some(rest) = target.strip_prefix("oci://") else {
        bail!("`{target}`: publish to oci://registry/repository:tag");
    };
    let reference = oci::reference(rest)?;
    let bytes = read_bounded(file)?;
    if !wasmparser::Parser::is_component(&bytes) {
        bail!(
            "{} is not a WebAssembly component (a core module? build for wasm32-wasip2)",
            file.display()
        );
    }
    let manifest = oci::push(&reference, bytes).await?;
    if let Some(key) = sign {
        signature::sign(&oci::client(&reference), &reference, &manifest, key).await?;
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_and_the_names_they_give() {
        let name = |t: &str| Source::parse(t).unwrap().default_name();
        assert_eq!(name("oci://127.0.0.1:5000/tools/hello:1"), "hello");
        assert_eq!(
            name(
                "oci://ghcr.io/me/hello@sha256:0000000000000000000000000000000000000000000000000000000000000000"
            ),
            "hello"
        );
        assert_eq!(name("https://example.com/dl/hello.wasm"), "hello");
        assert_eq!(name("http://127.0.0.1:8000/x/hello.wasm"), "hello");
        assert_eq!(name("./build/hello.wasm"), "hello");
        for bad in [
            "http://example.com/hello.wasm",
            "ftp://x/y.wasm",
            "oci://",
            "oci://UPPER/Case:1",
        ] {
            assert!(Source::parse(bad).is_err(), "{bad}");
        }
    }
}
