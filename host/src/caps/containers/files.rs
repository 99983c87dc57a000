//! Files between this machine and a container, for engines that cannot
//! mount this machine's folders (another machine's): `copy-in` streams a
//! host folder into the container (GNU tar, through the engine's archive
//! API) and `sync-out` makes a host folder hold what a container folder
//! holds. Checkpoints use both directions too ([`super::commit`]).
//!
//! What comes out of a container is hostile input: the archive is first
//! stored whole (up to the caller's limit, so a container cannot fill the
//! disk), then applied beneath a directory handle of the target
//! ([`super::unpack`]).

use std::io::{Seek, Write};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;

use bollard::Docker;

use bollard::query_parameters::{DownloadFromContainerOptionsBuilder, UploadToContainerOptions};
use cap_std::fs::Dir;
use futures_util::TryStreamExt;

use crate::bindings::mcphost::plugin::containers::{ContainerError, SyncReport};
use crate::podman::failed;

use super::unpack;

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

/// Copy `paths` of the host folder `source` (all of it when empty), minus
/// `exclude`, into the container's folder `target`.
pub async fn copy_in(
    docker: &Docker,
    container: &str,
    source: &Path,
    target: &str,
    paths: &[PathBuf],
    exclude: &[PathBuf],
) -> Result<(), ContainerError> {
    let Some(program) = timebox::host_program("tar") else {
        return Err(ContainerError::Unavailable(
            "GNU tar was not found on PATH (outside the workspace): install it (Debian/Ubuntu: `apt-get install tar`)".into(),
        ));
    };
    let mut tar = tokio::process::Command::new(program);
    tar.arg("-C")
        .arg(source)
        .args(["-c", "--one-file-system", "--no-wildcards"]);
    for rel in exclude {
        tar.arg(format!("--exclude=./{}", rel.display()));
    }
    if paths.is_empty() {
        tar.arg(".");
    }
    // `./` in front: never taken for an option.
    tar.args(paths.iter().map(|p| format!("./{}", p.display())));
    let mut tar = tar
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ContainerError::Failed(format!("cannot run tar: {e}")))?;
    let stream = tokio_util::io::ReaderStream::new(tar.stdout.take().expect("piped"));
    let options = UploadToContainerOptions {
        path: target.to_string(),
        ..Default::default()
    };
    let uploaded = docker
        .upload_to_container(container, Some(options), bollard::body_try_stream(stream))
        .await
        .map_err(failed(&format!(
            "copying {} into {container}:{target}",
            source.display()
        )));
    let tarred = tar
        .wait_with_output()
        .await
        .map_err(|e| ContainerError::Failed(format!("tar: {e}")))?;
    uploaded?;
    if !tarred.status.success() {
        return Err(ContainerError::Failed(format!(
            "tar of {} failed: {}",
            source.display(),
            String::from_utf8_lossy(&tarred.stderr).trim()
        )));
    }
    Ok(())
}

/// Make the host folder `target` hold what the container's folder `source`
/// holds, `exclude` left alone on both sides.
pub async fn sync_out(
    docker: &Docker,
    container: &str,
    source: &str,
    target: Dir,
    exclude: Vec<PathBuf>,
    max_bytes: u64,
) -> Result<SyncReport, ContainerError> {
    let what = format!("copying {container}:{source} out");
    let mut archive = tempfile_here()?;
    let mut bytes = 0u64;
    let options = DownloadFromContainerOptionsBuilder::new()
        .path(source)
        .build();
    let mut stream = docker.download_from_container(container, Some(options));
    while let Some(chunk) = stream.try_next().await.map_err(failed(&what))? {
        bytes += chunk.len() as u64;
        if bytes > max_bytes {
            return Err(ContainerError::Invalid(format!(
                "{container}:{source} holds more than {max_bytes} bytes, the most this call takes back; \
                 nothing was changed on this machine: remove what is not needed there (build output, \
                 caches), or allow more"
            )));
        }
        archive
            .write_all(&chunk)
            .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))?;
    }
    let applied = tokio::task::spawn_blocking(move || {
        archive.rewind()?;
        unpack::apply(archive, &target, &exclude, max_bytes)
    })
    .await
    .map_err(|e| ContainerError::Failed(format!("{what}: {e}")))?;
    let (written, removed) = applied.map_err(|e| match e.kind() {
        std::io::ErrorKind::FileTooLarge => ContainerError::Invalid(format!(
            "{container}:{source}: {e}; nothing was changed on this machine: remove what is not \
             needed there (build output, caches, hard-linked copies), or allow more"
        )),
        _ => ContainerError::Failed(format!("{what}: {e}")),
    })?;
    Ok(SyncReport {
        written,
        removed,
        bytes,
    })
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
