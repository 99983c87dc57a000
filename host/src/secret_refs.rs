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
/// scrubbing. A scope with no secrets gives none.
pub async fn resolve(grants: &Grants, scope: &str) -> Result<Vec<(String, Secret)>, RefError> {
    let Some(file) = &grants.secret_refs else {
        return Err(RefError::Denied(grants.denial(
            "secret references",
            "containers.secrets",
            "\"<the file `cofer config secret` writes>\"",
        )));
    };
    let refs = read(file, &grants.untrusted_dirs)?;
    let Some(refs) = refs.get(scope) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (name, reference) in refs {
        let value = value_of(name, reference, &grants.untrusted_dirs).await?;
        let value = value.strip_suffix('\n').unwrap_or(&value);
        let value = value.strip_suffix('\r').unwrap_or(value);
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

async fn value_of(name: &str, reference: &str, untrusted: &[PathBuf]) -> Result<String, RefError> {
    let unresolved =
        |why: String| RefError::Unresolved(format!("secret `{name}` ({reference}): {why}"));
    if let Some(var) = reference.strip_prefix("env://") {
        return std::env::var(var).map_err(|_| {
            unresolved(format!(
                "the host has no variable {var}: set it where the host starts"
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
        let meta =
            std::fs::metadata(&path).map_err(|e| unresolved(format!("cannot read it: {e}")))?;
        if !meta.is_file() || meta.len() > MAX_VALUE_BYTES as u64 {
            return Err(unresolved(format!(
                "it must be a plain file of at most {MAX_VALUE_BYTES} bytes"
            )));
        }
        return std::fs::read_to_string(&path)
            .map_err(|e| unresolved(format!("cannot read it: {e}")));
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
            "resolving it needs {install}, which is not on the host's PATH: install it, or use env:// or file://"
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
