//! Networks of a plugin's own, so its containers reach each other by name
//! (Podman's DNS on a user-defined network). A network carries the owner
//! and machine labels as containers do; a plugin can neither join nor
//! remove one it did not make.

use std::collections::HashMap;

use bollard::models::{EndpointSettings, NetworkConnectRequest, NetworkCreateRequest};

use super::{MACHINE, MACHINE_LABEL, OWNER_LABEL, check_word};
use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::podman::{PodmanError, failed};
use crate::policy::Grants;
use bollard::Docker;

/// Whether `network` exists, and then whether it is the plugin's own.
async fn owned(docker: &Docker, g: &Grants, network: &str) -> Result<Option<bool>, ContainerError> {
    let found = match docker.inspect_network(network, None).await {
        Ok(found) => found,
        Err(e) => match failed(&format!("inspecting network {network}"))(e) {
            PodmanError::NotFound(_) => return Ok(None),
            e => return Err(e.into()),
        },
    };
    let labels = found.labels.unwrap_or_default();
    Ok(Some(
        labels.get(OWNER_LABEL) == Some(&g.plugin) && labels.get(MACHINE_LABEL) == Some(&*MACHINE),
    ))
}

fn not_ours(g: &Grants, network: &str) -> ContainerError {
    ContainerError::NotFound(format!(
        "network `{network}` exists but does not belong to plugin `{}`: choose another name",
        g.plugin
    ))
}

/// Create `network` for the plugin unless it has it already.
async fn ensure(docker: &Docker, g: &Grants, network: &str) -> Result<(), ContainerError> {
    match owned(docker, g, network).await? {
        Some(true) => return Ok(()),
        Some(false) => return Err(not_ours(g, network)),
        None => {}
    }
    let request = NetworkCreateRequest {
        name: network.to_string(),
        labels: Some(HashMap::from([
            (OWNER_LABEL.to_string(), g.plugin.clone()),
            (MACHINE_LABEL.to_string(), MACHINE.clone()),
        ])),
        ..Default::default()
    };
    let created = docker.create_network(request).await;
    match created.map_err(failed(&format!("creating network {network}"))) {
        Ok(_) => Ok(()),
        // Another call made it in the meantime: fine if it is ours.
        Err(PodmanError::Failed(said)) if said.contains("already exists") => {
            match owned(docker, g, network).await? {
                Some(true) => Ok(()),
                _ => Err(not_ours(g, network)),
            }
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn connect(
    docker: &Docker,
    g: &Grants,
    network: &str,
    container: &str,
    aliases: &[String],
) -> Result<(), ContainerError> {
    check_word("network", network)?;
    for alias in aliases {
        check_word("network alias", alias)?;
    }
    ensure(docker, g, network).await?;
    let request = NetworkConnectRequest {
        container: container.to_string(),
        endpoint_config: Some(EndpointSettings {
            aliases: Some(aliases.to_vec()),
            ..Default::default()
        }),
    };
    let connected = docker
        .connect_network(network, request)
        .await
        .map_err(failed(&format!(
            "connecting {container} to network {network}"
        )));
    match connected {
        Err(PodmanError::Failed(said)) if said.contains("already connected") => Ok(()),
        other => Ok(other?),
    }
}

pub async fn remove(docker: &Docker, g: &Grants, network: &str) -> Result<bool, ContainerError> {
    check_word("network", network)?;
    match owned(docker, g, network).await? {
        None => Ok(false),
        Some(false) => Err(not_ours(g, network)),
        // Without --force: a network still in use stays, and says so.
        Some(true) => docker
            .remove_network(network)
            .await
            .map(|()| true)
            .map_err(|e| failed(&format!("removing network {network}"))(e).into()),
    }
}
