//! Podman services on other machines reached over ssh, as Podman itself
//! reaches them (`ssh://user@host/run/podman/podman.sock`): the user's own
//! `ssh` (found as the host's other programs are, outside every folder a
//! plugin writes) forwards the remote socket to a socket in this host
//! instance's private folder, and the API client speaks through it.
//!
//! Everything ssh does is said on its command line: no ssh config file
//! is read (`-F none`, as Podman's own ssh client reads none), host keys
//! are checked against known_hosts and never added (`StrictHostKeyChecking
//! yes`), nothing is asked of a person (`BatchMode`): a key comes from
//! the agent or the policy's `identity`. The tunnel carries a marker of
//! this host instance: it ends with the host, as the host's own Podman
//! service does.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;

use super::PodmanError;
use crate::policy::{RemoteEngine, SshTarget};
use timebox::MARKER_VAR;

/// How long ssh may take to log in and forward the socket.
const TUNNEL_START: Duration = Duration::from_secs(20);

/// How long a forwarded socket may take to give Podman's answer.
const FORWARDED_ANSWER: Duration = Duration::from_secs(3);

/// A running `ssh -L`, by engine name.
struct Tunnel {
    engine: String,
    child: std::process::Child,
    marker: String,
    socket: PathBuf,
}

static TUNNELS: std::sync::Mutex<Vec<Tunnel>> = std::sync::Mutex::new(Vec::new());

/// The API client of `remote`, through its tunnel (opened when there is
/// none or the last one ended).
pub async fn connect(remote: &RemoteEngine, target: &SshTarget) -> Result<Docker, PodmanError> {
    connect_with(remote, target, None).await
}

/// The same with `program` as ssh (a record's, for the watchdog: it cannot
/// look programs up as the host does), else the host's own.
pub async fn connect_with(
    remote: &RemoteEngine,
    target: &SshTarget,
    program: Option<&Path>,
) -> Result<Docker, PodmanError> {
    // The forward ends in a unix socket, which the API client reaches as
    // a named pipe on Windows: not there (yet).
    if cfg!(windows) {
        return Err(PodmanError::Unavailable(format!(
            "engine `{}`: ssh:// engines are not supported on Windows: forward the engine's \
             socket yourself and name it as `unix://` (or a named pipe) with `address`",
            remote.name
        )));
    }
    if let Some(socket) = alive(&remote.name)
        && let Ok(docker) = super::connect::connect_socket(&socket).await
    {
        return Ok(docker);
    }
    // One that ended, or forwards to nothing that answers, goes first.
    close(&remote.name);
    let socket = open(remote, target, program)?;
    let started = Instant::now();
    // When ssh has logged in and listens, Podman's answer comes at once
    // or not at all (its service is down there): a short wait then.
    let mut listening: Option<Instant> = None;
    loop {
        if socket.exists() {
            match super::connect::connect_socket(&socket).await {
                Ok(docker) => {
                    tracing::info!(engine = %remote.name, "reached the engine over ssh");
                    return Ok(docker);
                }
                Err(_)
                    if listening.get_or_insert_with(Instant::now).elapsed() > FORWARDED_ANSWER =>
                {
                    let said = std::fs::read_to_string(log_of(&socket)).unwrap_or_default();
                    close(&remote.name);
                    return Err(PodmanError::Unavailable(format!(
                        "engine `{}`: ssh reached {}, but Podman's service does not answer at {} \
                         there (ssh: {}): start it on that machine (`systemctl --user start \
                         podman.socket`, or `systemctl start podman.socket` as root), and let \
                         its sshd forward (AllowTcpForwarding, AllowStreamLocalForwarding)",
                        remote.name,
                        target.host,
                        target.socket,
                        tail(&said)
                    )));
                }
                Err(_) => {}
            }
        }
        if let Some(said) = ended(&remote.name) {
            return Err(PodmanError::Unavailable(explain(remote, target, &said)));
        }
        if started.elapsed() > TUNNEL_START {
            let said = std::fs::read_to_string(log_of(&socket)).unwrap_or_default();
            close(&remote.name);
            return Err(PodmanError::Unavailable(format!(
                "engine `{}`: ssh to {} did not log in within {} s ({})",
                remote.name,
                target.host,
                TUNNEL_START.as_secs(),
                tail(&said),
            )));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// End every tunnel (the host ends in order).
pub fn end_tunnels() {
    let tunnels = std::mem::take(&mut *TUNNELS.lock().unwrap_or_else(|e| e.into_inner()));
    for tunnel in tunnels {
        end(tunnel);
    }
}

/// The socket of `engine`'s tunnel while its ssh runs.
fn alive(engine: &str) -> Option<PathBuf> {
    let mut tunnels = TUNNELS.lock().unwrap_or_else(|e| e.into_inner());
    let tunnel = tunnels.iter_mut().find(|t| t.engine == engine)?;
    matches!(tunnel.child.try_wait(), Ok(None)).then(|| tunnel.socket.clone())
}

/// What ssh said, once it has ended; the tunnel is forgotten.
fn ended(engine: &str) -> Option<String> {
    let mut tunnels = TUNNELS.lock().unwrap_or_else(|e| e.into_inner());
    let at = tunnels.iter().position(|t| t.engine == engine)?;
    if matches!(tunnels[at].child.try_wait(), Ok(None)) {
        return None;
    }
    let tunnel = tunnels.remove(at);
    let said = std::fs::read_to_string(log_of(&tunnel.socket)).unwrap_or_default();
    let _ = std::fs::remove_file(&tunnel.socket);
    Some(said)
}

/// End `engine`'s tunnel, if it has one.
pub fn close(engine: &str) {
    let mut tunnels = TUNNELS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(at) = tunnels.iter().position(|t| t.engine == engine) {
        end(tunnels.remove(at));
    }
}

fn end(mut tunnel: Tunnel) {
    let pid = i32::try_from(tunnel.child.id()).unwrap_or(i32::MAX);
    crate::platform::kill_tree(pid, &tunnel.marker);
    let _ = tunnel.child.kill();
    let _ = tunnel.child.wait();
    let _ = std::fs::remove_file(&tunnel.socket);
}

fn log_of(socket: &Path) -> PathBuf {
    socket.with_extension("log")
}

/// Start `ssh -L` for `remote`; the socket it will listen on.
fn open(
    remote: &RemoteEngine,
    target: &SshTarget,
    program: Option<&Path>,
) -> Result<PathBuf, PodmanError> {
    let unavailable =
        |what: String| PodmanError::Unavailable(format!("engine `{}`: {what}", remote.name));
    let ssh = program
        .map(Path::to_path_buf)
        .or_else(|| timebox::host_program("ssh"))
        .ok_or_else(|| {
            unavailable(
            "`ssh` was not found on PATH (outside the folders plugins write): install OpenSSH's \
             client (Debian/Ubuntu: `apt-get install openssh-client`)"
                .into(),
        )
        })?;
    let dir = private_dir().map_err(|e| unavailable(e))?;
    let socket = dir.join(format!("ssh-{}.sock", remote.name));
    let _ = std::fs::remove_file(&socket);
    let log = std::fs::File::create(log_of(&socket))
        .map_err(|e| unavailable(format!("cannot write its log in {}: {e}", dir.display())))?;
    let marker = timebox::new_marker();
    let mut command = std::process::Command::new(ssh);
    command
        .args(arguments(target, &socket))
        .env(MARKER_VAR, &marker)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    let child = command
        .spawn()
        .map_err(|e| unavailable(format!("cannot start ssh: {e}")))?;
    TUNNELS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Tunnel {
            engine: remote.name.clone(),
            child,
            marker,
            socket: socket.clone(),
        });
    Ok(socket)
}

/// The host instance's folder, readable by this user only: whoever can
/// open a forwarded socket is root on the engine's machine.
fn private_dir() -> Result<PathBuf, String> {
    let dir = super::service_dir(timebox::instance());
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make {} private: {e}", dir.display()))?;
    }
    Ok(dir)
}

/// ssh's command line: every choice made here, none by a config file.
fn arguments(target: &SshTarget, socket: &Path) -> Vec<String> {
    let mut args: Vec<String> = ["-F", "none", "-n", "-N", "-T"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let known_hosts = target.known_hosts.display().to_string();
    for option in [
        "BatchMode=yes",
        "StrictHostKeyChecking=yes",
        &format!("UserKnownHostsFile={known_hosts}"),
        "UpdateHostKeys=no",
        "ExitOnForwardFailure=yes",
        "StreamLocalBindUnlink=yes",
        // The forwarded socket: this user only.
        "StreamLocalBindMask=0177",
        "ConnectTimeout=10",
        // A machine gone quiet ends the tunnel within 45 s: the next call
        // opens a new one, or says the engine is unreachable.
        "ServerAliveInterval=15",
        "ServerAliveCountMax=3",
        "ControlMaster=no",
        "ControlPath=none",
        "ForwardAgent=no",
        "ClearAllForwardings=no",
        "PermitLocalCommand=no",
    ] {
        args.push("-o".into());
        args.push(option.to_string());
    }
    if let Some(identity) = &target.identity {
        args.extend(["-o".into(), "IdentitiesOnly=yes".into()]);
        args.extend(["-i".into(), identity.display().to_string()]);
    }
    args.extend(["-p".into(), target.port.to_string()]);
    args.push("-L".into());
    args.push(format!("{}:{}", socket.display(), target.socket));
    if let Some(user) = &target.user {
        args.extend(["-l".into(), user.clone()]);
    }
    args.push("--".into());
    args.push(target.host.clone());
    args
}

/// ssh ended before the socket answered: what to do, from what it said.
fn explain(remote: &RemoteEngine, target: &SshTarget, said: &str) -> String {
    let (host, port, kh) = (&target.host, target.port, target.known_hosts.display());
    let shown = if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    };
    let why = if said.contains("IDENTIFICATION HAS CHANGED") {
        format!(
            "the host key of {shown} is not the one recorded in {kh}: someone may stand between \
             you, or the machine was reinstalled. Only when its owner confirms the new key, remove \
             the old one (`ssh-keygen -R '{shown}' -f {kh}`) and add the new"
        )
    } else if said.contains("Host key verification failed")
        || said.contains("No ") && said.contains("host key is known")
    {
        format!(
            "the host key of {shown} is not in {kh}, and the host never accepts an unknown key: \
             check its fingerprint with the machine's owner, then add it (`ssh-keyscan -p {port} \
             {host} >> {kh}`, or log in once with `ssh -p {port} {host}` and accept it)"
        )
    } else if said.contains("Permission denied") {
        format!(
            "{shown} refused the login{}: load the key into your ssh-agent (`ssh-add`) or name it \
             as `identity` of the engine; the host never asks for a password",
            target
                .user
                .as_deref()
                .map(|u| format!(" of `{u}`"))
                .unwrap_or_default()
        )
    } else {
        format!("ssh to {shown} ended: {}", tail(said))
    };
    format!("engine `{}` ({}): {why}", remote.name, remote.url)
}

/// The last lines ssh wrote, bounded.
fn tail(said: &str) -> String {
    let said = said.trim();
    let tail = &said[said.floor_char_boundary(said.len().saturating_sub(600))..];
    termtext::lines(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> SshTarget {
        SshTarget {
            user: Some("core".into()),
            host: "lab.example".into(),
            port: 2222,
            socket: "/run/podman/podman.sock".into(),
            identity: Some("/home/me/.ssh/id_lab".into()),
            known_hosts: "/home/me/.ssh/known_hosts".into(),
        }
    }

    #[test]
    fn ssh_is_told_everything_and_reads_no_config() {
        let args = arguments(&target(), Path::new("/tmp/x/ssh-lab.sock"));
        let line = args.join(" ");
        assert!(line.starts_with("-F none -n -N -T"), "{line}");
        for needed in [
            "BatchMode=yes",
            "StrictHostKeyChecking=yes",
            "UserKnownHostsFile=/home/me/.ssh/known_hosts",
            "-i /home/me/.ssh/id_lab",
            "-p 2222",
            "-L /tmp/x/ssh-lab.sock:/run/podman/podman.sock",
            "-l core -- lab.example",
        ] {
            assert!(line.contains(needed), "{needed}: {line}");
        }
        assert!(line.ends_with("-- lab.example"), "{line}");
    }

    #[test]
    fn what_ssh_says_becomes_what_to_do() {
        let remote = RemoteEngine {
            name: "lab".into(),
            url: "ssh://core@lab.example:2222/run/podman/podman.sock".into(),
            address: "lab.example".into(),
            ssh: Some(target()),
        };
        let unknown = explain(
            &remote,
            &target(),
            "No ED25519 host key is known for [lab.example]:2222 and you have requested strict checking.\r\nHost key verification failed.\r\n",
        );
        assert!(
            unknown.contains("ssh-keyscan -p 2222 lab.example >> /home/me/.ssh/known_hosts"),
            "{unknown}"
        );
        let changed = explain(
            &remote,
            &target(),
            "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nHost key verification failed.",
        );
        assert!(
            changed.contains("ssh-keygen -R '[lab.example]:2222'"),
            "{changed}"
        );
        let denied = explain(
            &remote,
            &target(),
            "core@lab.example: Permission denied (publickey).",
        );
        assert!(
            denied.contains("ssh-add") && denied.contains("never asks for a password"),
            "{denied}"
        );
    }
}
