//! Watching the plugins folder: a component added, replaced or removed
//! while serving reloads the catalog and, when the served tools changed,
//! tells the client with `notifications/tools/list_changed`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use notify::{RecursiveMode, Watcher};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::mpsc;

use crate::service::Service;

/// File copies arrive as bursts of events; wait for quiet before reloading.
const SETTLE: Duration = Duration::from_millis(150);

/// Watch until the returned watcher is dropped. Watching starts at once,
/// before the MCP session exists, so no change after start-up is missed;
/// changes are announced once `peer` delivers the session.
pub fn watch(
    service: Arc<Service>,
    peer: tokio::sync::oneshot::Receiver<Peer<RoleServer>>,
) -> Result<notify::RecommendedWatcher> {
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
        let Ok(peer) = peer.await else { return };
        while rx.recv().await.is_some() {
            while let Ok(Some(())) = tokio::time::timeout(SETTLE, rx.recv()).await {}
            if service.reload().await {
                tracing::info!(dir = %dir.display(), "plugins changed; telling the client");
                if let Err(e) = peer.notify_tool_list_changed().await {
                    tracing::warn!(error = %e, "could not send tools/list_changed");
                }
            }
        }
    });
    Ok(watcher)
}
