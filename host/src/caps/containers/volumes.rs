//! Named volumes: made for a container with the plugin's label, and
//! removed only by the plugin that owns them.

use std::collections::HashMap;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, MountType, VolumeCreateRequest};

use super::owned::MACHINE;
use super::{MACHINE_LABEL, OWNER_LABEL};
use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::podman::{PodmanError, failed};
use crate::policy::Grants;

/// A mount source naming a volume rather than a host folder.
pub(super) fn is_volume(source: &str) -> bool {
    !source.contains('/')
}

pub(super) fn check_volume(name: &str) -> Result<(), ContainerError> {
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
pub(super) async fn volume_owned(
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
pub(super) async fn ensure_volumes(
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
