//! A second Podman engine that does not share this machine's files, for
//! tests and benchmarks of engines on other machines: a `podman system
//! service` in its own mount namespace (the temporary folder hidden under
//! a tmpfs), its own network namespace (joined by a veth pair on a private
//! /30) and its own storage, listening on TCP at its namespace's address.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::*;

/// The second engine; everything on it and around it goes when dropped.
pub struct IsolatedEngine {
    pub address: String,
    netns: String,
    veth: String,
    service: std::process::Child,
    /// Its storage and config, outside the hidden temporary folder.
    dir: tempfile::TempDir,
}

impl IsolatedEngine {
    /// Started with `image` loaded into it; `None` (a skip, a failure
    /// under CI=true) without Podman, `ip`, `unshare` and `nsenter`.
    pub fn start(image: &str) -> Option<IsolatedEngine> {
        if !podman_ready()
            || !["ip", "unshare", "nsenter"]
                .iter()
                .all(|p| require_program(p, "install iproute2 and util-linux"))
        {
            return None;
        }
        // Names and a /30 of 10.231.x.0/24 of this engine's own (several
        // tests of one process may start one each).
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nth = STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let tag = (std::process::id() + 83 * nth) % 250;
        let (netns, veth, peer) = (
            format!("mcpt{tag}"),
            format!("mcpt{tag}h"),
            format!("mcpt{tag}n"),
        );
        let (host_ip, engine_ip) = (format!("10.231.{tag}.1"), format!("10.231.{tag}.2"));
        let ip = |args: &[&str]| {
            let out = Command::new("ip").args(args).output().unwrap();
            assert!(
                out.status.success(),
                "ip {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let _ = Command::new("ip").args(["netns", "del", &netns]).output();
        let _ = Command::new("ip").args(["link", "del", &veth]).output();
        ip(&["netns", "add", &netns]);
        ip(&["link", "add", &veth, "type", "veth", "peer", "name", &peer]);
        ip(&["link", "set", &peer, "netns", &netns]);
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &veth]);
        ip(&["link", "set", &veth, "up"]);
        for args in [
            vec!["addr", "add", &format!("{engine_ip}/30"), "dev", &peer],
            vec!["link", "set", &peer, "up"],
            vec!["link", "set", "lo", "up"],
        ] {
            ip(&[&["netns", "exec", &netns, "ip"][..], &args].concat());
        }
        let dir = tempfile::Builder::new()
            .prefix("mcp-test-engine-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let conf = dir.path().join("containers.conf");
        std::fs::copy(containers_conf(), &conf).unwrap();
        let address = format!("tcp://{engine_ip}:8899");
        let root = dir.path().display();
        // `nsenter --net`, not `ip netns exec`: that one remounts /sys, and
        // the cgroup mounts runc needs would be gone.
        let script = format!(
            "mount --make-rprivate / && mount -t tmpfs tmpfs {tmp} && \
             exec podman --root {root}/root --runroot {root}/run --tmpdir {root}/tmp \
             system service --time 0 {address}",
            tmp = std::env::temp_dir().display()
        );
        let service = Command::new("unshare")
            .args([
                "-m",
                "nsenter",
                &format!("--net=/run/netns/{netns}"),
                "sh",
                "-c",
                &script,
            ])
            .env("CONTAINERS_CONF", &conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("service.log")).unwrap())
            .spawn()
            .unwrap();
        let engine = IsolatedEngine {
            address,
            netns,
            veth,
            service,
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect((engine_ip.as_str(), 8899)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the isolated engine never listened: {}",
                std::fs::read_to_string(engine.dir.path().join("service.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // No registry: the image goes over as `podman save | load`.
        let saved = engine.dir.path().join("image.tar");
        podman(&["save", "--output", &saved.to_string_lossy(), image]);
        engine.remote(&["load", "--input", &saved.to_string_lossy()]);
        Some(engine)
    }

    /// `podman --remote` on this engine; its stdout.
    pub fn remote(&self, args: &[&str]) -> String {
        let out = Command::new("podman")
            .args(["--remote", "--url", &self.address])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "podman {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for IsolatedEngine {
    fn drop(&mut self) {
        let _ = Command::new("podman")
            .args([
                "--remote",
                "--url",
                &self.address,
                "rm",
                "--all",
                "--force",
                "--time",
                "0",
            ])
            .output();
        let _ = self.service.kill();
        let _ = self.service.wait();
        let _ = Command::new("ip")
            .args(["link", "del", &self.veth])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
        // Podman leaves its storage mounted until its own cleanup.
        let _ = Command::new("umount")
            .arg("-R")
            .arg(self.dir.path().join("root/overlay"))
            .output();
    }
}
