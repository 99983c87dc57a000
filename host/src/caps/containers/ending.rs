//! Stopping and removing containers, and what a removal leaves behind.

use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{RemoveContainerOptions, StopContainerOptions};

use super::mounts;
use crate::bindings::mcphost::plugin::containers::{ContainerError, StopKind};
use crate::podman::{self, Engine, Inspected, failed};

/// Stop a running container: SIGTERM, then SIGKILL after the grace period.
pub(super) async fn stop(
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
pub(super) async fn probed(
    docker: &Docker,
    id: &str,
    probes: &mounts::Probes,
) -> Result<(), ContainerError> {
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
pub(super) fn kill_leftovers(id: &str, name: &str) -> u32 {
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
