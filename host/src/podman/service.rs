//! Which Podman service the host talks to, and starting one of its own.
//!
//! An engine of the policy's (`containers.engines`) at its URL; the local
//! one at `$CONTAINER_HOST` when set (`unix://` a socket, `tcp://` an address),
//! else the system's socket (`/run/podman/podman.sock` for root,
//! `$XDG_RUNTIME_DIR/podman/podman.sock` otherwise), else a `podman system
//! service` the host starts on a socket of its own, in
//! [`service_dir`]: it carries a marker of this host instance, so the
//! watchdog ends it with the host and removes the directory. A host that
//! ends in order ends it itself ([`end_own_service`]): a one-shot `host
//! call` (every `cofer` command) must not leave it running.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;
use tokio::sync::Mutex;

use super::connect::{connect, connect_socket};
use super::{Engine, INSTALL_HINT, PodmanError, program};
use timebox::MARKER_VAR;

/// How long a service the host starts may take to answer.
const SERVICE_START: Duration = Duration::from_secs(20);

/// The connected clients, one per engine. [`lost`] marks them stale when
/// a service stops answering, so the next call connects again (starting a
/// new local service if need be).
static CLIENTS: Mutex<Vec<(Engine, Docker)>> = Mutex::const_new(Vec::new());
static LOST: AtomicBool = AtomicBool::new(false);
/// The service this host started, if any: its pid and marker.
static OWN: std::sync::Mutex<Option<(u32, String)>> = std::sync::Mutex::new(None);

/// The API client for `engine`.
pub async fn client(engine: &Engine) -> Result<Docker, PodmanError> {
    let mut clients = CLIENTS.lock().await;
    if LOST.swap(false, Ordering::SeqCst) {
        clients.clear();
    }
    if let Some((_, docker)) = clients.iter().find(|(e, _)| e == engine) {
        return Ok(docker.clone());
    }
    let docker = match engine {
        Engine::Remote(remote) => match &remote.ssh {
            Some(target) => super::ssh::connect(remote, target).await?,
            None => connect(&remote.url).await?,
        },
        Engine::Local => local().await?,
    };
    clients.push((engine.clone(), docker.clone()));
    Ok(docker)
}

/// This machine's service: `CONTAINER_HOST`, the system's socket, or one
/// the host starts.
async fn local() -> Result<Docker, PodmanError> {
    if let Some(host) = std::env::var("CONTAINER_HOST")
        .ok()
        .filter(|h| !h.is_empty())
    {
        return connect(&host).await;
    }
    for socket in system_sockets() {
        if let Ok(docker) = connect_socket(&socket).await {
            return Ok(docker);
        }
    }
    start_service().await
}

/// The service stopped answering: the next [`client`] connects again.
pub fn lost() {
    LOST.store(true, Ordering::SeqCst);
}

/// Where the host instance `instance` keeps the socket of its own service.
pub fn service_dir(instance: &str) -> PathBuf {
    std::env::temp_dir().join(format!("mcp-host-podman-{instance}"))
}

fn system_sockets() -> Vec<PathBuf> {
    crate::platform::podman_sockets()
}

/// The PATH the host's own Podman service runs with: the host's, and the
/// system's administration folders after it when missing. Podman's network
/// helper (netavark) runs `iptables`/`nft` from there; a host started with
/// a user's PATH without `/usr/sbin` made every container with a network
/// fail with `netavark: No such file or directory`.
fn service_path() -> std::ffi::OsString {
    let mut dirs: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for system in [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ] {
        let system = std::path::PathBuf::from(system);
        if cfg!(unix) && !dirs.contains(&system) {
            dirs.push(system);
        }
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

/// End the Podman service this host started (if it did) and its ssh
/// tunnels, and remove their folder: at the end of a one-shot command and of a graceful shutdown.
/// Blocking: at most the grace period of [`crate::platform::kill_tree`].
pub fn end_own_service() {
    super::ssh::end_tunnels();
    let own = OWN.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some((pid, marker)) = own {
        let pid = i32::try_from(pid).unwrap_or(i32::MAX);
        crate::platform::kill_tree(pid, &marker);
        let _ = std::fs::remove_dir_all(service_dir(timebox::instance()));
        tracing::debug!(pid, "ended the host's Podman service");
    }
}

/// `podman system service` on a socket of this host's own, for as long as
/// the host lives.
async fn start_service() -> Result<Docker, PodmanError> {
    let dir = service_dir(timebox::instance());
    std::fs::create_dir_all(&dir)
        .map_err(|e| PodmanError::Unavailable(format!("cannot make {}: {e}", dir.display())))?;
    let socket = dir.join("podman.sock");
    let _ = std::fs::remove_file(&socket);
    // What it says goes to a log beside its socket (read back below
    // should it not start).
    let log_path = dir.join("service.log");
    let log = std::fs::File::create(&log_path).map_err(|e| {
        PodmanError::Unavailable(format!("cannot make {}: {e}", log_path.display()))
    })?;
    let marker = timebox::new_marker();
    let mut command = tokio::process::Command::new(program()?);
    command
        .args(["system", "service", "--time=0"])
        .arg(format!("unix://{}", socket.display()))
        .env(MARKER_VAR, &marker)
        .env("PATH", service_path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    let mut child = command.spawn().map_err(|e| {
        PodmanError::Unavailable(format!(
            "cannot start `podman system service`: {e} ({INSTALL_HINT})"
        ))
    })?;
    let started = Instant::now();
    loop {
        if socket.exists()
            && let Ok(docker) = connect_socket(&socket).await
        {
            tracing::info!(socket = %socket.display(), "started Podman's API service for the host");
            if let Some(pid) = child.id() {
                *OWN.lock().unwrap_or_else(|e| e.into_inner()) = Some((pid, marker));
            }
            // It lives as long as the host (the watchdog ends it after);
            // this task only reaps it should it die before.
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            return Ok(docker);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            let said = said.trim();
            let tail = &said[said.floor_char_boundary(said.len().saturating_sub(2000))..];
            return Err(PodmanError::Unavailable(format!(
                "`podman system service` exited at once ({status}): {tail}. Podman is installed \
                 but does not run here: {INSTALL_HINT}"
            )));
        }
        if started.elapsed() > SERVICE_START {
            let _ = child.kill().await;
            return Err(PodmanError::Unavailable(format!(
                "`podman system service` did not answer within {} s: {INSTALL_HINT}",
                SERVICE_START.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
