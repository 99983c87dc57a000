//! `host update`: each locked plugin's source asked again (a registry's
//! tag, not the manifest recorded), and what changed installed after the
//! same checks as `install`. Two things are never taken silently: a build
//! that imports more of the host than the installed one (it would run
//! under the grants the name already holds), which is shown and asked
//! for as `install` asks (`--yes`), and a build this name held before (a
//! tag moved back), which is refused unless `--allow-downgrade`. A dry
//! run makes every check the update makes, and installs nothing.

use std::path::Path;

use anyhow::{Context, Result, bail};

use super::preview::imports;
use super::{Choice, Lock, Source, Trust, claim, digest_of, put, read_bounded};
use crate::catalog::Loader;

/// What `host update` was asked to do.
pub struct Asked<'a> {
    /// Only this plugin.
    pub only: Option<&'a str>,
    pub dry_run: bool,
    /// `--yes`: a build that imports more of the host is accepted.
    pub yes: bool,
    /// `--allow-downgrade`: a build this name held before is taken.
    pub allow_downgrade: bool,
}

/// What `host update` did (or would do) for one locked plugin.
pub struct Update {
    pub name: String,
    pub from: String,
    /// None when the source still holds what is installed, or was not
    /// asked ([`Update::not_checked`]), or was not taken ([`Update::held`]).
    pub to: Option<Changed>,
    /// Why the source was not asked again (a file).
    pub not_checked: Option<String>,
    /// Why the build the source holds now was not installed.
    pub held: Option<String>,
}

pub struct Changed {
    pub digest: String,
    pub manifest: Option<String>,
    pub signer: Option<String>,
    /// Host interfaces it imports that the installed one did not.
    pub new_imports: Vec<String>,
}

/// Update the locked plugins (or `asked.only`); what happened to each.
pub async fn update(loader: &Loader, asked: &Asked<'_>) -> Result<Vec<Update>> {
    let lock = Lock::read(&loader.plugins_dir)?;
    let entries: Vec<_> = lock
        .plugins
        .into_iter()
        .filter(|e| asked.only.is_none_or(|n| n == e.name))
        .collect();
    if entries.is_empty() {
        match asked.only {
            Some(name) => bail!(
                "{} lists no plugin `{name}`: `host list plugins` shows what is installed",
                Lock::path(&loader.plugins_dir).display()
            ),
            None => bail!(
                "{} lists no plugin: nothing to update",
                Lock::path(&loader.plugins_dir).display()
            ),
        }
    }
    let trust = Trust::of(loader)?;
    let mut done = Vec::new();
    for entry in entries {
        let update = |to, not_checked, held| Update {
            name: entry.name.clone(),
            from: entry.digest.clone(),
            to,
            not_checked,
            held,
        };
        let source = Source::parse(&entry.source)?;
        if let Source::File(path) = &source {
            done.push(update(
                None,
                Some(format!(
                    "from the file {}: `host install` it again to take a new build",
                    path.display()
                )),
                None,
            ));
            continue;
        }
        let fetched = source
            .fetch(&trust)
            .await
            .with_context(|| format!("{} was left as it is", entry.name))?;
        let digest = digest_of(&fetched.bytes);
        if digest == entry.digest {
            done.push(update(None, None, None));
            continue;
        }
        // The name was accepted when it was installed; the same name check
        // as `install` (the build must not declare itself another), in a
        // dry run too.
        let choice = Choice {
            name: Some(entry.name.clone()),
            replace: true,
            yes: true,
        };
        claim::name(
            &choice,
            &source.default_name(),
            &entry.source,
            &fetched.bytes,
        )
        .with_context(|| format!("{} was left as it is", entry.name))?;
        if entry.replaced.contains(&digest) && !asked.allow_downgrade {
            done.push(update(
                None,
                None,
                Some(format!(
                    "{} now holds {digest}, a build `{}` had before this one (the tag moved back): \
                     add `--allow-downgrade` to take it",
                    entry.source, entry.name
                )),
            ));
            continue;
        }
        let installed = installed_imports(&loader.plugins_dir, &entry.name);
        let new_imports: Vec<String> = imports(&fetched.bytes)?
            .into_iter()
            .filter(|i| !installed.contains(i))
            .collect();
        let changed = Changed {
            digest,
            manifest: fetched.manifest.clone(),
            signer: fetched.signer.clone(),
            new_imports,
        };
        if !asked.dry_run {
            if let Err(why) = accept_imports(loader, &entry.name, &changed.new_imports, asked.yes) {
                done.push(update(None, None, Some(why)));
                continue;
            }
            put(loader, &entry.source, &source, fetched, &choice)
                .await
                .with_context(|| format!("{} was left as it is", entry.name))?;
        }
        done.push(update(Some(changed), None, None));
    }
    Ok(done)
}

/// A build that imports interfaces the installed one did not would use
/// them under the grants `name` holds: shown, and taken only when the
/// person says so (here, or with `--yes`); why not, otherwise.
fn accept_imports(loader: &Loader, name: &str, new: &[String], yes: bool) -> Result<(), String> {
    if new.is_empty() || yes {
        return Ok(());
    }
    let grants = claim::described(&loader.grants(name));
    let mut shown = format!(
        "the new build of `{name}` imports more of the host: {}\nit would use them under the grants `{name}` holds:\n",
        new.join(", ")
    );
    for line in &grants {
        shown.push_str(&format!("  {line}\n"));
    }
    if grants.is_empty() {
        shown.push_str("  (none: what it imports would be denied)\n");
    }
    match claim::ask(&format!("{shown}Update `{name}`? [y/N] ")) {
        None => Err(format!(
            "{}not updated: check it with `host inspect` and run `host update {name} --yes` to take it",
            shown.replace('\n', " ")
        )),
        Some(false) => Err("not updated: its new imports were not accepted".into()),
        Some(true) => Ok(()),
    }
}

fn installed_imports(dir: &Path, name: &str) -> Vec<String> {
    read_bounded(&dir.join(format!("{name}.wasm")))
        .ok()
        .and_then(|bytes| imports(&bytes).ok())
        .unwrap_or_default()
}
