//! The environment's network as its main container sees it: the service
//! containers running beside it (added services and background
//! commands), where each of their ports is reached, and their names in
//! the main container's /etc/hosts.

use plugin_sdk::ToolError;
use plugin_sdk::containers::{self, ContainerInfo};
use serde_json::{Map, Value, json};

use crate::env::{self, Env};
use crate::errors::from_container;

/// The environment's service containers (added ones and background
/// commands).
pub fn running(env: &Env) -> Result<Vec<ContainerInfo>, ToolError> {
    Ok(env
        .containers()?
        .into_iter()
        .filter(|c| {
            c.labels
                .iter()
                .any(|(k, v)| k == env::LABEL_ROLE && v == "service")
        })
        .collect())
}

/// For each of `ports`: where the environment reaches it (`internal_host`)
/// and where the user does (its binding on 127.0.0.1), as run_cmd reports
/// them.
pub fn endpoints(info: &ContainerInfo, ports: &[u16], internal_host: &str) -> Map<String, Value> {
    ports
        .iter()
        .map(|port| {
            let external = info
                .ports
                .iter()
                .find(|b| b.container_port == *port)
                .map(|b| format!("tcp://{}:{}", b.host_ip, b.host_port));
            (
                port.to_string(),
                json!({
                    "environment_internal": format!("tcp://{internal_host}:{port}"),
                    "host_external": external,
                }),
            )
        })
        .collect()
}

/// Marks the /etc/hosts lines write_hosts writes.
const HOSTS_MARK: &str = "# cofer service";

/// Put each running added service's name and address into the /etc/hosts
/// of `container` (the environment's main container), replacing the lines
/// written before.
pub fn write_hosts(env: &Env, container: &str) -> Result<(), ToolError> {
    let mut lines = String::new();
    for info in running(env)? {
        let name = info.labels.iter().find(|(k, _)| k == "cofer.service");
        if let (Some((_, name)), Some(ip)) = (name, &info.ip_address) {
            lines.push_str(&format!("{ip}\t{name} {HOSTS_MARK}\n"));
        }
    }
    // Rewritten in place (`cat >`): Podman bind-mounts the file.
    let script = format!(
        "grep -v '{HOSTS_MARK}$' /etc/hosts > /tmp/.cofer-hosts; printf '%s' \"$1\" >> /tmp/.cofer-hosts; \
         cat /tmp/.cofer-hosts > /etc/hosts; rm -f /tmp/.cofer-hosts"
    );
    let request = env::chore(vec!["sh".into(), "-c".into(), script, "sh".into(), lines]);
    let result = containers::exec(container, &request)
        .map_err(|e| from_container("write the services' names into /etc/hosts", e))?;
    if result.exit_code != Some(0) {
        let (_, stderr) = result.streams();
        return Err(crate::errors::step_failed(
            "write the services' names into /etc/hosts",
            format!(
                "{} {}",
                plugin_sdk::exit_text(result.exit_code),
                stderr.trim()
            ),
            "the image needs sh, grep and cat; check that /etc/hosts is writable in it",
        ));
    }
    Ok(())
}
