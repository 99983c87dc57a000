//! `containers`: Podman containers for plugins granted `containers`, with
//! networks of their own ([`network`]), checkpoints ([`commit`]) and files
//! carried to engines that cannot mount this machine's ([`files`]).
//!
//! What a plugin may ask for is checked here: an image allowed by
//! `containers.images`, bind mounts inside its fs roots, ports published on
//! 127.0.0.1 only, no privileged options at all (there is no field for
//! them). Every container gets the label `mcphost.plugin=<plugin>`; a
//! plugin can see, exec in, stop or remove only containers with its own
//! label.
//!
//! Every operation goes through Podman's REST API ([`podman`]), of the
//! call's engine: the local one, or one `containers.engines` names (the
//! plugin picks among those by name; a URL never comes from it). An
//! exec passes the run's marker variable into the container
//! (`MCP_HOST_RUN_ID`), so the processes it starts there carry it too;
//! they are host processes in the container's PID namespace, and the
//! timebox's tree kill (a /proc scan for the marker) ends them,
//! re-parented descendants included; on another machine's engine the same
//! scan runs inside the container ([`podman::exec`]). Ending the session
//! alone would leave them running: conmon keeps it alive.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, HostConfig, Mount, MountType, PortBinding as HostBinding,
    VolumeCreateRequest,
};
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, ListContainersOptions, RemoveContainerOptions,
    RenameContainerOptions, StopContainerOptions,
};
use futures_util::TryStreamExt;

use crate::bindings::Refusal;
use crate::bindings::mcphost::plugin::containers::{
    ContainerError, ContainerInfo, CreateRequest, Engine as EngineInfo, ExecRequest, Host,
    PortBinding, Removal, StopKind, SyncReport,
};
use crate::bindings::mcphost::plugin::process::RunResult;
use crate::caps::spawn::{MAX_TAIL_BYTES, RunProgress, run_result};
use crate::paths::confine;
use crate::podman::{self, Engine, Inspected, PodmanError, failed};
use crate::policy::{Grants, LOCAL_ENGINE};
use crate::store::CallState;
use timebox::MARKER_VAR;

mod commit;
pub(crate) mod files;
pub mod mounts;
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

/// (plugin, engine, id or name) already seen to carry the plugin's label,
/// so an `exec` does not pay for a `podman inspect` every time.
static OWNED: LazyLock<Mutex<HashSet<(String, String, String)>>> = LazyLock::new(Default::default);

fn owned_key(plugin: &str, engine: &Engine, id: &str) -> (String, String, String) {
    (
        plugin.to_string(),
        engine.name().to_string(),
        id.to_string(),
    )
}

fn remember(plugin: &str, engine: &Engine, info: &Inspected) {
    let mut owned = OWNED.lock().expect("owned set poisoned");
    owned.insert(owned_key(plugin, engine, &info.id));
    owned.insert(owned_key(plugin, engine, &info.name));
}

fn forget(plugin: &str, engine: &Engine, info: &Inspected) {
    let mut owned = OWNED.lock().expect("owned set poisoned");
    owned.remove(&owned_key(plugin, engine, &info.id));
    owned.remove(&owned_key(plugin, engine, &info.name));
}

fn granted(g: &Grants) -> Result<(), ContainerError> {
    g.require("containers").map_err(ContainerError::Denied)
}

/// The container `id` on `engine` if it exists and belongs to this plugin.
async fn owned(g: &Grants, engine: &Engine, id: &str) -> Result<Inspected, ContainerError> {
    granted(g)?;
    check_word("container id", id)?;
    let not_found = || {
        ContainerError::NotFound(format!(
            "no container `{id}` belongs to plugin `{}`",
            g.plugin
        ))
    };
    let docker = podman::client(engine).await?;
    let info = match podman::inspect(&docker, id).await {
        Ok(info) => info,
        Err(PodmanError::NotFound(_)) => return Err(not_found()),
        Err(e) => return Err(e.into()),
    };
    if owner(&info) != Some(g.plugin.as_str()) || !this_machine(&info) {
        return Err(not_found());
    }
    remember(&g.plugin, engine, &info);
    Ok(info)
}

/// Capabilities a development container keeps: installing packages
/// (ownership, permissions, apt's setuid/setgid sandbox), signalling its
/// own processes, and a service on a port below 1024. Not the rest of
/// Podman's defaults (MKNOD, NET_RAW, SYS_CHROOT, SETFCAP, SETPCAP,
/// AUDIT_WRITE), whatever `containers.conf` says.
const CONTAINER_CAPABILITIES: [&str; 8] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "NET_BIND_SERVICE",
];

/// What every container is started with: the capabilities above, no
/// privilege gained through setuid binaries, and the policy's memory and
/// process limits.
fn confinement(g: &Grants) -> HostConfig {
    HostConfig {
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(
            CONTAINER_CAPABILITIES
                .iter()
                .map(|c| c.to_string())
                .collect(),
        ),
        security_opt: Some(vec!["no-new-privileges".into()]),
        pids_limit: Some(g.container_pids as i64),
        memory: Some((g.container_memory_mb * 1024 * 1024) as i64),
        ..Default::default()
    }
}

/// Turn a create request into the container the policy allows on
/// `engine` (its volumes are made by [`ensure_volumes`]).
fn create_body(
    g: &Grants,
    engine: &Engine,
    request: &CreateRequest,
) -> Result<ContainerCreateBody, ContainerError> {
    if !image_allowed(&request.image, &g.images) {
        return Err(ContainerError::Denied(g.denial(
            &format!("the image `{}`", request.image),
            "containers.images",
            &format!("\"{}\"", request.image),
        )));
    }
    check_word("image", &request.image)?;
    let mut labels = HashMap::from([
        (OWNER_LABEL.to_string(), g.plugin.clone()),
        (MACHINE_LABEL.to_string(), MACHINE.clone()),
    ]);
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
        labels.insert(key.clone(), value.clone());
    }
    let mut mounts = Vec::new();
    for mount in &request.mounts {
        if !mount.target.starts_with('/') || mount.target.contains([':', ',']) {
            return Err(ContainerError::Invalid(format!(
                "mount target `{}` must be absolute, without ':' or ','",
                mount.target
            )));
        }
        if is_volume(&mount.source) {
            check_volume(&mount.source)?;
            mounts.push(Mount {
                typ: Some(MountType::VOLUME),
                source: Some(mount.source.clone()),
                target: Some(mount.target.clone()),
                read_only: Some(mount.read_only),
                ..Default::default()
            });
            continue;
        }
        let roots = g.roots(!mount.read_only);
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
        if source.contains([':', ',']) {
            return Err(ContainerError::Invalid(format!(
                "mount source `{source}` must not contain ':' or ','"
            )));
        }
        // A mount, not a `Binds` entry: for those the engine makes a
        // missing source, so an engine that cannot see the host's files
        // (another machine's) would mount an empty folder and go on.
        mounts.push(Mount {
            typ: Some(MountType::BIND),
            source: Some(source.into_owned()),
            target: Some(mount.target.clone()),
            read_only: Some(mount.read_only),
            ..Default::default()
        });
    }
    let mut exposed = Vec::new();
    let mut published = HashMap::new();
    let publish_ip = publish_address(engine)?;
    for port in &request.ports {
        if *port == 0 {
            return Err(ContainerError::Invalid("port 0 cannot be published".into()));
        }
        let spec = format!("{port}/tcp");
        exposed.push(spec.clone());
        // Any free port, on the loopback address only (another machine's
        // engine: on its address, where this machine reaches it).
        let binding = HostBinding {
            host_ip: Some(publish_ip.clone()),
            host_port: Some(String::new()),
        };
        published.insert(spec, Some(vec![binding]));
    }
    if let Some(name) = &request.name {
        check_word("container name", name)?;
    }
    Ok(ContainerCreateBody {
        image: Some(request.image.clone()),
        cmd: Some(request.command.clone()).filter(|c| !c.is_empty()),
        // An empty entry clears the image's entrypoint.
        entrypoint: (!request.use_entrypoint).then(|| vec![String::new()]),
        env: Some(env_list(&request.env)?),
        labels: Some(labels),
        working_dir: request.workdir.clone(),
        exposed_ports: Some(exposed),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            port_bindings: Some(published),
            ..confinement(g)
        }),
        ..Default::default()
    })
}

/// Where `engine` publishes ports: the loopback address here, else the
/// engine's address (as an IP: Podman binds to it).
fn publish_address(engine: &Engine) -> Result<String, ContainerError> {
    use std::net::{IpAddr, ToSocketAddrs};
    let address = engine.address();
    if address.parse::<IpAddr>().is_ok() {
        return Ok(address.to_string());
    }
    (address, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut found| found.next())
        .map(|a| a.ip().to_string())
        .ok_or_else(|| {
            ContainerError::Unavailable(format!(
                "the address `{address}` of engine `{}` does not resolve: fix `address` in containers.engines",
                engine.name()
            ))
        })
}

/// A mount source naming a volume rather than a host folder.
fn is_volume(source: &str) -> bool {
    !source.contains('/')
}

fn check_volume(name: &str) -> Result<(), ContainerError> {
    let valid = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if valid {
        Ok(())
    } else {
        Err(ContainerError::Invalid(format!(
            "volume name `{name}` is not valid: letters, digits, `_`, `.` and `-`, a letter or digit first"
        )))
    }
}

/// Whether the volume `name` exists, and then whether it is the plugin's.
async fn volume_owned(
    docker: &Docker,
    g: &Grants,
    name: &str,
) -> Result<Option<bool>, ContainerError> {
    match docker.inspect_volume(name).await {
        Ok(found) => Ok(Some(
            found.labels.get(OWNER_LABEL) == Some(&g.plugin)
                && found.labels.get(MACHINE_LABEL) == Some(&*MACHINE),
        )),
        Err(e) => match failed(&format!("inspecting volume {name}"))(e) {
            PodmanError::NotFound(_) => Ok(None),
            e => Err(e.into()),
        },
    }
}

/// Make the volumes `body` mounts that do not exist, with the plugin's
/// labels; a volume of someone else's is refused.
async fn ensure_volumes(
    docker: &Docker,
    g: &Grants,
    body: &ContainerCreateBody,
) -> Result<(), ContainerError> {
    let mounts = body.host_config.as_ref().and_then(|h| h.mounts.as_ref());
    for mount in mounts.into_iter().flatten() {
        let (Some(MountType::VOLUME), Some(name)) = (mount.typ, &mount.source) else {
            continue;
        };
        match volume_owned(docker, g, name).await? {
            Some(true) => continue,
            Some(false) => {
                return Err(ContainerError::NotFound(format!(
                    "volume `{name}` exists but does not belong to plugin `{}`: choose another name",
                    g.plugin
                )));
            }
            None => {}
        }
        let request = VolumeCreateRequest {
            name: Some(name.clone()),
            labels: Some(HashMap::from([
                (OWNER_LABEL.to_string(), g.plugin.clone()),
                (MACHINE_LABEL.to_string(), MACHINE.clone()),
            ])),
            ..Default::default()
        };
        docker
            .create_volume(request)
            .await
            .map_err(failed(&format!("creating volume {name}")))?;
    }
    Ok(())
}

/// Make sure `image` is in local storage: pulled if the policy allows
/// that, else refused with how to get it.
async fn ensure_image(docker: &Docker, g: &Grants, image: &str) -> Result<(), ContainerError> {
    if podman::image(docker, image).await?.is_some() {
        return Ok(());
    }
    if !image_allowed(image, &g.pull) {
        return Err(ContainerError::Invalid(image_missing(g, image)));
    }
    let options = CreateImageOptions {
        from_image: Some(image.to_string()),
        ..Default::default()
    };
    docker
        .create_image(Some(options), None, None)
        .try_for_each(|_| async { Ok(()) })
        .await
        .map_err(failed(&format!("pulling {image}")))?;
    Ok(())
}

impl Host for CallState {
    fn convert_container_error(
        &mut self,
        err: Refusal<ContainerError>,
    ) -> wasmtime::Result<ContainerError> {
        err.into_wit()
    }

    async fn engines(&mut self) -> wasmtime::Result<Vec<EngineInfo>> {
        let remote = self.grants.engines.iter().cloned().map(Engine::Remote);
        Ok(std::iter::once(Engine::Local)
            .chain(remote)
            .map(|e| engine_info(&e))
            .collect())
    }

    async fn use_engine(&mut self, name: String) -> Answer<EngineInfo> {
        let g = self.grants.clone();
        granted(&g)?;
        let engine = if name == LOCAL_ENGINE {
            Engine::Local
        } else {
            let found = g.engines.iter().find(|e| e.name == name).ok_or_else(|| {
                let known: Vec<&str> = std::iter::once(LOCAL_ENGINE)
                    .chain(g.engines.iter().map(|e| e.name.as_str()))
                    .collect();
                ContainerError::Denied(format!(
                    "plugin `{}` has no engine `{name}` (it has: {}): name a Podman service as \
                     `containers.engines.{name} = \"tcp://<address>:<port>\"` under [plugins.{}] in {}",
                    g.plugin,
                    known.join(", "),
                    g.plugin,
                    g.config_hint
                ))
            })?;
            Engine::Remote(found.clone())
        };
        self.engine = engine;
        Ok(engine_info(&self.engine))
    }

    async fn run(&mut self, request: CreateRequest) -> Answer<ContainerInfo> {
        let g = self.grants.clone();
        let engine = self.engine.clone();
        granted(&g)?;
        let mut body = create_body(&g, &engine, &request)?;
        let docker = podman::client(&engine).await?;
        ensure_image(&docker, &g, &request.image).await?;
        ensure_volumes(&docker, &g, &body).await?;
        // Pinned and probed only now: a pull can take minutes. Held until
        // the container has started (it then has mounts of its own).
        let pins = mounts::Pins::take(&g, engine.name() == LOCAL_ENGINE, &mut body)?;
        let probes = mounts::Probes::place(&pins)?;
        let options = CreateContainerOptions {
            name: request.name.clone(),
            ..Default::default()
        };
        let id = docker
            .create_container(Some(options), body)
            .await
            .map_err(failed(&format!(
                "creating a container of {}",
                request.image
            )))?
            .id;
        let started = match docker.start_container(&id, None).await {
            Ok(()) => probed(&docker, &id, &probes).await,
            Err(e) => Err(failed(&format!("starting container {id}"))(e).into()),
        };
        drop(pins);
        if let Err(e) = started {
            // Nothing half-made stays behind.
            let _ = docker.remove_container(&id, Some(force_removal())).await;
            return Err(e.into());
        }
        let info = owned(&g, &engine, &id).await?;
        Ok(container_info(&info))
    }

    async fn exec(&mut self, id: String, request: ExecRequest) -> Answer<RunResult> {
        let call = self.call.clone();
        let g = self.grants.clone();
        let engine = self.engine.clone();
        granted(&g)?;
        let known = OWNED
            .lock()
            .expect("owned set poisoned")
            .contains(&owned_key(&g.plugin, &engine, &id));
        // An empty argv runs the image's default command, as create does.
        let needs_image = request.use_entrypoint || request.argv.is_empty();
        let image = if needs_image || !known {
            Some(owned(&g, &engine, &id).await?.image_name)
        } else {
            None
        };
        let env = env_list(&request.env)?;
        let docker = podman::client(&engine).await?;
        let config = match (needs_image, &image) {
            (true, Some(image)) => podman::image(&docker, image).await?.and_then(|i| i.config),
            _ => None,
        };
        let (entrypoint, default) = config.map_or((None, None), |c| (c.entrypoint, c.cmd));
        let mut argv = if request.use_entrypoint {
            entrypoint.unwrap_or_default()
        } else {
            Vec::new()
        };
        if request.argv.is_empty() {
            argv.extend(default.unwrap_or_default());
        } else {
            argv.extend(request.argv.iter().cloned());
        }
        if argv.is_empty() {
            return Err(ContainerError::Invalid(
                "argv is empty and the image has no default command: give a command".into(),
            )
            .into());
        }
        let timeout = crate::caps::spawn::run_budget(call.deadline, request.timeout_ms);
        let no_output_timeout = request.no_output_timeout_ms.map(Duration::from_millis);
        let tail_bytes = request.tail_bytes.min(MAX_TAIL_BYTES) as usize;
        let progress = RunProgress::new(
            call.client.clone(),
            format!("the command in container {id}"),
        );
        let spec = podman::exec::ExecSpec {
            argv,
            workdir: request.workdir,
            env,
            stdin: request.stdin,
            timeout,
            no_output_timeout,
            tail_bytes,
            remote: match &engine {
                Engine::Local => None,
                Engine::Remote(remote) => Some(remote.url.clone()),
            },
        };
        let outcome = podman::exec::exec(docker, &id, spec, &call.cancel, &progress).await?;
        tracing::debug!(
            plugin = %g.plugin, trace_id = %call.trace_id, container = %id,
            ending = ?outcome.ending, exit_code = ?outcome.exit_code, kill = ?outcome.kill,
            "exec finished"
        );
        Ok(run_result(outcome))
    }

    async fn inspect(&mut self, id: String) -> Answer<ContainerInfo> {
        Ok(container_info(
            &owned(&self.grants, &self.engine, &id).await?,
        ))
    }

    async fn logs(&mut self, id: String, tail_bytes: u64) -> Answer<String> {
        let info = owned(&self.grants, &self.engine, &id).await?;
        let docker = podman::client(&self.engine).await?;
        let keep = tail_bytes.min(MAX_TAIL_BYTES) as usize;
        Ok(podman::logs_tail(&docker, &info.id, keep).await?)
    }

    async fn stop(&mut self, id: String, grace_ms: u32) -> Answer<StopKind> {
        let g = self.grants.clone();
        let info = owned(&g, &self.engine, &id).await?;
        Ok(stop(&self.engine, &info, grace_ms).await?)
    }

    async fn remove(&mut self, id: String, grace_ms: u32) -> Answer<Removal> {
        let g = self.grants.clone();
        let engine = self.engine.clone();
        let info = owned(&g, &engine, &id).await?;
        let stop = stop(&engine, &info, grace_ms).await?;
        podman::client(&engine)
            .await?
            .remove_container(&info.id, Some(force_removal()))
            .await
            .map_err(failed(&format!("removing container {}", info.name)))?;
        forget(&g.plugin, &engine, &info);
        // Another machine's engine keeps its helpers on that machine.
        let leftovers = match engine {
            Engine::Local => tokio::task::spawn_blocking({
                let (id, name) = (info.id.clone(), info.name.clone());
                move || kill_leftovers(&id, &name)
            })
            .await
            .unwrap_or(0),
            Engine::Remote(_) => 0,
        };
        Ok(Removal {
            id: info.id,
            stop,
            leftovers_killed: leftovers,
        })
    }

    async fn list(&mut self, labels: Vec<(String, String)>) -> Answer<Vec<ContainerInfo>> {
        let g = self.grants.clone();
        granted(&g)?;
        let mut filters = vec![format!("{OWNER_LABEL}={}", g.plugin)];
        for (key, value) in &labels {
            check_word("label", key)?;
            filters.push(format!("{key}={value}"));
        }
        let docker = podman::client(&self.engine).await?;
        let options = ListContainersOptions {
            all: true,
            filters: Some(HashMap::from([("label".to_string(), filters)])),
            ..Default::default()
        };
        let listed = podman::settled(|| docker.list_containers(Some(options.clone())))
            .await
            .map_err(failed("listing containers"))?;
        let mut found = Vec::new();
        for id in listed.into_iter().filter_map(|c| c.id) {
            match podman::inspect(&docker, &id).await {
                Ok(info) => found.push(info),
                // Removed since it was listed: simply gone.
                Err(PodmanError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(found
            .iter()
            .filter(|info| owner(info) == Some(g.plugin.as_str()) && this_machine(info))
            .inspect(|info| remember(&g.plugin, &self.engine, info))
            .map(container_info)
            .collect())
    }

    async fn rename(&mut self, id: String, name: String) -> Answer<()> {
        let g = self.grants.clone();
        let info = owned(&g, &self.engine, &id).await?;
        check_word("container name", &name)?;
        podman::client(&self.engine)
            .await?
            .rename_container(&info.id, RenameContainerOptions { name })
            .await
            .map_err(failed(&format!("renaming container {}", info.name)))?;
        forget(&g.plugin, &self.engine, &info);
        Ok(())
    }

    async fn network_connect(
        &mut self,
        network: String,
        id: String,
        aliases: Vec<String>,
    ) -> Answer<()> {
        let g = self.grants.clone();
        let info = owned(&g, &self.engine, &id).await?;
        let docker = podman::client(&self.engine).await?;
        Ok(network::connect(&docker, &g, &network, &info.id, &aliases).await?)
    }

    async fn network_remove(&mut self, network: String) -> Answer<bool> {
        let g = self.grants.clone();
        granted(&g)?;
        let docker = podman::client(&self.engine).await?;
        Ok(network::remove(&docker, &g, &network).await?)
    }

    async fn commit(&mut self, id: String, image: String) -> Answer<String> {
        let g = self.grants.clone();
        let info = owned(&g, &self.engine, &id).await?;
        let docker = podman::client(&self.engine).await?;
        Ok(commit::commit(&docker, &g, &info, &image).await?)
    }

    async fn volume_remove(&mut self, name: String) -> Answer<bool> {
        let g = self.grants.clone();
        granted(&g)?;
        check_volume(&name)?;
        let docker = podman::client(&self.engine).await?;
        match volume_owned(&docker, &g, &name).await? {
            None => return Ok(false),
            Some(false) => {
                return Err(ContainerError::NotFound(format!(
                    "volume `{name}` does not belong to plugin `{}`",
                    g.plugin
                ))
                .into());
            }
            Some(true) => {}
        }
        docker
            .remove_volume(
                &name,
                None::<bollard::query_parameters::RemoveVolumeOptions>,
            )
            .await
            .map_err(failed(&format!("removing volume {name}")))?;
        Ok(true)
    }

    async fn copy_in(
        &mut self,
        id: String,
        source: String,
        target: String,
        paths: Vec<String>,
        exclude: Vec<String>,
    ) -> Answer<()> {
        let g = self.grants.clone();
        let info = owned(&g, &self.engine, &id).await?;
        let roots = g.roots(false);
        let source = confined(&g, &source, &roots, "fs.read")?;
        let paths = relatives("path", &paths)?;
        let exclude = relatives("excluded path", &exclude)?;
        in_container("target", &target)?;
        // tar reads the folder that was checked, through its open handle.
        let folder = pinned_dir(&g, &source, &roots)?;
        let docker = podman::client(&self.engine).await?;
        let through = crate::pin::proc_path(&folder);
        Ok(files::copy_in(&docker, &info.id, &through, &target, &paths, &exclude).await?)
    }

    async fn sync_out(
        &mut self,
        id: String,
        source: String,
        target: String,
        exclude: Vec<String>,
        max_bytes: u64,
    ) -> Answer<SyncReport> {
        let g = self.grants.clone();
        let info = owned(&g, &self.engine, &id).await?;
        let target = confined(&g, &target, &g.write_roots, "fs.write")?;
        let exclude = relatives("excluded path", &exclude)?;
        in_container("source", &source)?;
        // Applied beneath the folder that was checked, opened now.
        let folder = pinned_dir(&g, &target, &g.write_roots)?;
        let docker = podman::client(&self.engine).await?;
        let report =
            files::sync_out(&docker, &info.id, &source, folder, exclude, max_bytes).await?;
        tracing::debug!(
            plugin = %g.plugin, container = %info.name, written = report.written,
            removed = report.removed, bytes = report.bytes, "synced out"
        );
        Ok(report)
    }
}

/// The folder at `path` (already confined), opened beneath its root with
/// no link on the way ([`crate::pin`]).
fn pinned_dir(
    g: &Grants,
    path: &Path,
    roots: &[PathBuf],
) -> Result<cap_std::fs::Dir, ContainerError> {
    match crate::pin::open(path, roots) {
        Ok(crate::pin::Pinned::Dir(dir)) => Ok(dir),
        Ok(crate::pin::Pinned::File(_)) => Err(ContainerError::Invalid(format!(
            "{} is a file, not a folder",
            path.display()
        ))),
        Err(e) => Err(ContainerError::Denied(format!(
            "plugin `{}` cannot use {}: {e}",
            g.plugin,
            path.display()
        ))),
    }
}

/// Made by a host on this machine (or by one from before the machine
/// label, which ran here: a shared service was not supported then).
fn this_machine(info: &Inspected) -> bool {
    info.labels
        .get(MACHINE_LABEL)
        .is_none_or(|m| *m == *MACHINE)
}

fn owner(info: &Inspected) -> Option<&str> {
    info.labels.get(OWNER_LABEL).map(String::as_str)
}

/// A host folder the plugin names, inside `roots` (`key` grants them).
fn confined(
    g: &Grants,
    path: &str,
    roots: &[PathBuf],
    key: &str,
) -> Result<PathBuf, ContainerError> {
    let found = confine(path, &g.workspace, roots)
        .filter(|_| Path::new(path).is_absolute())
        .ok_or_else(|| {
            ContainerError::Denied(g.denial(
                &format!("the folder `{path}`"),
                key,
                "an absolute root containing it",
            ))
        })?;
    if !found.is_dir() {
        return Err(ContainerError::Invalid(format!("`{path}` is not a folder")));
    }
    Ok(found)
}

/// A folder in the container: absolute.
fn in_container(what: &str, path: &str) -> Result<(), ContainerError> {
    if path.starts_with('/') {
        Ok(())
    } else {
        Err(ContainerError::Invalid(format!(
            "{what} `{path}` must be an absolute path in the container"
        )))
    }
}

fn relatives(what: &str, paths: &[String]) -> Result<Vec<PathBuf>, ContainerError> {
    paths.iter().map(|p| files::relative(what, p)).collect()
}

fn engine_info(engine: &Engine) -> EngineInfo {
    EngineInfo {
        name: engine.name().to_string(),
        shares_files: *engine == Engine::Local,
        address: engine.address().to_string(),
    }
}

/// Stop a running container: SIGTERM, then SIGKILL after the grace period.
async fn stop(
    engine: &Engine,
    info: &Inspected,
    grace_ms: u32,
) -> Result<StopKind, ContainerError> {
    if info.status != "running" && info.status != "paused" {
        return Ok(StopKind::NotRunning);
    }
    let docker = podman::client(engine).await?;
    let options = StopContainerOptions {
        t: Some(grace_ms.div_ceil(1000) as i32),
        signal: None,
    };
    docker
        .stop_container(&info.id, Some(options))
        .await
        .map_err(failed(&format!("stopping container {}", info.name)))?;
    // Exit code 137 = 128 + SIGKILL: the grace period ran out.
    Ok(match podman::inspect(&docker, &info.id).await?.exit_code {
        137 => StopKind::Killed,
        _ => StopKind::Terminated,
    })
}

/// Remove even a running container (its processes are killed).
pub(super) fn force_removal() -> RemoveContainerOptions {
    RemoveContainerOptions {
        force: true,
        ..Default::default()
    }
}

/// Whether the started container `id` sees its probes. One whose process
/// has already ended has no mounts left to look in: what it did is done,
/// and its exit is the answer (it was taken for an engine that does not
/// see this machine's files). Podman may still call a container that is
/// ending `running` for a moment, so an unseen probe is looked at again
/// for up to a second before it stands.
async fn probed(docker: &Docker, id: &str, probes: &mounts::Probes) -> Result<(), ContainerError> {
    let mut seen = probes.seen(docker, id).await;
    for _ in 0..10 {
        if seen.is_ok() {
            break;
        }
        if podman::inspect(docker, id)
            .await
            .is_ok_and(|i| i.status != "running")
        {
            tracing::debug!(container = %id, "ended before its mounts could be probed");
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen = probes.seen(docker, id).await;
    }
    seen
}

/// How long a removed container's `conmon` processes get to end on their
/// own: Podman's API answers the removal before they have.
const LEFTOVER_GRACE: Duration = Duration::from_secs(3);

/// Host processes still naming the removed container (a session's
/// `conmon`) once they had [`LEFTOVER_GRACE`] to end: killed, and counted
/// for the caller's report.
fn kill_leftovers(id: &str, name: &str) -> u32 {
    let naming = || crate::platform::processes_naming(&[id, name]);
    let deadline = Instant::now() + LEFTOVER_GRACE;
    let mut left = naming();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = naming();
    }
    left.into_iter()
        .filter(|pid| crate::platform::kill_process(*pid))
        .count() as u32
}

fn container_info(info: &Inspected) -> ContainerInfo {
    ContainerInfo {
        id: info.id.clone(),
        name: info.name.clone(),
        image: info.image_name.clone(),
        state: info.status.clone(),
        labels: info
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ports: info
            .ports
            .iter()
            .map(|(container_port, host_ip, host_port)| PortBinding {
                container_port: *container_port,
                host_ip: host_ip.clone(),
                host_port: *host_port,
            })
            .collect(),
        ip_address: info.address(),
        exit_code: (!matches!(info.status.as_str(), "running" | "created" | "paused"))
            .then(|| i32::try_from(info.exit_code).ok())
            .flatten(),
    }
}

/// `KEY=value` entries, refusing names a container cannot take or that
/// would hide the run's marker.
fn env_list(env: &[(String, String)]) -> Result<Vec<String>, ContainerError> {
    env.iter()
        .map(|(key, value)| {
            if key.is_empty() || key.contains('=') || key == MARKER_VAR {
                Err(ContainerError::Invalid(format!(
                    "environment variable `{key}` cannot be set"
                )))
            } else {
                Ok(format!("{key}={value}"))
            }
        })
        .collect()
}

/// Ids, names, images and label keys: one word, never taken for an option
/// or a second word (they also end up in URLs and filters).
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
        assert!(env_list(&[(MARKER_VAR.to_string(), "x".into())]).is_err());
    }
}
