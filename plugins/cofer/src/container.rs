//! The environment's main container: started from the record's image with
//! its `envs`, joined to the environment's network when it has services,
//! and set up by the record's `setup_commands` — the same way at create,
//! when it is recreated (gone after a reboot, removed by hand) and on
//! `environment_config`, which changes the record. Also
//! `environment_checkpoint`, an image of it.

use plugin_sdk::containers::{self, ContainerError, CreateRequest, ExecRequest};
use plugin_sdk::process::Status;
use plugin_sdk::{ToolError, ToolOutput};
use serde_json::{Value, json};

use crate::args::{Checkpoint, Config};
use crate::env::{self, Env, Record, env_pairs};
use crate::errors::{error, from_container, transient_container};
use crate::turn::{DEFAULT_TIMEOUT_MS, short, turn};
use crate::{note, setting};

/// Output of a failed setup command kept for the error.
const SETUP_TAIL_BYTES: u64 = 16 * 1024;

/// Start the main container as `name` (one retry), give it the worktree
/// (an engine that cannot mount it), join the network, run the setup
/// commands; a container that fails to set up is removed. The setup
/// commands' results.
pub fn start(env: &Env, record: &Record, name: &str) -> Result<Vec<Value>, ToolError> {
    let request = CreateRequest {
        name: Some(name.to_string()),
        ..env.container_request(record, "main", env::idle_command())?
    };
    match containers::run(&request) {
        Err(e) if transient_container(&e) => {
            // A half-created container would hold the name: clear it first.
            let _ = containers::remove(name, 0);
            containers::run(&request)
        }
        other => other,
    }
    .map_err(|e| from_container("start the container", e))?;
    let prepared = (|| {
        env.push(name, &[])?;
        if !record.services.is_empty() {
            containers::network_connect(&env.network(), name, &[])
                .map_err(|e| from_container("join the environment's network", e))?;
            crate::network::write_hosts(env, name)?;
        }
        setup(env, name, &record.setup_commands)
    })();
    if prepared.is_err() {
        let _ = containers::remove(name, 0);
    }
    prepared
}

/// Run each setup command once, in order, stopping at the first failure.
fn setup(env: &Env, container: &str, commands: &[String]) -> Result<Vec<Value>, ToolError> {
    let timeout_ms = setting("COHERRA_TIMEOUT_RUN", DEFAULT_TIMEOUT_MS);
    let mut done = Vec::new();
    for command in commands {
        let request = ExecRequest {
            argv: vec!["sh".into(), "-c".into(), command.clone()],
            workdir: Some(env::WORKDIR.into()),
            env: Vec::new(),
            use_entrypoint: false,
            stdin: None,
            timeout_ms,
            no_output_timeout_ms: None,
            tail_bytes: SETUP_TAIL_BYTES,
            secrets_of: Some(env.repo.clone()),
        };
        let result = containers::exec(container, &request)
            .map_err(|e| from_container("run a setup command", e))?;
        if result.status != Status::Exited || result.exit_code != Some(0) {
            let (stdout, stderr) = result.streams();
            let ended = match result.status {
                Status::Exited => plugin_sdk::exit_text(result.exit_code),
                Status::Timeout | Status::NoOutput => {
                    format!("ran longer than {timeout_ms} ms (COHERRA_TIMEOUT_RUN) and was killed")
                }
                _ => format!("did not finish ({:?})", result.status),
            };
            return Err(error(
                "setup_failed",
                format!("setup command `{command}` {ended}; the environment was left as it was before this call"),
                "fix the command (it runs with sh -c in /workdir of a fresh container from the base image), or leave it out",
            )
            .with_details(json!({
                "step": "run a setup command",
                "command": command,
                "exit_code": result.exit_code,
                "stdout": stdout,
                "stderr": stderr,
                "completed": done,
            })));
        }
        done.push(json!({"command": command, "duration_ms": result.duration_ms}));
    }
    Ok(done)
}

/// Make sure the main container exists and runs.
pub fn ensure(env: &Env, record: &Record) -> Result<(), ToolError> {
    match containers::inspect(&env.container_name()) {
        Ok(info) if info.state == "running" => Ok(()),
        Ok(_) | Err(ContainerError::NotFound(_)) => recreate(env, record),
        Err(e) => Err(from_container("inspect the container", e)),
    }
}

/// Replace a stopped or missing main container with a fresh one.
pub fn recreate(env: &Env, record: &Record) -> Result<(), ToolError> {
    match containers::remove(&env.container_name(), 1000) {
        Ok(_) | Err(ContainerError::NotFound(_)) => {}
        Err(e) => return Err(from_container("remove the stopped container", e)),
    }
    start(env, record, &env.container_name()).map(drop)
}

/// `environment_config`: the new configuration is tried in a second
/// container first; only when it starts and every setup command succeeds
/// does it replace the old one (and the record change). /workdir is the
/// same worktree throughout, and what the setup commands wrote in it is
/// committed under the call's explanation.
pub fn configure(args: Config) -> Result<ToolOutput, ToolError> {
    let (env, record) = Env::find(&args.common.environment_source, &args.environment_id)?;
    env.require_worktree()?;
    let mut next = record.clone();
    if let Some(image) = &args.config.base_image {
        next.image = image.trim().to_string();
    }
    if let Some(commands) = &args.config.setup_commands {
        next.setup_commands = commands.clone();
    }
    if let Some(envs) = &args.config.envs {
        env_pairs(envs)?;
        next.envs = envs.clone();
    }
    note(format!(
        "environment_config env={} image={} setup_commands={}",
        env.id,
        next.image,
        next.setup_commands.len()
    ));
    let candidate = format!("{}-next", env.container_name());
    let message = args.common.message_or(format!(
        "Configure the environment (base image {})",
        next.image
    ));
    let timeout_ms = setting("COHERRA_TIMEOUT_RUN", DEFAULT_TIMEOUT_MS);
    let wait_ms = timeout_ms.saturating_mul(next.setup_commands.len().max(1) as u64);
    let done = turn(&env, wait_ms, &message, |_| {
        // Left over by a host that died half-way through a config change.
        let _ = containers::remove(&candidate, 0);
        let done = start(&env, &next, &candidate)?;
        let swapped = (|| {
            match containers::remove(&env.container_name(), 2000) {
                Ok(_) | Err(ContainerError::NotFound(_)) => {}
                Err(e) => return Err(from_container("remove the old container", e)),
            }
            containers::rename(&candidate, &env.container_name())
                .map_err(|e| from_container("rename the new container", e))?;
            env.write_record(&next)
        })();
        if let Err(e) = swapped {
            let _ = containers::remove(&candidate, 0);
            return Err(e);
        }
        Ok(done)
    })?;
    let services = crate::network::running(&env)?;
    let mut text = format!(
        "SUCCESS: Configuration applied. The environment's container was recreated from {}: \
         /workdir is kept, everything else from before is gone.\n",
        next.image
    );
    for step in &done.value {
        text.push_str(&format!(
            "setup: `{}` succeeded ({} ms)\n",
            step["command"].as_str().unwrap_or_default(),
            step["duration_ms"]
        ));
    }
    if let Some(commit) = &done.commit {
        text.push_str(&format!(
            "What the setup commands wrote in /workdir was committed to {} ({}).\n",
            env.branch(),
            short(commit)
        ));
    }
    text.push('\n');
    text.push_str(
        &serde_json::to_string(&env.describe(&next, &services)).expect("JSON values serialise"),
    );
    Ok(plugin_sdk::text_output(text))
}

/// `environment_checkpoint`: the main container as a local image, with
/// /workdir as the environment's branch has it.
pub fn checkpoint(args: Checkpoint) -> Result<ToolOutput, ToolError> {
    let (env, record) = Env::find(&args.common.environment_source, &args.environment_id)?;
    env.require_worktree()?;
    ensure(&env, &record)?;
    let message = args.common.message_or("Checkpoint".into());
    let done = turn(&env, DEFAULT_TIMEOUT_MS, &message, |_| {
        containers::commit(&env.container_name(), &args.destination)
            .map_err(|e| from_container("commit the container", e))
    })?;
    let id = done.value;
    note(format!(
        "environment_checkpoint env={} image={} id={id}",
        env.id, args.destination
    ));
    let out = json!({"image": args.destination, "image_id": id, "engine": env.engine});
    let (storage, podman) = if env.copies_files {
        (
            format!("engine {}'s", env.engine),
            "podman --remote --url <the engine's URL>",
        )
    } else {
        ("local".to_string(), "podman")
    };
    Ok(ToolOutput {
        text: format!(
            "Checkpoint saved as the {storage} image {:?} (id {}). It holds the environment's container \
             and its /workdir; run it with `{podman} run --rm -it {} sh`.",
            args.destination,
            short(&id),
            args.destination
        ),
        structured: Some(out.to_string()),
    })
}
