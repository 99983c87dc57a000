//! Another machine's Podman reached the way Podman users reach one: over
//! ssh. An [`IsolatedEngine`] listening on a unix socket only, and
//! Debian's `sshd` in the engine's network namespace (listening on the
//! private /30 the test made, nowhere else), with a host key, a client
//! key and a known_hosts file of the test's own.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::*;
use crate::isolated_engine::IsolatedEngine;

/// sshd's port in the engine's namespace.
const PORT: u16 = 2222;

pub struct SshEngine {
    pub engine: IsolatedEngine,
    sshd: std::process::Child,
    /// The client's key, and a known_hosts holding the engine's host key.
    pub identity: PathBuf,
    pub known_hosts: PathBuf,
    /// A known_hosts that does not know the engine.
    pub strangers: PathBuf,
    pub user: String,
}

impl SshEngine {
    /// `None` (a skip, a failure under CI=true) without Podman, iproute2
    /// or OpenSSH's server and client.
    pub fn start(image: &str) -> Option<SshEngine> {
        Self::start_with(image, false)
    }

    /// The same with the engine's storage on a disk of its own.
    #[allow(dead_code)] // the cofer bench's
    pub fn start_on_own_disk(image: &str) -> Option<SshEngine> {
        Self::start_with(image, true)
    }

    fn start_with(image: &str, own_disk: bool) -> Option<SshEngine> {
        if !["ssh", "ssh-keygen", "/usr/sbin/sshd"]
            .iter()
            .all(|p| require_program(p, "install openssh-server and openssh-client"))
        {
            return None;
        }
        let engine = IsolatedEngine::start_on_socket(image, own_disk)?;
        let keys = engine.dir().join("ssh");
        std::fs::create_dir(&keys).unwrap();
        let keygen = |file: &str| {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C", "cofer-test", "-f"])
                .arg(keys.join(file))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::read_to_string(keys.join(format!("{file}.pub"))).unwrap()
        };
        let host_key = keygen("host_key");
        let client_key = keygen("id_ed25519");
        std::fs::write(keys.join("authorized_keys"), &client_key).unwrap();
        let known_hosts = keys.join("known_hosts");
        let host_key = host_key
            .split_whitespace()
            .take(2)
            .collect::<Vec<_>>()
            .join(" ");
        std::fs::write(&known_hosts, format!("[{}]:{PORT} {host_key}\n", engine.ip)).unwrap();
        let strangers = keys.join("known_hosts_without_it");
        std::fs::write(&strangers, "").unwrap();
        let config = keys.join("sshd_config");
        std::fs::write(
            &config,
            format!(
                "Port {PORT}\nListenAddress {ip}\nHostKey {k}/host_key\nPidFile none\n\
                 AuthorizedKeysFile {k}/authorized_keys\nStrictModes no\nUsePAM no\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
                 PermitRootLogin prohibit-password\nAllowStreamLocalForwarding yes\n\
                 AllowTcpForwarding yes\nX11Forwarding no\n",
                ip = engine.ip,
                k = keys.display()
            ),
        )
        .unwrap();
        // sshd's privilege separation folder, as its package makes it.
        let _ = std::fs::create_dir_all("/run/sshd");
        let sshd = spawn_sshd(&engine, &config);
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        Some(SshEngine {
            identity: keys.join("id_ed25519"),
            known_hosts,
            strangers,
            user,
            sshd,
            engine,
        })
    }

    /// Stop sshd and every session it serves: the machine can no longer be
    /// reached (its engine and containers keep running there).
    pub fn stop_sshd(&mut self) {
        let _ = Command::new("pkill")
            .args(["-KILL", "-P", &self.sshd.id().to_string()])
            .output();
        let _ = self.sshd.kill();
        let _ = self.sshd.wait();
    }

    /// Start sshd again (after [`Self::stop_sshd`]).
    pub fn start_sshd(&mut self) {
        self.sshd = spawn_sshd(&self.engine, &self.engine.dir().join("ssh/sshd_config"));
    }

    /// `ssh://user@address:port/path/to/the/engine's/podman.sock`.
    pub fn url(&self) -> String {
        let socket = self.engine.address.trim_start_matches("unix://");
        format!("ssh://{}@{}:{PORT}{socket}", self.user, self.engine.ip)
    }

    /// The policy's table for this engine, checked against `known_hosts`.
    pub fn table(&self, known_hosts: &std::path::Path) -> String {
        format!(
            "{{ url = \"{}\", identity = \"{}\", known_hosts = \"{}\" }}",
            self.url(),
            self.identity.display(),
            known_hosts.display()
        )
    }

    /// sshd's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.engine.dir().join("ssh/sshd.log")).unwrap_or_default()
    }
}

impl Drop for SshEngine {
    fn drop(&mut self) {
        self.stop_sshd();
    }
}

/// sshd in `engine`'s network namespace, once it listens.
fn spawn_sshd(engine: &IsolatedEngine, config: &std::path::Path) -> std::process::Child {
    let log = engine.dir().join("ssh/sshd.log");
    let sshd = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", engine.netns))
        .args(["/usr/sbin/sshd", "-D", "-e", "-f"])
        .arg(config)
        .stdout(std::process::Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap(),
        )
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect((engine.ip.as_str(), PORT)).is_err() {
        assert!(
            Instant::now() < deadline,
            "sshd never listened: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sshd
}
