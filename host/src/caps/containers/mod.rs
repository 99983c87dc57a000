//! `containers`: Podman containers for plugins granted `containers`, with
//! networks of their own ([`network`]), checkpoints ([`commit`]) and files
//! carried to engines that cannot mount this machine's ([`files`]).
//!
//! What a plugin may ask for is checked ([`create`], [`volumes`]): an image allowed by
//! `containers.images`, bind mounts inside its fs roots, ports published on
//! 127.0.0.1 only, no privileged options at all (there is no field for
//! them). Every container gets the label `mcphost.plugin=<plugin>`; a
//! plugin can see, exec in, stop or remove ([`ending`]) only containers
//! with its own label ([`owned`]).
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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::query_parameters::{
    CreateContainerOptions, ListContainersOptions, RenameContainerOptions,
};

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

mod build;
mod commit;
mod create;
mod dealt;
mod ending;
pub(crate) mod files;
mod manifest;
pub mod mounts;
mod network;
mod owned;
mod placement;
mod taken;
pub(crate) mod unpack;
mod volumes;

use create::{create_body, ensure_image, env_list};
use ending::{force_removal, kill_leftovers, probed, stop};
use owned::{MACHINE, check_word, forget, granted, known, owned, owner, remember, this_machine};
use volumes::{check_volume, ensure_volumes, volume_owned};

/// The label that ties a container to the plugin that made it.
pub const OWNER_LABEL: &str = "mcphost.plugin";
/// The label that ties it to the machine whose host made it: hosts on
/// several machines may share one Podman service, and each acts only on its
/// own containers.
pub const MACHINE_LABEL: &str = "mcphost.machine";

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
        self.engine = placement::choose(&g, &name).await?;
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
        // An empty argv runs the image's default command, as create does.
        let needs_image = request.use_entrypoint || request.argv.is_empty();
        let (container, image) = match known(&g.plugin, &engine, &id) {
            Some(container) if !needs_image => (container, None),
            _ => {
                let info = owned(&g, &engine, &id).await?;
                (info.id, Some(info.image_name))
            }
        };
        let mut env = env_list(&request.env)?;
        // Values go into the exec's environment and nowhere else; the output
        // below is scrubbed of them before the plugin sees it.
        let secret = request.secrets_of.is_some();
        if let Some(scope) = &request.secrets_of {
            let given = crate::secret_refs::resolve(&g, scope)
                .await
                .map_err(|e| match e {
                    crate::secret_refs::RefError::Denied(why) => ContainerError::Denied(why),
                    crate::secret_refs::RefError::Unresolved(why) => ContainerError::Invalid(why),
                })?;
            env.extend(given.iter().map(|(k, v)| format!("{k}={}", v.expose())));
        }
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
        // On another machine's engine the sweep after the command also
        // takes the `stat`s of the folder last synced out, which the sync
        // that follows a command would otherwise ask for in an exec of its
        // own.
        // (This machine's engine shares the folders: nothing is synced.)
        let remote = engine.remote_url();
        let (then, generation) = match remote {
            None => (None, 0),
            Some(_) => (
                manifest::synced_source(engine.name(), &container),
                taken::touched(engine.name(), &container),
            ),
        };
        let spec = podman::exec::ExecSpec {
            argv,
            workdir: request.workdir,
            env,
            stdin: request.stdin.map(podman::exec::Input::Bytes),
            user: None,
            timeout,
            no_output_timeout,
            tail_bytes,
            remote,
            sweep: true,
            then: then.as_deref().map(manifest::after_sweep),
        };
        let ran = podman::exec::exec(docker, &container, spec, &call.cancel, &progress).await?;
        if let (Some(source), Some(printed)) = (&then, &ran.then) {
            taken::keep(engine.name(), &container, generation, source, printed);
        }
        let outcome = ran.outcome;
        tracing::debug!(
            plugin = %g.plugin, trace_id = %call.trace_id, container = %id,
            ending = ?outcome.ending, exit_code = ?outcome.exit_code, kill = ?outcome.kill,
            "exec finished"
        );
        let mut result = run_result(outcome);
        if secret {
            result.tail = crate::caps::spawn::scrubbed_tail(result.tail);
        }
        Ok(result)
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
        let logs = podman::logs_tail(&docker, &info.id, keep).await?;
        Ok(crate::scrub::scrubbed(logs))
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

    async fn build(
        &mut self,
        context: String,
        dockerfile: String,
        image: String,
    ) -> Answer<String> {
        let g = self.grants.clone();
        granted(&g)?;
        let roots = g.roots(false);
        let context = confined(&g, &context, &roots, "fs.read")?;
        let dockerfile = files::relative("Dockerfile", &dockerfile)?;
        // The engine reads the folder that was checked, through its handle.
        let folder = pinned_dir(&g, &context, &roots)?;
        let through = crate::pin::proc_path(&folder);
        let docker = podman::client(&self.engine).await?;
        let b = build::Build {
            folder: &folder,
            through: &through,
            dockerfile: &dockerfile,
            image: &image,
        };
        Ok(build::build(&docker, &g, &b).await?)
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
        taken::touched(self.engine.name(), &info.id);
        let copy = files::CopyIn {
            container: &info.id,
            source: &through,
            target: &target,
            paths: &paths,
            exclude: &exclude,
        };
        if paths.is_empty() {
            // A whole folder: unpacked by the container's own tar, many
            // times faster than Podman's archive API on many files.
            let remote = self.engine.remote_url();
            let cancel = self.call.cancel.clone();
            return Ok(files::untar_inside(&docker, &copy, remote, &cancel).await?);
        }
        Ok(files::copy_in(&docker, &copy).await?)
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
        let job = files::SyncOut {
            container: info.id.clone(),
            source,
            target,
            exclude,
            max_bytes,
        };
        let cancel = self.call.cancel.clone();
        let report = files::sync_out(&docker, &self.engine, job, folder, &cancel).await?;
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
