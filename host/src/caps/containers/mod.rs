//! `containers`: Podman containers for plugins granted `containers`, with
//! networks of their own ([`network`]) and checkpoints ([`commit`]).
//!
//! What a plugin may ask for is checked here: an image allowed by
//! `containers.images`, bind mounts inside its fs roots, ports published on
//! 127.0.0.1 only, no privileged options at all (there is no field for
//! them). Every container gets the label `mcphost.plugin=<plugin>`; a
//! plugin can see, exec in, stop or remove only containers with its own
//! label.
//!
//! `exec` goes through Podman's REST API ([`podman::api`]), or for a
//! remote engine runs `podman exec` under [`timebox`]. Either way the run's
//! marker variable is passed into the container (`MCP_HOST_RUN_ID`), so the
//! processes it starts there carry it too; they are host processes in the
//! container's PID namespace, and the timebox's tree kill (a /proc scan for
//! the marker) ends them, re-parented descendants included. Ending the
//! client alone would leave them running: conmon keeps the session alive.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use crate::bindings::Refusal;
use crate::bindings::mcphost::plugin::containers::{
    ContainerError, ContainerInfo, CreateRequest, ExecRequest, Host, PortBinding, Removal, StopKind,
};
use crate::bindings::mcphost::plugin::process::RunResult;
use crate::caps::spawn::{MAX_TAIL_BYTES, RunProgress, run_result};
use crate::paths::confine;
use crate::podman::{self, Inspected, PodmanError};
use crate::policy::Grants;
use crate::store::CallState;
use timebox::{MARKER_VAR, Spawn};

mod commit;
mod network;

/// The label that ties a container to the plugin that made it.
pub const OWNER_LABEL: &str = "mcphost.plugin";
/// The label that ties it to the machine whose host made it: hosts on
/// several machines may share one Podman service, and each acts only on its
/// own containers.
pub const MACHINE_LABEL: &str = "mcphost.machine";

/// This machine: its `/etc/machine-id`, else its host name.
pub(super) static MACHINE: LazyLock<String> = LazyLock::new(|| {
    ["/etc/machine-id", "/proc/sys/kernel/hostname"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .map(|id| id.trim().to_string())
        .find(|id| !id.is_empty())
        .unwrap_or_else(|| "unknown".into())
});

type Answer<T> = Result<T, Refusal<ContainerError>>;

impl From<PodmanError> for ContainerError {
    fn from(e: PodmanError) -> Self {
        match e {
            PodmanError::Unavailable(m) => ContainerError::Unavailable(m),
            PodmanError::NotFound(m) => ContainerError::NotFound(m),
            PodmanError::Failed(m) => ContainerError::Failed(m),
        }
    }
}

/// (plugin, id or name) pairs already seen to carry the plugin's label, so
/// an `exec` does not pay for a `podman inspect` every time.
static OWNED: LazyLock<Mutex<HashSet<(String, String)>>> = LazyLock::new(Default::default);

fn remember(plugin: &str, info: &Inspected) {
    let mut owned = OWNED.lock().expect("owned set poisoned");
    owned.insert((plugin.to_string(), info.id.clone()));
    owned.insert((plugin.to_string(), info.name.clone()));
}

fn forget(plugin: &str, info: &Inspected) {
    let mut owned = OWNED.lock().expect("owned set poisoned");
    owned.remove(&(plugin.to_string(), info.id.clone()));
    owned.remove(&(plugin.to_string(), info.name.clone()));
}

fn granted(g: &Grants) -> Result<(), ContainerError> {
    g.require("containers").map_err(ContainerError::Denied)
}

/// The container `id` if it exists and belongs to this plugin.
async fn owned(g: &Grants, id: &str) -> Result<Inspected, ContainerError> {
    granted(g)?;
    check_word("container id", id)?;
    let not_found = || {
        ContainerError::NotFound(format!(
            "no container `{id}` belongs to plugin `{}`",
            g.plugin
        ))
    };
    let info = match podman::inspect(&[id.to_string()]).await {
        Ok(mut found) if !found.is_empty() => found.remove(0),
        Ok(_) | Err(PodmanError::NotFound(_)) => return Err(not_found()),
        Err(e) => return Err(e.into()),
    };
    if owner(&info) != Some(g.plugin.as_str()) || !this_machine(&info) {
        return Err(not_found());
    }
    remember(&g.plugin, &info);
    Ok(info)
}

/// Capabilities a development container keeps: installing packages
/// (ownership, permissions, apt's setuid/setgid sandbox), signalling its
/// own processes, and a service on a port below 1024. Not the rest of
/// Podman's defaults (MKNOD, NET_RAW, SYS_CHROOT, SETFCAP, SETPCAP,
/// AUDIT_WRITE), whatever `containers.conf` says.
const CONTAINER_CAPABILITIES: &str =
    "CHOWN,DAC_OVERRIDE,FOWNER,FSETID,KILL,SETGID,SETUID,NET_BIND_SERVICE";

/// What every container is started with: the capabilities above, no
/// privilege gained through setuid binaries, and the policy's memory and
/// process limits.
fn confinement(g: &Grants) -> Vec<String> {
    vec![
        "--cap-drop=all".into(),
        format!("--cap-add={CONTAINER_CAPABILITIES}"),
        "--security-opt=no-new-privileges".into(),
        format!("--pids-limit={}", g.container_pids),
        format!("--memory={}m", g.container_memory_mb),
    ]
}

/// Turn a create request into `podman run` arguments the policy allows.
fn run_args(g: &Grants, request: &CreateRequest) -> Result<Vec<String>, ContainerError> {
    if !image_allowed(&request.image, &g.images) {
        return Err(ContainerError::Denied(g.denial(
            &format!("the image `{}`", request.image),
            "containers.images",
            &format!("\"{}\"", request.image),
        )));
    }
    check_word("image", &request.image)?;
    let pull = if image_allowed(&request.image, &g.pull) {
        "--pull=missing"
    } else {
        "--pull=never"
    };
    let mut args: Vec<String> = vec!["run".into(), "--detach".into(), pull.into()];
    args.extend(confinement(g));
    args.extend(["--label".into(), format!("{OWNER_LABEL}={}", g.plugin)]);
    args.extend(["--label".into(), format!("{MACHINE_LABEL}={}", *MACHINE)]);
    for (key, value) in &request.labels {
        if key.is_empty() || key.contains('=') || key == OWNER_LABEL || key == MACHINE_LABEL {
            return Err(ContainerError::Invalid(format!(
                "label `{key}` cannot be set"
            )));
        }
        if value.contains('\n') {
            return Err(ContainerError::Invalid(format!(
                "the value of label `{key}` contains a newline, which labels cannot hold"
            )));
        }
        args.extend(["--label".into(), format!("{key}={value}")]);
    }
    for mount in &request.mounts {
        let roots: Vec<PathBuf> = if mount.read_only {
            g.read_roots.iter().chain(&g.write_roots).cloned().collect()
        } else {
            g.write_roots.clone()
        };
        let key = if mount.read_only {
            "fs.read"
        } else {
            "fs.write"
        };
        let source = confine(&mount.source, &g.workspace, &roots)
            .filter(|_| Path::new(&mount.source).is_absolute())
            .ok_or_else(|| {
                ContainerError::Denied(g.denial(
                    &format!("mounting `{}`", mount.source),
                    key,
                    "an absolute root containing it",
                ))
            })?;
        let source = source.to_string_lossy();
        if !mount.target.starts_with('/')
            || [&*source, &mount.target]
                .iter()
                .any(|p| p.contains([':', ',']))
        {
            return Err(ContainerError::Invalid(format!(
                "mount `{}` -> `{}`: the target must be absolute, and neither may contain ':' or ','",
                mount.source, mount.target
            )));
        }
        let ro = if mount.read_only { ":ro" } else { "" };
        args.extend(["--volume".into(), format!("{source}:{}{ro}", mount.target)]);
    }
    if let Some(dir) = &request.workdir {
        args.extend(["--workdir".into(), dir.clone()]);
    }
    args.extend(env_args(&request.env)?);
    for port in &request.ports {
        if *port == 0 {
            return Err(ContainerError::Invalid("port 0 cannot be published".into()));
        }
        args.extend(["--publish".into(), format!("127.0.0.1::{port}")]);
    }
    if !request.use_entrypoint {
        args.push("--entrypoint=".into());
    }
    if let Some(name) = &request.name {
        check_word("container name", name)?;
        args.extend(["--name".into(), name.clone()]);
    }
    args.push(request.image.clone());
    args.extend(request.command.iter().cloned());
    Ok(args)
}

impl Host for CallState {
    fn convert_container_error(
        &mut self,
        err: Refusal<ContainerError>,
    ) -> wasmtime::Result<ContainerError> {
        err.into_wit()
    }

    async fn run(&mut self, request: CreateRequest) -> Answer<ContainerInfo> {
        let g = self.grants.clone();
        granted(&g)?;
        let args = run_args(&g, &request)?;
        let id = match podman::run(&args).await {
            Err(PodmanError::Failed(said))
                if said.contains("image not known") && !image_allowed(&request.image, &g.pull) =>
            {
                return Err(ContainerError::Invalid(image_missing(&g, &request.image)).into());
            }
            other => other?.trim().to_string(),
        };
        let info = owned(&g, &id).await?;
        Ok(container_info(&info))
    }

    async fn exec(&mut self, id: String, request: ExecRequest) -> Answer<RunResult> {
        let call = self.call.clone();
        let g = self.grants.clone();
        granted(&g)?;
        let known = OWNED
            .lock()
            .expect("owned set poisoned")
            .contains(&(g.plugin.clone(), id.clone()));
        let image = if request.use_entrypoint || !known {
            Some(owned(&g, &id).await?.image_name)
        } else {
            None
        };
        if request.argv.is_empty() {
            return Err(ContainerError::Invalid("argv is empty".into()).into());
        }
        let env_flags = env_args(&request.env)?; // also checks the names
        let mut argv = match (request.use_entrypoint, &image) {
            (true, Some(image)) => podman::image_entrypoint(image).await?,
            _ => Vec::new(),
        };
        argv.extend(request.argv.iter().cloned());
        let remaining = call.deadline.saturating_duration_since(Instant::now());
        let timeout = Duration::from_millis(request.timeout_ms).min(remaining);
        let no_output_timeout = request.no_output_timeout_ms.map(Duration::from_millis);
        let tail_bytes = request.tail_bytes.min(MAX_TAIL_BYTES) as usize;
        let progress = RunProgress::new(call.client.clone(), format!("podman exec {id}"));
        let outcome = match podman::api::client().await? {
            Some(docker) => {
                let spec = podman::api::ExecSpec {
                    argv,
                    workdir: request.workdir,
                    env: request.env,
                    stdin: request.stdin,
                    timeout,
                    no_output_timeout,
                    tail_bytes,
                };
                podman::api::exec(docker, &id, spec, &call.cancel, &progress).await?
            }
            None => {
                let mut args: Vec<String> = vec!["exec".into(), "--env".into(), MARKER_VAR.into()];
                if request.stdin.is_some() {
                    args.push("--interactive".into());
                }
                if let Some(dir) = &request.workdir {
                    args.extend(["--workdir".into(), dir.clone()]);
                }
                args.extend(env_flags);
                args.push(id.clone());
                args.extend(argv);
                let spawn = Spawn {
                    program: podman::program()?,
                    args,
                    cwd: std::env::temp_dir(),
                    env: std::env::vars().collect(),
                    stdin: request.stdin,
                    timeout,
                    no_output_timeout,
                    tail_bytes,
                    log: None,
                };
                cli_exec(&id, &spawn, &call.cancel, &progress).await?
            }
        };
        tracing::debug!(
            plugin = %g.plugin, trace_id = %call.trace_id, container = %id,
            ending = ?outcome.ending, exit_code = ?outcome.exit_code, kill = ?outcome.kill,
            "exec finished"
        );
        Ok(run_result(outcome))
    }

    async fn inspect(&mut self, id: String) -> Answer<ContainerInfo> {
        Ok(container_info(&owned(&self.grants, &id).await?))
    }

    async fn stop(&mut self, id: String, grace_ms: u32) -> Answer<StopKind> {
        let g = self.grants.clone();
        let info = owned(&g, &id).await?;
        Ok(stop(&info, grace_ms).await?)
    }

    async fn remove(&mut self, id: String, grace_ms: u32) -> Answer<Removal> {
        let g = self.grants.clone();
        let info = owned(&g, &id).await?;
        let stop = stop(&info, grace_ms).await?;
        podman::run(&[
            "rm".into(),
            "--force".into(),
            "--time=0".into(),
            info.id.clone(),
        ])
        .await?;
        forget(&g.plugin, &info);
        let leftovers = tokio::task::spawn_blocking({
            let (id, name) = (info.id.clone(), info.name.clone());
            move || kill_leftovers(&id, &name)
        })
        .await
        .unwrap_or(0);
        Ok(Removal {
            id: info.id,
            stop,
            leftovers_killed: leftovers,
        })
    }

    async fn list(&mut self, labels: Vec<(String, String)>) -> Answer<Vec<ContainerInfo>> {
        let g = self.grants.clone();
        granted(&g)?;
        let mut args: Vec<String> = vec![
            "ps".into(),
            "--all".into(),
            "--quiet".into(),
            "--no-trunc".into(),
            "--filter".into(),
            format!("label={OWNER_LABEL}={}", g.plugin),
        ];
        for (key, value) in &labels {
            check_word("label", key)?;
            args.extend(["--filter".into(), format!("label={key}={value}")]);
        }
        let ids: Vec<String> = podman::run(&args)
            .await?
            .lines()
            .map(str::to_string)
            .collect();
        // A container removed between `ps` and `inspect` is simply gone.
        let found = match podman::inspect(&ids).await {
            Err(PodmanError::NotFound(_)) => {
                let mut found = Vec::new();
                for id in ids {
                    found.extend(podman::inspect(&[id]).await.unwrap_or_default());
                }
                found
            }
            other => other?,
        };
        Ok(found
            .iter()
            .filter(|info| owner(info) == Some(g.plugin.as_str()) && this_machine(info))
            .inspect(|info| remember(&g.plugin, info))
            .map(container_info)
            .collect())
    }

    async fn rename(&mut self, id: String, name: String) -> Answer<()> {
        let g = self.grants.clone();
        let info = owned(&g, &id).await?;
        check_word("container name", &name)?;
        podman::run(&["rename".into(), info.id.clone(), name]).await?;
        forget(&g.plugin, &info);
        Ok(())
    }

    async fn network_connect(
        &mut self,
        network: String,
        id: String,
        aliases: Vec<String>,
    ) -> Answer<()> {
        let g = self.grants.clone();
        let info = owned(&g, &id).await?;
        Ok(network::connect(&g, &network, &info.id, &aliases).await?)
    }

    async fn network_remove(&mut self, network: String) -> Answer<bool> {
        let g = self.grants.clone();
        granted(&g)?;
        Ok(network::remove(&g, &network).await?)
    }

    async fn commit(&mut self, id: String, image: String) -> Answer<String> {
        let g = self.grants.clone();
        let info = owned(&g, &id).await?;
        Ok(commit::commit(&g, &info, &image).await?)
    }
}

/// `podman exec` as a timeboxed process, for an engine the API does not
/// reach (a remote `CONTAINER_HOST`).
async fn cli_exec(
    id: &str,
    spawn: &Spawn,
    cancel: &tokio_util::sync::CancellationToken,
    progress: &RunProgress,
) -> Result<timebox::Outcome, ContainerError> {
    let outcome = timebox::run(spawn, cancel, progress).await;
    // Podman's own failures (exit 125/255 with its `Error:` line and
    // nothing on stdout): the session never ran. Matched narrowly so a
    // command's own exit code 125 is never mistaken for one.
    if matches!(outcome.exit_code, Some(125) | Some(255)) && outcome.stdout_bytes == 0 {
        let said: String = outcome.tail.chunks().into_iter().map(|(_, t)| t).collect();
        let podman_said = said.starts_with("Error: ")
            && [
                "no such container",
                "no container with",
                "container state improper",
            ]
            .iter()
            .any(|sign| said.contains(sign));
        if podman_said {
            return Err(podman::classify(&format!("podman exec {id}"), &said).into());
        }
    }
    Ok(outcome)
}

/// Made by a host on this machine (or by one from before the machine
/// label, which ran here: a shared service was not supported then).
fn this_machine(info: &Inspected) -> bool {
    let label = info
        .config
        .labels
        .as_ref()
        .and_then(|l| l.get(MACHINE_LABEL));
    label.is_none_or(|m| *m == *MACHINE)
}

fn owner(info: &Inspected) -> Option<&str> {
    info.config
        .labels
        .as_ref()?
        .get(OWNER_LABEL)
        .map(String::as_str)
}

/// Stop a running container: SIGTERM, then SIGKILL after the grace period.
async fn stop(info: &Inspected, grace_ms: u32) -> Result<StopKind, ContainerError> {
    if info.state.status != "running" && info.state.status != "paused" {
        return Ok(StopKind::NotRunning);
    }
    let seconds = grace_ms.div_ceil(1000);
    podman::run(&["stop".into(), format!("--time={seconds}"), info.id.clone()]).await?;
    let after = podman::inspect(std::slice::from_ref(&info.id)).await?;
    // Exit code 137 = 128 + SIGKILL: the grace period ran out.
    Ok(match after.first().map(|i| i.state.exit_code) {
        Some(137) => StopKind::Killed,
        _ => StopKind::Terminated,
    })
}

/// Host processes still naming the removed container (an exec client, a
/// monitor): killed, and counted for the caller's report.
fn kill_leftovers(id: &str, name: &str) -> u32 {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let Ok(all) = procfs::process::all_processes() else {
        return 0;
    };
    let me = std::process::id() as i32;
    let mut killed = 0;
    for process in all.flatten() {
        if process.pid == me {
            continue;
        }
        let Ok(cmdline) = process.cmdline() else {
            continue;
        };
        let podman_related = cmdline
            .first()
            .is_some_and(|p| p.ends_with("podman") || p.ends_with("conmon"));
        if podman_related
            && cmdline.iter().any(|arg| arg == id || arg == name)
            && kill(Pid::from_raw(process.pid), Signal::SIGKILL).is_ok()
        {
            killed += 1;
        }
    }
    killed
}

fn container_info(info: &Inspected) -> ContainerInfo {
    let mut ports = Vec::new();
    for (spec, bindings) in info.network_settings.ports.iter().flatten() {
        let Some(port) = spec.split('/').next().and_then(|p| p.parse().ok()) else {
            continue;
        };
        for binding in bindings.iter().flatten() {
            if let Ok(host_port) = binding.host_port.parse() {
                ports.push(PortBinding {
                    container_port: port,
                    host_ip: binding.host_ip.clone(),
                    host_port,
                });
            }
        }
    }
    ContainerInfo {
        id: info.id.clone(),
        name: info.name.clone(),
        image: info.image_name.clone(),
        state: info.state.status.clone(),
        labels: info
            .config
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ports,
        ip_address: info.network_settings.address(),
    }
}

fn env_args(env: &[(String, String)]) -> Result<Vec<String>, ContainerError> {
    let mut args = Vec::new();
    for (key, value) in env {
        if key.is_empty() || key.contains('=') || key == MARKER_VAR {
            return Err(ContainerError::Invalid(format!(
                "environment variable `{key}` cannot be set"
            )));
        }
        args.extend(["--env".into(), format!("{key}={value}")]);
    }
    Ok(args)
}

/// Ids, names, images and label keys: one token podman cannot take for an option.
pub(super) fn check_word(what: &str, word: &str) -> Result<(), ContainerError> {
    if word.is_empty()
        || word.starts_with('-')
        || word.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        Err(ContainerError::Invalid(format!(
            "{what} `{word}` is not valid"
        )))
    } else {
        Ok(())
    }
}

/// Why a run of an image that is not in local storage was refused. It
/// carries the words plugins look for ("is not in local storage").
fn image_missing(g: &Grants, image: &str) -> String {
    format!(
        "image `{image}` is not in local storage and the policy does not let the host pull it: \
         pull or build it (`podman pull {image}`), or allow pulling it with containers.pull under \
         [plugins.{}] in {}",
        g.plugin, g.config_hint
    )
}

/// `containers.images` entries: an exact image, `prefix*`, or `*`.
pub(super) fn image_allowed(image: &str, allowed: &[String]) -> bool {
    allowed
        .iter()
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => image.starts_with(prefix),
            None => pattern == image,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_patterns() {
        let allowed = vec![
            "localhost/*".to_string(),
            "docker.io/library/alpine:3".into(),
        ];
        assert!(image_allowed("localhost/cofer-test:latest", &allowed));
        assert!(image_allowed("docker.io/library/alpine:3", &allowed));
        assert!(!image_allowed("docker.io/library/alpine:4", &allowed));
        assert!(image_allowed("anything", &["*".to_string()]));
        assert!(!image_allowed("anything", &[]));
    }

    #[test]
    fn option_like_words_are_refused() {
        assert!(check_word("image", "--privileged").is_err());
        assert!(check_word("image", "a b").is_err());
        assert!(check_word("image", "localhost/x:1").is_ok());
        assert!(env_args(&[(MARKER_VAR.to_string(), "x".into())]).is_err());
    }
}
