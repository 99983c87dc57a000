//! `commit`: a local image of a container as it is, for checkpoints.
//!
//! `podman commit` leaves out what bind mounts show, which for a
//! development container is the work itself; so the writable mounts'
//! contents are copied into a second container of the committed image (a
//! tar stream through `podman cp`, symlinks stored as links, never
//! followed) and that is committed under the same name. Read-only mounts
//! inside them (the host's own files lent to the container) are left out.
//! The container's labels are blanked in the image: a container someone
//! runs from it by hand must not pass for the plugin's.

use std::process::Stdio;

use super::{check_word, image_allowed};
use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::podman::{self, Inspected, InspectedMount, PodmanError};
use crate::policy::Grants;

/// The label naming the plugin that wrote an image.
const COMMITTED_BY_LABEL: &str = "mcphost.committed-by";

pub async fn commit(g: &Grants, info: &Inspected, image: &str) -> Result<String, ContainerError> {
    check_word("image", image)?;
    if !image_allowed(image, &g.commit) {
        return Err(ContainerError::Denied(g.denial(
            &format!("writing the image `{image}`"),
            "containers.commit",
            &format!("\"{image}\""),
        )));
    }
    let (before, by) = committed_by(image).await?;
    if before.is_some() && by.as_deref() != Some(g.plugin.as_str()) {
        return Err(ContainerError::Invalid(format!(
            "image `{image}` exists and was not made by plugin `{}`: choose another name",
            g.plugin
        )));
    }
    let mut args = vec![
        "commit".to_string(),
        "--quiet".into(),
        "--pause=false".into(),
    ];
    for key in info.config.labels.iter().flatten().map(|(k, _)| k) {
        args.extend(["--change".into(), format!("LABEL {key}=\"\"")]);
    }
    args.extend([
        "--change".into(),
        format!("LABEL {COMMITTED_BY_LABEL}={}", g.plugin),
        info.id.clone(),
        image.to_string(),
    ]);
    let mut id = podman::run(&args).await?.trim().to_string();
    let writable: Vec<&InspectedMount> = info
        .mounts
        .iter()
        .filter(|m| m.kind == "bind" && m.rw)
        .collect();
    if !writable.is_empty() {
        id = with_mounts_copied(image, &writable, &info.mounts).await?;
    }
    // The image this name held before, now untagged, goes (if unused).
    if let Some(old) = before.filter(|old| *old != id) {
        let _ = podman::run(&["image".into(), "rm".into(), old]).await;
    }
    tracing::info!(plugin = %g.plugin, container = %info.name, image, id, "committed");
    Ok(id)
}

/// The image's id and its `mcphost.committed-by` label, if it exists.
async fn committed_by(image: &str) -> Result<(Option<String>, Option<String>), ContainerError> {
    let format = format!("{{{{.Id}}}} {{{{index .Config.Labels \"{COMMITTED_BY_LABEL}\"}}}}");
    match podman::run(&[
        "image".into(),
        "inspect".into(),
        "--format".into(),
        format,
        image.into(),
    ])
    .await
    {
        Ok(out) => {
            let (id, by) = out.trim().split_once(' ').unwrap_or((out.trim(), ""));
            let by = by.trim();
            Ok((
                Some(id.to_string()),
                Some(by)
                    .filter(|b| !b.is_empty() && *b != "<no value>")
                    .map(str::to_string),
            ))
        }
        Err(PodmanError::Failed(said)) if said.contains("image not known") => Ok((None, None)),
        Err(e) => Err(e.into()),
    }
}

/// Copy what `writable` mounts hold into a container of `image` and commit
/// it as `image` again; the new id.
async fn with_mounts_copied(
    image: &str,
    writable: &[&InspectedMount],
    all: &[InspectedMount],
) -> Result<String, ContainerError> {
    let staging = podman::run(&["create".into(), "--pull=never".into(), image.into()])
        .await?
        .trim()
        .to_string();
    let copied = async {
        for mount in writable {
            copy_in(&staging, mount, all).await?;
        }
        podman::run(&[
            "commit".into(),
            "--quiet".into(),
            staging.clone(),
            image.into(),
        ])
        .await
        .map(|id| id.trim().to_string())
        .map_err(ContainerError::from)
    }
    .await;
    let _ = podman::run(&["rm".into(), "--force".into(), staging.clone()]).await;
    copied
}

/// `tar -C <source> -c .` (minus read-only mounts inside it) into
/// `podman cp - <container>:<target>`.
async fn copy_in(
    container: &str,
    mount: &InspectedMount,
    all: &[InspectedMount],
) -> Result<(), ContainerError> {
    let mut tar = tokio::process::Command::new("tar");
    tar.arg("-C")
        .arg(&mount.source)
        .args(["-c", "--one-file-system"]);
    for inner in all.iter().filter(|m| !m.rw) {
        if let Some(rel) = inner
            .destination
            .strip_prefix(&mount.destination)
            .and_then(|r| r.strip_prefix('/'))
            .filter(|r| !r.is_empty())
        {
            tar.arg(format!("--exclude=./{rel}"));
        }
    }
    let mut tar = tar
        .arg(".")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ContainerError::Failed(format!("cannot run tar: {e}")))?;
    let stream: Stdio = tar
        .stdout
        .take()
        .expect("piped")
        .try_into()
        .map_err(|e| ContainerError::Failed(format!("cannot pipe tar into podman: {e}")))?;
    let target = format!("{container}:{}", mount.destination);
    let cp = podman::run_with_stdin(&["cp".into(), "-".into(), target], stream).await;
    let tarred = tar
        .wait_with_output()
        .await
        .map_err(|e| ContainerError::Failed(format!("tar: {e}")))?;
    cp?;
    if !tarred.status.success() {
        return Err(ContainerError::Failed(format!(
            "tar of {} failed: {}",
            mount.source,
            String::from_utf8_lossy(&tarred.stderr).trim()
        )));
    }
    Ok(())
}
