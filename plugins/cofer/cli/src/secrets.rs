//! `cofer config secret`: the repository's secret *references* (never
//! values), in a file of the person's outside every repository
//! (`$COFER_SECRETS`, default `~/.config/cofer/secrets.toml`, readable by
//! them only), one table per repository. The host reads it (its
//! `containers.secrets` for Cofer names the same file), resolves a
//! repository's references at each command's start into that command's
//! environment, and masks the values in everything it gives back.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Subcommand;
use hostgit::Repo;

#[derive(Subcommand)]
pub enum SecretCommand {
    /// Store NAME as a reference: env://VAR, file://PATH, op://VAULT/ITEM/FIELD
    /// or vault://PATH#FIELD. Commands in new and running environments get
    /// its value as the variable NAME.
    Set {
        name: String,
        reference: String,
    },
    Unset {
        name: String,
    },
    /// The names and their references (never values).
    List,
    Clear,
}

type Tables = BTreeMap<String, BTreeMap<String, String>>;

/// The file, as the host's default policy names it.
pub fn file() -> PathBuf {
    match std::env::var_os("COFER_SECRETS").filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => dirs::home_dir()
            .unwrap_or_default()
            .join(".config/cofer/secrets.toml"),
    }
}

fn read() -> Result<Tables> {
    let file = file();
    match std::fs::read_to_string(&file) {
        Ok(text) => toml::from_str(&text).with_context(|| {
            format!(
                "{} is not a secrets file cofer wrote: fix it",
                file.display()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Tables::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", file.display())),
    }
}

fn write(tables: &Tables) -> Result<()> {
    let file = file();
    let dir = file.parent().context("the secrets file needs a folder")?;
    std::fs::create_dir_all(dir)?;
    let tmp = file.with_extension("toml.tmp");
    let text = format!(
        "# Secret references for Cofer environments, one table per repository.\n# Written by `cofer config secret`; values are never stored here.\n{}",
        toml::to_string(tables)?
    );
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    std::io::Write::write_all(&mut options.open(&tmp)?, text.as_bytes())?;
    std::fs::rename(&tmp, &file).with_context(|| format!("cannot write {}", file.display()))
}

/// The key of a repository's table: its work tree, as the host names it.
fn scope(repo: &Repo) -> String {
    repo.work_tree().to_string_lossy().into_owned()
}

/// The repository's names and references.
pub fn names(repo: &Repo) -> Result<Vec<(String, String)>> {
    Ok(read()?
        .remove(&scope(repo))
        .unwrap_or_default()
        .into_iter()
        .collect())
}

pub fn secret(repo: &Repo, command: SecretCommand) -> Result<()> {
    let mut tables = read()?;
    let ours = tables.entry(scope(repo)).or_default();
    match command {
        SecretCommand::List => {
            for (name, reference) in ours.iter() {
                println!("{name} = {reference}");
            }
            return Ok(());
        }
        SecretCommand::Set { name, reference } => {
            check_name(&name)?;
            check_reference(&reference)?;
            ours.insert(name, reference);
        }
        SecretCommand::Unset { name } => {
            if ours.remove(&name).is_none() {
                bail!("there is no secret `{name}`: `cofer config secret list` shows them");
            }
        }
        SecretCommand::Clear => ours.clear(),
    }
    tables.retain(|_, refs| !refs.is_empty());
    write(&tables)?;
    println!(
        "saved {}; each command in this repository's environments gets these as variables",
        file().display()
    );
    Ok(())
}

/// A reference the host can resolve, checked now rather than at the
/// first command.
fn check_reference(reference: &str) -> Result<()> {
    let ok = if let Some(var) = reference.strip_prefix("env://") {
        check_name(var).is_ok()
    } else if let Some(path) = reference.strip_prefix("file://") {
        path.starts_with('/') || path.starts_with("~/")
    } else if let Some(rest) = reference.strip_prefix("op://") {
        rest.split('/').filter(|p| !p.is_empty()).count() >= 3
    } else if let Some(rest) = reference.strip_prefix("vault://") {
        !rest.is_empty() && !rest.starts_with('-')
    } else {
        false
    };
    if !ok {
        bail!(
            "`{reference}` is not a secret reference: use env://VAR, file:///absolute/path (or file://~/path), op://VAULT/ITEM/FIELD or vault://PATH#FIELD"
        );
    }
    Ok(())
}

/// A variable's name, as a shell takes it.
pub fn check_name(name: &str) -> Result<()> {
    let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        bail!(
            "`{name}` is not a variable name: use letters, digits and `_`, not starting with a digit"
        );
    }
    Ok(())
}
