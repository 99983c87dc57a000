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
//! plugins whose bytes did not change.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value};
use tokio::sync::broadcast;
use wasmtime::Engine;
use wasmtime::component::{Component, Linker};

use crate::admission::Gate;
use crate::bindings::{Exports, ResourceTemplate};
use crate::caps::notify::{Announcer, Change, uri_scheme};
use crate::client::StderrLink;
use crate::engine::{ComponentCache, Origin};
use crate::policy::{Config, Grants, Places};
use crate::runtime::{self, Prepared};
use crate::schema::ArgsSchema;
use crate::store::{CallContext, CallState};

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

/// A plugin file after the compile step of a (re)load.
enum Compiled {
    /// Byte for byte the plugin already loaded.
    Same(Arc<Plugin>),
    New(Component, Origin, String),
}

/// One tool as declared by its plugin, with its compiled input schema.
pub struct ToolDef {
    /// The name the plugin uses.
    pub name: String,
    /// The name clients see (dots become `_` with `--underscore-names`).
    pub exposed: String,
    pub description: String,
    pub input_schema: Map<String, Value>,
    pub output_schema: Option<Map<String, Value>>,
    /// Structured results must match the output schema: TypeScript
    /// clients reject a call whose `structuredContent` does not, even an
    /// error.
    pub output_validator: Option<jsonschema::Validator>,
    pub validator: ArgsSchema,
    /// What the tool does to the world (read-only, destructive, ...).
    pub annotations: Option<rmcp::model::ToolAnnotations>,
    /// Pictures clients may show beside it (`x-icons`).
    pub icons: Option<Vec<rmcp::model::Icon>>,
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
#[derive(Default)]
pub struct Catalog {
    pub plugins: Vec<Arc<Plugin>>,
    pub tools: BTreeMap<String, (Arc<Plugin>, usize)>,
    /// Which plugin serves resources of each URI scheme.
    pub schemes: BTreeMap<String, Arc<Plugin>>,
    /// Which plugin offers each prompt, by name.
    pub prompts: BTreeMap<String, Arc<Plugin>>,
    pub problems: Vec<Problem>,
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
            .map(|(name, (p, _))| (name.clone(), p.hash.clone()))
            .collect()
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
        })
    }

    pub fn grants(&self, plugin: &str) -> Grants {
        self.config.grants(plugin, &self.places, &self.config_hint)
    }

    /// Load the plugins folder, reusing plugins of `previous` whose bytes
    /// are unchanged.
    pub async fn load_all(&self, previous: &Catalog) -> Catalog {
        let mut catalog = Catalog::default();
        let files = match wasm_files(&self.plugins_dir) {
            Ok(files) => files,
            Err(e) => {
                tracing::error!(dir = %self.plugins_dir.display(), error = %format!("{e:#}"), "cannot read the plugins folder");
                return catalog;
            }
        };
        // Unchanged plugins are kept; the others are compiled side by side
        // (a cold start compiles them all: 2.1 s one after another on 2
        // cores), then asked for their tools in folder order.
        // (name, path, bytes, instructions) of each file to load.
        type Found = (String, PathBuf, Result<Vec<u8>>, Option<String>);
        let mut read: Vec<Found> = Vec::new();
        for (stem, path) in files {
            let bytes = std::fs::read(&path).map_err(|e| anyhow!("cannot read the file: {e}"));
            let (name, instructions) = match bytes.as_deref().map(declared) {
                Ok(Ok(d)) => (d.name.unwrap_or(stem), d.instructions),
                Err(_) => (stem, None),
                Ok(Err(e)) => {
                    catalog.refuse(stem, path, format!("{e:#}"));
                    continue;
                }
            };
            if let Some((_, first, _, _)) = read.iter().find(|(n, _, _, _)| *n == name) {
                let reason = format!(
                    "plugin `{name}` is also {}; this file was not loaded: remove one of them \
                     (a plugin's name comes from the component, not from its file name)",
                    first.display()
                );
                catalog.refuse(name, path, reason);
                continue;
            }
            read.push((name, path, bytes, instructions));
        }
        let compiled: Vec<Result<Compiled>> = std::thread::scope(|scope| {
            let jobs: Vec<_> = read
                .iter()
                .map(|(_, path, bytes, _)| {
                    scope.spawn(move || {
                        let bytes = bytes.as_ref().map_err(|e| anyhow!("{e}"))?;
                        let hash = sha256_hex(bytes);
                        if let Some(same) = previous
                            .plugins
                            .iter()
                            .find(|p| &p.path == path && p.hash == hash)
                        {
                            return Ok(Compiled::Same(same.clone()));
                        }
                        let (component, origin) = self.cache.load(&self.engine, bytes, &hash)?;
                        Ok(Compiled::New(component, origin, hash))
                    })
                })
                .collect();
            jobs.into_iter()
                .map(|job| {
                    job.join()
                        .unwrap_or_else(|_| Err(anyhow!("compiling it panicked")))
                })
                .collect()
        });
        for ((name, path, _, instructions), compiled) in read.into_iter().zip(compiled) {
            let loaded = match compiled {
                Ok(Compiled::Same(same)) => Ok(same),
                Ok(Compiled::New(component, origin, hash)) => self
                    .load(&name, instructions, &path, component, origin, hash)
                    .await
                    .map(Arc::new),
                Err(e) => Err(e),
            };
            match loaded {
                Ok(plugin) => self.admit(&mut catalog, plugin),
                Err(e) => catalog.refuse(name, path, format!("{e:#}")),
            }
        }
        catalog
    }

    /// Add a plugin unless one of its tools or its resource scheme is
    /// already served.
    fn admit(&self, catalog: &mut Catalog, plugin: Arc<Plugin>) {
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
            return;
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
        tracing::info!(plugin = %plugin.name, tools = plugin.tools.len(), origin = ?plugin.origin, "plugin loaded");
        catalog.plugins.push(plugin);
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
        let mut tools = Vec::with_capacity(offer.tools.len());
        for tool in offer.tools {
            let mut input_schema = schema_object(&tool.input_schema)
                .with_context(|| format!("tool `{}`: input schema", tool.name))?;
            // Annotations ride in the input schema until the WIT has a field.
            let annotations = match input_schema.remove("x-annotations") {
                Some(value) => Some(serde_json::from_value(value).with_context(|| {
                    format!(
                        "tool `{}`: x-annotations are not MCP tool annotations",
                        tool.name
                    )
                })?),
                None => None,
            };
            let icons = match input_schema.remove("x-icons") {
                Some(value) => Some(
                    tool_icons(value).with_context(|| format!("tool `{}`: x-icons", tool.name))?,
                ),
                None => None,
            };
            let output_schema = match &tool.output_schema {
                Some(s) => Some(
                    schema_object(s)
                        .with_context(|| format!("tool `{}`: output schema", tool.name))?,
                ),
                None => None,
            };
            let output_validator = match &output_schema {
                Some(schema) => Some(
                    jsonschema::validator_for(&Value::Object(schema.clone())).map_err(|e| {
                        anyhow!(
                            "tool `{}`: output schema is not a valid JSON Schema: {e}",
                            tool.name
                        )
                    })?,
                ),
                None => None,
            };
            crate::schema::for_clients(&mut input_schema);
            let validator =
                ArgsSchema::compile(&Value::Object(input_schema.clone())).map_err(|e| {
                    anyhow!(
                        "tool `{}`: input schema is not a valid JSON Schema: {e}",
                        tool.name
                    )
                })?;
            let exposed = if self.underscore_names {
                tool.name.replace('.', "_")
            } else {
                tool.name.clone()
            };
            tools.push(ToolDef {
                name: tool.name,
                exposed,
                description: tool.description,
                input_schema,
                output_schema,
                output_validator,
                validator,
                annotations,
                icons,
            });
        }
        // Descriptions name tools too ("then call godot.get_class"): as served.
        let renames: Vec<(String, String)> = tools
            .iter()
            .filter(|t| t.name != t.exposed)
            .map(|t| (t.name.clone(), t.exposed.clone()))
            .collect();
        for tool in &mut tools {
            for (from, to) in &renames {
                tool.description = tool.description.replace(from, to);
            }
        }
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

/// A tool's icons, each an `https:` URL or a `data:image/` URI: a client
/// fetches or renders them, so nothing that reaches into the machine
/// (`file:`) or runs (`javascript:`).
fn tool_icons(value: Value) -> Result<Vec<rmcp::model::Icon>> {
    let icons: Vec<rmcp::model::Icon> = serde_json::from_value(value)
        .context("not a list of MCP icons ({src, mimeType, sizes})")?;
    for icon in &icons {
        crate::caps::content::icon_src(&icon.src).map_err(|e| anyhow!(e))?;
    }
    Ok(icons)
}

fn schema_object(text: &str) -> Result<Map<String, Value>> {
    match serde_json::from_str(text).context("not JSON")? {
        Value::Object(map) => Ok(map),
        _ => Err(anyhow!("a tool schema must be a JSON object")),
    }
}

/// What a component says of itself, in custom sections (in the component
/// or a module inside it) that the SDK's `export!` writes.
#[derive(Default)]
pub struct Declared {
    /// `mcphost:plugin-name`: its name, which keys its policy.
    pub name: Option<String>,
    /// `mcphost:plugin-instructions`: how an agent should use its tools,
    /// served in the MCP `instructions`.
    pub instructions: Option<String>,
}

const NAME_SECTION: &str = "mcphost:plugin-name";
const INSTRUCTIONS_SECTION: &str = "mcphost:plugin-instructions";
/// More would crowd every client's context.
const MAX_INSTRUCTIONS_BYTES: usize = 8 * 1024;

pub fn declared(bytes: &[u8]) -> Result<Declared> {
    let mut declared = Declared::default();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let wasmparser::Payload::CustomSection(section) =
            payload.context("not a WebAssembly component")?
        else {
            continue;
        };
        let text = std::str::from_utf8(section.data()).ok();
        match section.name() {
            NAME_SECTION => {
                let name = text.filter(|n| valid_name(n)).ok_or_else(|| {
                    anyhow!(
                        "the component declares an unusable plugin name in `{NAME_SECTION}` ({:?}): \
                         use 1-64 of a-z, 0-9, `_` and `-`",
                        String::from_utf8_lossy(section.data())
                    )
                })?;
                declared.name = Some(name.to_string());
            }
            INSTRUCTIONS_SECTION => {
                let text = text
                    .filter(|t| t.len() <= MAX_INSTRUCTIONS_BYTES)
                    .ok_or_else(|| {
                        anyhow!(
                            "the instructions in `{INSTRUCTIONS_SECTION}` are not UTF-8 text of at most {MAX_INSTRUCTIONS_BYTES} bytes"
                        )
                    })?;
                declared.instructions = Some(text.trim().to_string()).filter(|t| !t.is_empty());
            }
            _ => {}
        }
    }
    Ok(declared)
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
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

#[cfg(test)]
mod tests {
    use super::tool_icons;
    use serde_json::json;

    #[test]
    fn icons_are_web_or_inline_images_only() {
        let icon = |src: &str| json!([{"src": src, "mimeType": "image/png"}]);
        assert!(tool_icons(icon("https://example.org/a.png")).is_ok());
        assert!(tool_icons(icon("data:image/png;base64,AAAA")).is_ok());
        for bad in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "http://example.org/a.png",
            "data:text/html,<b>",
        ] {
            assert!(tool_icons(icon(bad)).is_err(), "{bad}");
        }
        assert!(tool_icons(json!({"src": "https://x"})).is_err(), "a list");
    }
}
