//! `host install`, `inspect`, `update`, `uninstall`, `publish` and
//! `secret`: what the plugins folder holds and what its plugins are given.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

use crate::catalog::Loader;
use crate::secrets::Store;

pub async fn install(
    source: Option<String>,
    choice: &crate::install::Choice,
    loader: Loader,
) -> Result<ExitCode> {
    let installed = match source {
        Some(source) => vec![crate::install::install(&loader, &source, choice).await?],
        None => crate::install::install_locked(&loader).await?,
    };
    for done in installed {
        println!(
            "{}\t{}\t{}\t{} tools",
            done.entry.name,
            done.entry.digest,
            done.file.display(),
            done.plugin.tools.len()
        );
    }
    eprintln!("its grants go under [plugins.<name>] of your config; nothing in a plugin sets them");
    Ok(ExitCode::SUCCESS)
}

pub async fn inspect(text: &str, loader: Loader) -> Result<ExitCode> {
    let preview = crate::install::preview::inspect(&loader, text).await?;
    let text = serde_json::to_string_pretty(&preview.to_json()).expect("JSON serialises");
    println!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// One line per locked plugin: unchanged, or its old and new digest, who
/// signed the new one and the host interfaces it imports now, or why its
/// new build was not taken (then the exit code is 1).
pub async fn update(asked: &crate::install::update::Asked<'_>, loader: Loader) -> Result<ExitCode> {
    let mut held = false;
    for update in crate::install::update::update(&loader, asked).await? {
        if let Some(why) = update.not_checked {
            println!("{}\tnot checked\t{}\t{why}", update.name, update.from);
            continue;
        }
        if let Some(why) = update.held {
            held = true;
            println!("{}\tnot updated\t{}\t{why}", update.name, update.from);
            continue;
        }
        let Some(to) = update.to else {
            println!("{}\tunchanged\t{}", update.name, update.from);
            continue;
        };
        let signed = to
            .signer
            .map_or("unsigned".to_string(), |s| format!("signed by {s}"));
        let imports = match to.new_imports.is_empty() {
            true => String::new(),
            false => format!("\tnow imports {}", to.new_imports.join(", ")),
        };
        let done = if asked.dry_run {
            "would update"
        } else {
            "updated"
        };
        println!(
            "{}\t{done}\t{} -> {}\t{signed}{imports}",
            update.name, update.from, to.digest
        );
    }
    Ok(if held {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub fn uninstall(name: &str, plugins_dir: &Path) -> Result<ExitCode> {
    let file = crate::install::uninstall(plugins_dir, name)?;
    eprintln!("removed {}", file.display());
    Ok(ExitCode::SUCCESS)
}

pub async fn publish(file: &Path, target: &str, sign: Option<&Path>) -> Result<ExitCode> {
    let digest = crate::install::publish(file, target, sign).await?;
    println!("{digest}");
    Ok(ExitCode::SUCCESS)
}

/// `host secret set`: the value is standard input, one trailing line
/// break dropped.
pub fn secret_set(store: &Store, plugin: &str, name: &str) -> Result<ExitCode> {
    let mut value = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut value)
        .context("cannot read the secret from standard input")?;
    let value = value.strip_suffix('\n').unwrap_or(&value);
    let value = value.strip_suffix('\r').unwrap_or(value);
    store.set(plugin, name, value)?;
    eprintln!(
        "stored {name} for {plugin} in {}; it reaches the plugin once `secrets = [\"{name}\"]` is under [plugins.{plugin}] and the host (re)loads it",
        store.dir().display()
    );
    Ok(ExitCode::SUCCESS)
}

pub fn secret_remove(store: &Store, plugin: &str, name: &str) -> Result<ExitCode> {
    if !store.remove(plugin, name)? {
        bail!("{plugin} has no secret {name}: `host secret list` shows what is stored");
    }
    Ok(ExitCode::SUCCESS)
}

/// The names stored (never the values), per plugin.
pub fn secret_list(store: &Store, plugin: Option<String>) -> Result<ExitCode> {
    let plugins = plugin.map_or_else(|| store.plugins(), |p| vec![p]);
    for plugin in plugins {
        for name in store.names(&plugin)? {
            println!("{plugin}\t{name}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
