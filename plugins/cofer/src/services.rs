//! Services: `environment_add_service` (container-use's: a named container
//! from any allowed image, on a network of the environment's own where the
//! environment reaches it by its name, ports published on 127.0.0.1), and
//! the background commands of `environment_run_cmd`. Added services are
//! kept in the record, so `environment_open` starts again those that are
//! gone.
//!
//! Names are also written into the main container's /etc/hosts: Podman's
//! DNS server on Debian 12 (aardvark-dns 1.4) stops answering after a few
//! configuration reloads (containers/aardvark-dns#389, fixed in 1.11), and
//! a name that resolves only sometimes is worse than none.

use plugin_sdk::containers::{self, ContainerInfo, CreateRequest};
use plugin_sdk::{ToolError, ToolOutput};
use serde_json::json;

use crate::args::{AddService, ServiceLogs};
use crate::env::{Env, Record, ServiceConfig, env_pairs};
use crate::errors::{ended_at_start, error, from_container};
use crate::network::{endpoints, running, write_hosts};
use crate::note;

/// The most output read per service (the lines shown are the last of it).
const LOG_TAIL_BYTES: u64 = 256 * 1024;

/// `environment_service_logs`: each service's state, exit code and last
/// output lines.
pub fn logs(args: ServiceLogs) -> Result<ToolOutput, ToolError> {
    let (env, _) = Env::find(&args.common.environment_source, &args.environment_id)?;
    let label = |c: &ContainerInfo, key: &str| {
        c.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let all = running(&env)?;
    let picked: Vec<&ContainerInfo> = all
        .iter()
        .filter(|c| {
            args.service.as_deref().is_none_or(|wanted| {
                c.name == wanted || label(c, "cofer.service").as_deref() == Some(wanted)
            })
        })
        .collect();
    if picked.is_empty() {
        let names: Vec<&str> = all.iter().map(|c| c.name.as_str()).collect();
        return Err(error(
            "not_found",
            match &args.service {
                Some(wanted) => format!("environment `{}` has no service `{wanted}`", env.id),
                None => format!("environment `{}` has no services", env.id),
            },
            &if names.is_empty() {
                "start one with environment_run_cmd (background=true) or environment_add_service"
                    .to_string()
            } else {
                format!("its services are: {}", names.join(", "))
            },
        ));
    }
    let mut text = String::new();
    let mut found = Vec::new();
    for c in picked {
        let output = containers::logs(&c.id, LOG_TAIL_BYTES)
            .map_err(|e| from_container("read a service's output", e))?;
        let lines: Vec<&str> = output.lines().collect();
        let shown = &lines[lines.len().saturating_sub(args.lines as usize)..];
        let command = label(c, "cofer.command").unwrap_or_default();
        let exit = c
            .exit_code
            .map_or(String::new(), |code| format!(", exit code {code}"));
        text.push_str(&format!("== {} ({}{exit})", c.name, c.state));
        if !command.is_empty() {
            text.push_str(&format!(": {command}"));
        }
        text.push('\n');
        for line in shown {
            text.push_str(line);
            text.push('\n');
        }
        found.push(json!({
            "name": label(c, "cofer.service").unwrap_or_else(|| c.name.clone()),
            "container_name": c.name,
            "command": command,
            "state": c.state,
            "exit_code": c.exit_code,
            "output": shown.join("\n"),
            "lines_omitted": lines.len() - shown.len(),
        }));
    }
    Ok(ToolOutput {
        text,
        structured: Some(json!({ "services": found }).to_string()),
    })
}

pub fn add(args: AddService) -> Result<ToolOutput, ToolError> {
    let (env, mut record) = Env::find(&args.common.environment_source, &args.environment_id)?;
    env.require_worktree()?;
    if record.services.iter().any(|s| s.name == args.name) {
        return Err(error(
            "conflict",
            format!(
                "environment `{}` already has a service `{}`; it was left as it is",
                env.id, args.name
            ),
            "choose another name",
        ));
    }
    let config = ServiceConfig {
        name: args.name.clone(),
        image: args.image.trim().to_string(),
        command: args.command.clone(),
        exposed_ports: args.ports.clone(),
        env: args.envs.clone(),
    };
    env_pairs(&config.env)?;
    note(format!(
        "environment_add_service env={} name={} image={}",
        env.id, config.name, config.image
    ));
    // The environment joins its network first, so it can reach the
    // service from the moment it runs.
    crate::container::ensure(&env, &record)?;
    containers::network_connect(&env.network(), &env.container_name(), &[])
        .map_err(|e| from_container("join the environment's network", e))?;
    let info = start(&env, &config)?;
    record.services.push(config.clone());
    if let Err(e) = env
        .write_record(&record)
        .and_then(|()| write_hosts(&env, &env.container_name()))
    {
        let _ = containers::remove(&info.id, 0);
        return Err(e);
    }
    let mut endpoints = endpoints(&info, &config.exposed_ports, &config.name);
    // container-use's own keys too: `internal` and `external`, no scheme.
    for (port, e) in endpoints.iter_mut() {
        e["internal"] = json!(format!("{}:{port}", config.name));
        e["external"] = json!(
            e["host_external"]
                .as_str()
                .map(|x| x.trim_start_matches("tcp://"))
        );
    }
    let service = json!({
        "config": config,
        "endpoints": endpoints,
        "container": info.id,
        "container_name": info.name,
    });
    Ok(ToolOutput {
        text: format!("Service added and started successfully: {service}"),
        structured: Some(service.to_string()),
    })
}

/// Start the added service `config` on the environment's network; one
/// that exits at once is removed and reported.
fn start(env: &Env, config: &ServiceConfig) -> Result<ContainerInfo, ToolError> {
    let mut labels = env.labels("service");
    labels.push(("cofer.service".into(), config.name.clone()));
    let request = CreateRequest {
        image: config.image.clone(),
        name: Some(env.added_service_name(&config.name)),
        command: match &config.command {
            Some(command) => vec!["sh".into(), "-c".into(), command.clone()],
            None => Vec::new(),
        },
        use_entrypoint: true,
        labels,
        mounts: Vec::new(),
        workdir: None,
        env: env_pairs(&config.env)?,
        ports: config.exposed_ports.clone(),
    };
    let info = containers::run(&request).map_err(|e| from_container("start the service", e))?;
    let joined =
        containers::network_connect(&env.network(), &info.id, std::slice::from_ref(&config.name))
            .map_err(|e| from_container("put the service on the environment's network", e))
            .and_then(|()| inspect_settled(&info.id));
    match joined {
        Ok(now) if now.state == "running" => Ok(now),
        Ok(now) => Err(ended_at_start(
            &info.id,
            now.exit_code,
            &format!(
                "service `{}` ({}) stopped at once (state {}); nothing was added",
                config.name, config.image, now.state
            ),
            "check the image's default command or pass `command` (run by sh -c); try it by hand with `podman run --rm <image>`",
        )),
        Err(e) => {
            let _ = containers::remove(&info.id, 0);
            Err(e)
        }
    }
}

/// The container `id` as Podman describes it. Podman (4.3) can fail to
/// describe a container that is exiting at that moment ("network
/// inspection mismatch"): asked again a moment later, it describes the
/// exited container.
fn inspect_settled(id: &str) -> Result<ContainerInfo, ToolError> {
    let mut tries = 0;
    loop {
        match containers::inspect(id) {
            Err(_) if tries < 3 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            other => return other.map_err(|e| from_container("inspect the service", e)),
        }
    }
}

/// Start again the recorded services whose containers are gone or
/// stopped; what was restarted.
pub fn ensure(env: &Env, record: &Record) -> Result<Vec<String>, ToolError> {
    if record.services.is_empty() {
        return Ok(Vec::new());
    }
    let live = running(env)?;
    let gone: Vec<&ServiceConfig> = record
        .services
        .iter()
        .filter(|config| {
            let name = env.added_service_name(&config.name);
            !live.iter().any(|c| c.name == name && c.state == "running")
        })
        .collect();
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    containers::network_connect(&env.network(), &env.container_name(), &[])
        .map_err(|e| from_container("join the environment's network", e))?;
    for config in &gone {
        let _ = containers::remove(&env.added_service_name(&config.name), 0);
        start(env, config)?;
    }
    write_hosts(env, &env.container_name())?;
    Ok(gone.iter().map(|config| config.name.clone()).collect())
}
