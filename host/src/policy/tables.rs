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
