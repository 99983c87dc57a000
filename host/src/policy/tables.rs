//! The smaller tables of a plugin's policy: what it may run (`process`),
//! read and write (`fs`), where its indexes live (`index`), its limits,
//! and which of its tools exist (`tools`).

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexPolicy {
    /// Where the plugin's indexes live. [default: `${plugin_cache}/index`]
    pub root: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessPolicy {
    /// Program names (matched without a Windows extension) or absolute paths.
    #[serde(default)]
    pub programs: Vec<String>,
    /// Host environment variables passed through to spawned programs.
    #[serde(default)]
    pub env: Vec<String>,
    /// Whether its programs are confined to its grants (issue 71; see
    /// [`super::confinement`]). [default: true]
    pub confine: Option<bool>,
    /// Folders its programs may write besides `fs.write` (a runner's
    /// caches, an agent's state); placeholders expanded, made if missing.
    #[serde(default)]
    pub write: Vec<String>,
    /// Folders its programs may read that are hidden from them by
    /// default (`~/.ssh`, credential stores, the host's cache).
    #[serde(default)]
    pub read: Vec<String>,
    /// The TCP ports its programs may connect to: numbers, or URLs (their
    /// port; an empty value is skipped). Absent: any port.
    pub connect: Option<Vec<Port>>,
    /// The TCP ports its programs may listen on. Absent: any port.
    pub bind: Option<Vec<Port>>,
}

/// A port in `process.connect`/`process.bind`: a number, or a text that
/// is one or a URL (`${env:PI_BASE_URL|}`) whose port is meant.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Port {
    Number(u16),
    Text(String),
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsPolicy {
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub memory_mb: Option<u64>,
    pub timeout_ms: Option<u64>,
    /// Calls of the plugin running at once.
    pub concurrency: Option<u64>,
    /// Calls waiting for a turn beyond those; more are refused as `busy`.
    pub queue: Option<u64>,
    /// Largest log file (`log-path` of a run) written, MiB.
    pub log_mb: Option<u64>,
}

/// Globs over a plugin's tool names (see `catalog::filter`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsPolicy {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}
