//! What a new container may be: the image the policy allows (pulled only
//! when it says so), mounts inside the plugin's roots, ports on 127.0.0.1,
//! a fixed set of capabilities and no privileged option.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;
use bollard::models::{
    ContainerCreateBody, HostConfig, Mount, MountType, PortBinding as HostBinding,
};
use bollard::query_parameters::CreateImageOptions;
use futures_util::TryStreamExt;

use super::owned::{MACHINE, check_word};
use super::volumes::{check_volume, is_volume};
use super::{MACHINE_LABEL, OWNER_LABEL};
use crate::bindings::mcphost::plugin::containers::{ContainerError, CreateRequest};
use crate::paths::confine;
use crate::podman::{self, Engine, failed};
use crate::policy::Grants;
use timebox::MARKER_VAR;

/// Capabilities a development container keeps: installing packages
/// (ownership, permissions, apt's setuid/setgid sandbox), signalling its
/// own processes, and a service on a port below 1024. Not the rest of
/// Podman's defaults (MKNOD, NET_RAW, SYS_CHROOT, SETFCAP, SETPCAP,
/// AUDIT_WRITE), whatever `containers.conf` says.
const CONTAINER_CAPABILITIES: [&str; 8] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "NET_BIND_SERVICE",
];

/// What every container is started with: the capabilities above, no
/// privilege gained through setuid binaries, and the policy's memory and
/// process limits.
fn confinement(g: &Grants) -> HostConfig {
    HostConfig {
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(
            CONTAINER_CAPABILITIES
                .iter()
                .map(|c| c.to_string())
                .collect(),
        ),
        security_opt: Some(vec!["no-new-privileges".into()]),
        pids_limit: Some(g.container_pids as i64),
        memory: Some((g.container_memory_mb * 1024 * 1024) as i64),
        ..Default::default()
    }
}

/// Turn a create request into the container the policy allows on
/// `engine` (its volumes are made by [`ensure_volumes`]).
pub(super) fn create_body(
    g: &Grants,
    engine: &Engine,
    request: &CreateRequest,
) -> Result<ContainerCreateBody, ContainerError> {
    if !image_allowed(&request.image, &g.images) {
        return Err(ContainerError::Denied(g.denial(
            &format!("the image `{}`", request.image),
            "containers.images",
            &format!("\"{}\"", request.image),
        )));
    }
    check_word("image", &request.image)?;
    let mut labels = HashMap::from([
        (OWNER_LABEL.to_string(), g.plugin.clone()),
        (MACHINE_LABEL.to_string(), MACHINE.clone()),
    ]);
    for (key, value) in &request.labels {
        if key.is_empty() || key.contains('=') || key == OWNER_LABEL || key == MACHINE_LABEL {
            return Err(ContainerError::Invalid(format!(
                "label `{key}` cannot be set"
            )));
        }
        if value.contains('\n') {
            return Err(ContainerError::Invalid(format!(
                "the value of label `{key}` contains a newline, which labels cannot hold"
            )));
        }
        labels.insert(key.clone(), value.clone());
    }
    let mut mounts = Vec::new();
    for mount in &request.mounts {
        if !mount.target.starts_with('/') || mount.target.contains([':', ',']) {
            return Err(ContainerError::Invalid(format!(
                "mount target `{}` must be absolute, without ':' or ','",
                mount.target
            )));
        }
        if is_volume(&mount.source) {
            check_volume(&mount.source)?;
            mounts.push(Mount {
                typ: Some(MountType::VOLUME),
                source: Some(mount.source.clone()),
                target: Some(mount.target.clone()),
                read_only: Some(mount.read_only),
                ..Default::default()
            });
            continue;
        }
        let roots = g.roots(!mount.read_only);
        let key = if mount.read_only {
            "fs.read"
        } else {
            "fs.write"
        };
        let source = confine(&mount.source, &g.workspace, &roots)
            .filter(|_| Path::new(&mount.source).is_absolute())
            .ok_or_else(|| {
                ContainerError::Denied(g.denial(
                    &format!("mounting `{}`", mount.source),
                    key,
                    "an absolute root containing it",
                ))
            })?;
        let source = source.to_string_lossy();
        if source.contains([':', ',']) {
            return Err(ContainerError::Invalid(format!(
                "mount source `{source}` must not contain ':' or ','"
            )));
        }
        // A mount, not a `Binds` entry: for those the engine makes a
        // missing source, so an engine that cannot see the host's files
        // (another machine's) would mount an empty folder and go on.
        mounts.push(Mount {
            typ: Some(MountType::BIND),
            source: Some(source.into_owned()),
            target: Some(mount.target.clone()),
            read_only: Some(mount.read_only),
            ..Default::default()
        });
    }
    let mut exposed = Vec::new();
    let mut published = HashMap::new();
    let publish_ip = publish_address(engine)?;
    for port in &request.ports {
        if *port == 0 {
            return Err(ContainerError::Invalid("port 0 cannot be published".into()));
        }
        let spec = format!("{port}/tcp");
        exposed.push(spec.clone());
        // Any free port, on the loopback address only (another machine's
        // engine: on its address, where this machine reaches it).
        let binding = HostBinding {
            host_ip: Some(publish_ip.clone()),
            host_port: Some(String::new()),
        };
        published.insert(spec, Some(vec![binding]));
    }
    if let Some(name) = &request.name {
        check_word("container name", name)?;
    }
    Ok(ContainerCreateBody {
        image: Some(request.image.clone()),
        cmd: Some(request.command.clone()).filter(|c| !c.is_empty()),
        // An empty entry clears the image's entrypoint.
        entrypoint: (!request.use_entrypoint).then(|| vec![String::new()]),
        env: Some(env_list(&request.env)?),
        labels: Some(labels),
        working_dir: request.workdir.clone(),
        exposed_ports: Some(exposed),
        host_config: Some(HostConfig {
            mounts: Some(mounts),
            port_bindings: Some(published),
            ..confinement(g)
        }),
        ..Default::default()
    })
}

/// Where `engine` publishes ports: the loopback address here, else the
/// engine's address (as an IP: Podman binds to it).
fn publish_address(engine: &Engine) -> Result<String, ContainerError> {
    use std::net::{IpAddr, ToSocketAddrs};
    let address = engine.address();
    if address.parse::<IpAddr>().is_ok() {
        return Ok(address.to_string());
    }
    (address, 0)
        .to_socket_addrs()
        .ok()
        .and_then(|mut found| found.next())
        .map(|a| a.ip().to_string())
        .ok_or_else(|| {
            ContainerError::Unavailable(format!(
                "the address `{address}` of engine `{}` does not resolve: fix `address` in containers.engines",
                engine.name()
            ))
        })
}

/// Make sure `image` is in local storage: pulled if the policy allows
/// that, else refused with how to get it.
pub(super) async fn ensure_image(
    docker: &Docker,
    g: &Grants,
    image: &str,
) -> Result<(), ContainerError> {
    if podman::image(docker, image).await?.is_some() {
        return Ok(());
    }
    if !image_allowed(image, &g.pull) {
        return Err(ContainerError::Invalid(image_missing(g, image)));
    }
    let options = CreateImageOptions {
        from_image: Some(image.to_string()),
        ..Default::default()
    };
    docker
        .create_image(Some(options), None, None)
        .try_for_each(|_| async { Ok(()) })
        .await
        .map_err(|e| match e {
            // Podman answered, in its pull's stream: the registry failed
            // (unreachable, unknown name, refused), not Podman.
            bollard::errors::Error::DockerStreamError { error } => {
                ContainerError::Invalid(pull_failed(image, &error))
            }
            bollard::errors::Error::DockerResponseServerError { message, .. }
                if !message.contains("OCI runtime") =>
            {
                ContainerError::Invalid(pull_failed(image, &message))
            }
            other => ContainerError::from(failed(&format!("pulling {image}"))(other)),
        })?;
    Ok(())
}

/// Why a pull failed, in the words plugins look for ("could not be
/// pulled"), with the registry's own reason and the ways around it.
fn pull_failed(image: &str, why: &str) -> String {
    format!(
        "image `{image}` could not be pulled: {}. Check that this machine reaches its registry \
         (DNS, proxy, `podman pull {image}` on the host), or use an image already in local storage \
         (`image`, or COFER_DEFAULT_IMAGE for the default)",
        why.trim()
    )
}

/// `KEY=value` entries, refusing names a container cannot take or that
/// would hide the run's marker.
pub(super) fn env_list(env: &[(String, String)]) -> Result<Vec<String>, ContainerError> {
    env.iter()
        .map(|(key, value)| {
            if key.is_empty() || key.contains('=') || key == MARKER_VAR {
                Err(ContainerError::Invalid(format!(
                    "environment variable `{key}` cannot be set"
                )))
            } else {
                Ok(format!("{key}={value}"))
            }
        })
        .collect()
}

/// Why a run of an image that is not in local storage was refused. It
/// carries the words plugins look for ("is not in local storage").
fn image_missing(g: &Grants, image: &str) -> String {
    format!(
        "image `{image}` is not in local storage and the policy does not let the host pull it: \
         pull or build it (`podman pull {image}`), or allow pulling it with containers.pull under \
         [plugins.{}] in {}",
        g.plugin, g.config_hint
    )
}

/// `containers.images` entries: an exact image, `prefix*`, or `*`.
pub(super) fn image_allowed(image: &str, allowed: &[String]) -> bool {
    allowed
        .iter()
        .any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => image.starts_with(prefix),
            None => pattern == image,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_patterns() {
        let allowed = vec![
            "localhost/*".to_string(),
            "docker.io/library/alpine:3".into(),
        ];
        assert!(image_allowed("localhost/cofer-test:latest", &allowed));
        assert!(image_allowed("docker.io/library/alpine:3", &allowed));
        assert!(!image_allowed("docker.io/library/alpine:4", &allowed));
        assert!(image_allowed("anything", &["*".to_string()]));
        assert!(!image_allowed("anything", &[]));
    }

    #[test]
    fn option_like_words_are_refused() {
        assert!(check_word("image", "--privileged").is_err());
        assert!(check_word("image", "a b").is_err());
        assert!(check_word("image", "localhost/x:1").is_ok());
        assert!(env_list(&[(MARKER_VAR.to_string(), "x".into())]).is_err());
    }
}
