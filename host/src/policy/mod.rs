//! The policy: what each plugin may do. Deny by default.
//!
//! The shipped default (`config/default.toml`, compiled into the binary) is
//! merged with the user's file key by key. Every denial names the plugin, the
//! capability and the config key that would grant it, so the fix is a copy
//! and paste away.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

mod confinement;
mod connections;
mod engines;
mod placeholders;
mod tables;

pub use engines::{ContainersPolicy, EngineSetting, LOCAL_ENGINE, RemoteEngine, SshTarget};
use placeholders::{env_refs, expand, expand_path, expand_paths, unset_without_fallback};
pub use tables::{FsPolicy, IndexPolicy, Limits, ProcessPolicy, ToolsPolicy};

/// The shipped default policy.
pub const DEFAULT_POLICY: &str = include_str!("../../../config/default.toml");

/// Capabilities a plugin must be granted. `log` and `notify` are always on.
/// Calls of one plugin running at once, unless its policy says otherwise:
/// a quarter of the host's instance slots, so no plugin takes them all.
const DEFAULT_CONCURRENCY: u64 = 32;
/// Calls of one plugin waiting for a turn before new ones are `busy`.
const DEFAULT_QUEUE: u64 = 1024;
/// A run's log file stops growing here (a test flooding its output once
/// wrote 300 MB); its tail is still appended.
const DEFAULT_LOG_MB: u64 = 100;

pub const GRANTABLE: &[&str] = &[
    "process",
    "fs",
    "index",
    "containers",
    "git",
    "pty",
    "client",
];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub defaults: PluginPolicy,
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginPolicy>,
    /// Whose signatures `host install` takes.
    #[serde(default)]
    pub trust: Trust,
    /// The plugin tables the user's file has (the shipped ones name plugins
    /// a user may not have installed).
    #[serde(skip)]
    user_tables: Vec<String>,
}

/// `[trust]`: the public keys (PEM files; placeholders expanded) whose
/// signatures `host install` accepts, and whether it refuses a plugin
/// without a signature by one of them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trust {
    #[serde(default)]
    pub keys: Vec<String>,
    #[serde(default)]
    pub require_signatures: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginPolicy {
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub process: ProcessPolicy,
    #[serde(default)]
    pub fs: FsPolicy,
    #[serde(default)]
    pub index: IndexPolicy,
    #[serde(default)]
    pub containers: ContainersPolicy,
    /// Environment variables the plugin itself sees (placeholders expanded).
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    /// Secrets (`host secret set PLUGIN NAME`) the plugin sees as
    /// variables of the same names.
    #[serde(default)]
    pub secrets: Vec<String>,
    #[serde(default)]
    pub limits: Limits,
    /// Which of its tools exist for this host (`tools.allow`, `tools.deny`).
    #[serde(default)]
    pub tools: ToolsPolicy,
}

impl PluginPolicy {
    /// The grant keys this table sets.
    fn grant_keys(&self) -> Vec<&'static str> {
        [
            ("capabilities", !self.capabilities.is_empty()),
            ("process.programs", !self.process.programs.is_empty()),
            ("process.env", !self.process.env.is_empty()),
            ("process.write", !self.process.write.is_empty()),
            ("process.read", !self.process.read.is_empty()),
            ("fs.read", !self.fs.read.is_empty()),
            ("fs.write", !self.fs.write.is_empty()),
            ("index.root", self.index.root.is_some()),
            ("containers.images", !self.containers.images.is_empty()),
            ("containers.pull", !self.containers.pull.is_empty()),
            ("containers.commit", !self.containers.commit.is_empty()),
            ("containers.engines", !self.containers.engines.is_empty()),
            ("containers.secrets", self.containers.secrets.is_some()),
            ("tools.allow", !self.tools.allow.is_empty()),
            ("tools.deny", !self.tools.deny.is_empty()),
            ("secrets", !self.secrets.is_empty()),
        ]
        .into_iter()
        .filter_map(|(key, set)| set.then_some(key))
        .collect()
    }

    /// Every setting that may hold placeholders, with its key.
    fn templates(&self) -> Vec<(String, &str)> {
        let lists = [
            ("process.programs", &self.process.programs),
            ("process.write", &self.process.write),
            ("process.read", &self.process.read),
            ("fs.read", &self.fs.read),
            ("fs.write", &self.fs.write),
        ];
        lists
            .into_iter()
            .flat_map(|(key, list)| list.iter().map(move |v| (key.to_string(), v.as_str())))
            .chain(
                self.index
                    .root
                    .iter()
                    .map(|v| ("index.root".to_string(), v.as_str())),
            )
            .chain(
                self.containers
                    .secrets
                    .iter()
                    .map(|v| ("containers.secrets".to_string(), v.as_str())),
            )
            .chain(
                self.vars
                    .iter()
                    .map(|(k, v)| (format!("vars.{k}"), v.as_str())),
            )
            .collect()
    }
}

/// Programs that run whatever they are given: a grant of one is a grant of
/// every program.
const RUNS_ANYTHING: &[&str] = &[
    "sh", "bash", "dash", "zsh", "fish", "ksh", "csh", "tcsh", "ash", "busybox", "env", "xargs",
    "sudo", "su", "doas", "python", "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua",
    "pwsh",
];

impl Config {
    /// What `host check` warns about: tables for plugins that are not in
    /// the plugins folder (a misspelt name is silently ignored otherwise),
    /// and grants wider than they look.
    pub fn warnings(&self, plugins: &[&str], places: &Places) -> Vec<String> {
        let mut warnings = Vec::new();
        for name in &self.user_tables {
            if !plugins.contains(&name.as_str()) {
                warnings.push(format!(
                    "[plugins.{name}] names no plugin in the plugins folder (loaded: {}): check the \
                     spelling (plugin names use `_`, e.g. run_test)",
                    plugins.join(", ")
                ));
            }
        }
        for name in plugins {
            let g = self.grants(name, places, "");
            for (key, roots) in [("fs.read", &g.read_roots), ("fs.write", &g.write_roots)] {
                for root in roots {
                    // A root of the file system: `/`, or on Windows `C:\`.
                    let whole = root.parent().is_none();
                    if whole || *root == places.home {
                        warnings.push(format!(
                            "[plugins.{name}] {key} grants {}: the whole {}, secrets included; grant \
                             the directories it needs",
                            root.display(),
                            if whole { "machine" } else { "home directory" }
                        ));
                    }
                }
            }
            for program in &g.programs {
                let base = Path::new(program)
                    .file_name()
                    .map(|b| b.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let stem = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
                if RUNS_ANYTHING.contains(&stem) {
                    warnings.push(format!(
                        "[plugins.{name}] process.programs grants `{program}`, which runs any code it \
                         is given: the plugin can run every program; grant the programs it needs"
                    ));
                }
            }
        }
        warnings
    }
}

/// Where a path placeholder points.
#[derive(Debug, Clone)]
pub struct Places {
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub cache_dir: PathBuf,
}

impl Places {
    pub fn plugin_cache(&self, plugin: &str) -> PathBuf {
        self.cache_dir.join("plugins").join(plugin)
    }
}

/// The policy in force for one plugin, with placeholders resolved.
#[derive(Debug, Clone)]
pub struct Grants {
    pub plugin: String,
    /// Config file a user edits to change grants (named in denials).
    pub config_hint: String,
    pub capabilities: Vec<String>,
    pub programs: Vec<String>,
    pub env: Vec<String>,
    pub images: Vec<String>,
    /// Images it may have pulled when missing (`containers.pull`).
    pub pull: Vec<String>,
    /// Image names it may write (`containers.commit`).
    pub commit: Vec<String>,
    /// Engines besides the local one (`containers.engines`).
    pub engines: Vec<RemoteEngine>,
    /// Engines named but not usable here, and why (an ssh key in a folder
    /// a plugin writes …).
    pub refused_engines: Vec<(String, String)>,
    /// Named groups of engines (`containers.pools`): a new environment
    /// goes to the member with the most room.
    pub pools: BTreeMap<String, Vec<String>>,
    /// The file of secret references its execs may use (`containers.secrets`).
    pub secret_refs: Option<PathBuf>,
    /// Its tools that exist for this host: `tools.allow` (empty: all) less
    /// `tools.deny`, globs.
    pub tool_allow: Vec<String>,
    pub tool_deny: Vec<String>,
    /// Limits put on every container the plugin starts.
    pub container_memory_mb: u64,
    pub container_pids: u64,
    pub read_roots: Vec<PathBuf>,
    pub write_roots: Vec<PathBuf>,
    pub plugin_cache: PathBuf,
    pub index_root: PathBuf,
    pub vars: Vec<(String, String)>,
    /// The secrets it is granted (`secrets`), by name.
    pub secret_names: Vec<String>,
    /// Their values, as stored (filled in by the loader; see
    /// [`crate::secrets`]).
    pub secrets: Vec<(String, crate::secrets::Secret)>,
    pub workspace: PathBuf,
    /// Folders some plugin may write or a container fill (the workspace,
    /// the cache, every plugin's `fs.write`): no program is looked up in
    /// them, since whoever writes there would choose what the host runs.
    pub untrusted_dirs: Vec<PathBuf>,
    pub memory_bytes: usize,
    pub timeout_ms: u64,
    pub concurrency: usize,
    pub queue: usize,
    pub log_bytes: u64,
    /// What its programs may touch ([`confinement`]); `None`: they run
    /// with the user's rights (`process.confine = false`).
    pub confinement: Option<timebox::confine::Confinement>,
}

impl Grants {
    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    /// The roots a use may reach: every root it may read (`fs.read` and
    /// `fs.write`), or, when it `writes`, the `fs.write` roots only.
    pub fn roots(&self, writes: bool) -> Vec<PathBuf> {
        if writes {
            self.write_roots.clone()
        } else {
            self.read_roots
                .iter()
                .chain(&self.write_roots)
                .cloned()
                .collect()
        }
    }

    /// The standard denial text: plugin, capability, and the key to set.
    pub fn denial(&self, capability: &str, key: &str, value: &str) -> String {
        format!(
            "plugin `{}` is not granted {capability}: add {value} to `{key}` under [plugins.{}] in {}",
            self.plugin, self.plugin, self.config_hint
        )
    }

    /// Err with a denial unless the capability interface is granted.
    pub fn require(&self, capability: &str) -> Result<(), String> {
        if self.has(capability) {
            Ok(())
        } else {
            Err(self.denial(
                &format!("the `{capability}` capability"),
                "capabilities",
                &format!("\"{capability}\""),
            ))
        }
    }
}

impl Config {
    /// The shipped default merged with the user's file, if any.
    /// The `[trust] keys` files, placeholders expanded.
    pub fn trusted_keys(&self, places: &Places) -> Vec<PathBuf> {
        self.trust
            .keys
            .iter()
            .map(|k| expand_path(k, places, &places.cache_dir))
            .collect()
    }

    pub fn load(user_file: Option<&Path>) -> Result<Config> {
        let user = match user_file {
            Some(path) => Some((
                path,
                std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config file {}", path.display()))?,
            )),
            None => None,
        };
        Config::parse(user.as_ref().map(|(path, text)| (*path, text.as_str())))
    }

    /// The shipped default merged with `user`: a config file's path (for
    /// messages) and its text.
    pub fn parse(user: Option<(&Path, &str)>) -> Result<Config> {
        let user_file = user.map(|(path, _)| path);
        let mut merged: toml::Table = DEFAULT_POLICY
            .parse()
            .context("the built-in default policy is not valid TOML")?;
        let mut user_tables = Vec::new();
        if let Some((path, text)) = user {
            let user: toml::Table = text
                .parse()
                .with_context(|| format!("config file {} is not valid TOML", path.display()))?;
            user_tables = match user.get("plugins") {
                Some(toml::Value::Table(plugins)) => plugins.keys().cloned().collect(),
                _ => Vec::new(),
            };
            merge(&mut merged, user);
        }
        let mut config: Config =
            toml::Value::Table(merged)
                .try_into()
                .with_context(|| match user_file {
                    Some(p) => {
                        format!("config file {} has an unknown or mistyped key", p.display())
                    }
                    None => "the built-in default policy has an unknown key".into(),
                })?;
        config.user_tables = user_tables;
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> Result<()> {
        if let Some(key) = self.defaults.grant_keys().first() {
            bail!(
                "[defaults] {key}: grants are given per plugin, never by default (a default would reach \
                 every plugin, third-party ones included); move it to each [plugins.<name>] that needs it"
            );
        }
        for (name, policy) in std::iter::once(("defaults", &self.defaults))
            .chain(self.plugins.iter().map(|(k, v)| (k.as_str(), v)))
        {
            for (key, template) in policy.templates() {
                if let Some(var) = unset_without_fallback(template) {
                    bail!(
                        "[plugins.{name}] {key}: `${{env:{var}}}` is not set and has no fallback: set {var}, \
                         or give one as `${{env:{var}|<fallback>}}`"
                    );
                }
            }
            for (key, value) in [
                ("limits.memory_mb", policy.limits.memory_mb),
                ("limits.timeout_ms", policy.limits.timeout_ms),
                ("limits.log_mb", policy.limits.log_mb),
                ("containers.memory_mb", policy.containers.memory_mb),
                ("containers.pids", policy.containers.pids),
            ] {
                if value == Some(0) {
                    bail!(
                        "[plugins.{name}] {key} = 0 would make every call fail: give a positive value"
                    );
                }
            }
            if let Err(why) = policy.containers.check() {
                bail!("[plugins.{name}] containers.{why}");
            }
            confinement::check_ports(name, &policy.process)?;
            for cap in &policy.capabilities {
                if !GRANTABLE.contains(&cap.as_str()) {
                    bail!(
                        "[plugins.{name}] capabilities: unknown capability `{cap}` (known: {})",
                        GRANTABLE.join(", ")
                    );
                }
            }
            let slots = crate::engine::MAX_CONCURRENT_CALLS as u64;
            if let Some(n) = policy.limits.concurrency.filter(|n| *n == 0 || *n > slots) {
                bail!(
                    "[plugins.{name}] limits.concurrency = {n} is outside 1..={slots} (the host's instance slots): change it"
                );
            }
            let ceiling = crate::engine::MAX_MEMORY_BYTES / (1024 * 1024);
            if let Some(mb) = policy.limits.memory_mb.filter(|mb| *mb as usize > ceiling) {
                bail!(
                    "[plugins.{name}] limits.memory_mb = {mb} is above the host's ceiling of {ceiling}: lower it"
                );
            }
        }
        Ok(())
    }

    /// The host's variables the policy reads (`${env:NAME}`), every plugin's.
    pub fn host_variables(&self) -> std::collections::BTreeSet<String> {
        std::iter::once(&self.defaults)
            .chain(self.plugins.values())
            .flat_map(|p| p.templates())
            .flat_map(|(_, template)| env_refs(template))
            .map(|(name, _)| name.to_string())
            .collect()
    }

    /// See [`Grants::untrusted_dirs`].
    fn writable_by_plugins(&self, places: &Places) -> Vec<PathBuf> {
        let mut dirs = vec![places.workspace.clone(), places.cache_dir.clone()];
        dirs.extend(self.plugin_write_roots(places));
        dirs
    }

    /// Every plugin's `fs.write` roots.
    pub fn plugin_write_roots(&self, places: &Places) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        for (name, p) in &self.plugins {
            let cache = places.plugin_cache(name);
            // Its programs' `process.write` too: whoever runs there writes.
            dirs.extend(
                p.fs.write
                    .iter()
                    .chain(&p.process.write)
                    .flat_map(|r| expand_paths(r, places, &cache)),
            );
        }
        dirs
    }

    /// Resolve the grants of one plugin: its entry over `[defaults]`.
    pub fn grants(&self, plugin: &str, places: &Places, config_hint: &str) -> Grants {
        let d = &self.defaults;
        let p = self.plugins.get(plugin);
        // Grants are the plugin's own: `[defaults]` holds none (see `check`),
        // and an empty list means nothing.
        let pick = |f: fn(&PluginPolicy) -> &Vec<String>| -> Vec<String> {
            p.map(f).cloned().unwrap_or_default()
        };
        let plugin_cache = places.plugin_cache(plugin);
        let roots = |roots: Vec<String>| -> Vec<PathBuf> {
            roots
                .iter()
                .flat_map(|r| expand_paths(r, places, &plugin_cache))
                .collect()
        };
        let index_root = p
            .and_then(|p| p.index.root.clone())
            .unwrap_or_else(|| "${plugin_cache}/index".into());
        let mut vars = d.vars.clone();
        vars.extend(p.map(|p| p.vars.clone()).unwrap_or_default());
        let limit = |f: fn(&Limits) -> Option<u64>| p.and_then(|p| f(&p.limits)).or(f(&d.limits));
        let mut grants = Grants {
            plugin: plugin.to_string(),
            config_hint: config_hint.to_string(),
            capabilities: pick(|p| &p.capabilities),
            programs: pick(|p| &p.process.programs)
                .iter()
                .map(|p| expand(p, places, &plugin_cache))
                .collect(),
            env: pick(|p| &p.process.env),
            images: pick(|p| &p.containers.images),
            pull: pick(|p| &p.containers.pull)
                .iter()
                .map(|p| expand(p, places, &plugin_cache))
                .collect(),
            commit: pick(|p| &p.containers.commit),
            engines: Vec::new(),
            refused_engines: Vec::new(),
            pools: p.map(|p| p.containers.pools.clone()).unwrap_or_default(),
            tool_allow: pick(|p| &p.tools.allow),
            tool_deny: pick(|p| &p.tools.deny),
            secret_refs: p
                .and_then(|p| p.containers.secrets.as_ref())
                .map(|file| expand_path(file, places, &plugin_cache)),
            container_memory_mb: p
                .and_then(|p| p.containers.memory_mb)
                .or(d.containers.memory_mb)
                .unwrap_or(4096),
            container_pids: p
                .and_then(|p| p.containers.pids)
                .or(d.containers.pids)
                .unwrap_or(4096),
            read_roots: roots(pick(|p| &p.fs.read)),
            write_roots: roots(pick(|p| &p.fs.write)),
            index_root: expand_path(&index_root, places, &plugin_cache),
            vars: vars
                .iter()
                .map(|(k, v)| (k.clone(), expand(v, places, &plugin_cache)))
                .collect(),
            secret_names: pick(|p| &p.secrets),
            secrets: Vec::new(),
            plugin_cache,
            workspace: places.workspace.clone(),
            untrusted_dirs: self.writable_by_plugins(places),
            memory_bytes: (limit(|l| l.memory_mb).unwrap_or(256) * 1024 * 1024) as usize,
            timeout_ms: limit(|l| l.timeout_ms).unwrap_or(60_000),
            concurrency: limit(|l| l.concurrency).unwrap_or(DEFAULT_CONCURRENCY) as usize,
            queue: limit(|l| l.queue).unwrap_or(DEFAULT_QUEUE) as usize,
            log_bytes: limit(|l| l.log_mb).unwrap_or(DEFAULT_LOG_MB) * 1024 * 1024,
            confinement: None,
        };
        if let Some(p) = p {
            (grants.engines, grants.refused_engines) =
                p.containers.resolve_engines(&grants.untrusted_dirs);
        }
        grants.confinement = self.confinement(
            p,
            places,
            &grants.plugin_cache,
            &grants.read_roots,
            &grants.write_roots,
        );
        grants
    }
}

/// Merge `over` into `base`: tables recursively, everything else replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

/// Grants for unit tests: plugin `p` with `capabilities`, writing `root`.
#[cfg(test)]
pub fn test_grants(root: &Path, capabilities: &[&str]) -> Grants {
    let places = Places {
        workspace: root.to_path_buf(),
        home: root.to_path_buf(),
        cache_dir: root.join("cache"),
    };
    let mut g = Config::load(None).unwrap().grants("p", &places, "test");
    g.write_roots = vec![root.to_path_buf()];
    g.capabilities = capabilities.iter().map(|c| c.to_string()).collect();
    g
}

#[cfg(test)]
mod tests;
