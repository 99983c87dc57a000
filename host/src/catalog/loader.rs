//! The [`Loader`]: reads the plugins folder, lists what the components
//! declare, compiles them (or takes the cached artifacts), asks each for
//! its tools and places them in a [`Catalog`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use tokio::sync::broadcast;
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use super::tools::{Schemas, tool_defs};
use super::{Catalog, Compiled, Found, Listed, Plugin, Problem, sha256_hex, wasm_files};
use crate::admission::Gate;
use crate::bindings::Exports;
use crate::caps::notify::{Announcer, Change, uri_scheme};
use crate::client::StderrLink;
use crate::declared::declared;
use crate::engine::{ComponentCache, Origin};
use crate::policy::{Config, Grants, Places};
use crate::runtime::{self, Prepared};
use crate::store::{CallContext, CallState};

/// Everything needed to load plugins.
pub struct Loader {
    pub engine: Engine,
    linker: Linker<CallState>,
    /// The policy and the compiled-component cache made for it, swapped
    /// whole when the config file changes ([`Loader::reconfigure`]).
    current: std::sync::RwLock<(Arc<Config>, Arc<ComponentCache>)>,
    /// The user's config file, read again when it changes.
    pub config_file: Option<PathBuf>,
    /// Whether it may be missing (the default place, not `--config`):
    /// then the shipped defaults are in force until it is written.
    pub config_optional: bool,
    pub places: Places,
    pub config_hint: String,
    pub plugins_dir: PathBuf,
    pub underscore_names: bool,
    /// Where changes to what is served are told (see [`Change`]).
    pub changes: broadcast::Sender<Change>,
    /// Where plugins ask to have their tools listed again (`notify.
    /// tools-changed`), and where the service hears it (taken once).
    relist: tokio::sync::mpsc::UnboundedSender<String>,
    pub relisted: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<String>>>,
    /// Where `host secret set` keeps what plugins' `secrets` name.
    pub secrets: crate::secrets::Store,
    /// `--tools`: the only tools this host serves (globs; empty: all).
    pub only_tools: Vec<String>,
}

/// How long a plugin may take to list its tools.
const LIST_DEADLINE: Duration = Duration::from_secs(5);

impl Loader {
    pub fn new(
        engine: Engine,
        config: Config,
        places: Places,
        config_hint: String,
        plugins_dir: PathBuf,
        underscore_names: bool,
    ) -> Result<Self> {
        let linker = crate::store::linker(&engine)?;
        let cache = Self::cache_for(&engine, &config, &places);
        let (relist, relisted) = tokio::sync::mpsc::unbounded_channel();
        Ok(Loader {
            engine,
            linker,
            current: std::sync::RwLock::new((Arc::new(config), cache)),
            config_file: None,
            config_optional: false,
            places,
            config_hint,
            plugins_dir,
            underscore_names,
            changes: broadcast::channel(64).0,
            relist,
            relisted: std::sync::Mutex::new(Some(relisted)),
            secrets: crate::secrets::Store::at(crate::secrets::Store::default_dir()),
            only_tools: Vec::new(),
        })
    }

    /// The policy in force.
    pub fn config(&self) -> Arc<Config> {
        self.current.read().expect("config lock").0.clone()
    }

    fn cache(&self) -> Arc<ComponentCache> {
        self.current.read().expect("config lock").1.clone()
    }

    /// Compiled components are kept nowhere a plugin may write.
    fn cache_for(engine: &Engine, config: &Config, places: &Places) -> Arc<ComponentCache> {
        let writable = config.plugin_write_roots(places);
        Arc::new(ComponentCache::new(
            engine,
            places.cache_dir.join("compiled"),
            &writable,
        ))
    }

    /// Read the config file again and make it the policy in force (for
    /// plugins loaded from now on); a file that does not load changes
    /// nothing and says why.
    pub fn reconfigure(&self) -> Result<()> {
        let file = self
            .config_file
            .as_deref()
            .filter(|p| !self.config_optional || p.exists());
        let config = Config::load(file)?;
        let cache = Self::cache_for(&self.engine, &config, &self.places);
        *self.current.write().expect("config lock") = (Arc::new(config), cache);
        Ok(())
    }

    pub fn grants(&self, plugin: &str) -> Grants {
        let mut grants = self
            .config()
            .grants(plugin, &self.places, &self.config_hint);
        let (secrets, missing) = self.secrets.for_plugin(plugin, &grants.secret_names);
        if !missing.is_empty() {
            tracing::warn!(
                plugin, missing = %missing.join(", "),
                "secrets the policy names are not set: `host secret set {plugin} NAME` (the value on stdin)"
            );
        }
        // Masked from the first answer on: a plugin given a value must not
        // hand it back to the client (nor a program it runs print it).
        for (name, value) in &secrets {
            crate::scrub::remember(name, value.expose());
        }
        grants.secrets = secrets;
        // The plugins' secrets are no program's to read.
        if let Some(confine) = &mut grants.confinement {
            confine.hidden.push(self.secrets.dir().to_path_buf());
        }
        grants
    }

    /// The tools of the plugin files `found` as the components declare
    /// them (their `mcphost:plugin-tools` sections), read without compiling
    /// anything: a client can list them while the plugins compile. None
    /// when a plugin declares none (only running it tells), or the
    /// declarations clash: then only a load can say what is served.
    pub fn listing(&self, found: &[Found]) -> Option<Catalog> {
        let mut catalog = Catalog::default();
        let mut exposed = std::collections::HashSet::new();
        for f in found {
            let mut tools =
                tool_defs(f.tools.clone()?, self.underscore_names, Schemas::Listed).ok()?;
            crate::catalog::link_views(&f.name, &f.views, &mut tools);
            crate::catalog::filter::apply(&self.grants(&f.name), &self.only_tools, &mut tools);
            if tools.iter().any(|t| !exposed.insert(t.exposed.clone())) {
                return None;
            }
            catalog.listed.push(Arc::new(Listed {
                plugin: f.name.clone(),
                tools,
                instructions: f.instructions.clone(),
            }));
        }
        (!catalog.listed.is_empty()).then_some(catalog)
    }

    /// Load the plugins folder, reusing plugins of `previous` whose bytes
    /// are unchanged.
    pub async fn load_all(&self, previous: &Catalog) -> Catalog {
        let mut catalog = Catalog::default();
        let found = self.read_folder(&mut catalog);
        self.load_found(&found, previous, catalog).await
    }

    /// Whether every plugin file `found` is compiled already (loading them
    /// all then takes milliseconds).
    pub fn all_compiled(&self, found: &[Found]) -> bool {
        found
            .iter()
            .all(|f| f.bytes.is_ok() && self.cache().has(&f.hash))
    }

    /// Load the plugin files `found` into `catalog` (holding the problems of
    /// reading the folder), reusing plugins of `previous`.
    pub async fn load_found(
        &self,
        found: &[Found],
        previous: &Catalog,
        mut catalog: Catalog,
    ) -> Catalog {
        // Unchanged plugins are kept; the others are compiled side by side
        // (a cold start compiles them all: 2.1 s one after another on 2
        // cores), then asked for their tools in folder order.
        let compiled: Vec<Result<Compiled>> = std::thread::scope(|scope| {
            let jobs: Vec<_> = found
                .iter()
                .map(|f| scope.spawn(|| self.compile(previous, f)))
                .collect();
            jobs.into_iter()
                .map(|job| {
                    job.join()
                        .unwrap_or_else(|_| Err(anyhow!("compiling it panicked")))
                })
                .collect()
        });
        for (found, compiled) in found.iter().zip(compiled) {
            let plugin = self.ready(found, compiled).await;
            self.place(&mut catalog, found, &plugin);
        }
        catalog
    }

    /// The plugin files of the folder, each with its declared name; files
    /// that cannot be plugins, or repeat a name, go to `catalog`'s problems.
    pub fn read_folder(&self, catalog: &mut Catalog) -> Vec<Found> {
        let files = match wasm_files(&self.plugins_dir) {
            Ok(files) => files,
            Err(e) => {
                tracing::error!(dir = %self.plugins_dir.display(), error = %format!("{e:#}"), "cannot read the plugins folder");
                return Vec::new();
            }
        };
        let mut read: Vec<Found> = Vec::new();
        for (stem, path) in files {
            let bytes = std::fs::read(&path).map_err(|e| anyhow!("cannot read the file: {e}"));
            let (name, instructions, tools, views) = match bytes.as_deref().map(declared) {
                Ok(Ok(d)) => {
                    let name = d.name.unwrap_or(stem);
                    for why in &d.broken_views {
                        tracing::warn!(plugin = %name, reason = %why, "view left out");
                    }
                    (name, d.instructions, d.tools, d.views)
                }
                Err(_) => (stem, None, None, Vec::new()),
                Ok(Err(e)) => {
                    catalog.refuse(stem, path, format!("{e:#}"));
                    continue;
                }
            };
            if let Some(first) = read.iter().find(|f| f.name == name) {
                let reason = format!(
                    "plugin `{name}` is also {}; this file was not loaded: remove one of them \
                     (a plugin's name comes from the component, not from its file name)",
                    first.path.display()
                );
                catalog.refuse(name, path, reason);
                continue;
            }
            let hash = bytes.as_deref().map(sha256_hex).unwrap_or_default();
            read.push(Found {
                name,
                path,
                bytes,
                hash,
                instructions,
                tools,
                views,
            });
        }
        read
    }

    /// `bytes` loaded as the plugin file `path` would be (compiled into the
    /// cache, linked, asked for its tools) without serving it: what
    /// `host install` checks before a file lands in the folder. Its
    /// declared name, or `fallback`; its tools.
    pub async fn try_bytes(
        &self,
        fallback: &str,
        path: &Path,
        bytes: Vec<u8>,
    ) -> Result<Arc<Plugin>> {
        let d = declared(&bytes)?;
        let found = Found {
            name: d.name.unwrap_or_else(|| fallback.to_string()),
            path: path.to_path_buf(),
            hash: sha256_hex(&bytes),
            bytes: Ok(bytes),
            instructions: d.instructions,
            tools: d.tools,
            views: d.views,
        };
        let compiled = self.compile(&Catalog::default(), &found);
        self.ready(&found, compiled).await
    }

    /// The compile step of a plugin file: the plugin of `previous` with the
    /// same bytes, or its component, from the cache or compiled (blocking:
    /// ~0.1-0.3 s of both cores).
    pub fn compile(&self, previous: &Catalog, found: &Found) -> Result<Compiled> {
        let bytes = found.bytes.as_ref().map_err(|e| anyhow!("{e}"))?;
        if let Some(same) = previous
            .plugins
            .iter()
            .find(|p| p.path == found.path && p.hash == found.hash)
        {
            return Ok(Compiled::Same(same.clone()));
        }
        let (component, origin) = self.cache().load(&self.engine, bytes, &found.hash)?;
        Ok(Compiled::New(component, origin, found.hash.clone()))
    }

    /// A compiled plugin, loaded: linked, asked for its tools.
    pub async fn ready(&self, found: &Found, compiled: Result<Compiled>) -> Result<Arc<Plugin>> {
        match compiled? {
            Compiled::Same(same) => Ok(same),
            Compiled::New(component, origin, hash) => self
                .load(
                    &found.name,
                    (found.instructions.clone(), found.views.clone()),
                    &found.path,
                    component,
                    origin,
                    hash,
                )
                .await
                .map(Arc::new),
        }
    }

    /// Serve `plugin` in `catalog`, or say why it cannot be: `found`'s
    /// listed tools give way either way.
    pub fn place(&self, catalog: &mut Catalog, found: &Found, plugin: &Result<Arc<Plugin>>) {
        catalog.listed.retain(|l| l.plugin != found.name);
        match plugin {
            Ok(plugin) => {
                if self.admit(catalog, plugin.clone()) {
                    tracing::info!(plugin = %plugin.name, tools = plugin.tools.len(), origin = ?plugin.origin, "plugin loaded");
                }
            }
            Err(e) => catalog.refuse(found.name.clone(), found.path.clone(), format!("{e:#}")),
        }
    }

    /// The plugins `found` as loaded (`plugins`, in the same order), served
    /// in folder order after the `problems` of reading the folder: what
    /// [`Loader::place`] already said of each is not said again.
    pub fn assemble(
        &self,
        mut catalog: Catalog,
        found: &[Found],
        plugins: Vec<Result<Arc<Plugin>>>,
    ) -> Catalog {
        for (found, plugin) in found.iter().zip(plugins) {
            match plugin {
                Ok(plugin) => {
                    self.admit(&mut catalog, plugin);
                }
                Err(e) => catalog.problems.push(Problem {
                    plugin: found.name.clone(),
                    path: found.path.clone(),
                    reason: format!("{e:#}"),
                }),
            }
        }
        catalog
    }

    /// Add a plugin unless one of its tools or its resource scheme is
    /// already served.
    fn admit(&self, catalog: &mut Catalog, plugin: Arc<Plugin>) -> bool {
        let tool_clash = plugin.tools.iter().find_map(|t| {
            catalog
                .tools
                .get(&t.exposed)
                .map(|(other, _)| (format!("tool `{}`", t.exposed), other.clone()))
        });
        let scheme_clash = plugin.scheme.as_ref().and_then(|s| {
            catalog
                .schemes
                .get(s)
                .map(|other| (format!("resource scheme `{s}://`"), other.clone()))
        });
        let prompt_clash = plugin.prompts.iter().find_map(|p| {
            catalog
                .prompts
                .get(&p.name)
                .map(|other| (format!("prompt `{}`", p.name), other.clone()))
        });
        if let Some((what, other)) = tool_clash.or(scheme_clash).or(prompt_clash) {
            let reason = format!(
                "{what} is offered by both plugin `{}` ({}) and plugin `{}` ({}); `{}` was not loaded: rename or remove one of them",
                other.name,
                other.path.display(),
                plugin.name,
                plugin.path.display(),
                plugin.name
            );
            catalog.refuse(plugin.name.clone(), plugin.path.clone(), reason);
            return false;
        }
        for (i, tool) in plugin.tools.iter().enumerate() {
            catalog
                .tools
                .insert(tool.exposed.clone(), (plugin.clone(), i));
        }
        if let Some(scheme) = &plugin.scheme {
            catalog.schemes.insert(scheme.clone(), plugin.clone());
        }
        for prompt in &plugin.prompts {
            catalog.prompts.insert(prompt.name.clone(), plugin.clone());
        }
        catalog.hidden.extend(plugin.hidden.iter().cloned());
        catalog.plugins.push(plugin);
        true
    }

    async fn load(
        &self,
        name: &str,
        (instructions, views): (Option<String>, Vec<crate::views::View>),
        path: &Path,
        component: Component,
        origin: Origin,
        hash: String,
    ) -> Result<Plugin> {
        let started = Instant::now();
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .context("the component needs imports this host does not provide")?;
        let exports = Exports::find(&pre)
            .map_err(anyhow::Error::from)
            .context("the component does not export the mcphost:plugin/tools interface")?;
        let prepared = Prepared {
            pre,
            exports,
            slots: crate::admission::Pool::engine().reserve(),
        };
        let grants = Arc::new(self.grants(name));
        let call = CallContext::new(
            "describe",
            LIST_DEADLINE.as_millis() as u64,
            Arc::new(StderrLink),
        );
        let offer = runtime::describe(&prepared, grants.clone(), call)
            .await
            .map_err(|e| anyhow!("listing its tools failed: {e}"))?;
        let uris = offer
            .templates
            .iter()
            .map(|t| t.uri_template.as_str())
            .chain(offer.resources.iter().map(|r| r.uri.as_str()));
        let scheme = resource_scheme(uris)?;
        let mut tools = tool_defs(offer.tools, self.underscore_names, Schemas::Compiled)?;
        crate::catalog::link_views(name, &views, &mut tools);
        let hidden = crate::catalog::filter::apply(&grants, &self.only_tools, &mut tools);
        tracing::debug!(plugin = %name, ?origin, elapsed_us = started.elapsed().as_micros() as u64, "plugin prepared");
        Ok(Plugin {
            name: name.to_string(),
            path: path.to_path_buf(),
            hash,
            origin,
            prepared,
            gate: Gate::new(grants.concurrency, grants.queue),
            grants,
            tools,
            templates: offer.templates,
            announcer: Announcer {
                scheme: scheme.clone(),
                changes: self.changes.clone(),
                relist: self.relist.clone(),
            },
            scheme,
            prompts: offer.prompts,
            instructions,
            views,
            hidden,
            first_refresh: tokio::sync::watch::Sender::new(false),
        })
    }
}

/// The one URI scheme all of a plugin's resource templates and listed
/// resources use.
fn resource_scheme<'a>(uris: impl Iterator<Item = &'a str>) -> Result<Option<String>> {
    let mut scheme = None;
    for uri in uris {
        let s = uri_scheme(uri)
            .ok_or_else(|| anyhow!("resource `{uri}` does not start with `<scheme>://`"))?;
        match &scheme {
            Some(first) if first != s => {
                bail!("resources use two schemes, `{first}` and `{s}`: use one per plugin")
            }
            _ => scheme = Some(s.to_string()),
        }
    }
    Ok(scheme)
}
