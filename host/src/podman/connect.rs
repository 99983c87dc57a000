//! Connecting the API client to a Podman service at a socket or an
//! address, once it answers: shared by this machine's service
//! ([`super::service`]) and the ssh tunnels to others' ([`super::ssh`]).

use std::path::Path;

use bollard::Docker;

use super::PodmanError;

/// How long one API request may take to be answered (a pull or a commit
/// is one request; an exec's output stream is not bounded by it).
const REQUEST_TIMEOUT_S: u64 = 300;

/// The service at `host` (`CONTAINER_HOST`, or an engine's URL).
pub async fn connect(host: &str) -> Result<Docker, PodmanError> {
    if let Some(path) = host.strip_prefix("unix://") {
        return connect_socket(Path::new(path)).await;
    }
    if host.starts_with("tcp://") {
        let docker =
            Docker::connect_with_http(host, REQUEST_TIMEOUT_S, bollard::API_DEFAULT_VERSION)
                .map_err(|e| unanswered(host, e))?;
        return ready(docker, host).await;
    }
    Err(PodmanError::Unavailable(format!(
        "CONTAINER_HOST={host}: the host speaks to this machine's Podman over `unix://` and `tcp://` \
         only. Another machine's is named in the config instead: `containers.engines.lab = \
         \"ssh://user@machine/run/podman/podman.sock\"` under [plugins.cofer] (see the Cofer chapter)"
    )))
}

fn unanswered(service: &str, e: bollard::errors::Error) -> PodmanError {
    PodmanError::Unavailable(format!(
        "Podman's service at {service} is not answering: {e}. Start it (`systemctl --user start \
         podman.socket`, or `podman system service` on the engine's machine) or unset CONTAINER_HOST"
    ))
}

pub async fn connect_socket(socket: &Path) -> Result<Docker, PodmanError> {
    let shown = socket.display().to_string();
    let docker = crate::platform::connect_podman(&shown, REQUEST_TIMEOUT_S)
        .map_err(|e| unanswered(&shown, e))?;
    ready(docker, &shown).await
}

async fn ready(docker: Docker, service: &str) -> Result<Docker, PodmanError> {
    docker.ping().await.map_err(|e| unanswered(service, e))?;
    // Podman 4 speaks API 1.41; bollard asks for a newer one by default.
    docker
        .negotiate_version()
        .await
        .map_err(|e| unanswered(service, e))
}
