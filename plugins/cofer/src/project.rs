//! A repository's own defaults for new environments, what container-use
//! keeps as its project `config`: `<repo>/.git/cofer/config.json`, written
//! by the person (`cofer config …`), inside the git directory, which no
//! environment's worktree or container reaches. Only `environment_create`
//! reads it; an environment keeps what it was made with in its record.
//!
//! When that file does not give a default, the repository's
//! devcontainer.json may ([`devcontainer`]): its image, variables,
//! create commands and forwarded ports; what it says that Cofer does not
//! honour is listed in the create's answer.
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

/// What a new environment of the repository starts from: the person's
/// config, each default it leaves out taken from devcontainer.json.
#[derive(Debug, Default)]
pub struct Defaults {
    pub project: Project,
    pub forward_ports: Vec<u16>,
    /// devcontainer.json's Dockerfile, when the person's config names no image.
    pub build: Option<devcontainer::Build>,
    /// devcontainer.json's, when it gave anything.
    pub devcontainer: Option<devcontainer::Devcontainer>,
}

/// The repository's defaults (none when it has neither file).
pub fn defaults(repo: &str) -> Result<Defaults, ToolError> {
    let mut project = read(repo)?;
    let found = devcontainer::read(std::path::Path::new(repo)).map_err(|why| {
        error(
            "precondition_failed",
            format!("the repository's devcontainer.json cannot be used: {why}"),
            "fix the file (or give the defaults with `cofer config` instead, which take precedence), then call the tool again",
        )
    })?;
    let Some(d) = found else {
        return Ok(Defaults {
            project,
            ..Defaults::default()
        });
    };
    d.fill(
        &mut project.base_image,
        &mut project.setup_commands,
        &mut project.envs,
    );
    let build = if project.base_image.is_none() {
        d.build.clone()
    } else {
        None
    };
    Ok(Defaults {
        project,
        forward_ports: d.forward_ports.clone(),
        build,
        devcontainer: Some(d),
    })
}

impl Defaults {
    /// The image devcontainer.json's Dockerfile makes, built now by the
    /// call's engine (layers it built before are reused): a name of the
    /// repository's own, `localhost/cofer-devcontainer-<repository id>`.
    /// None when no Dockerfile is to be built.
    pub fn build_image(
        &self,
        repo: &str,
        repository_id: &str,
    ) -> Result<Option<String>, ToolError> {
        let Some(build) = &self.build else {
            return Ok(None);
        };
        let file = self
            .devcontainer
            .as_ref()
            .map_or("devcontainer.json", |d| d.file.as_str());
        let dockerfile = if build.context == "." {
            Some(build.dockerfile.as_str())
        } else {
            build
                .dockerfile
                .strip_prefix(&format!("{}/", build.context))
        };
        let Some(dockerfile) = dockerfile else {
            return Err(error(
                "precondition_failed",
                format!(
                    "{file}: the Dockerfile {} lies outside the build's context {}",
                    build.dockerfile, build.context
                ),
                "set build.context to a folder holding the Dockerfile (\"..\" for the repository), then call environment_create again",
            ));
        };
        let image = format!("localhost/cofer-devcontainer-{repository_id}:latest");
        let context = if build.context == "." {
            repo.to_string()
        } else {
            format!("{repo}/{}", build.context)
        };
        crate::note(format!(
            "environment_create building {image} from {} (context {})",
            build.dockerfile, build.context
        ));
        plugin_sdk::containers::build(&context, dockerfile, &image)
            .map_err(|e| crate::errors::from_container(&format!("build the image of {file}"), e))?;
        Ok(Some(image))
    }

    /// What the create's answer says of devcontainer.json.
    pub fn said(&self) -> Option<serde_json::Value> {
        let d = self.devcontainer.as_ref()?;
        Some(serde_json::json!({
            "file": d.file,
            "not_honoured": d.not_honoured,
        }))
    }
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
