//! A repository's own defaults for new environments, what container-use
//! keeps as its project `config`: `<repo>/.git/cofer/config.json`, written
//! by the person (`cofer config …`), inside the git directory, which no
//! environment's worktree or container reaches. Only `environment_create`
//! reads it; an environment keeps what it was made with in its record.
//!
//! Secrets are not here: their references are the host's, kept where no
//! plugin can write (`cofer config secret`).

use plugin_sdk::ToolError;
use serde::Deserialize;

use crate::env::state_dir;
use crate::errors::error;

/// The file is small text; more than this is not a config `cofer` wrote.
const MAX_BYTES: u64 = 256 * 1024;

/// The fields `cofer config` edits (the same names as environment_config's).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Project {
    pub base_image: Option<String>,
    #[serde(default)]
    pub setup_commands: Vec<String>,
    #[serde(default)]
    pub envs: Vec<String>,
}

pub fn path(repo: &str) -> String {
    format!("{}/config.json", state_dir(repo))
}

/// The repository's defaults; none when it has no config file.
pub fn read(repo: &str) -> Result<Project, ToolError> {
    let path = path(repo);
    let broken = |why: String| {
        error(
            "precondition_failed",
            format!("the repository's Cofer config {path} cannot be used: {why}"),
            "ask the person to fix it from the terminal (`cofer config show` shows what is wrong, `cofer config reset` starts over), then call the tool again",
        )
    };
    let bytes = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Project::default()),
        Err(e) => return Err(broken(e.to_string())),
        Ok(meta) if !meta.is_file() => return Err(broken("it is not a plain file".into())),
        Ok(meta) if meta.len() > MAX_BYTES => {
            return Err(broken(format!("it is larger than {MAX_BYTES} bytes")));
        }
        Ok(_) => std::fs::read(&path).map_err(|e| broken(e.to_string()))?,
    };
    serde_json::from_slice(&bytes).map_err(|e| broken(e.to_string()))
}
