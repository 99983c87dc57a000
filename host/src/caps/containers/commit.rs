//! `commit`: a local image of a container as it is, for checkpoints.
//!
//! A commit leaves out what bind mounts show, which for a development
//! container is the work itself; so the writable mounts' contents are
//! copied into a second container of the committed image (a tar stream
//! through the API, symlinks stored as links, never followed; a volume's
//! straight from the engine) and that is committed under the same name. Read-only mounts inside them (the host's
//! own files lent to the container) are left out. The container's labels
//! are blanked in the image: a container someone runs from it by hand must
//! not pass for the plugin's.

use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    CommitContainerOptions, CreateContainerOptions, DownloadFromContainerOptionsBuilder,
    UploadToContainerOptions,
};

use futures_util::TryStreamExt;

use super::create::image_allowed;
use super::{check_word, files, force_removal};
use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::podman::{self, Inspected, InspectedMount, failed};
use crate::policy::Grants;

/// The label naming the plugin that wrote an image.
pub(super) const COMMITTED_BY_LABEL: &str = "mcphost.committed-by";

pub async fn commit(
    docker: &Docker,
    g: &Grants,
    info: &Inspected,
    image: &str,
) -> Result<String, ContainerError> {
    let before = writable(docker, g, image).await?;
    let mut changes: Vec<String> = info
        .labels
        .keys()
        .map(|key| format!("LABEL {key}=\"\""))
        .collect();
    changes.push(format!("LABEL {COMMITTED_BY_LABEL}={}", g.plugin));
    let mut id = commit_as(docker, &info.id, image, Some(changes.join("\n"))).await?;
    let writable: Vec<&InspectedMount> = info
        .mounts
        .iter()
        .filter(|m| (m.kind == "bind" || m.kind == "volume") && m.rw)
        .collect();
    if !writable.is_empty() {
        id = with_mounts_copied(docker, g, image, info, &writable).await?;
    }
    // The image this name held before, now untagged, goes (if unused).
    if let Some(old) = before.and_then(|i| i.id).filter(|old| *old != id) {
        let _ = docker
            .remove_image(
                &old,
                None::<bollard::query_parameters::RemoveImageOptions>,
                None,
            )
            .await;
    }
    tracing::info!(plugin = %g.plugin, container = %info.name, image, id, "committed");
    Ok(id)
}

/// Whether plugin `g` may write the image name `image`: allowed by
/// `containers.commit`, and either new or one it made. What the name
/// holds now, if anything.
pub(super) async fn writable(
    docker: &Docker,
    g: &Grants,
    image: &str,
) -> Result<Option<bollard::models::ImageInspect>, ContainerError> {
    check_word("image", image)?;
    if !image_allowed(image, &g.commit) {
        return Err(ContainerError::Denied(g.denial(
            &format!("writing the image `{image}`"),
            "containers.commit",
            &format!("\"{image}\""),
        )));
    }
    let before = podman::image(docker, image).await?;
    let by = before.as_ref().and_then(|i| {
        i.config
            .as_ref()?
            .labels
            .as_ref()?
            .get(COMMITTED_BY_LABEL)
            .cloned()
    });
    if before.is_some() && by.as_deref() != Some(g.plugin.as_str()) {
        return Err(ContainerError::Invalid(format!(
            "image `{image}` exists and was not made by plugin `{}`: choose another name",
            g.plugin
        )));
    }
    Ok(before)
}

/// Commit `container` as `image` (`repository[:tag]`); the image's id.
async fn commit_as(
    docker: &Docker,
    container: &str,
    image: &str,
    changes: Option<String>,
) -> Result<String, ContainerError> {
    // The tag follows the last `:` after the last `/` (a registry may
    // have a port).
    let (repo, tag) = match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, tag),
        _ => (image, "latest"),
    };
    let options = CommitContainerOptions {
        container: Some(container.to_string()),
        repo: Some(repo.to_string()),
        tag: Some(tag.to_string()),
        pause: false,
        changes,
        ..Default::default()
    };
    let committed = docker
        .commit_container(options, bollard::models::ContainerConfig::default())
        .await
        .map_err(failed(&format!("committing {container} as {image}")))?;
    Ok(committed.id)
}

/// Copy what `writable` mounts of `container` hold into a container of
/// `image` and commit it as `image` again; the new id.
async fn with_mounts_copied(
    docker: &Docker,
    g: &Grants,
    image: &str,
    info: &Inspected,
    writable: &[&InspectedMount],
) -> Result<String, ContainerError> {
    let (container, all) = (&info.id, &info.mounts);
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        ..Default::default()
    };
    let staging = docker
        .create_container(None::<CreateContainerOptions>, body)
        .await
        .map_err(failed(&format!("creating a container of {image}")))?
        .id;
    let copied = async {
        for mount in writable {
            if mount.kind == "volume" {
                copy_volume(docker, container, &staging, &mount.destination).await?;
                continue;
            }
            // The read-only mounts inside it are the host's, lent.
            let exclude: Vec<PathBuf> = all
                .iter()
                .filter(|m| !m.rw)
                .filter_map(|inner| {
                    let rel = inner.destination.strip_prefix(&mount.destination)?;
                    Some(PathBuf::from(rel.strip_prefix('/')?))
                        .filter(|r| !r.as_os_str().is_empty())
                })
                .collect();
            // Pinned like the mount itself: tar reads the open folder.
            let source = super::mounts::source_of(&info.labels, &mount.source, &mount.destination);
            let pinned = crate::pin::open(Path::new(source), &g.write_roots).map_err(|e| {
                ContainerError::Denied(format!("cannot copy {source} into the checkpoint: {e}"))
            })?;
            let crate::pin::Pinned::Dir(dir) = &pinned else {
                continue;
            };
            let through = crate::pin::proc_path(dir);
            let copy = files::CopyIn {
                container: &staging,
                source: &through,
                target: &mount.destination,
                paths: &[],
                exclude: &exclude,
            };
            files::copy_in(docker, &copy).await?;
        }
        commit_as(docker, &staging, image, None).await
    }
    .await;
    let _ = docker
        .remove_container(&staging, Some(force_removal()))
        .await;
    copied
}

/// What a volume shows at `path` in `from`, into `to` (engine to engine:
/// the files never come to this machine).
async fn copy_volume(
    docker: &Docker,
    from: &str,
    to: &str,
    path: &str,
) -> Result<(), ContainerError> {
    let options = DownloadFromContainerOptionsBuilder::new()
        .path(path)
        .build();
    let stream = docker
        .download_from_container(from, Some(options))
        .map_err(std::io::Error::other);
    // The archive holds the folder itself: it goes into its parent.
    let parent = Path::new(path)
        .parent()
        .map_or("/".into(), |p| p.display().to_string());
    let options = UploadToContainerOptions {
        path: parent,
        ..Default::default()
    };
    docker
        .upload_to_container(to, Some(options), bollard::body_try_stream(stream))
        .await
        .map_err(failed(&format!(
            "copying {from}:{path} into the checkpoint"
        )))?;
    Ok(())
}
