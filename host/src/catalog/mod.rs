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

pub mod filter;
mod loader;
mod tools;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime::component::Component;

use crate::admission::Gate;
use crate::bindings::ResourceTemplate;
use crate::caps::notify::{Announcer, uri_scheme};

use crate::engine::Origin;
use crate::policy::Grants;
use crate::runtime::Prepared;
pub use loader::Loader;
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
    /// The pages it shows people ([`crate::views`]).
    pub views: Vec<crate::views::View>,
    /// Its tools the filters hide ([`filter`]), exposed name and why.
    pub hidden: Vec<(String, String)>,
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
    /// The views it declares ([`crate::views`]).
    views: Vec<crate::views::View>,
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
    /// Tools the filters hide, by exposed name, and why.
    pub hidden: BTreeMap<String, String>,
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
                    def.icons,
                    def.view
                ])
                .to_string()
            })
            .collect()
    }

    pub fn tool(&self, exposed: &str) -> Option<(&Arc<Plugin>, &ToolDef)> {
        self.tools.get(exposed).map(|(p, i)| (p, &p.tools[*i]))
    }

    /// The view `ui://<plugin>/<view>` names, if a loaded plugin has it.
    pub fn view(&self, uri: &str) -> Option<&crate::views::View> {
        let (plugin, view) = crate::views::parse_uri(uri)?;
        let plugin = self.plugins.iter().find(|p| p.name == plugin)?;
        plugin.views.iter().find(|v| v.name == view)
    }

    /// Every loaded plugin's views, with their URIs.
    pub fn views(&self) -> Vec<(String, &crate::views::View)> {
        self.plugins
            .iter()
            .flat_map(|p| {
                p.views
                    .iter()
                    .map(|v| (crate::views::uri(&p.name, &v.name), v))
            })
            .collect()
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
                    tool.icons,
                    tool.view
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

/// Point each tool's `x-view` (a view name) at its view's URI, or drop it
/// with a warning when the plugin has no such view.
pub fn link_views(plugin: &str, views: &[crate::views::View], tools: &mut [ToolDef]) {
    for tool in tools {
        let Some(name) = tool.view.take() else {
            continue;
        };
        if views.iter().any(|v| v.name == name) {
            tool.view = Some(crate::views::uri(plugin, &name));
        } else {
            tracing::warn!(%plugin, tool = %tool.name, view = %name, "the tool names a view the plugin does not have; it is served without one");
        }
    }
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
