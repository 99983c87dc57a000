//! Networks of a plugin's own, so its containers reach each other by name
//! (Podman's DNS on a user-defined network). A network carries the owner
//! and machine labels as containers do; a plugin can neither join nor
//! remove one it did not make.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::{MACHINE, MACHINE_LABEL, OWNER_LABEL, check_word};
use crate::bindings::mcphost::plugin::containers::ContainerError;
use crate::podman::{self, PodmanError};
use crate::policy::Grants;

#[derive(Deserialize)]
struct Inspected {
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

/// Whether `network` exists, and then whether it is the plugin's own.
async fn owned(g: &Grants, network: &str) -> Result<Option<bool>, ContainerError> {
    let out = match podman::run(&["network".into(), "inspect".into(), network.into()]).await {
        Ok(out) => out,
        Err(PodmanError::Failed(said)) if said.contains("network not found") => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let found: Vec<Inspected> = serde_json::from_str(&out).map_err(|e| {
        ContainerError::Failed(format!("cannot read `podman network inspect` output: {e}"))
    })?;
    let labels = found
        .into_iter()
        .next()
        .and_then(|n| n.labels)
        .unwrap_or_default();
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
async fn ensure(g: &Grants, network: &str) -> Result<(), ContainerError> {
    match owned(g, network).await? {
        Some(true) => return Ok(()),
        Some(false) => return Err(not_ours(g, network)),
        None => {}
    }
    let created = podman::run(&[
        "network".into(),
        "create".into(),
        "--label".into(),
        format!("{OWNER_LABEL}={}", g.plugin),
        "--label".into(),
        format!("{MACHINE_LABEL}={}", *MACHINE),
        network.into(),
    ])
    .await;
    match created {
        Ok(_) => Ok(()),
        // Another call made it in the meantime: fine if it is ours.
        Err(PodmanError::Failed(said)) if said.contains("already exists") => {
            match owned(g, network).await? {
                Some(true) => Ok(()),
                _ => Err(not_ours(g, network)),
            }
        }
        Err(e) => Err(e.into()),
    }
}

pub async fn connect(
    g: &Grants,
    network: &str,
    container: &str,
    aliases: &[String],
) -> Result<(), ContainerError> {
    check_word("network", network)?;
    for alias in aliases {
        check_word("network alias", alias)?;
    }
    ensure(g, network).await?;
    let mut args = vec!["network".to_string(), "connect".into()];
    for alias in aliases {
        args.extend(["--alias".into(), alias.clone()]);
    }
    args.extend([network.to_string(), container.to_string()]);
    match podman::run(&args).await {
        Err(PodmanError::Failed(said)) if said.contains("already connected") => Ok(()),
        other => other.map(drop).map_err(Into::into),
    }
}

pub async fn remove(g: &Grants, network: &str) -> Result<bool, ContainerError> {
    check_word("network", network)?;
    match owned(g, network).await? {
        None => Ok(false),
        Some(false) => Err(not_ours(g, network)),
        // Without --force: a network still in use stays, and says so.
        Some(true) => podman::run(&["network".into(), "rm".into(), network.into()])
            .await
            .map(|_| true)
            .map_err(Into::into),
    }
}
