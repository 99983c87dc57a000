//! Background work of plugins that export `lifecycle`: `refresh` runs once
//! after the plugin loads and again whenever files change under the
//! directories it asked to watch (only directories its policy lets it
//! read). One task per plugin, so refreshes of a plugin never overlap; a
//! replaced or removed plugin's task is stopped, which drops whatever it
//! was building. The plugin's calls wait for its first refresh (within
//! their deadline), not for later ones: those swap in what they built.
//!
//! The folders a plugin asked to watch are remembered between runs (in
//! the host's cache), so a warm start watches them before the first
//! refresh runs and needs no second one to catch what changed meanwhile.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::catalog::{Catalog, Plugin};
use crate::client::StderrLink;
use crate::paths::confine;
use crate::runtime;
use crate::store::CallContext;

/// Editors and unpackers write in bursts; refresh once things are quiet.
const SETTLE: Duration = Duration::from_millis(300);
/// At most this many changed paths are passed to `refresh`.
const MAX_CHANGED: usize = 200;

#[derive(Default)]
pub struct Background {
    enabled: AtomicBool,
    /// The folder remembering each plugin's watched folders.
    memo: OnceLock<PathBuf>,
    /// Plugin path -> (hash of the running version, its task).
    tasks: Mutex<HashMap<PathBuf, (String, JoinHandle<()>)>>,
}

impl Background {
    /// Start background work from now on (`host serve` does; one-shot
    /// commands do not), remembering watched folders in `memo`.
    pub fn enable(&self, catalog: &Catalog, memo: PathBuf) {
        let _ = self.memo.set(memo);
        self.enabled.store(true, Ordering::SeqCst);
        self.sync(catalog);
    }

    /// Start tasks for new plugins, stop those of plugins that went away.
    pub fn sync(&self, catalog: &Catalog) {
        if !self.enabled.load(Ordering::SeqCst) {
            return;
        }
        let mut tasks = self.tasks.lock().expect("background lock");
        tasks.retain(|path, (hash, task)| {
            let alive = catalog
                .plugins
                .iter()
                .any(|p| &p.path == path && &p.hash == hash);
            if !alive {
                task.abort();
            }
            alive
        });
        for plugin in &catalog.plugins {
            if plugin.prepared.exports.lifecycle.is_some() && !tasks.contains_key(&plugin.path) {
                // Set before the task runs: a call that comes first waits.
                plugin.first_refresh.send_replace(true);
                let memo = self.memo.get().map(|dir| dir.join(&plugin.name));
                let task = tokio::spawn(refresh_loop(plugin.clone(), memo));
                tasks.insert(plugin.path.clone(), (plugin.hash.clone(), task));
            }
        }
    }
}

impl Background {
    /// Stop all background work and wait until it has let go (at the host's
    /// shutdown: a task polled while the runtime stops would see its
    /// blocking file operations cancelled under it). An index build cut
    /// short leaves the previous index in place.
    pub async fn stop(&self) {
        self.enabled.store(false, Ordering::SeqCst);
        let tasks: Vec<JoinHandle<()>> = self
            .tasks
            .lock()
            .expect("background lock")
            .drain()
            .map(|(_, (_, task))| task)
            .collect();
        for task in tasks {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        for (_, (_, task)) in self.tasks.lock().expect("background lock").drain() {
            task.abort();
        }
    }
}

/// Ends a plugin's first refresh however its task ends (aborted too).
struct FirstRefreshEnds(Arc<Plugin>);

impl Drop for FirstRefreshEnds {
    fn drop(&mut self) {
        self.0.first_refresh.send_replace(false);
    }
}

async fn refresh_loop(plugin: Arc<Plugin>, memo: Option<PathBuf>) {
    let _ends = FirstRefreshEnds(plugin.clone());
    let (tx, mut rx) = mpsc::unbounded_channel::<PathBuf>();
    // What it watched last time, watched from before its first refresh
    // (checked against its roots again, as any folder it names).
    let remembered = memo
        .as_deref()
        .and_then(|m| std::fs::read_to_string(m).ok())
        .map(|text| text.lines().map(str::to_string).collect())
        .unwrap_or_default();
    let mut watched: Vec<PathBuf> = allowed_dirs(&plugin, remembered);
    let mut watcher = watch(&plugin.name, &watched, tx.clone());
    let mut changed: Vec<String> = Vec::new();
    loop {
        let started = Instant::now();
        let call = CallContext::new(
            "lifecycle.refresh",
            plugin.grants.timeout_ms,
            Arc::new(StderrLink),
        )
        .announcing(&plugin.announcer);
        let trace_id = call.trace_id.clone();
        let elapsed_ms = || started.elapsed().as_millis() as u64;
        let refreshed =
            runtime::refresh(&plugin.prepared, plugin.grants.clone(), call, &changed).await;
        plugin.first_refresh.send_replace(false);
        match refreshed {
            None => return,
            Some(Ok(Ok(dirs))) => {
                tracing::info!(plugin = %plugin.name, changed = changed.len(), elapsed_ms = elapsed_ms(), %trace_id, "background refresh done");
                let dirs = allowed_dirs(&plugin, dirs);
                if dirs != watched {
                    watcher = watch(&plugin.name, &dirs, tx.clone());
                    watched = dirs;
                    remember(memo.as_deref(), &watched);
                    // A change made while this refresh ran, before the
                    // watcher existed, would be lost: look once more.
                    changed.clear();
                    continue;
                }
            }
            Some(Ok(Err(e))) => {
                tracing::warn!(plugin = %plugin.name, code = %e.code, message = %e.message, %trace_id, "background refresh failed")
            }
            Some(Err(failure)) => {
                tracing::warn!(plugin = %plugin.name, error = %failure, %trace_id, "background refresh failed")
            }
        }
        let _keep_watching = &watcher;
        let Some(first) = rx.recv().await else { return };
        let mut paths = BTreeSet::from([first]);
        while let Ok(Some(path)) = tokio::time::timeout(SETTLE, rx.recv()).await {
            paths.insert(path);
        }
        changed = paths
            .iter()
            .take(MAX_CHANGED)
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
    }
}

/// Write down the folders a plugin watches, for its next start.
fn remember(memo: Option<&std::path::Path>, dirs: &[PathBuf]) {
    let Some(memo) = memo else { return };
    let text: String = dirs
        .iter()
        .map(|d| format!("{}\n", d.to_string_lossy()))
        .collect();
    let written = memo
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(memo, text));
    if let Err(e) = written {
        tracing::debug!(memo = %memo.display(), error = %e, "watched folders not remembered");
    }
}

/// The requested directories the plugin may read; the rest are logged.
fn allowed_dirs(plugin: &Plugin, dirs: Vec<String>) -> Vec<PathBuf> {
    let grants = &plugin.grants;
    // Writable roots are readable too (they are preopened read-write).
    let roots: Vec<PathBuf> = if grants.has("fs") {
        grants
            .read_roots
            .iter()
            .chain(&grants.write_roots)
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    dirs.into_iter()
        .filter_map(|d| {
            let allowed = confine(&d, &grants.workspace, &roots);
            if allowed.is_none() {
                tracing::warn!(plugin = %plugin.name, dir = %d, "not watching a directory outside the plugin's readable roots (fs.read)");
            }
            allowed
        })
        .collect()
}

fn watch(
    plugin: &str,
    dirs: &[PathBuf],
    tx: mpsc::UnboundedSender<PathBuf>,
) -> Option<notify::RecommendedWatcher> {
    if dirs.is_empty() {
        return None;
    }
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !event.kind.is_access()
        {
            for path in event.paths {
                let _ = tx.send(path);
            }
        }
    })
    .map_err(|e| tracing::warn!(%plugin, error = %e, "cannot start a watcher"))
    .ok()?;
    for dir in dirs {
        if let Err(e) = watcher.watch(dir, RecursiveMode::Recursive) {
            tracing::warn!(%plugin, dir = %dir.display(), error = %e, "cannot watch directory");
        }
    }
    Some(watcher)
}
