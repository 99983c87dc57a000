//! Registry logins the way Podman and Docker keep them, so `podman login`
//! and `host login` are interchangeable: the same files, read in Podman's
//! order (`containers-auth.json(5)`), each with `auths` (base64
//! `user:password`), `credHelpers` (a `docker-credential-<name>` program per
//! registry) and `credsStore` (one for every registry).
//!
//! A credential never leaves this module except into a request's
//! `Authorization` header: it is not in a `Debug` form, an error, a log
//! line, the lock or the cache.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use base64::Engine;
use serde_json::{Map, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A login for one registry.
#[derive(Clone)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <hidden>)", self.username)
    }
}

/// The most read of an auth file or a helper's answer.
const MAX_AUTH_BYTES: u64 = 1 << 20;
/// How long a credential helper may take.
const HELPER_TIMEOUT: Duration = Duration::from_secs(30);

/// The files a login is looked for in, in Podman's order:
/// `$REGISTRY_AUTH_FILE` (which replaces the first two),
/// `$XDG_RUNTIME_DIR/containers/auth.json`,
/// `~/.config/containers/auth.json`, `~/.docker/config.json`.
pub fn auth_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    match std::env::var_os("REGISTRY_AUTH_FILE").filter(|f| !f.is_empty()) {
        Some(file) => files.push(PathBuf::from(file)),
        None => {
            if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
                files.push(Path::new(&run).join("containers/auth.json"));
            }
            if let Some(config) = dirs::config_dir() {
                files.push(config.join("containers/auth.json"));
            }
        }
    }
    if let Some(home) = dirs::home_dir() {
        files.push(home.join(".docker/config.json"));
    }
    files
}

/// Where `host login` writes, as `podman login` does: `$REGISTRY_AUTH_FILE`,
/// else `$XDG_RUNTIME_DIR/containers/auth.json`, else
/// `~/.config/containers/auth.json`.
pub fn login_file() -> Result<PathBuf> {
    if let Some(file) = std::env::var_os("REGISTRY_AUTH_FILE").filter(|f| !f.is_empty()) {
        return Ok(PathBuf::from(file));
    }
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return Ok(Path::new(&run).join("containers/auth.json"));
    }
    let config = dirs::config_dir()
        .context("no place for logins: set REGISTRY_AUTH_FILE or XDG_RUNTIME_DIR")?;
    Ok(config.join("containers/auth.json"))
}

/// The login for `registry` (`host[:port]`) and where it was found;
/// `None` when no file or helper has one.
pub async fn lookup(registry: &str) -> Result<Option<(Credentials, String)>> {
    for file in auth_files() {
        let Some(config) = read(&file)? else { continue };
        let shown = file.display().to_string();
        let helper = config
            .get("credHelpers")
            .and_then(|h| h.as_object())
            .and_then(|helpers| helpers.iter().find(|(key, _)| same_registry(key, registry)))
            .and_then(|(_, name)| name.as_str());
        if let Some(name) = helper {
            if let Some(found) = from_helper(name, registry).await? {
                return Ok(Some((found, format!("docker-credential-{name} ({shown})"))));
            }
            continue;
        }
        let entry = config
            .get("auths")
            .and_then(|a| a.as_object())
            .and_then(|auths| auths.iter().find(|(key, _)| same_registry(key, registry)));
        if let Some((_, entry)) = entry
            && let Some(found) = decode(entry)
                .with_context(|| format!("the login for {registry} in {shown} cannot be read"))?
        {
            return Ok(Some((found, shown)));
        }
        if let Some(name) = config.get("credsStore").and_then(|s| s.as_str())
            && let Some(found) = from_helper(name, registry).await?
        {
            return Ok(Some((found, format!("docker-credential-{name} ({shown})"))));
        }
    }
    Ok(None)
}

/// Save `credentials` for `registry` in `file` (the other entries kept),
/// readable by its owner only.
pub fn store(file: &Path, registry: &str, credentials: &Credentials) -> Result<()> {
    let mut config = read(file)?.unwrap_or_default();
    let auths = config
        .entry("auths")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(auths) = auths.as_object_mut() else {
        bail!(
            "{}: `auths` is not an object; fix or remove the file",
            file.display()
        );
    };
    auths.retain(|key, _| !same_registry(key, registry));
    let pair = format!("{}:{}", credentials.username, credentials.password);
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    auths.insert(registry.to_string(), serde_json::json!({ "auth": encoded }));
    write(file, &config)
}

/// Take `registry`'s login out of `file`; whether there was one.
pub fn remove(file: &Path, registry: &str) -> Result<bool> {
    let Some(mut config) = read(file)? else {
        return Ok(false);
    };
    let Some(auths) = config.get_mut("auths").and_then(|a| a.as_object_mut()) else {
        return Ok(false);
    };
    let before = auths.len();
    auths.retain(|key, _| !same_registry(key, registry));
    if auths.len() == before {
        return Ok(false);
    }
    write(file, &config)?;
    Ok(true)
}

/// Whether an auth file's key names `registry`: `registry`, or written as
/// a URL (`https://registry/v1/`, Docker's form).
fn same_registry(key: &str, registry: &str) -> bool {
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key.split('/').next().unwrap_or(key);
    host.eq_ignore_ascii_case(registry) || (registry == "docker.io" && host == "index.docker.io")
}

/// An `auths` entry's login (`auth`: base64 `user:password`).
fn decode(entry: &Value) -> Result<Option<Credentials>> {
    let Some(auth) = entry
        .get("auth")
        .and_then(|a| a.as_str())
        .filter(|a| !a.is_empty())
    else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(auth.trim())
        .context("its `auth` is not base64")?;
    let text = String::from_utf8(bytes).context("its `auth` is not text")?;
    let Some((username, password)) = text.split_once(':') else {
        bail!("its `auth` is not `user:password`");
    };
    Ok(Some(Credentials {
        username: username.to_string(),
        password: password.to_string(),
    }))
}

/// The folders a credential helper is never taken from: what plugins
/// write, the workspace, the host's cache ([`trust_helpers_outside`]).
static UNTRUSTED: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();

/// Take credential helpers only from outside `untrusted` from now on (set
/// once by the command line, from the policy; the current directory alone
/// otherwise).
pub fn trust_helpers_outside(untrusted: Vec<PathBuf>) {
    let _ = UNTRUSTED.set(untrusted);
}

/// The login `docker-credential-<name> get` gives for `registry`; `None`
/// when it has none.
async fn from_helper(name: &str, registry: &str) -> Result<Option<Credentials>> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        bail!("the credential helper `{name}` is not a helper's name (docker-credential-<name>)");
    }
    let program = format!("docker-credential-{name}");
    // Found as a plugin's programs are: never in a folder a plugin, a
    // container or a project writes (a project's `node_modules/.bin` on
    // PATH would otherwise choose what runs with the user's logins).
    let untrusted = UNTRUSTED
        .get()
        .cloned()
        .unwrap_or_else(|| std::env::current_dir().into_iter().collect());
    let Some(found) = timebox::resolve_trusted(&program, Path::new("/"), &untrusted) else {
        bail!(
            "the auth file names the credential helper `{program}`, which is not on PATH outside \
             the folders plugins, containers and the workspace may write: install it (in /usr/bin \
             or ~/.local/bin, say) or change the auth file"
        );
    };
    let mut child = tokio::process::Command::new(&found)
        .arg("get")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {program}: install it or change the auth file"))?;
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");
    let ran = async {
        stdin.write_all(registry.as_bytes()).await?;
        drop(stdin);
        let mut answer = Vec::new();
        (&mut stdout)
            .take(MAX_AUTH_BYTES)
            .read_to_end(&mut answer)
            .await?;
        let status = child.wait().await?;
        std::io::Result::Ok((status, answer))
    };
    let (status, answer) = tokio::time::timeout(HELPER_TIMEOUT, ran)
        .await
        .with_context(|| format!("{program} did not answer within 30 s"))?
        .with_context(|| format!("cannot run {program}"))?;
    if !status.success() {
        // "credentials not found in native keychain": not an error.
        return Ok(None);
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Answer {
        username: String,
        secret: String,
    }
    let answer: Answer = serde_json::from_slice(&answer)
        .with_context(|| format!("{program} answered something that is not its JSON"))?;
    Ok(Some(Credentials {
        username: answer.username,
        password: answer.secret,
    }))
}

/// An auth file as JSON; `None` when there is none.
fn read(file: &Path) -> Result<Option<Map<String, Value>>> {
    let bytes = match std::fs::File::open(file) {
        Ok(f) => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_AUTH_BYTES), &mut bytes)
                .with_context(|| format!("cannot read {}", file.display()))?;
            bytes
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Some(Map::new()));
    }
    // The error names the file, never its text (which holds logins).
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        _ => bail!("{} is not a JSON object: fix or remove it", file.display()),
    }
}

/// Write an auth file whole (a temporary file renamed over it), readable
/// by its owner only.
fn write(file: &Path, config: &Map<String, Value>) -> Result<()> {
    let dir = file.parent().context("an auth file needs a folder")?;
    // A folder made here is the user's alone; one that exists is left as
    // Podman or the user made it.
    if !dir.is_dir() {
        crate::platform::create_private_dir(dir)
            .with_context(|| format!("cannot make {}", dir.display()))?;
    }
    let temporary = dir.join(format!(".auth.json.{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let mut out = crate::platform::create_private_file(&temporary)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    let text = serde_json::to_vec_pretty(config).expect("JSON serialises");
    std::io::Write::write_all(&mut out, &text)
        .and_then(|()| out.sync_all())
        .and_then(|()| std::fs::rename(&temporary, file))
        .with_context(|| format!("cannot write {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_a_registry_as_podman_and_docker_write_them() {
        assert!(same_registry("ghcr.io", "ghcr.io"));
        assert!(same_registry("https://index.docker.io/v1/", "docker.io"));
        assert!(same_registry("http://127.0.0.1:5000", "127.0.0.1:5000"));
        assert!(!same_registry("ghcr.io.evil", "ghcr.io"));
        assert!(!same_registry("127.0.0.1:5001", "127.0.0.1:5000"));
    }

    #[test]
    fn a_login_is_stored_and_removed_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("containers/auth.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            r#"{"auths":{"other.io":{"auth":"eDp5"}},"credHelpers":{}}"#,
        )
        .unwrap();
        let login = Credentials {
            username: "me".into(),
            password: "s3cr3t-value".into(),
        };
        store(&file, "127.0.0.1:5000", &login).unwrap();
        let saved: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let found = decode(&saved["auths"]["127.0.0.1:5000"]).unwrap().unwrap();
        assert_eq!(
            (found.username.as_str(), found.password.as_str()),
            ("me", "s3cr3t-value")
        );
        assert_eq!(saved["auths"]["other.io"]["auth"], "eDp5", "others kept");
        assert!(!format!("{found:?}").contains("s3cr3t"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(remove(&file, "127.0.0.1:5000").unwrap());
        assert!(!remove(&file, "127.0.0.1:5000").unwrap());
        std::fs::write(&file, "{\"auths\": not json s3cr3t").unwrap();
        let e = format!("{:#}", read(&file).unwrap_err());
        assert!(
            e.contains("not a JSON object") && !e.contains("s3cr3t"),
            "{e}"
        );
    }
}
