//! `host publish`, `host install`, `host uninstall` against a real OCI
//! registry (Debian's `docker-registry`, the CNCF distribution registry)
//! on 127.0.0.1, its storage in the test's folder.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::json;

use crate::harness::*;

/// A registry of its own for one test, gone with it.
pub struct Registry {
    child: std::process::Child,
    pub address: String,
    storage: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    /// `$OCI_REGISTRY` (default: `docker-registry` on PATH), or a skip.
    pub fn start() -> Option<Registry> {
        Registry::start_with(|_| String::new())
    }

    /// The same, `more(folder)` added to its config (e.g. an `auth:`
    /// section whose files it writes into the registry's folder).
    pub fn start_with(more: impl FnOnce(&Path) -> String) -> Option<Registry> {
        let program = match std::env::var_os("OCI_REGISTRY").filter(|p| !p.is_empty()) {
            Some(p) => PathBuf::from(p),
            None if require_program(
                "docker-registry",
                "apt-get install docker-registry, or set OCI_REGISTRY",
            ) =>
            {
                PathBuf::from("docker-registry")
            }
            None => return None,
        };
        let dir = tempfile::tempdir().unwrap();
        let storage = dir.path().join("storage");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {address}\n{}",
                storage.display(),
                more(dir.path())
            ),
        )
        .unwrap();
        let child = std::process::Command::new(&program)
            .arg("serve")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        let registry = Registry {
            child,
            address,
            storage,
            _dir: dir,
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&registry.address).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the registry never listened"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(registry)
    }

    pub fn url(&self, repo_tag: &str) -> String {
        format!("oci://{}/{repo_tag}", self.address)
    }

    /// The files of every blob it stores.
    fn blobs(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut dirs = vec![self.storage.join("docker/registry/v2/blobs")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.file_name().is_some_and(|n| n == "data") {
                    out.push(path);
                }
            }
        }
        out
    }
}

pub async fn host(env: &Env, args: &[&str]) -> Output {
    env.host(args).output().await.unwrap()
}

/// `host publish FILE TARGET` (it reads no config or folder).
pub async fn publish(file: &Path, target: &str) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .arg("publish")
        .arg(file)
        .arg(target)
        .output()
        .await
        .unwrap()
}

pub fn refused(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "expected a refusal: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

pub fn lock(env: &Env) -> toml::Table {
    toml::from_str(&std::fs::read_to_string(env.plugins.join("plugins.lock")).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_from_a_registry_is_installed_locked_served_and_installed_again() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let env = Env::new(&[], "");
    let hello = built_plugin("hello");
    let hello_bytes = std::fs::read(&hello).unwrap();
    let tag = registry.url("tools/hello:1");
    let manifest = succeeded(&publish(&hello, &tag).await);
    let manifest = manifest.trim();
    assert!(manifest.starts_with("sha256:"), "{manifest}");

    let out = succeeded(&host(&env, &["install", &tag]).await);
    assert!(out.starts_with("hello\t"), "{out}");
    let file = env.plugins.join("hello.wasm");
    assert_eq!(std::fs::read(&file).unwrap(), hello_bytes);
    let locked = lock(&env);
    let entry = &locked["plugin"].as_array().unwrap()[0];
    assert_eq!(entry["name"].as_str(), Some("hello"));
    assert_eq!(entry["source"].as_str(), Some(tag.as_str()));
    assert_eq!(
        entry["digest"].as_str(),
        Some(sha256(&hello_bytes).as_str())
    );
    assert_eq!(entry["manifest"].as_str(), Some(manifest));
    let listed = succeeded(&host(&env, &["list", "plugins"]).await);
    assert!(
        listed.contains(&tag) && listed.contains(&sha256(&hello_bytes)),
        "{listed}"
    );

    // Served as any plugin of the folder is.
    let client = env.start().await;
    let r = client.call("hello", json!({"name": "registry"})).await;
    assert!(!is_error(&r), "{r:?}");
    drop(client);

    // The tag moves to another component; the lock still names the first,
    // and a second machine (an empty folder) gets exactly that.
    succeeded(&publish(&built_plugin("faulty"), &tag).await);
    std::fs::remove_file(&file).unwrap();
    let out = succeeded(&host(&env, &["install"]).await);
    assert!(out.contains(&sha256(&hello_bytes)), "{out}");
    assert_eq!(std::fs::read(&file).unwrap(), hello_bytes);

    let out = host(&env, &["uninstall", "hello"]).await;
    succeeded(&out);
    assert!(!file.exists());
    assert!(lock(&env).get("plugin").is_none(), "{:?}", lock(&env));
    let err = refused(&host(&env, &["uninstall", "hello"]).await);
    assert!(err.contains("no plugin `hello`"), "{err}");
    let err = refused(&host(&env, &["install"]).await);
    assert!(err.contains("lists no plugin"), "{err}");
}

/// A component importing what this host does not offer: an instance
/// `evil:pwn/escape` with one function.
pub fn foreign_component() -> Vec<u8> {
    use wasm_encoder::{
        Component, ComponentImportSection, ComponentTypeRef, ComponentTypeSection, InstanceType,
    };
    let mut instance = InstanceType::new();
    instance
        .ty()
        .function()
        .params::<[(&str, wasm_encoder::ComponentValType); 0], _>([])
        .result(None);
    instance.export("run", ComponentTypeRef::Func(0));
    let mut types = ComponentTypeSection::new();
    types.instance(&instance);
    let mut imports = ComponentImportSection::new();
    imports.import("evil:pwn/escape", ComponentTypeRef::Instance(0));
    let mut component = Component::new();
    component.section(&types).section(&imports);
    component.finish()
}

fn plugins_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread")]
async fn what_a_registry_sends_wrong_never_lands_in_the_folder() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let env = Env::new(&[], "");
    std::fs::write(env.plugins.join("other.wasm"), b"").unwrap();

    // Imports this host does not offer: refused before it lands.
    let foreign = env.dir.path().join("foreign.wasm");
    std::fs::write(&foreign, foreign_component()).unwrap();
    let tag = registry.url("tools/foreign:1");
    succeeded(&publish(&foreign, &tag).await);
    let err = refused(&host(&env, &["install", &tag]).await);
    assert!(
        err.contains("does not load in this host") && err.contains("evil:pwn/escape"),
        "{err}"
    );
    assert_eq!(plugins_in(&env.plugins), ["other.wasm"]);

    // Bytes that are not what the manifest says: the digest check refuses.
    let tag = registry.url("tools/hello:1");
    succeeded(&publish(&built_plugin("hello"), &tag).await);
    let size = std::fs::metadata(built_plugin("hello")).unwrap().len();
    let blob = registry
        .blobs()
        .into_iter()
        .find(|b| std::fs::metadata(b).unwrap().len() == size)
        .expect("the component's blob");
    let mut bytes = std::fs::read(&blob).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&blob, bytes).unwrap();
    let err = refused(&host(&env, &["install", &tag]).await);
    assert!(err.to_lowercase().contains("digest"), "{err}");
    assert_eq!(plugins_in(&env.plugins), ["other.wasm"]);

    // Not a component at all, and a name the folder already serves.
    let core = env.dir.path().join("core.wasm");
    std::fs::write(&core, wasm_encoder::Module::new().finish()).unwrap();
    let err = refused(&publish(&core, &tag).await);
    assert!(err.contains("not a WebAssembly component"), "{err}");
    std::fs::copy(built_plugin("hello"), env.plugins.join("greeter.wasm")).unwrap();
    let err = refused(&host(&env, &["install", built_plugin("hello").to_str().unwrap()]).await);
    assert!(
        err.contains("greeter.wasm already serves a plugin named `hello`"),
        "{err}"
    );
    assert!(!env.plugins.join("plugins.lock").exists());
}

/// A P-256 key pair from fixed bytes, written as openssl writes them:
/// the private key PKCS#8 PEM, the public key SPKI PEM (cosign.pub).
fn key_pair(dir: &Path, name: &str, seed: u8) -> (PathBuf, PathBuf) {
    use p256::ecdsa::SigningKey;
    use p256::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    let key = SigningKey::from_bytes(&[seed; 32].into()).unwrap();
    let private = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    std::fs::write(
        &private,
        key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes(),
    )
    .unwrap();
    std::fs::write(
        &public,
        key.verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .unwrap(),
    )
    .unwrap();
    (private, public)
}

/// The config trusts `key` alone and requires signatures.
fn trust_only(env: &Env, key: &Path) {
    std::fs::write(
        &env.config,
        format!(
            "[trust]\nkeys = [{:?}]\nrequire_signatures = true\n",
            key.display().to_string()
        ),
    )
    .unwrap();
}

async fn publish_signed(file: &Path, target: &str, key: &Path) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .arg("publish")
        .arg(file)
        .arg(target)
        .arg("--sign")
        .arg(key)
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn signatures_by_trusted_keys_are_required_when_the_config_says_so() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let env = Env::new(&[], "");
    let (alice_key, alice_pub) = key_pair(env.dir.path(), "alice", 7);
    let (mallory_key, _) = key_pair(env.dir.path(), "mallory", 9);
    let hello = built_plugin("hello");
    let signed = registry.url("tools/hello:signed");
    // Signatures belong to a manifest's digest, not a tag: the unsigned
    // one is another component.
    let plain = registry.url("tools/conformance:plain");
    let forged = registry.url("tools/faulty:other");
    succeeded(&publish_signed(&hello, &signed, &alice_key).await);
    succeeded(&publish(&built_plugin("conformance"), &plain).await);
    succeeded(&publish_signed(&built_plugin("faulty"), &forged, &mallory_key).await);
    trust_only(&env, &alice_pub);

    let out = succeeded(&host(&env, &["install", &signed]).await);
    assert!(out.starts_with("hello\t"), "{out}");
    let locked = lock(&env);
    let signer = locked["plugin"][0]["signer"].as_str().unwrap();
    assert!(signer.starts_with("alice (sha256:"), "{signer}");

    let err = refused(&host(&env, &["install", &forged]).await);
    assert!(
        err.contains("none by a key you trust") && err.contains("alice"),
        "{err}"
    );
    let err = refused(&host(&env, &["install", &plain]).await);
    assert!(err.contains("no signature by a key you trust"), "{err}");
    let err = refused(&host(&env, &["install", hello.to_str().unwrap()]).await);
    assert!(err.contains("cannot carry a signature"), "{err}");
    assert_eq!(plugins_in(&env.plugins), ["hello.wasm", "plugins.lock"]);

    // The lock is checked again on a second machine, signatures too.
    std::fs::remove_file(env.plugins.join("hello.wasm")).unwrap();
    succeeded(&host(&env, &["install"]).await);
    assert!(env.plugins.join("hello.wasm").exists());
}

/// Serve `body` once per connection over plain HTTP on 127.0.0.1.
async fn serve_file(body: Vec<u8>) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/wasm\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body).await;
        }
    });
    (address, task)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_from_a_url_on_this_machine_is_installed_and_locked() {
    let env = Env::new(&[], "");
    let bytes = std::fs::read(built_plugin("hello")).unwrap();
    let (address, server) = serve_file(bytes.clone()).await;
    let url = format!("http://{address}/dl/hello.wasm");
    let out = succeeded(&host(&env, &["install", &url]).await);
    assert!(out.starts_with("hello\t"), "{out}");
    assert_eq!(
        std::fs::read(env.plugins.join("hello.wasm")).unwrap(),
        bytes
    );
    let locked = lock(&env);
    assert_eq!(locked["plugin"][0]["source"].as_str(), Some(url.as_str()));
    assert!(locked["plugin"][0].get("manifest").is_none());
    server.abort();
    // Plain HTTP to another machine is refused before anything is fetched.
    let err = refused(&host(&env, &["install", "http://192.0.2.1/hello.wasm"]).await);
    assert!(err.contains("use https://"), "{err}");
}

/// Issue 61, item 1: an artifact never takes the name (and so the grants,
/// secrets and cache) of a plugin on its own say-so. Its name is the
/// source's unless the user gives one; a name installed from elsewhere
/// stays unless the user says `--replace`; a name the policy grants
/// anything is given to a new source only after `--yes`.
#[tokio::test(flavor = "multi_thread")]
async fn an_artifact_never_takes_a_plugins_name_or_grants_by_itself() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let env = Env::new(
        &[],
        "[plugins.hello]\ncapabilities = [\"fs\"]\nfs.read = [\"${workspace}\"]\n",
    );
    let hello = built_plugin("hello");
    // `someone/weather:1` is a component that calls itself `hello`.
    let weather = registry.url("someone/weather:1");
    succeeded(&publish(&hello, &weather).await);
    let err = refused(&host(&env, &["install", &weather]).await);
    assert!(
        err.contains("declares itself as plugin `hello`") && err.contains("--name hello"),
        "{err}"
    );
    assert_eq!(plugins_in(&env.plugins), Vec::<String>::new());

    // Named so by the user: the grants `hello` holds are shown, and
    // nobody said yes.
    let err = refused(&host(&env, &["install", &weather, "--name", "hello"]).await);
    assert!(
        err.contains("capabilities: fs") && err.contains("--yes"),
        "{err}"
    );
    assert_eq!(plugins_in(&env.plugins), Vec::<String>::new());
    let out = succeeded(&host(&env, &["install", &weather, "--name", "hello", "--yes"]).await);
    assert!(out.starts_with("hello\t"), "{out}");

    // Another source for the installed name: kept unless `--replace`.
    let other = registry.url("tools/hello:2");
    succeeded(&publish(&hello, &other).await);
    let err = refused(&host(&env, &["install", &other, "--yes"]).await);
    assert!(
        err.contains(&format!("already installed from {weather}")) && err.contains("--replace"),
        "{err}"
    );
    assert_eq!(
        lock(&env)["plugin"][0]["source"].as_str(),
        Some(weather.as_str())
    );
    // A plugin put in the folder by hand is another source too.
    std::fs::remove_file(env.plugins.join("plugins.lock")).unwrap();
    let err = refused(&host(&env, &["install", &other, "--yes"]).await);
    assert!(err.contains("not by `host install`"), "{err}");
    let out = succeeded(&host(&env, &["install", &other, "--replace", "--yes"]).await);
    assert!(out.starts_with("hello\t"), "{out}");
    assert_eq!(
        lock(&env)["plugin"][0]["source"].as_str(),
        Some(other.as_str())
    );
    // The same source again is an update: its grants were accepted.
    succeeded(&host(&env, &["install", &other]).await);

    // `host uninstall` takes names, never paths.
    std::fs::write(env.dir.path().join("outside.wasm"), b"x").unwrap();
    let err = refused(&host(&env, &["uninstall", "../outside"]).await);
    assert!(err.contains("not a plugin name"), "{err}");
    assert!(env.dir.path().join("outside.wasm").exists());
}

/// A registry in the middle: it forwards everything to `registry`, but
/// answers a read of the manifest tagged `lie` with the one tagged
/// `other` (as a registry serving someone else's artifact would).
async fn lying_proxy(registry: &Registry) -> (String, tokio::task::JoinHandle<()>) {
    use axum::body::{Body, to_bytes};
    use axum::http::Request;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let upstream = registry.address.clone();
    let here = address.clone();
    let client = reqwest::Client::new();
    let app = axum::Router::new().fallback(move |request: Request<Body>| {
        let (client, upstream, here) = (client.clone(), upstream.clone(), here.clone());
        async move {
            let (parts, body) = request.into_parts();
            let mut path = parts.uri.path_and_query().unwrap().to_string();
            if parts.method == "GET" && path.ends_with("/manifests/lie") {
                path = path.replace("/manifests/lie", "/manifests/other");
            }
            let mut forwarded =
                client.request(parts.method.clone(), format!("http://{upstream}{path}"));
            for (name, value) in &parts.headers {
                if name != "host" {
                    forwarded = forwarded.header(name, value);
                }
            }
            let body = to_bytes(body, usize::MAX).await.unwrap();
            let answer = forwarded.body(body).send().await.unwrap();
            let mut reply = axum::http::Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                if name == "transfer-encoding" || name == "connection" {
                    continue;
                }
                let value = value.to_str().unwrap().replace(&upstream, &here);
                reply = reply.header(name, value);
            }
            reply
                .body(Body::from(answer.bytes().await.unwrap()))
                .unwrap()
        }
    });
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (address, task)
}

/// Issue 61, item 2: `host publish --sign` signs the digest of what it
/// pushed, computed from its own bytes, never what the registry names
/// when asked back.
#[tokio::test(flavor = "multi_thread")]
async fn publish_signs_what_it_pushed_not_what_a_registry_answers() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let env = Env::new(&[], "");
    let (key, public) = key_pair(env.dir.path(), "alice", 7);
    // Someone else's artifact, already in the registry.
    let theirs = registry.url("tools/hello:other");
    let their_digest = succeeded(&publish(&built_plugin("faulty"), &theirs).await);
    let (proxy, task) = lying_proxy(&registry).await;
    let out = publish_signed(
        &built_plugin("hello"),
        &format!("oci://{proxy}/tools/hello:lie"),
        &key,
    )
    .await;
    let ours = succeeded(&out);
    task.abort();
    assert_ne!(
        ours.trim(),
        their_digest.trim(),
        "the digest printed is theirs"
    );
    trust_only(&env, &public);
    // Their artifact carries no signature of alice's; ours does.
    let err = refused(&host(&env, &["install", &theirs, "--name", "faulty"]).await);
    assert!(err.contains("no signature by a key you trust"), "{err}");
    let out = succeeded(&host(&env, &["install", &registry.url("tools/hello:lie")]).await);
    assert!(out.starts_with("hello\t"), "{out}");
}

/// Answer every request with a redirect to `to`, over plain HTTP on
/// 127.0.0.1.
async fn serve_redirect(to: String) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).await;
            let head = format!(
                "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes()).await;
        }
    });
    (address, task)
}

/// Issue 61, items 9 and 10: a source that never ends (a device, a named
/// pipe) is refused at once, and a redirect is held to the rules of the
/// first URL: no plain HTTP to another machine (here an address that
/// only looks like another machine's, so nothing leaves this one).
#[tokio::test(flavor = "multi_thread")]
async fn sources_that_never_end_and_redirects_elsewhere_are_refused() {
    let env = Env::new(&[], "");
    for endless in ["/dev/zero", "/dev/urandom"] {
        let out = tokio::time::timeout(
            Duration::from_secs(60),
            host(&env, &["install", endless, "--name", "zero"]),
        )
        .await
        .expect("reading a device as a plugin never ended");
        let err = refused(&out);
        assert!(err.contains("not a regular file"), "{err}");
    }
    let pipe = env.dir.path().join("pipe.wasm");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        host(&env, &["install", pipe.to_str().unwrap()]),
    )
    .await
    .expect("reading a named pipe as a plugin waited for a writer");
    assert!(refused(&out).contains("not a regular file"));

    let bytes = std::fs::read(built_plugin("hello")).unwrap();
    let (real, server) = serve_file(bytes).await;
    let port = real.rsplit_once(':').unwrap().1;
    let (hop, redirect) =
        serve_redirect(format!("http://[::ffff:127.0.0.1]:{port}/hello.wasm")).await;
    let err = refused(&host(&env, &["install", &format!("http://{hop}/hello.wasm")]).await);
    assert!(
        err.contains("redirect to") && err.contains("was refused"),
        "{err}"
    );
    assert_eq!(plugins_in(&env.plugins), Vec::<String>::new());
    // On this machine, from plain HTTP to plain HTTP, it is followed.
    let (hop, redirect_here) = serve_redirect(format!("http://{real}/hello.wasm")).await;
    succeeded(&host(&env, &["install", &format!("http://{hop}/hello.wasm")]).await);
    for task in [server, redirect, redirect_here] {
        task.abort();
    }
}

/// A registry that answers every request with `status` and a body of
/// `prefix` followed by bytes without end (up to 2 GiB, or until the
/// reader hangs up): what a hostile registry may send.
async fn serve_endless(
    status: &'static str,
    prefix: &'static [u8],
) -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                let _ = stream.read(&mut request).await;
                let head = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/vnd.oci.image.manifest.v1+json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    2u64 << 30
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(prefix).await;
                let chunk = vec![b'\x1b'; 64 << 10];
                for _ in 0..(2u64 << 30) / chunk.len() as u64 {
                    if stream.write_all(&chunk).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (address, task)
}

/// Issue 61, item 9: a registry's manifest and error text are read no
/// further than they could honestly be, and what is printed of them holds
/// no escape sequence.
#[tokio::test(flavor = "multi_thread")]
async fn a_registrys_endless_answers_are_cut_short_and_printed_harmless() {
    let env = Env::new(&[], "");
    let (manifests, one) = serve_endless("200 OK", b"{\"layers\":[").await;
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        host(
            &env,
            &["install", &format!("oci://{manifests}/tools/hello:1")],
        ),
    )
    .await
    .expect("an endless manifest was read to its end");
    let err = refused(&out);
    assert!(err.contains("larger than the 4194304 bytes taken"), "{err}");
    let (errors, two) = serve_endless("500 Internal Server Error", b"it broke: \x1b[2J").await;
    let out = tokio::time::timeout(
        Duration::from_secs(120),
        host(&env, &["install", &format!("oci://{errors}/tools/hello:1")]),
    )
    .await
    .expect("an endless error body was read to its end");
    let err = refused(&out);
    assert!(err.contains("500") && err.contains("it broke"), "{err}");
    assert!(
        !err.contains('\x1b'),
        "an escape sequence reached the terminal"
    );
    assert!(err.len() < 16 << 10, "{} bytes of error printed", err.len());
    assert_eq!(plugins_in(&env.plugins), Vec::<String>::new());
    one.abort();
    two.abort();
}
