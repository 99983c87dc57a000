//! Files between this machine and a container, for engines that cannot
//! mount this machine's folders (another machine's): `copy-in` streams a
//! host folder into the container (GNU tar, into the container's own `tar`
//! when it runs and has one, else through the engine's archive API) and
//! `sync-out` makes a host folder hold what a container folder holds.
//! Checkpoints use both directions too ([`super::commit`]).
//!
//! What comes out of a container is hostile input: the archive is first
//! stored whole (up to the caller's limit, so a container cannot fill the
//! disk), then applied beneath a directory handle of the target
//! ([`super::unpack`]).

use std::collections::HashMap;
use std::io::{Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{DownloadFromContainerOptionsBuilder, UploadToContainerOptions};
use cap_std::fs::Dir;
use futures_util::TryStreamExt;
use tokio_util::io::SyncIoBridge;
use tokio_util::sync::CancellationToken;

use super::{dealt, manifest, taken, unpack};
use crate::bindings::mcphost::plugin::containers::{ContainerError, SyncReport};
use crate::podman::{self, Engine, failed};

/// A relative path of the caller's: plain names only, never `..` or `/`.
pub fn relative(what: &str, path: &str) -> Result<PathBuf, ContainerError> {
    let p = Path::new(path);
    if path.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(ContainerError::Invalid(format!(
            "{what} `{path}` must be a relative path of plain names (no `..`, no leading `/`)"
        )));
    }
    Ok(p.to_path_buf())
}

/// `paths` of the host folder `source` (all of it when empty), minus
/// `exclude`, to copy into the container's folder `target`.
pub struct CopyIn<'a> {
    pub container: &'a str,
    pub source: &'a Path,
    pub target: &'a str,
    pub paths: &'a [PathBuf],
    pub exclude: &'a [PathBuf],
}

impl CopyIn<'_> {
    /// What it does, for error messages.
    fn what(&self) -> String {
        format!(
            "copying {} into {}:{}",
            self.source.display(),
            self.container,
            self.target
        )
    }
}

/// A tar of what `copy` names, streamed from GNU tar on this machine
/// (hard links as files when it is to be [`dealt`] out).
pub(super) fn tar_of(
    copy: &CopyIn,
    to_deal: bool,
) -> Result<tokio::process::Child, ContainerError> {
    let Some(program) = timebox::host_program("tar") else {
        return Err(ContainerError::Unavailable(
            "GNU tar was not found on PATH (outside the workspace): install it (Debian/Ubuntu: `apt-get install tar`)".into(),
        ));
    };
    let mut tar = tokio::process::Command::new(program);
    tar.arg("-C")
        .arg(copy.source)
        .args(["-c", "--one-file-system", "--no-wildcards"]);
    for rel in copy.exclude {
        tar.arg(format!("--exclude=./{}", rel.display()));
    }
    if to_deal {
        tar.arg("--hard-dereference");
    }
    if copy.paths.is_empty() {
        tar.arg(".");
    }
    // `./` in front: never taken for an option.
    tar.args(copy.paths.iter().map(|p| format!("./{}", p.display())));
    tar.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ContainerError::Failed(format!("cannot run tar: {e}")))
}

/// Wait for the tar of `copy`; an error if it failed.
async fn tarred(tar: tokio::process::Child, copy: &CopyIn<'_>) -> Result<(), ContainerError> {
    let tarred = tar
        .wait_with_output()
        .await
        .map_err(|e| ContainerError::Failed(format!("tar: {e}")))?;
    if !tarred.status.success() {
        let said = String::from_utf8_lossy(&tarred.stderr);
        // A tar ended by a signal says nothing: its status tells which.
        let why = match said.trim() {
            "" => tarred.status.to_string(),
            said => said.to_string(),
        };
        return Err(ContainerError::Failed(format!(
            "tar of {} failed: {why}",
            copy.source.display()
        )));
    }
    Ok(())
}

/// Copy through Podman's archive API (the container need not run).
pub async fn copy_in(docker: &Docker, copy: &CopyIn<'_>) -> Result<(), ContainerError> {
    let mut tar = tar_of(copy, false)?;
    let stream = tokio_util::io::ReaderStream::new(tar.stdout.take().expect("piped"));
    let options = UploadToContainerOptions {
        path: copy.target.to_string(),
        ..Default::default()
    };
    let uploaded = docker
        .upload_to_container(
            copy.container,
            Some(options),
            bollard::body_try_stream(stream),
        )
        .await
        .map_err(failed(&copy.what()));
    let tarred = tarred(tar, copy).await;
    uploaded?;
    tarred
}

/// Longest a copy into a running container may take.
const UNTAR_TIMEOUT: Duration = Duration::from_secs(3600);

/// Copy into a running container by its own `tar -x` (as root, as the
/// archive API writes), one `tar` per core of the engine's machine
/// ([`dealt`]); through the archive API when the image has no `tar`.
/// The container only ever reads what this machine's tar wrote.
pub async fn untar_inside(
    docker: &Docker,
    copy: &CopyIn<'_>,
    remote: Option<String>,
    cancel: &CancellationToken,
) -> Result<(), ContainerError> {
    let started = std::time::Instant::now();
    let cores = engine_cores(docker, remote.as_deref().unwrap_or("local")).await;
    let mut tar = tar_of(copy, cores > 1)?;
    let stdout = tar.stdout.take().expect("piped");
    let ended = if cores == 1 {
        let stream = podman::exec::Input::Stream(Box::new(stdout));
        vec![untar_part(docker, copy, stream, remote, cancel).await]
    } else {
        let (writers, readers): (Vec<_>, Vec<_>) =
            (0..cores).map(|_| tokio::io::duplex(DEAL_BUFFER)).unzip();
        let from = SyncIoBridge::new(stdout);
        let writers: Vec<_> = writers.into_iter().map(SyncIoBridge::new).collect();
        let dealing = tokio::task::spawn_blocking(move || dealt::deal(from, writers));
        let runs = readers.into_iter().map(|reader| {
            let stream = podman::exec::Input::Stream(Box::new(reader));
            untar_part(docker, copy, stream, remote.clone(), cancel)
        });
        let ended = futures_util::future::join_all(runs).await;
        // A part that failed ends the dealing (its stream is closed); what
        // the parts say is the answer.
        let _ = dealing.await;
        ended
    };
    let ended: Vec<Untar> = ended.into_iter().collect::<Result<_, _>>()?;
    if ended.contains(&Untar::NoTar) {
        drop(tar);
        tracing::debug!(
            container = copy.container,
            "no tar in the container: copied in through the archive API"
        );
        return copy_in(docker, copy).await;
    }
    tarred(tar, copy).await?;
    tracing::debug!(
        container = copy.container,
        parts = ended.len(),
        took_ms = started.elapsed().as_millis(),
        "copied in by the container's tar"
    );
    Ok(())
}

/// How many `tar`s the engine's machine gets ([`MAX_PARTS`] at most),
/// asked once per engine: Podman's `info` takes 160-260 ms (it counts its
/// store), a third of a copy of 10,000 files.
async fn engine_cores(docker: &Docker, engine: &str) -> usize {
    static CORES: std::sync::Mutex<Vec<(String, usize)>> = std::sync::Mutex::new(Vec::new());
    let known = |cores: &[(String, usize)]| cores.iter().find(|(e, _)| e == engine).map(|c| c.1);
    if let Some(cores) = known(&CORES.lock().expect("not poisoned")) {
        return cores;
    }
    match docker.info().await {
        Ok(info) => {
            let cores = info.ncpu.unwrap_or(1).clamp(1, MAX_PARTS) as usize;
            CORES
                .lock()
                .expect("not poisoned")
                .push((engine.to_string(), cores));
            cores
        }
        // Asked again next time.
        Err(_) => 1,
    }
}

/// What a part's stream holds ahead of its `tar -x`: a few hundred small
/// files, so no part waits while another writes.
const DEAL_BUFFER: usize = 256 * 1024;

/// At most this many `tar`s side by side.
const MAX_PARTS: i64 = 4;

/// How one `tar -x` in the container ended.
#[derive(PartialEq)]
enum Untar {
    Done,
    /// The image has none.
    NoTar,
}

/// One `tar -x` in the container, of `stream`.
async fn untar_part(
    docker: &Docker,
    copy: &CopyIn<'_>,
    stream: podman::exec::Input,
    remote: Option<String>,
    cancel: &CancellationToken,
) -> Result<Untar, ContainerError> {
    let spec = podman::exec::ExecSpec {
        argv: ["tar", "-x", "-f", "-", "-C", copy.target]
            .map(String::from)
            .to_vec(),
        workdir: None,
        env: Vec::new(),
        stdin: Some(stream),
        user: Some("0".into()),
        timeout: UNTAR_TIMEOUT,
        no_output_timeout: None,
        tail_bytes: 8 * 1024,
        remote,
        sweep: false,
        then: None,
    };
    let what = copy.what();
    let ran = podman::exec::exec(
        docker.clone(),
        copy.container,
        spec,
        cancel,
        &podman::exec::Quiet,
    )
    .await
    .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))?;
    let outcome = ran.outcome;
    match (outcome.ending, outcome.exit_code) {
        (timebox::Ending::Exited, Some(0)) => Ok(Untar::Done),
        // No `tar` in the image (126: not runnable, 127: not found).
        (timebox::Ending::Exited, Some(126 | 127)) => Ok(Untar::NoTar),
        (ending, code) => {
            let said: String = outcome.tail.chunks().into_iter().map(|(_, t)| t).collect();
            Err(ContainerError::Failed(format!(
                "{what}: tar in the container ended {ending:?} (exit code {code:?}): {}",
                said.trim()
            )))
        }
    }
}

/// One `sync-out`: the container's folder `source` into this machine's
/// folder `target` (already confined and opened as `folder`).
pub struct SyncOut {
    pub container: String,
    pub source: String,
    pub target: PathBuf,
    pub exclude: Vec<PathBuf>,
    pub max_bytes: u64,
}

/// Changed files fetched one by one up to this many; past it the whole
/// folder comes in one archive.
const FETCH_ONE_BY_ONE: usize = 32;

/// Make the host folder `target` hold what the container's folder `source`
/// holds, `exclude` left alone on both sides: only what changed since the
/// last sync when that is known ([`manifest`]), else all of it.
pub async fn sync_out(
    docker: &Docker,
    engine: &Engine,
    job: SyncOut,
    folder: Dir,
    cancel: &CancellationToken,
) -> Result<SyncReport, ContainerError> {
    let what = format!("copying {}:{} out", job.container, job.source);
    let key = manifest::Key {
        engine: engine.name().to_string(),
        container: job.container.clone(),
        source: job.source.clone(),
        target: job.target.clone(),
        exclude: job.exclude.clone(),
    };
    let remote = engine.remote_url();
    // The command before took the `stat`s on its way out, or they are
    // asked for now.
    let kept = taken::kept(engine.name(), &job.container, &job.source);
    let from_sweep = kept.is_some();
    let now = match kept {
        Some(kept) => Some(kept),
        None => manifest::take(docker, &job.container, &job.source, remote, cancel).await,
    };
    let remembered = manifest::recall(&key);
    // Until this sync has ended well, nothing is known of the folder.
    manifest::remember(key.clone(), None);
    let folder = Arc::new(folder);
    let listed = match (&now, remembered) {
        (Some(now), Some(was)) => {
            let (root, exclude) = (folder.clone(), job.exclude.clone());
            let local = blocking(&what, move || manifest::list_local(&root, &exclude)).await?;
            let plan = was.plan(now, &local);
            changed_only(docker, &job, &folder, plan, local, &what).await?
        }
        _ => None,
    };
    tracing::debug!(
        container = %job.container, changed_only = listed.is_some(),
        remembered = now.is_some(), from_sweep, "sync-out"
    );
    let (report, local) = match listed {
        Some(done) => done,
        None => {
            let report = whole(docker, &job, folder.clone(), &what).await?;
            let (root, exclude) = (folder.clone(), job.exclude.clone());
            let local = blocking(&what, move || manifest::list_local(&root, &exclude)).await;
            (report, local.ok())
        }
    };
    if let (Some(now), Some(local)) = (now, local) {
        manifest::remember(key, Some(manifest::Remembered::new(now, local)));
    }
    Ok(report)
}

/// `plan` carried out, fetching each changed file by itself; `None` when
/// it is better done whole (many files, a link, a file that changed
/// again while fetched). With the report, this machine's side after it.
async fn changed_only(
    docker: &Docker,
    job: &SyncOut,
    folder: &Arc<Dir>,
    plan: manifest::Plan,
    mut local: HashMap<PathBuf, manifest::Local>,
    what: &str,
) -> Result<Option<(SyncReport, Option<HashMap<PathBuf, manifest::Local>>)>, ContainerError> {
    // A link's archive may be of what it points at: links come whole.
    if plan.fetch.len() > FETCH_ONE_BY_ONE || plan.links > 0 {
        return Ok(None);
    }
    let mut report = SyncReport {
        written: 0,
        removed: 0,
        bytes: 0,
    };
    let (root, dirs) = (folder.clone(), plan.dirs.clone());
    report.written += blocking(what, move || {
        let mut made = 0;
        for (dir, mode) in dirs {
            made += unpack::make_dir(&root, &dir, mode)? as u32;
        }
        Ok(made)
    })
    .await?;
    for rel in &plan.fetch {
        let path = in_container(&job.source, rel);
        let left = job.max_bytes.saturating_sub(report.bytes);
        let Ok((archive, bytes)) = download(docker, &job.container, &path, left, what).await else {
            return Ok(None);
        };
        report.bytes += bytes;
        let (root, rel) = (folder.clone(), rel.clone());
        let applied =
            tokio::task::spawn_blocking(move || unpack::apply_one(archive, &root, &rel, left))
                .await
                .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))?;
        match applied {
            Ok(changed) => report.written += changed as u32,
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => return Err(too_big(job, &e)),
            Err(_) => return Ok(None),
        }
    }
    let (root, remove) = (folder.clone(), plan.remove.clone());
    report.removed += blocking(what, move || {
        for rel in &remove {
            unpack::clear(&root, rel)?;
        }
        Ok(remove.len() as u32)
    })
    .await?;
    let removed = plan.remove.clone();
    let touched: Vec<PathBuf> = plan
        .dirs
        .into_iter()
        .map(|(dir, _)| dir)
        .chain(plan.fetch)
        .chain(plan.remove)
        .collect();
    let root = folder.clone();
    let now_here = blocking(what, move || {
        Ok(touched
            .into_iter()
            .map(|rel| {
                let here = manifest::local_of(&root, &rel);
                (rel, here)
            })
            .collect::<Vec<_>>())
    })
    .await?;
    for (rel, here) in now_here {
        match here {
            Some(here) => local.insert(rel, here),
            None => local.remove(&rel),
        };
    }
    // A removed folder took what it held.
    local.retain(|p, _| !removed.iter().any(|gone| p.starts_with(gone)));
    Ok(Some((report, Some(local))))
}

/// The whole folder in one archive, applied.
async fn whole(
    docker: &Docker,
    job: &SyncOut,
    folder: Arc<Dir>,
    what: &str,
) -> Result<SyncReport, ContainerError> {
    let (archive, bytes) =
        download(docker, &job.container, &job.source, job.max_bytes, what).await?;
    let (exclude, max_bytes) = (job.exclude.clone(), job.max_bytes);
    let applied =
        tokio::task::spawn_blocking(move || unpack::apply(archive, &folder, &exclude, max_bytes))
            .await
            .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))?;
    let (written, removed) = applied.map_err(|e| match e.kind() {
        std::io::ErrorKind::FileTooLarge => too_big(job, &e),
        _ => ContainerError::Failed(format!("{what}: {e}")),
    })?;
    Ok(SyncReport {
        written,
        removed,
        bytes,
    })
}

/// The engine's archive of the container's `path`, stored whole in a
/// temporary file (at most `max_bytes`, so a container cannot fill the
/// disk) and rewound; its size.
async fn download(
    docker: &Docker,
    container: &str,
    path: &str,
    max_bytes: u64,
    what: &str,
) -> Result<(std::fs::File, u64), ContainerError> {
    let mut archive = tempfile_here()?;
    let mut bytes = 0u64;
    let options = DownloadFromContainerOptionsBuilder::new()
        .path(path)
        .build();
    let mut stream = docker.download_from_container(container, Some(options));
    while let Some(chunk) = stream.try_next().await.map_err(failed(what))? {
        bytes += chunk.len() as u64;
        if bytes > max_bytes {
            return Err(ContainerError::Invalid(format!(
                "{container}:{path} holds more than {max_bytes} bytes, the most this call takes back; \
                 nothing was changed on this machine: remove what is not needed there (build output, \
                 caches), or allow more"
            )));
        }
        archive
            .write_all(&chunk)
            .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))?;
    }
    archive
        .rewind()
        .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))?;
    Ok((archive, bytes))
}

fn too_big(job: &SyncOut, e: &std::io::Error) -> ContainerError {
    ContainerError::Invalid(format!(
        "{}:{}: {e}; nothing was changed on this machine: remove what is not \
         needed there (build output, caches, hard-linked copies), or allow more",
        job.container, job.source
    ))
}

/// The container's path of `rel` beneath `source`, `/` between names on
/// every host.
fn in_container(source: &str, rel: &Path) -> String {
    let mut path = source.trim_end_matches('/').to_string();
    for name in rel.components() {
        path.push('/');
        path.push_str(&name.as_os_str().to_string_lossy());
    }
    path
}

/// File-system work off the event loop.
async fn blocking<T: Send + 'static>(
    what: &str,
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> Result<T, ContainerError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))?
        .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))
}

/// An anonymous file in the temporary folder (gone when closed).
pub(super) fn tempfile_here() -> Result<std::fs::File, ContainerError> {
    let path = std::env::temp_dir().join(format!("mcp-host-sync-{}", uuid::Uuid::new_v4()));
    let file = std::fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .and_then(|f| std::fs::remove_file(&path).map(|()| f))
        .map_err(|e| ContainerError::Failed(format!("cannot make {}: {e}", path.display())))?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_plain() {
        assert!(relative("path", "src/a.rs").is_ok());
        for bad in ["", "/etc", "../x", "a/../../b"] {
            assert!(relative("path", bad).is_err(), "{bad}");
        }
    }
}
