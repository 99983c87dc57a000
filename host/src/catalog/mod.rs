//! The plugin loader and the catalog of tools it builds.
//!
//! Every `*.wasm` file in the plugins folder is a plugin. Its name, which
//! keys its policy, is the one the component declares (the custom section
//! `mcphost:plugin-name`, written by the SDK's `export!`), else the file's
//! (`run_test.wasm` → `run_test`); two files claiming one name load the
//! first only. A component may also declare instructions for agents
//! (`mcphost:plugin-instructions`), served in the MCP `instructions`.
//! Loading one compiles it (or takes the cached artifact), links it, asks it
//! for its tools and compiles their schemas. A plugin that fails any step
//! is reported with its name and the reason and left out; so is one that
//! offers a tool name another plugin already serves. Reloading keeps
//! plugins whose bytes did not change. At a start, the tools the
//! components declare ([`crate::declared`]) are listed before any is
//! compiled ([`Loader::listing`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use tokio::sync::broadcast;
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use crate::admission::Gate;
use crate::bindings::{Exports, ResourceTemplate};
use crate::caps::notify::{Announcer, Change, uri_scheme};
use crate::client::StderrLink;
use crate::declared::declared;

mod tools;
use crate::engine::{ComponentCache, Origin};
use crate::policy::{Config, Grants, Places};
use crate::runtime::{self, Prepared};
use crate::store::{CallContext, CallState};
pub use tools::{Schemas, TaskSupport, ToolDef, tool_defs};

/// A plugin ready to serve calls.
pub struct Plugin {
    pub name: String,
    pub path: PathBuf,
    pub hash: String,
    pub origin: Origin,
    pub prepared: Prepared,
    pub grants: Arc<Grants>,
    /// Its calls' turns (`limits.concurrency`, `limits.queue`).
    pub gate: Gate,
    pub tools: Vec<ToolDef>,
    /// Resource templates it serves, and the URI scheme they and its
    /// listed resources share.
    pub templates: Vec<ResourceTemplate>,
    pub scheme: Option<String>,
    /// How its calls tell of changes to its resources.
    pub announcer: Announcer,
    /// The MCP prompts it offers.
    pub prompts: Vec<crate::bindings::Prompt>,
    /// What it tells agents about its tools (see [`Declared`]).
    pub instructions: Option<String>,
    /// Whether its first background refresh after loading is under way
    /// ([`crate::background`]): its calls wait for that one, so the first
    /// answers after a restart with changed files are not the old ones.
    pub first_refresh: tokio::sync::watch::Sender<bool>,
}

impl Plugin {
    /// Wait (at most `limit`) until the plugin's first refresh after
    /// loading has ended; at once when there is none under way.
    pub async fn first_refresh_done(&self, limit: Duration) {
        let mut running = self.first_refresh.subscribe();
        let _ = tokio::time::timeout(limit, running.wait_for(|running| !running)).await;
    }
}

/// A plugin file of the folder, read.
pub struct Found {
    pub name: String,
    pub path: PathBuf,
    bytes: Result<Vec<u8>>,
    /// The SHA-256 of its bytes, hex.
    hash: String,
    instructions: Option<String>,
    /// The tools it declares, if it does.
    tools: Option<Vec<crate::bindings::Tool>>,
}

impl Found {
    /// Its size in bytes (0 when it could not be read).
    pub fn size(&self) -> usize {
        self.bytes.as_ref().map_or(0, Vec::len)
    }
}

/// A plugin file after the compile step of a (re)load.
pub enum Compiled {
    /// Byte for byte the plugin already loaded.
    Same(Arc<Plugin>),
    New(Component, Origin, String),
}

/// A plugin that could not be loaded, and why.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Problem {
    pub plugin: String,
    pub path: PathBuf,
    pub reason: String,
}

/// What is being served: the loaded plugins, their tools by exposed name,
/// and the plugins that were left out.
#[derive(Default, Clone)]
pub struct Catalog {
    pub plugins: Vec<Arc<Plugin>>,
    pub tools: BTreeMap<String, (Arc<Plugin>, usize)>,
    /// Which plugin serves resources of each URI scheme.
    pub schemes: BTreeMap<String, Arc<Plugin>>,
    /// Which plugin offers each prompt, by name.
    pub prompts: BTreeMap<String, Arc<Plugin>>,
    pub problems: Vec<Problem>,
    /// Tools listed before their plugins are loaded, from what each
    /// component declares ([`Loader::listing`]); empty once loaded.
    pub listed: Vec<Arc<Listed>>,
}

/// A plugin's tools as its component declares them, listed while it is
/// being compiled.
pub struct Listed {
    pub plugin: String,
    pub tools: Vec<ToolDef>,
    pub instructions: Option<String>,
}

impl Catalog {
    /// Leave a plugin out, saying why (in the log and to `host check`).
    fn refuse(&mut self, plugin: String, path: PathBuf, reason: String) {
        tracing::warn!(plugin = %plugin, path = %path.display(), %reason, "plugin not loaded");
        self.problems.push(Problem {
            plugin,
            path,
            reason,
        });
    }

    /// Every tool served, by exposed name: the loaded plugins' or, while
    /// they load, the listed ones.
    pub fn served_tools(&self) -> Vec<(&str, &ToolDef)> {
        let loaded = self
            .tools
            .iter()
            .map(|(name, (p, i))| (name.as_str(), &p.tools[*i]));
        let listed = self
            .listed
            .iter()
            .flat_map(|l| &l.tools)
            .map(|t| (t.exposed.as_str(), t));
        let mut all: Vec<(&str, &ToolDef)> = loaded.chain(listed).collect();
        all.sort_by_key(|(name, _)| *name);
        all
    }

    /// The definition of the tool served as `exposed`, loaded or listed
    /// (asked at every call: a lookup, the listed ones only while loading).
    pub fn tool_def(&self, exposed: &str) -> Option<&ToolDef> {
        self.tool(exposed).map(|(_, def)| def).or_else(|| {
            self.listed
                .iter()
                .flat_map(|l| &l.tools)
                .find(|t| t.exposed == exposed)
        })
    }

    /// Each plugin's instructions for agents, by plugin name.
    pub fn instructions(&self) -> Vec<(&str, &str)> {
        let loaded = self
            .plugins
            .iter()
            .filter_map(|p| Some((p.name.as_str(), p.instructions.as_deref()?)));
        let listed = self
            .listed
            .iter()
            .filter_map(|l| Some((l.plugin.as_str(), l.instructions.as_deref()?)));
        loaded.chain(listed).collect()
    }

    /// What clients see of the tools, to tell whether a load changed it.
    pub fn as_listed(&self) -> Vec<String> {
        self.served_tools()
            .into_iter()
            .map(|(name, def)| {
                serde_json::json!([
                    name,
                    def.description,
                    def.input_schema,
                    def.output_schema,
                    def.annotations,
                    def.icons
                ])
                .to_string()
            })
            .collect()
    }

    pub fn tool(&self, exposed: &str) -> Option<(&Arc<Plugin>, &ToolDef)> {
        self.tools.get(exposed).map(|(p, i)| (p, &p.tools[*i]))
    }

    /// The plugin serving resource `uri`, by its scheme.
    pub fn resource_plugin(&self, uri: &str) -> Option<&Arc<Plugin>> {
        self.schemes.get(uri_scheme(uri)?)
    }

    /// A fingerprint of the served tools, to tell whether a reload changed
    /// what clients see.
    pub fn fingerprint(&self) -> Vec<(String, String)> {
        self.tools
            .iter()
            .map(|(name, (p, i))| {
                // The same file may list other tools when asked again
                // (`notify.tools-changed`): the definition counts too.
                let tool = &p.tools[*i];
                let definition = serde_json::json!([
                    tool.description,
                    tool.input_schema,
                    tool.output_schema,
                    tool.annotations,
                    tool.icons
                ]);
                (name.clone(), sha256_hex(definition.to_string().as_bytes()))
            })
            .collect()
    }

    /// This catalog without plugin `name`: loading the folder against it
    /// loads that plugin afresh, asking for its tools again.
    pub fn without(&self, name: &str) -> Catalog {
        Catalog {
            plugins: self
                .plugins
                .iter()
                .filter(|p| p.name != name)
                .cloned()
                .collect(),
            ..Catalog::default()
        }
    }
}

/// Everything needed to load plugins.
pub struct Loader {
    pub engine: Engine,
    linker: Linker<CallState>,
    cache: ComponentCache,
    pub config: Config,
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
        let cache = ComponentCache::new(&engine, places.cache_dir.join("compiled"));
        let (relist, relisted) = tokio::sync::mpsc::unbounded_channel();
        Ok(Loader {
            engine,
            linker,
            cache,
            config,
            places,
            config_hint,
            plugins_dir,
            underscore_names,
            changes: broadcast::channel(64).0,
            relist,
            relisted: std::sync::Mutex::new(Some(relisted)),
        })
    }

    pub fn grants(&self, plugin: &str) -> Grants {
        self.config.grants(plugin, &self.places, &self.config_hint)
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
            let tools = tool_defs(f.tools.clone()?, self.underscore_names, Schemas::Listed).ok()?;
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
            .all(|f| f.bytes.is_ok() && self.cache.has(&f.hash))
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
            let (name, instructions, tools) = match bytes.as_deref().map(declared) {
                Ok(Ok(d)) => (d.name.unwrap_or(stem), d.instructions, d.tools),
                Err(_) => (stem, None, None),
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
            });
        }
        read
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
        let (component, origin) = self.cache.load(&self.engine, bytes, &found.hash)?;
        Ok(Compiled::New(component, origin, found.hash.clone()))
    }

    /// A compiled plugin, loaded: linked, asked for its tools.
    pub async fn ready(&self, found: &Found, compiled: Result<Compiled>) -> Result<Arc<Plugin>> {
        match compiled? {
            Compiled::Same(same) => Ok(same),
            Compiled::New(component, origin, hash) => self
                .load(
                    &found.name,
                    found.instructions.clone(),
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
        catalog.plugins.push(plugin);
        true
    }

    async fn load(
        &self,
        name: &str,
        instructions: Option<String>,
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
        let tools = tool_defs(offer.tools, self.underscore_names, Schemas::Compiled)?;
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

/// `(file stem, path)` of every `*.wasm` file, sorted by name.
pub fn wasm_files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "wasm") && path.is_file() {
            let name = path
                .file_stem()
                .expect("a .wasm file has a stem")
                .to_string_lossy()
                .into_owned();
            files.push((name, path));
        }
    }
    files.sort();
    Ok(files)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
