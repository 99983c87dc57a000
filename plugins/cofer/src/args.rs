//! Tool arguments, container-use compatible (field names and descriptions
//! from container-use's `mcpserver/args.go`), plus Cofer's own: `image` and
//! `environment_id` on create, `force` on destroy.

use serde::Deserialize;
use serde_json::{Value, json};

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

#[derive(Debug, Deserialize)]
pub struct Create {
    pub environment_source: String,
    pub title: String,
    pub image: Option<String>,
    pub from_git_ref: Option<String>,
    #[serde(default)]
    pub allow_replace: bool,
    pub environment_id: Option<String>,
    pub explanation: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct RunCmd {
    pub environment_source: String,
    pub environment_id: String,
    pub command: String,
    #[serde(default = "default_shell")]
    pub shell: String,
    #[serde(default)]
    pub background: bool,
    #[serde(default)]
    pub use_entrypoint: bool,
    #[serde(default)]
    pub ports: Vec<u16>,
    pub explanation: Option<String>,
}

fn default_shell() -> String {
    "sh".into()
}

#[derive(Debug, Deserialize)]
pub struct Scoped {
    pub environment_source: String,
    pub environment_id: String,
    #[serde(default)]
    pub force: bool,
}

#[derive(Debug, Deserialize)]
pub struct Source {
    pub environment_source: String,
}

fn common() -> serde_json::Map<String, Value> {
    let mut props = serde_json::Map::new();
    props.insert(
        "explanation".into(),
        json!({"type": "string", "description": "One sentence explanation for why this tool is being called."}),
    );
    props.insert(
        "environment_source".into(),
        json!({"type": "string", "minLength": 1, "description": "Absolute path to the source git repository for the environment."}),
    );
    props
}

fn id_schema(description: &str) -> Value {
    json!({"type": "string", "pattern": "^[a-z0-9][a-z0-9-]{0,47}$", "description": description})
}

fn object(mut props: serde_json::Map<String, Value>, extra: Value, required: &[&str]) -> Value {
    if let Value::Object(extra) = extra {
        props.extend(extra);
    }
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
        "x-error-code": "invalid_request",
    })
}

pub fn create_schema() -> Value {
    object(
        common(),
        json!({
            "title": {"type": "string", "minLength": 1, "description": "Short description of the work that is happening in this environment."},
            "image": {"type": "string", "minLength": 1, "description": "Container image to run the environment in (from local Podman storage). Default: the host's COFER_DEFAULT_IMAGE."},
            "from_git_ref": {"type": "string", "minLength": 1, "description": "Git reference to create the environment from. Defaults to HEAD."},
            "allow_replace": {"type": "boolean", "description": "Replace an existing environment with the same environment_id. Without it, an existing one is a conflict."},
            "environment_id": id_schema("ID for the new environment (lowercase letters, digits, '-'). Default: a generated name such as `bold-otter`."),
        }),
        &["environment_source", "title"],
    )
}

pub fn run_schema() -> Value {
    let mut schema = object(
        common(),
        json!({
            "environment_id": id_schema("The ID of the environment for this command. Must call `environment_create` first."),
            "command": {"type": "string", "minLength": 1, "description": "The terminal command to execute. If empty, the environment's default command is used."},
            "shell": {"type": "string", "enum": SHELLS, "default": "sh", "description": "The shell that will be interpreting this command (default: sh)"},
            "background": {"type": "boolean", "description": "Run the command in the background in a new container. Must ALWAYS be set for long running commands (e.g. http server). Failure to do so will result in the tool being stuck, awaiting for the command to finish."},
            "use_entrypoint": {"type": "boolean", "description": "Use the image entrypoint, if present, by prepending it to the args."},
            "ports": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}, "maxItems": 32, "description": "Ports to expose. Only works with background environments. For each port, returns the environment_internal (for use inside environments) and host_external (for use by the user) addresses."},
        }),
        &["environment_source", "environment_id", "command"],
    );
    // The host's call log says `mode="background"` when it is true (seed 001).
    schema["x-background-flag"] = json!("background");
    schema
}

pub fn destroy_schema() -> Value {
    object(
        common(),
        json!({
            "environment_id": id_schema("The ID of the environment to destroy."),
            "force": {"type": "boolean", "description": "If removing the worktree fails, retry harder (locked worktrees, leftover files) and report a warning instead of failing."},
        }),
        &["environment_source", "environment_id"],
    )
}

pub fn open_schema() -> Value {
    object(
        common(),
        json!({"environment_id": id_schema("The ID of the environment to open.")}),
        &["environment_source", "environment_id"],
    )
}

pub fn list_schema() -> Value {
    object(common(), json!({}), &["environment_source"])
}
