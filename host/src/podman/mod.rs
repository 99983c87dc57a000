//! Podman for the `containers` capability: its REST API for `exec` (the
//! call every environment command makes: [`api`]), the `podman` CLI for the
//! rest (create, remove, networks, commit), which reads what users have
//! configured (`CONTAINERS_CONF`, rootless or rootful storage). Podman sees
//! the host's whole environment: it is the host's tool, not the plugin's.

pub mod api;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use serde::Deserialize;

/// Any single podman command other than `exec` ends well within this.
const PODMAN_TIMEOUT: Duration = Duration::from_secs(120);

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

/// The podman program on PATH.
pub fn program() -> Result<PathBuf, PodmanError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    timebox::resolve_here("podman", &cwd).ok_or_else(|| {
        PodmanError::Unavailable(format!("`podman` was not found on PATH: {INSTALL_HINT}"))
    })
}

/// Run `podman <args>` and return its stdout.
pub async fn run(args: &[String]) -> Result<String, PodmanError> {
    run_with_stdin(args, Stdio::null()).await
}

/// Run `podman <args>` reading `stdin` (e.g. a tar stream for `cp -`).
pub async fn run_with_stdin(args: &[String], stdin: Stdio) -> Result<String, PodmanError> {
    let program = program()?;
    let shown = || format!("podman {}", args.join(" "));
    let output = tokio::process::Command::new(&program)
        .args(args)
        .stdin(stdin)
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(PODMAN_TIMEOUT, output).await {
        Err(_) => {
            return Err(PodmanError::Unavailable(format!(
                "`{}` gave no answer within {} s: Podman is hanging ({INSTALL_HINT})",
                shown(),
                PODMAN_TIMEOUT.as_secs()
            )));
        }
        Ok(Err(e)) => {
            return Err(PodmanError::Unavailable(format!(
                "cannot run {}: {e} ({INSTALL_HINT})",
                program.display()
            )));
        }
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    Err(classify(&shown(), &String::from_utf8_lossy(&output.stderr)))
}

/// Sort a failure into missing container, broken Podman, or plain failure.
pub fn classify(command: &str, stderr: &str) -> PodmanError {
    let stderr = stderr.trim();
    let said = format!("`{command}` failed: {stderr}");
    if stderr.contains("no such container") || stderr.contains("no container with") {
        PodmanError::NotFound(said)
    } else if ["unable to connect to Podman", "Cannot connect to Podman"]
        .iter()
        .any(|sign| stderr.contains(sign))
    {
        PodmanError::Unavailable(format!(
            "{said}. Podman is installed but its service is not answering: start it \
             (`systemctl --user start podman.socket`, or `podman system service` on the engine's \
             machine) and check CONTAINER_HOST and `podman system connection list`"
        ))
    } else if [
        "OCI runtime",
        "cgroups in hybrid mode",
        "setrlimit",
        "cannot find newuidmap",
        "database configuration mismatch",
    ]
    .iter()
    .any(|sign| stderr.contains(sign))
    {
        PodmanError::Unavailable(format!(
            "{said}. Podman is installed but cannot run containers: {INSTALL_HINT}"
        ))
    } else {
        PodmanError::Failed(said)
    }
}

/// The parts of `podman inspect` we use.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct Inspected {
    pub id: String,
    pub name: String,
    pub image_name: String,
    pub state: InspectedState,
    pub config: InspectedConfig,
    pub network_settings: InspectedNetwork,
    #[serde(default)]
    pub mounts: Vec<InspectedMount>,
}

/// A mount as `podman inspect` shows it.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InspectedMount {
    #[serde(rename = "Type")]
    pub kind: String,
    pub source: String,
    pub destination: String,
    #[serde(rename = "RW")]
    pub rw: bool,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InspectedState {
    pub status: String,
    #[serde(default)]
    pub exit_code: i32,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct InspectedConfig {
    #[serde(default)]
    pub labels: Option<std::collections::BTreeMap<String, String>>,
}

#[derive(Debug, Deserialize)]
pub struct InspectedNetwork {
    #[serde(rename = "IPAddress", default)]
    pub ip_address: String,
    #[serde(rename = "Ports", default)]
    pub ports: Option<std::collections::BTreeMap<String, Option<Vec<HostPort>>>>,
    /// Its address on each network it is on (the top-level address is
    /// empty when there are several).
    #[serde(rename = "Networks", default)]
    pub networks: Option<std::collections::BTreeMap<String, NetworkEndpoint>>,
}

#[derive(Debug, Deserialize)]
pub struct NetworkEndpoint {
    #[serde(rename = "IPAddress", default)]
    pub ip_address: String,
}

impl InspectedNetwork {
    /// The address on its only network; with several, on the first one
    /// other than Podman's default `podman` (a network made for it).
    pub fn address(&self) -> Option<String> {
        let own = || {
            let networks = self.networks.as_ref()?;
            networks
                .iter()
                .filter(|(name, _)| *name != "podman")
                .chain(networks.iter())
                .map(|(_, n)| n.ip_address.clone())
                .find(|ip| !ip.is_empty())
        };
        Some(self.ip_address.clone())
            .filter(|ip| !ip.is_empty())
            .or_else(own)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct HostPort {
    pub host_ip: String,
    pub host_port: String,
}

/// `podman container inspect` of each of `ids`.
pub async fn inspect(ids: &[String]) -> Result<Vec<Inspected>, PodmanError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut args = vec!["container".to_string(), "inspect".into()];
    args.extend(ids.iter().cloned());
    let out = run(&args).await?;
    serde_json::from_str(&out)
        .map_err(|e| PodmanError::Failed(format!("cannot read `podman inspect` output: {e}")))
}

/// The image's entrypoint (empty when it has none).
pub async fn image_entrypoint(image: &str) -> Result<Vec<String>, PodmanError> {
    let out = run(&[
        "image".into(),
        "inspect".into(),
        "--format".into(),
        "{{json .Config.Entrypoint}}".into(),
        image.into(),
    ])
    .await?;
    Ok(serde_json::from_str::<Option<Vec<String>>>(out.trim())
        .ok()
        .flatten()
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_sorted() {
        assert!(matches!(
            classify(
                "podman exec x true",
                "Error: no container with name or ID \"x\" found: no such container"
            ),
            PodmanError::NotFound(_)
        ));
        assert!(matches!(
            classify(
                "podman run",
                "Error: OCI runtime error: crun: cgroups in hybrid mode not supported"
            ),
            PodmanError::Unavailable(_)
        ));
        let down = classify(
            "podman ps",
            "Cannot connect to Podman. Please verify your connection to the Linux system using \
             `podman system connection list`\nError: unable to connect to Podman socket: dial unix \
             /run/podman/podman.sock: connect: no such file or directory",
        );
        assert!(
            matches!(&down, PodmanError::Unavailable(m) if m.contains("service is not answering")
                && !m.contains("apt-get install")),
            "{down:?}"
        );
        assert!(matches!(
            classify("podman run", "Error: localhost/nosuch: image not known"),
            PodmanError::Failed(_)
        ));
    }

    #[test]
    fn inspect_output_is_read() {
        let json = r#"[{"Id":"abc","Name":"t1","ImageName":"localhost/x:latest","State":{"Status":"running","ExitCode":0},
            "Config":{"Labels":{"a":"b"}},"NetworkSettings":{"IPAddress":"10.88.0.5",
            "Ports":{"8080/tcp":[{"HostIp":"127.0.0.1","HostPort":"40927"}],"9000/tcp":null}}}]"#;
        let got: Vec<Inspected> = serde_json::from_str(json).unwrap();
        assert_eq!(got[0].state.status, "running");
        let ports = got[0].network_settings.ports.as_ref().unwrap();
        assert_eq!(ports["8080/tcp"].as_ref().unwrap()[0].host_port, "40927");
        assert_eq!(
            got[0].network_settings.address().as_deref(),
            Some("10.88.0.5")
        );
    }

    #[test]
    fn with_several_networks_the_own_address_is_taken() {
        let json = r#"{"IPAddress":"","Networks":{"cofer-x":{"IPAddress":"10.89.0.3"},
            "podman":{"IPAddress":"10.88.0.7"}}}"#;
        let got: InspectedNetwork = serde_json::from_str(json).unwrap();
        assert_eq!(got.address().as_deref(), Some("10.89.0.3"));
    }
}
