//! Watching the plugins folder and the config file: a component added,
//! replaced or removed while serving reloads the catalog; a config file
//! saved again becomes the policy (grants, tool filters) and every plugin
//! is loaded anew under it. When the served tools changed, the service
//! says so to every session (see `Service::on_tools_changed`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::service::Service;

/// File copies arrive as bursts of events; wait for quiet before reloading.
const SETTLE: Duration = Duration::from_millis(150);

#[derive(Clone, Copy, PartialEq)]
enum Changed {
    Plugins,
    Config,
}

/// Watch until the returned watcher is dropped.
pub fn watch(service: Arc<Service>) -> Result<notify::RecommendedWatcher> {
    let dir = service.loader.plugins_dir.clone();
    let config = service.loader.config_file.clone();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let config_name = config
        .as_ref()
        .and_then(|c| c.file_name().map(|n| n.to_owned()));
    let config_dir = config.as_ref().and_then(|c| c.parent().map(PathBuf::from));
    // An event in the config's folder that is not the config file is not
    // ours (unless that folder is the plugins folder too).
    let (plugins_dir, config_folder) = (dir.clone(), config_dir.clone());
    let config_dir_only = move |path: &std::path::Path| {
        config_folder
            .as_deref()
            .is_some_and(|c| path.parent() == Some(c) && c != plugins_dir)
    };
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if event.kind.is_access() {
            return;
        }
        for path in &event.paths {
            // The config's folder is watched for the file (editors save by
            // renaming a new file over it); its other files are not ours.
            if config_name.is_some() && path.file_name() == config_name.as_deref() {
                let _ = tx.send(Changed::Config);
            } else if !config_dir_only(path) {
                let _ = tx.send(Changed::Plugins);
            }
        }
    })
    .context("cannot start watching the plugins folder")?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {}", dir.display()))?;
    match &config_dir {
        // The default config's folder may not exist yet (nothing written
        // there): a config put there later is read at the next start.
        Some(config_dir) if !config_dir.is_dir() && service.loader.config_optional => {
            tracing::info!(folder = %config_dir.display(), "no config folder to watch")
        }
        Some(config_dir) => watcher
            .watch(config_dir, RecursiveMode::NonRecursive)
            .with_context(|| format!("cannot watch {}", config_dir.display()))?,
        None => {}
    }
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut config_changed = first == Changed::Config;
            while let Ok(Some(next)) = tokio::time::timeout(SETTLE, rx.recv()).await {
                config_changed |= next == Changed::Config;
            }
            let changed = if config_changed {
                match service.reconfigure().await {
                    Ok(changed) => {
                        tracing::info!(config = ?config, "config changed; plugins loaded under it");
                        changed
                    }
                    Err(e) => {
                        tracing::warn!(config = ?config, "the changed config was not applied (the previous one stays): {e:#}");
                        continue;
                    }
                }
            } else {
                service.reload().await
            };
            if changed {
                tracing::info!(dir = %dir.display(), "served tools changed; telling the clients");
            }
        }
    });
    Ok(watcher)
}
