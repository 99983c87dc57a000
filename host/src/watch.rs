//! Watching the plugins folder: a component added, replaced or removed
//! while serving reloads the catalog; when the served tools changed, the
//! service says so to every session (see `Service::on_tools_changed`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::service::Service;

/// File copies arrive as bursts of events; wait for quiet before reloading.
const SETTLE: Duration = Duration::from_millis(150);

/// Watch until the returned watcher is dropped.
pub fn watch(service: Arc<Service>) -> Result<notify::RecommendedWatcher> {
    let dir = service.loader.plugins_dir.clone();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if event.is_ok_and(|e| !e.kind.is_access()) {
            let _ = tx.send(());
        }
    })
    .context("cannot start watching the plugins folder")?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .with_context(|| format!("cannot watch {}", dir.display()))?;
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            while let Ok(Some(())) = tokio::time::timeout(SETTLE, rx.recv()).await {}
            if service.reload().await {
                tracing::info!(dir = %dir.display(), "plugins changed; telling the clients");
            }
        }
    });
    Ok(watcher)
}
