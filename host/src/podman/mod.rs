//! Podman for the `containers` capability, through its REST API (the
//! Docker-compatible endpoints, via bollard): one HTTP exchange on a
//! socket per operation instead of a `podman` process. [`service`] picks
//! the service (or starts one for the host), [`exec`] runs commands.
//! Podman sees the host's whole environment: it is the host's tool, not
//! the plugin's.

mod connect;
pub mod exec;
mod framed;
mod service;
mod ssh;
mod sweep;

use std::collections::BTreeMap;
use std::path::PathBuf;

use bollard::Docker;
use bollard::models::{ContainerInspectResponse, ImageInspect};

pub use service::{client, end_own_service, service_dir};

/// Which Podman service: this machine's, or one the policy names.
#[derive(Debug, Clone, PartialEq)]
pub enum Engine {
    Local,
    Remote(crate::policy::RemoteEngine),
}

impl Engine {
    pub fn name(&self) -> &str {
        match self {
            Engine::Local => crate::policy::LOCAL_ENGINE,
            Engine::Remote(remote) => &remote.name,
        }
    }

    /// The engine's URL when it is another machine's (its processes are
    /// not in this machine's /proc); for one reached over ssh, with its
    /// key and known_hosts, so a record of it lets the host's watchdog
    /// reach it again ([`exec::end_in_flight`]).
    pub fn remote_url(&self) -> Option<String> {
        match self {
            Engine::Local => None,
            Engine::Remote(remote) => Some(
                remote
                    .ssh
                    .as_ref()
                    .map_or_else(|| remote.url.clone(), |t| t.record()),
            ),
        }
    }

    /// Where ports published there are reached from this machine.
    pub fn address(&self) -> &str {
        match self {
            Engine::Local => "127.0.0.1",
            Engine::Remote(remote) => &remote.address,
        }
    }
}

/// What to tell a user whose Podman is missing or broken.
pub const INSTALL_HINT: &str = "install Podman (Debian/Ubuntu: `apt-get install podman runc`); \
if containers fail to start, point CONTAINERS_CONF at a containers.conf with \
`runtime = \"runc\"` and default_ulimits within `ulimit -Hn` (see config/containers.conf)";

#[derive(Debug, thiserror::Error)]
pub enum PodmanError {
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Failed(String),
}

/// The podman program on PATH (to start a service of the host's own).
pub fn program() -> Result<PathBuf, PodmanError> {
    timebox::host_program("podman").ok_or_else(|| {
        PodmanError::Unavailable(format!("`podman` was not found on PATH: {INSTALL_HINT}"))
    })
}

/// Sort a failed API request about `what`: Podman's answer (missing,
/// cannot run containers, refused), or no answer at all, after which the
/// next request connects again.
pub fn failed(what: &str) -> impl FnOnce(bollard::errors::Error) -> PodmanError + '_ {
    move |e| match e {
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            message,
        } => PodmanError::NotFound(format!("{what}: {message}")),
        bollard::errors::Error::DockerResponseServerError { message, .. } => {
            classify(what, &message)
        }
        other => {
            service::lost();
            PodmanError::Unavailable(format!(
                "{what}: Podman's service stopped answering ({other}); the next command starts it again"
            ))
        }
    }
}

/// Podman's refusal: broken (it cannot run containers here) or plain.
fn classify(what: &str, message: &str) -> PodmanError {
    let said = format!("{what}: {}", message.trim());
    let broken = [
        "OCI runtime",
        "cgroups in hybrid mode",
        "setrlimit",
        "error setting rlimit",
        "cannot find newuidmap",
        "database configuration mismatch",
    ];
    if broken.iter().any(|sign| message.contains(sign)) {
        PodmanError::Unavailable(format!(
            "{said}. Podman is installed but cannot run containers: {INSTALL_HINT}"
        ))
    } else {
        PodmanError::Failed(said)
    }
}

/// What the host reads of a container.
#[derive(Debug, Default)]
pub struct Inspected {
    pub id: String,
    pub name: String,
    /// The image as it was asked for (`localhost/x:latest`).
    pub image_name: String,
    /// `created`, `running`, `exited`, ...
    pub status: String,
    pub exit_code: i64,
    pub labels: BTreeMap<String, String>,
    /// (container port, host address, host port) of each published port.
    pub ports: Vec<(u16, String, u16)>,
    /// Its address on each network it is on.
    pub networks: BTreeMap<String, String>,
    pub mounts: Vec<InspectedMount>,
}

/// A mount of a container.
#[derive(Debug)]
pub struct InspectedMount {
    pub kind: String,
    pub source: String,
    pub destination: String,
    pub rw: bool,
}

impl From<ContainerInspectResponse> for Inspected {
    fn from(c: ContainerInspectResponse) -> Self {
        let config = c.config.unwrap_or_default();
        let state = c.state.unwrap_or_default();
        let network = c.network_settings.unwrap_or_default();
        let mut ports = Vec::new();
        for (spec, bindings) in network.ports.into_iter().flatten() {
            let Some(port) = spec.split('/').next().and_then(|p| p.parse().ok()) else {
                continue;
            };
            for binding in bindings.into_iter().flatten() {
                if let Some(host_port) = binding.host_port.and_then(|p| p.parse().ok()) {
                    ports.push((port, binding.host_ip.unwrap_or_default(), host_port));
                }
            }
        }
        ports.sort();
        Inspected {
            id: c.id.unwrap_or_default(),
            // The Docker API names containers with a leading `/`.
            name: c
                .name
                .unwrap_or_default()
                .trim_start_matches('/')
                .to_string(),
            image_name: config.image.unwrap_or_default(),
            status: state.status.map(|s| s.to_string()).unwrap_or_default(),
            exit_code: state.exit_code.unwrap_or(0),
            labels: config.labels.unwrap_or_default().into_iter().collect(),
            ports,
            networks: network
                .networks
                .into_iter()
                .flatten()
                .map(|(name, endpoint)| (name, endpoint.ip_address.unwrap_or_default()))
                .collect(),
            mounts: c
                .mounts
                .into_iter()
                .flatten()
                .map(|m| InspectedMount {
                    kind: m.typ.unwrap_or_default(),
                    source: m.source.unwrap_or_default(),
                    destination: m.destination.unwrap_or_default(),
                    rw: m.rw.unwrap_or(false),
                })
                .collect(),
        }
    }
}

impl Inspected {
    /// The address on its only network; with several, on the first one
    /// other than Podman's default `podman` (a network made for it).
    pub fn address(&self) -> Option<String> {
        self.networks
            .iter()
            .filter(|(name, _)| *name != "podman")
            .chain(&self.networks)
            .map(|(_, ip)| ip.clone())
            .find(|ip| !ip.is_empty())
    }
}

/// The container `id` (an id or a name).
pub async fn inspect(docker: &Docker, id: &str) -> Result<Inspected, PodmanError> {
    settled(|| docker.inspect_container(id, None))
        .await
        .map(Inspected::from)
        .map_err(failed(&format!("inspecting container {id}")))
}

/// The last `keep` bytes of container `id`'s output (stdout and stderr as
/// they came), read as a stream so a long log is never held whole.
pub async fn logs_tail(docker: &Docker, id: &str, keep: usize) -> Result<String, PodmanError> {
    use futures_util::StreamExt;
    let options = bollard::query_parameters::LogsOptionsBuilder::new()
        .stdout(true)
        .stderr(true)
        .build();
    let mut stream = docker.logs(id, Some(options));
    let mut tail = std::collections::VecDeque::with_capacity(keep.min(1 << 16));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(failed(&format!("reading the output of container {id}")))?;
        tail.extend(chunk.into_bytes().iter());
        let over = tail.len().saturating_sub(keep);
        tail.drain(..over);
    }
    Ok(String::from_utf8_lossy(tail.make_contiguous()).into_owned())
}

/// `ask` once the engine's answer fits the Docker API's model. Podman 4.3
/// reports a container that has just exited as `stopped` until its
/// cleanup has run (a few hundred milliseconds), a state the model lacks
/// (`unknown variant`); asked again it says `exited`. Asked again for up
/// to 2 s; after that the error stands.
pub async fn settled<T, F, Fut>(mut ask: F) -> Result<T, bollard::errors::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, bollard::errors::Error>>,
{
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match ask().await {
            Err(e) if unknown_state(&e) && std::time::Instant::now() < until => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            answer => return answer,
        }
    }
}

fn unknown_state(e: &bollard::errors::Error) -> bool {
    use bollard::errors::Error::{JsonDataError, JsonSerdeError};
    matches!(e, JsonDataError { .. } | JsonSerdeError { .. })
        && e.to_string().contains("unknown variant")
}

/// The image `image`, if it is in local storage.
pub async fn image(docker: &Docker, image: &str) -> Result<Option<ImageInspect>, PodmanError> {
    match docker.inspect_image(image).await {
        Ok(found) => Ok(Some(found)),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(failed(&format!("inspecting image {image}"))(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_state_the_model_lacks_is_asked_again_until_it_settles() {
        let unknown = || bollard::errors::Error::JsonDataError {
            message: "unknown variant `stopped`, expected one of `created`, `exited`".into(),
            column: 1,
        };
        let mut asked = 0;
        let answer = settled(|| {
            asked += 1;
            let answer = if asked < 3 { Err(unknown()) } else { Ok(asked) };
            async move { answer }
        })
        .await;
        assert_eq!(answer.unwrap(), 3);
        let other = settled(|| async {
            Err::<(), _>(bollard::errors::Error::DockerResponseServerError {
                status_code: 500,
                message: "boom".into(),
            })
        })
        .await;
        assert!(other.is_err(), "other errors are not asked again");
    }

    #[test]
    fn failures_are_sorted() {
        let answer =
            |status_code, message: &str| bollard::errors::Error::DockerResponseServerError {
                status_code,
                message: message.into(),
            };
        let missing = failed("inspecting container x")(answer(
            404,
            "no container with name or ID \"x\" found: no such container",
        ));
        assert!(matches!(missing, PodmanError::NotFound(_)), "{missing:?}");
        let broken = failed("starting x")(answer(
            500,
            "runc: runc create failed: unable to start container process: error during container \
             init: error setting rlimits for ready process: error setting rlimit type 7: operation \
             not permitted: OCI permission denied",
        ));
        assert!(
            matches!(&broken, PodmanError::Unavailable(m) if m.contains("containers.conf")),
            "{broken:?}"
        );
        let refused = failed("creating network n")(answer(
            500,
            "network name n already used: network already exists",
        ));
        assert!(matches!(refused, PodmanError::Failed(_)), "{refused:?}");
    }

    /// Podman 4.3's answer to `GET /containers/{id}/json`, cut down.
    const INSPECTED: &str = r#"{"Id":"bdc8060aa426","Name":"/apitest",
        "State":{"Status":"running","ExitCode":0},
        "Config":{"Image":"localhost/cofer-test:latest","Labels":{"a":"b"}},
        "Mounts":[{"Type":"bind","Source":"/tmp/pt","Destination":"/mnt/x","Mode":"","RW":false,"Propagation":"rprivate"}],
        "NetworkSettings":{"Ports":{"8080/tcp":[{"HostIp":"127.0.0.1","HostPort":"37819"}],"9000/tcp":null},
          "Networks":{"podman":{"IPAddress":"10.88.9.154","Aliases":["bdc8060aa426"]}}}}"#;

    #[test]
    fn inspect_output_is_read() {
        let response: ContainerInspectResponse = serde_json::from_str(INSPECTED).unwrap();
        let got = Inspected::from(response);
        assert_eq!(got.name, "apitest");
        assert_eq!(got.status, "running");
        assert_eq!(got.image_name, "localhost/cofer-test:latest");
        assert_eq!(got.ports, [(8080, "127.0.0.1".to_string(), 37819)]);
        assert_eq!(got.address().as_deref(), Some("10.88.9.154"));
        assert_eq!(got.labels["a"], "b");
        assert_eq!(
            (got.mounts[0].kind.as_str(), got.mounts[0].rw),
            ("bind", false)
        );
    }

    #[test]
    fn with_several_networks_the_own_address_is_taken() {
        let got = Inspected {
            networks: [("cofer-x", "10.89.0.3"), ("podman", "10.88.0.7")]
                .map(|(n, ip)| (n.to_string(), ip.to_string()))
                .into(),
            ..Default::default()
        };
        assert_eq!(got.address().as_deref(), Some("10.89.0.3"));
    }
}
