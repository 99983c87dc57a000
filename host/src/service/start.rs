//! How a service starts: every plugin loaded first (`host call`), or the
//! tools listed at once and the plugins loaded behind (`host serve`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::Service;
use crate::caps::notify::Change;
use crate::catalog::{Catalog, Found, Loader, Plugin};

impl Service {
    /// A service with every plugin loaded.
    pub async fn start(loader: Loader) -> Service {
        let catalog = loader.load_all(&Catalog::default()).await;
        Service::new(loader, catalog, true)
    }

    /// A service that lists the tools the plugins declare at once and loads
    /// the plugins behind when some must be compiled (what takes time at a
    /// cold start), each serving calls as soon as it is loaded: a call waits for
    /// its own plugin only; the resource and prompt lists wait for all.
    /// When the loaded tools differ from the listed ones (a plugin fills in
    /// its declarations when it runs, or failed to load), clients are told
    /// the list changed. Each plugin's background work starts when it is
    /// loaded, remembering in `memo` what it watches.
    pub async fn start_listed(loader: Loader, memo: PathBuf) -> Arc<Service> {
        let mut problems = Catalog::default();
        let found = loader.read_folder(&mut problems);
        // Compiled already, they load as fast as they list: loaded first,
        // nothing else competes with the first answers.
        let listing = (!loader.all_compiled(&found))
            .then(|| loader.listing(&found))
            .flatten();
        let Some(mut listing) = listing else {
            let catalog = loader
                .load_found(&found, &Catalog::default(), problems)
                .await;
            let service = Arc::new(Service::new(loader, catalog, true));
            service.background.enable(&service.catalog(), memo);
            service.relist_when_asked();
            return service;
        };
        tracing::info!(
            plugins = listing.listed.len(),
            tools = listing.served_tools().len(),
            "tools listed before loading (as the components declare them)"
        );
        listing.problems = problems.problems.clone();
        let service = Arc::new(Service::new(loader, listing, false));
        tokio::spawn(service.clone().load_behind(found, problems, memo));
        service.relist_when_asked();
        service
    }

    /// Compile the plugins `found` and add each to the served catalog as it
    /// is ready; once all are, serve them in folder order (which decides
    /// clashes), after the `problems` of reading the folder.
    async fn load_behind(self: Arc<Self>, found: Vec<Found>, problems: Catalog, memo: PathBuf) {
        let listed = self.catalog();
        let mut catalog = Catalog::clone(&listed);
        self.background.enable(&catalog, memo);
        let found = Arc::new(found);
        let (ready, mut compiled) = tokio::sync::mpsc::unbounded_channel();
        let compiling = (self.clone(), found.clone());
        // One at a time, smallest first: a compile already keeps every core
        // busy, so side by side they would all end late together; this way
        // small plugins serve calls early.
        let compiler = tokio::task::spawn_blocking(move || {
            let (service, found) = compiling;
            let mut order: Vec<usize> = (0..found.len()).collect();
            order.sort_by_key(|&i| found[i].size());
            for i in order {
                let result = service.loader.compile(&Catalog::default(), &found[i]);
                if ready.send((i, result)).is_err() {
                    return;
                }
            }
        });
        let mut plugins: Vec<Option<anyhow::Result<Arc<Plugin>>>> =
            found.iter().map(|_| None).collect();
        while let Some((i, result)) = compiled.recv().await {
            let plugin = self.loader.ready(&found[i], result).await;
            self.loader.place(&mut catalog, &found[i], &plugin);
            // Its first refresh starts before any call can see it: calls
            // wait for that refresh.
            self.background.sync(&catalog);
            *self.catalog.write().expect("catalog lock") = Arc::new(catalog.clone());
            // Wakes the calls waiting for their plugin.
            self.loaded.send_replace(false);
            plugins[i] = Some(plugin);
        }
        let _ = compiler.await;
        let plugins = plugins
            .into_iter()
            .map(|p| p.unwrap_or_else(|| Err(anyhow::anyhow!("compiling it panicked"))))
            .collect();
        let loaded = self.loader.assemble(problems, &found, plugins);
        let loaded = Arc::new(loaded);
        *self.catalog.write().expect("catalog lock") = loaded.clone();
        self.loaded.send_replace(true);
        self.background.sync(&loaded);
        if listed.as_listed() != loaded.as_listed() {
            let _ = self.loader.changes.send(Change::Tools);
        }
    }

    /// Once every plugin is loaded and has ended its first refresh,
    /// start-up is over: the pages only it used are let go
    /// ([`crate::platform::release_startup_pages`]).
    pub async fn release_when_settled(self: Arc<Self>) {
        let catalog = self.loaded().await;
        for plugin in &catalog.plugins {
            plugin
                .first_refresh_done(Duration::from_millis(plugin.grants.timeout_ms))
                .await;
        }
        let _ = tokio::task::spawn_blocking(crate::platform::release_startup_pages).await;
    }
}
