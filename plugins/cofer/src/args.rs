//! Tool arguments, container-use compatible (field names and descriptions
//! from container-use's `mcpserver/args.go`), plus Cofer's own: `image` and
//! `environment_id` on create, `force` on destroy.

use schemars::JsonSchema;
use serde::Deserialize;

/// Shells a command may run under (container-use's list).
pub const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "zsh",
    "ash",
    "/bin/sh",
    "/bin/bash",
    "/bin/zsh",
    "/bin/ash",
];

/// What every tool takes, as in container-use. Unknown keys are refused by
/// the host's schema check (`additionalProperties` on each tool), since
/// serde cannot deny them through `flatten`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Common {
    /// One sentence explanation for why this tool is being called.
    pub explanation: Option<String>,
    /// Absolute path to the source git repository for the environment.
    #[schemars(length(min = 1))]
    pub environment_source: String,
}

impl Common {
    /// The commit message for a change: the caller's explanation, else
    /// `done` (what was done).
    pub fn message_or(&self, done: String) -> String {
        match self.explanation.as_deref().map(str::trim) {
            Some(explanation) if !explanation.is_empty() => explanation.to_string(),
            _ => done,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct Create {
    #[serde(flatten)]
    pub common: Common,
    /// Short description of the work that is happening in this environment.
    #[schemars(length(min = 1))]
    pub title: String,
    /// Container image to run the environment in (from local Podman storage). Default: the host's COFER_DEFAULT_IMAGE.
    #[schemars(length(min = 1))]
    pub image: Option<String>,
    /// Git reference to create the environment from. Defaults to HEAD.
    #[schemars(length(min = 1))]
    pub from_git_ref: Option<String>,
    /// Replace an existing environment with the same environment_id. Without it, an existing one is a conflict.
    #[serde(default)]
    pub allow_replace: bool,
    /// ID for the new environment (lowercase letters, digits, '-'). Default: a generated name such as `bold-otter`.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: Option<String>,
    /// The Podman engine to run it on: `local`, or a name the host's config gives in containers.engines (a service on another machine). Default: the host's COFER_ENGINE, else local.
    #[schemars(regex(pattern = r"^[A-Za-z0-9_-]{1,64}$"))]
    pub engine: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend(
    "additionalProperties" = false,
    "x-error-code" = "invalid_request",
    // The host's call log says `mode="background"` when it is true (seed 001).
    "x-background-flag" = "background"
))]
pub struct RunCmd {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// The terminal command to execute. If empty, the environment's default command is used.
    #[serde(default)]
    pub command: String,
    /// The shell that will be interpreting this command (default: sh)
    #[serde(default = "default_shell")]
    #[schemars(extend("enum" = SHELLS))]
    pub shell: String,
    /// Run the command in the background in a new container. Must ALWAYS be set for long running commands (e.g. http server). Failure to do so will result in the tool being stuck, awaiting for the command to finish.
    #[serde(default)]
    pub background: bool,
    /// Use the image entrypoint, if present, by prepending it to the args.
    #[serde(default)]
    pub use_entrypoint: bool,
    /// Ports to expose. Only works with background environments. For each port, returns the environment_internal (for use inside environments) and host_external (for use by the user) addresses. When left out, the ports the repository's devcontainer.json forwards (forwardPorts), if any.
    #[serde(default)]
    #[schemars(length(max = 32), inner(range(min = 1)))]
    pub ports: Vec<u16>,
    /// Most bytes of stdout and stderr returned together (default 16384, up to 65536): of the last 512 lines of each stream, the last ones that fit are shown, and the answer says how many were left out.
    #[serde(default)]
    #[schemars(range(min = 1024, max = 65536))]
    pub max_output_bytes: Option<u32>,
}

fn default_shell() -> String {
    "sh".into()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct Destroy {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment to destroy.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// If removing the worktree fails, retry harder (locked worktrees, leftover files) and report a warning instead of failing.
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct Open {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment to open.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct List {
    #[serde(flatten)]
    pub common: Common,
}

/// An environment id: lowercase letters, digits and '-', at most 48.
const ID_PATTERN: &str = "^[a-z0-9][a-z0-9-]{0,47}$";

/// The most a file tool's text may hold: the file tools read files of up
/// to 4 MB.
const MAX_FILE_CHARS: u64 = 4 << 20;

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct FileRead {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Path of the file to read, absolute or relative to the workdir
    #[schemars(length(min = 1))]
    pub target_file: String,
    /// Whether to read the entire file. Defaults to false (but without a line range the whole file is read).
    #[serde(default)]
    pub should_read_entire_file: bool,
    /// The starting line (1-indexed, inclusive) to read from the file.
    #[schemars(range(min = 1))]
    pub start_line_one_indexed_inclusive: Option<usize>,
    /// The ending line (1-indexed, inclusive) to read from the file.
    #[schemars(range(min = 1))]
    pub end_line_one_indexed_inclusive: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct FileList {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Path of the directory to list contents of, absolute or relative to the workdir
    #[schemars(length(min = 1))]
    pub path: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct FileWrite {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Path of the file to write, absolute or relative to the workdir.
    #[schemars(length(min = 1))]
    pub target_file: String,
    /// Full text content of the file you want to write.
    #[schemars(length(max = MAX_FILE_CHARS))]
    pub contents: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct FileEdit {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Path of the file to write, absolute or relative to the workdir.
    #[schemars(length(min = 1))]
    pub target_file: String,
    /// The text to find and replace.
    #[schemars(length(min = 1, max = MAX_FILE_CHARS))]
    pub search_text: String,
    /// The text to insert.
    #[schemars(length(max = MAX_FILE_CHARS))]
    pub replace_text: String,
    /// The ID of the match to replace, if there were multiple matches.
    pub which_match: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct FileDelete {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Path of the file to delete, absolute or relative to the workdir.
    #[schemars(length(min = 1))]
    pub target_file: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct UpdateMetadata {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Updated title describing the work being done in this environment.
    pub title: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct Log {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment whose history to show.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Also show each commit's changes (a patch).
    #[serde(default)]
    pub patch: bool,
    /// Most bytes returned (default 16384, up to 262144); a longer history is cut, saying so.
    #[serde(default)]
    #[schemars(range(min = 1024, max = 262144))]
    pub max_bytes: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct ServiceLogs {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment whose services to show.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// One service: its name (environment_add_service) or its container's
    /// name (a background command's `container_name`). Default: all.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub service: Option<String>,
    /// How many of the last output lines to show per service.
    #[serde(default = "default_log_lines")]
    #[schemars(range(min = 1, max = 2000))]
    pub lines: u32,
}

fn default_log_lines() -> u32 {
    100
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct Diff {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment whose changes to show.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Most bytes returned (default 16384, up to 262144); a longer diff is cut, saying so.
    #[serde(default)]
    #[schemars(range(min = 1024, max = 262144))]
    pub max_bytes: Option<u32>,
}

/// container-use's `config` object: each field given replaces the
/// environment's, a field left out keeps it.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false))]
pub struct ConfigChange {
    /// Base image for the environment
    #[schemars(length(min = 1))]
    pub base_image: Option<String>,
    /// Commands that should be executed on top of the base image to set up the environment. Similar to `RUN` instructions in Dockerfiles.
    pub setup_commands: Option<Vec<String>>,
    /// The environment variables to set (e.g. `["FOO=bar", "BAZ=qux"]`).
    pub envs: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct Config {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// The environment's new configuration.
    pub config: ConfigChange,
}

/// A service name: what the environment resolves it by (a DNS label).
/// An image reference as OCI names them: `[host[:port]/]path[:tag]`, each
/// part plain words joined by `.`, `_` or `-` (no `..`, no option).
const IMAGE_PATTERN: &str = r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::[0-9]+)?/)?[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?$";

const SERVICE_NAME_PATTERN: &str = "^[a-z0-9][a-z0-9-]{0,30}$";

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct AddService {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// The name of the service to start (the environment reaches it by this host name).
    #[schemars(regex(pattern = SERVICE_NAME_PATTERN))]
    pub name: String,
    /// The image of the service to start.
    #[schemars(length(min = 1))]
    pub image: String,
    /// The command to start the service. If not provided the image default command will be used.
    #[schemars(length(min = 1))]
    pub command: Option<String>,
    /// Ports to expose. For each port, returns the container_internal (for use by environments) and host_external (for use by the user) address.
    #[serde(default)]
    #[schemars(length(max = 32), inner(range(min = 1)))]
    pub ports: Vec<u16>,
    /// The environment variables to set (e.g. `["FOO=bar", "BAZ=qux"]`).
    #[serde(default)]
    pub envs: Vec<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("additionalProperties" = false, "x-error-code" = "invalid_request"))]
pub struct Checkpoint {
    #[serde(flatten)]
    pub common: Common,
    /// The ID of the environment for this command. Must call `environment_create` first.
    #[schemars(regex(pattern = ID_PATTERN))]
    pub environment_id: String,
    /// Local image name to checkpoint to (e.g. localhost/myproject:checkpoint). Names the host's policy allows only (containers.commit; by default localhost/*).
    #[schemars(length(min = 1, max = 255), regex(pattern = IMAGE_PATTERN))]
    pub destination: String,
}
