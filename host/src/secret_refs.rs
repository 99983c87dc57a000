//! Secret references, resolved on this machine for one command: the
//! person stores *references* per scope (a repository's path) in the file
//! `containers.secrets` names (`cofer config secret set NAME REF`), and an
//! exec that asks for a scope (`secrets-of`) gets their values as
//! variables. Neither the plugin nor the model ever sees a value: it goes
//! from here into the exec's environment only, and [`crate::scrub`] masks
//! it in everything given back.
//!
//! References: `env://VAR` (the host's variable), `file://PATH` (an
//! absolute path, `~/` for home), `op://VAULT/ITEM/FIELD` (1Password's
//! `op read`), `vault://PATH#FIELD` (HashiCorp's `vault kv get`, field
//! `value` by default). The file must lie outside every folder a plugin may
//! write: whoever writes it chooses what the host reads and runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::policy::Grants;
use crate::secrets::Secret;

/// The references file is small text.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// A value read from a file or a CLI.
const MAX_VALUE_BYTES: usize = 64 * 1024;
/// `op` and `vault` may ask a server; not longer than this.
const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the secrets of a scope could not be given; the text says what to do.
#[derive(Debug, thiserror::Error)]
pub enum RefError {
    #[error("{0}")]
    Denied(String),
    #[error("{0}")]
    Unresolved(String),
}

/// The variables `scope`'s secrets give a command, values remembered for
/// scrubbing. A scope with no secrets gives none. A scope is a repository
/// inside the plugin's roots: no plugin asks for another's secrets.
pub async fn resolve(grants: &Grants, scope: &str) -> Result<Vec<(String, Secret)>, RefError> {
    let Some(file) = &grants.secret_refs else {
        return Err(RefError::Denied(grants.denial(
            "secret references",
            "containers.secrets",
            "\"<the file `cofer config secret` writes>\"",
        )));
    };
    let scope_path = Path::new(scope);
    if !scope_path.is_absolute()
        || !grants
            .roots(false)
            .iter()
            .any(|root| timebox::inside(scope_path, root))
    {
        return Err(RefError::Denied(format!(
            "the secrets of `{scope}` were asked for, but a secrets scope is a repository inside \
             the plugin's roots (fs.read, fs.write under [plugins.{}] in {})",
            grants.plugin, grants.config_hint
        )));
    }
    let refs = read(file, &grants.untrusted_dirs)?;
    let Some(refs) = refs.get(scope) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, reference) in refs {
        let value = value_of(name, reference, &grants.untrusted_dirs).await?;
        let value = trimmed(&value);
        if value.is_empty() {
            return Err(RefError::Unresolved(format!(
                "secret `{name}` ({reference}) resolved to nothing: set it, or remove it (`cofer config secret unset {name}`)"
            )));
        }
        if value.len() < crate::scrub::MIN_LEN {
            return Err(RefError::Unresolved(format!(
                "secret `{name}` ({reference}) is shorter than {} characters, too short to be kept out of output: use a longer value",
                crate::scrub::MIN_LEN
            )));
        }
        crate::scrub::remember(name, value);
        out.push((name.clone(), Secret::new(value.to_string())));
    }
    Ok(out)
}

/// A value as a file or a CLI gives it, without the line end after it.
fn trimmed(value: &str) -> &str {
    let value = value.strip_suffix('\n').unwrap_or(value);
    value.strip_suffix('\r').unwrap_or(value)
}

/// The references file's size and time, when the host last knew every
/// value it names.
type Stamp = Option<(u64, Option<std::time::SystemTime>)>;
static KNOWN_FILES: tokio::sync::Mutex<BTreeMap<PathBuf, Stamp>> =
    tokio::sync::Mutex::const_new(BTreeMap::new());

/// Every value the references file of a plugin granted `containers.secrets`
/// names (every scope's), resolved and remembered for scrubbing before the
/// plugin's call is answered: what a command of an earlier host process
/// wrote with a value (a file, a commit) comes back masked from this
/// process's first answer. Resolved again when the file changes; values
/// stay in memory only. A reference that cannot be resolved here is
/// logged (by name, never a value): its value cannot be masked.
pub async fn know_all(grants: &Grants) {
    let Some(file) = &grants.secret_refs else {
        return;
    };
    let stamp = std::fs::metadata(file)
        .ok()
        .map(|m| (m.len(), m.modified().ok()));
    let mut known = KNOWN_FILES.lock().await;
    if known.get(file) == Some(&stamp) {
        return;
    }
    let refs = match read(file, &grants.untrusted_dirs) {
        Ok(refs) => refs,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the secrets file to mask its values");
            return;
        }
    };
    let mut seen = std::collections::BTreeSet::new();
    for (name, reference) in refs.values().flatten() {
        if !seen.insert((name, reference)) {
            continue;
        }
        match value_of(name, reference, &grants.untrusted_dirs).await {
            Ok(value) => crate::scrub::remember(name, trimmed(&value)),
            Err(e) => tracing::warn!(
                error = %e,
                "a secret cannot be resolved in this host process, so output that holds its value is not masked"
            ),
        }
    }
    known.insert(file.clone(), stamp);
}

/// The file's tables: scope -> name -> reference.
fn read(
    file: &Path,
    untrusted: &[PathBuf],
) -> Result<BTreeMap<String, BTreeMap<String, String>>, RefError> {
    let shown = file.display();
    // No file, no secrets: wherever it would be, nothing is read.
    if std::fs::symlink_metadata(file).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(BTreeMap::new());
    }
    // Checked where it really is; read there (no plugin can swap a folder
    // outside what plugins write).
    let real = crate::paths::canonical(file)
        .map_err(|e| RefError::Denied(format!("cannot read the secrets file {shown}: {e}")))?;
    let writable = untrusted.iter().find(|dir| timebox::inside(&real, dir));
    if let Some(place) = writable {
        return Err(RefError::Denied(format!(
            "the secrets file {shown} lies in {}, which plugins or containers may write: point containers.secrets (or COFER_SECRETS) at a file outside it",
            place.display()
        )));
    }
    let file = real.as_path();
    let text = match std::fs::metadata(file) {
        Ok(meta) if !meta.is_file() => {
            return Err(RefError::Denied(format!(
                "the secrets file {shown} is not a plain file"
            )));
        }
        Ok(meta) if meta.len() > MAX_FILE_BYTES => {
            return Err(RefError::Denied(format!(
                "the secrets file {shown} is larger than {MAX_FILE_BYTES} bytes"
            )));
        }
        _ => std::fs::read_to_string(file)
            .map_err(|e| RefError::Denied(format!("cannot read the secrets file {shown}: {e}")))?,
    };
    // toml's own message quotes the line; a reference is not a value, but
    // only where it is goes out.
    toml::from_str(&text).map_err(|e| {
        let at = e.span().map(|s| text[..s.start].lines().count().max(1));
        RefError::Denied(format!(
            "the secrets file {shown} is not valid TOML (line {}): fix it with `cofer config secret`",
            at.unwrap_or(1)
        ))
    })
}

/// A `file://` value, opened pinned: not from a folder a plugin or
/// container may write (whoever writes there could put a link to any file
/// of the user's where the reference points), no link followed at the
/// file itself, at most [`MAX_VALUE_BYTES`].
fn read_value_file(path: &Path, untrusted: &[PathBuf]) -> Result<String, String> {
    if let Some(place) = passes_through(path, untrusted) {
        return Err(format!(
            "it lies in {}, which plugins or containers may write: keep the secret's file outside it",
            place.display()
        ));
    }
    let real = crate::paths::canonical(path).map_err(|e| format!("cannot read it: {e}"))?;
    if let Some(place) = passes_through(&real, untrusted) {
        return Err(format!(
            "it leads into {}, which plugins or containers may write: keep the secret's file outside it",
            place.display()
        ));
    }
    let file = crate::platform::open_regular(&real, false)
        .map_err(|e| format!("cannot read it as a plain file: {e}"))?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_VALUE_BYTES as u64 + 1),
        &mut bytes,
    )
    .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() > MAX_VALUE_BYTES {
        return Err(format!("it is larger than {MAX_VALUE_BYTES} bytes"));
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".into())
}

/// The folder of `untrusted` that any name along `path` lies in: each name
/// is placed where its parent really is (links before it followed, its
/// own not), so a link a plugin planted on the way is found where it
/// stands.
fn passes_through<'a>(path: &Path, untrusted: &'a [PathBuf]) -> Option<&'a PathBuf> {
    let dirs: Vec<(PathBuf, &PathBuf)> = untrusted
        .iter()
        .map(|d| (crate::paths::canonical(d).unwrap_or_else(|_| d.clone()), d))
        .collect();
    let mut at = PathBuf::new();
    for part in path.components() {
        if let std::path::Component::Normal(name) = part {
            let parent = crate::paths::canonical(&at).unwrap_or_else(|_| at.clone());
            let placed = parent.join(name);
            if let Some((_, dir)) = dirs.iter().find(|(real, _)| placed.starts_with(real)) {
                return Some(dir);
            }
        }
        at.push(part);
    }
    None
}

async fn value_of(name: &str, reference: &str, untrusted: &[PathBuf]) -> Result<String, RefError> {
    let unresolved =
        |why: String| RefError::Unresolved(format!("secret `{name}` ({reference}): {why}"));
    if let Some(var) = reference.strip_prefix("env://") {
        return std::env::var(var).map_err(|_| {
            unresolved(format!(
                "the host has no variable {var}: set it where the host starts (for `cofer`, in the shell that runs it), or remove the secret (`cofer config secret unset {name}`)"
            ))
        });
    }
    if let Some(path) = reference.strip_prefix("file://") {
        let path = match path.strip_prefix("~/") {
            Some(rest) => dirs::home_dir().unwrap_or_default().join(rest),
            None => PathBuf::from(path),
        };
        if !path.is_absolute() {
            return Err(unresolved(
                "a file reference needs an absolute path (file:///… or file://~/…)".into(),
            ));
        }
        return read_value_file(&path, untrusted).map_err(unresolved);
    }
    let (program, args, install) = if reference.starts_with("op://") {
        (
            "op",
            vec![
                "read".to_string(),
                "--no-newline".to_string(),
                reference.to_string(),
            ],
            "the 1Password CLI `op` (https://developer.1password.com/docs/cli)",
        )
    } else if let Some(rest) = reference.strip_prefix("vault://") {
        let (path, field) = rest.split_once('#').unwrap_or((rest, "value"));
        (
            "vault",
            vec![
                "kv".into(),
                "get".into(),
                format!("-field={field}"),
                path.to_string(),
            ],
            "HashiCorp's `vault` CLI (https://developer.hashicorp.com/vault/install)",
        )
    } else {
        return Err(unresolved(
            "not a reference: use env://VAR, file://PATH, op://VAULT/ITEM/FIELD or vault://PATH#FIELD".into(),
        ));
    };
    let Some(found) = timebox::resolve_trusted(program, Path::new("/"), untrusted) else {
        return Err(unresolved(format!(
            "resolving it needs {install}, which is not on the host's PATH: install it, use env:// or file://, or remove the secret (`cofer config secret unset {name}`)"
        )));
    };
    let child = tokio::process::Command::new(found)
        .args(&args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(CLI_TIMEOUT, child)
        .await
        .map_err(|_| {
            unresolved(format!(
                "`{program}` gave no answer in {} s",
                CLI_TIMEOUT.as_secs()
            ))
        })?
        .map_err(|e| unresolved(format!("cannot run `{program}`: {e}")))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        let said: String = said.trim().chars().take(500).collect();
        return Err(unresolved(format!("`{program}` failed: {said}")));
    }
    if out.stdout.len() > MAX_VALUE_BYTES {
        return Err(unresolved(format!(
            "`{program}` gave more than {MAX_VALUE_BYTES} bytes"
        )));
    }
    String::from_utf8(out.stdout)
        .map_err(|_| unresolved(format!("`{program}` gave a value that is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Config, Places};

    /// Cofer's grants with `ws` as the workspace and `refs` as the
    /// references file.
    fn grants(ws: &Path, refs: &Path) -> Grants {
        let mut grants = Config::load(None).unwrap().grants(
            "cofer",
            &Places {
                workspace: ws.into(),
                home: "/home/u".into(),
                cache_dir: "/cache".into(),
            },
            "cfg.toml",
        );
        grants.secret_refs = Some(refs.into());
        grants
    }

    /// Issue 70, item 7: a plugin may name only a repository inside its
    /// roots as the scope whose secrets it wants.
    #[tokio::test]
    async fn a_scope_outside_the_plugins_roots_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let other = dir.path().join("other-repo");
        std::fs::create_dir_all(ws.join("repo")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let refs = dir.path().join("secrets.toml");
        std::fs::write(
            &refs,
            format!(
                "[{:?}]\nA = \"env://PATH\"\n[{:?}]\nB = \"env://PATH\"\n",
                other.display().to_string(),
                ws.join("repo").display().to_string()
            ),
        )
        .unwrap();
        let g = grants(&ws, &refs);
        let inside = resolve(&g, &ws.join("repo").to_string_lossy()).await;
        assert_eq!(inside.unwrap()[0].0, "B");
        for scope in [other.to_string_lossy().into_owned(), "relative".into()] {
            match resolve(&g, &scope).await {
                Err(RefError::Denied(why)) => assert!(why.contains("inside"), "{why}"),
                r => panic!("{scope}: {:?}", r.map(|v| v.len())),
            }
        }
    }

    /// Item 4: a name on the way that lies in a writable folder is refused
    /// (a link planted there), the file itself is not followed as a link.
    #[cfg(unix)]
    #[test]
    fn a_secret_file_is_read_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let writable = dir.path().join("ws");
        let safe = dir.path().join("safe");
        std::fs::create_dir_all(&writable).unwrap();
        std::fs::create_dir_all(&safe).unwrap();
        std::fs::write(safe.join("value"), "the-value\n").unwrap();
        let untrusted = [writable.clone()];
        assert_eq!(
            read_value_file(&safe.join("value"), &untrusted).unwrap(),
            "the-value\n"
        );
        // A folder link in the writable folder, leading to the safe one.
        std::os::unix::fs::symlink(&safe, writable.join("via")).unwrap();
        let err = read_value_file(&writable.join("via/value"), &untrusted).unwrap_err();
        assert!(err.contains("may write"), "{err}");
        // A link outside every writable folder that leads into one.
        std::fs::write(writable.join("planted"), "chosen-by-a-plugin").unwrap();
        std::os::unix::fs::symlink(writable.join("planted"), safe.join("link")).unwrap();
        let err = read_value_file(&safe.join("link"), &untrusted).unwrap_err();
        assert!(err.contains("leads into"), "{err}");
    }
}
