//! A second Podman engine that does not share this machine's files, for
//! tests and benchmarks of engines on other machines: a `podman system
//! service` in its own mount namespace (the temporary folder hidden under
//! a tmpfs), its own network namespace (joined by a veth pair on a private
//! /30) and its own storage, listening on TCP at its namespace's address.
//! For benchmarks its storage can sit on a disk of its own
//! ([`IsolatedEngine::start_on_own_disk`]), as another machine's does.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::harness::*;

/// The second engine; everything on it and around it goes when dropped.
pub struct IsolatedEngine {
    /// The URL `podman --remote` reaches it at: `tcp://` on its address,
    /// or `unix://` for one that only listens on a socket (reached by the
    /// host over ssh, [`crate::ssh_engine`]).
    pub address: String,
    /// Its network namespace's name and address.
    pub netns: String,
    pub ip: String,
    veth: String,
    service: std::process::Child,
    /// How its service is started.
    script: String,
    /// Its storage and config, outside the hidden temporary folder.
    dir: tempfile::TempDir,
    /// Its storage's own disk, if it has one.
    pub disk: Option<OwnDisk>,
}

/// A file system of its own, for benchmarks: an ext4 made with
/// `mkfs.ext4`'s defaults on a loop device over a sparse file in /var/tmp,
/// unmounted and deleted when dropped.
pub struct OwnDisk {
    pub path: std::path::PathBuf,
    /// Holds the image file; dropped after the unmount.
    _image: tempfile::TempDir,
}

impl OwnDisk {
    /// `None` (a skip, a failure under CI=true) without `mkfs.ext4`.
    pub fn new() -> Option<OwnDisk> {
        if !require_program("mkfs.ext4", "install e2fsprogs") {
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("mcp-bench-disk-")
            .tempdir_in("/var/tmp")
            .unwrap();
        let (image, path) = (dir.path().join("disk.img"), dir.path().join("disk"));
        std::fs::create_dir(&path).unwrap();
        // Sparse: only what is written takes room.
        run(&["truncate", "-s", "8G", &image.to_string_lossy()]);
        run(&["mkfs.ext4", "-q", "-F", &image.to_string_lossy()]);
        run(&[
            "mount",
            "-o",
            "loop",
            &image.to_string_lossy(),
            &path.to_string_lossy(),
        ]);
        Some(OwnDisk { path, _image: dir })
    }
}

impl Drop for OwnDisk {
    fn drop(&mut self) {
        // The loop device goes with it (`mount -o loop` sets autoclear).
        let _ = Command::new("umount").arg(&self.path).output();
    }
}

impl IsolatedEngine {
    /// Started with `image` loaded into it; `None` (a skip, a failure
    /// under CI=true) without Podman, `ip`, `unshare` and `nsenter`.
    pub fn start(image: &str) -> Option<IsolatedEngine> {
        Self::start_with(image, None, false)
    }

    /// Listening on a unix socket in its folder only (not on TCP); its
    /// storage on a disk of its own when `own_disk` (benchmarks).
    pub fn start_on_socket(image: &str, own_disk: bool) -> Option<IsolatedEngine> {
        let disk = if own_disk {
            Some(OwnDisk::new()?)
        } else {
            None
        };
        Self::start_with(image, disk, true)
    }

    /// Started with its storage on a file system of its own: an ext4 made
    /// with `mkfs.ext4`'s defaults on a loop device. Another machine's disk
    /// does not carry this one's state: here `/` is an ext4 without a
    /// journal, where creating a file scans past every inode freed in the
    /// last minutes (`recently_deleted`), so each 10,000 files the tests
    /// and benches delete make the next 10,000 created there 20-40x slower.
    #[allow(dead_code)] // the cofer bench's; the tests need no disk of their own
    pub fn start_on_own_disk(image: &str) -> Option<IsolatedEngine> {
        Self::start_with(image, Some(OwnDisk::new()?), false)
    }

    fn start_with(image: &str, disk: Option<OwnDisk>, socket: bool) -> Option<IsolatedEngine> {
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
        let ip = |args: &[&str]| run(&[&["ip"][..], args].concat());
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
        let address = if socket {
            format!("unix://{}/podman.sock", dir.path().display())
        } else {
            format!("tcp://{engine_ip}:8899")
        };
        let root = disk.as_ref().map_or(dir.path(), |d| &d.path).display();
        // `nsenter --net`, not `ip netns exec`: that one remounts /sys, and
        // the cgroup mounts runc needs would be gone.
        let script = format!(
            "mount --make-rprivate / && mount -t tmpfs tmpfs {tmp} && \
             exec podman --root {root}/root --runroot {root}/run --tmpdir {root}/tmp \
             system service --time 0 {address}",
            tmp = std::env::temp_dir().display()
        );
        let mut engine = IsolatedEngine {
            address,
            netns,
            ip: engine_ip,
            veth,
            service: Command::new("true").spawn().unwrap(),
            script,
            dir,
            disk,
        };
        engine.start_service();
        // No registry: the image goes over as `podman save | load`.
        let saved = engine.dir.path().join("image.tar");
        podman(&["save", "--output", &saved.to_string_lossy(), image]);
        engine.remote(&["load", "--input", &saved.to_string_lossy()]);
        Some(engine)
    }

    /// Start its service, and wait until it answers.
    fn start_service(&mut self) {
        let conf = self.dir.path().join("containers.conf");
        self.service = Command::new("unshare")
            .args([
                "-m",
                "nsenter",
                &format!("--net=/run/netns/{}", self.netns),
                "sh",
                "-c",
                &self.script,
            ])
            .env("CONTAINERS_CONF", &conf)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join("service.log")).unwrap())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "the isolated engine never answered: {}",
                std::fs::read_to_string(self.dir.path().join("service.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn answers(&self) -> bool {
        Command::new("podman")
            .args(["--remote", "--url", &self.address, "version"])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Its own folder (storage, config, logs): outside every test's
    /// workspace.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Environment `id`'s (of the repository `source`) checkpoint made as
    /// `image` through `client`, and `file` as the image holds it on this
    /// engine (the image removed).
    #[allow(dead_code)] // the tests'; the cofer bench makes no checkpoint
    pub async fn checkpoint_holds(
        &self,
        client: &Client,
        source: &str,
        id: &str,
        image: &str,
        file: &str,
    ) -> String {
        let r = client
            .call(
                "environment_checkpoint",
                serde_json::json!({"environment_source": source, "environment_id": id,
                                   "destination": image}),
            )
            .await;
        assert!(!is_error(&r), "{r:?}");
        let held = self.remote(&["run", "--rm", image, "cat", file]);
        self.remote(&["rmi", image]);
        held
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
        let root = self.disk.as_ref().map_or(self.dir.path(), |d| &d.path);
        let _ = Command::new("umount")
            .arg("-R")
            .arg(root.join("root/overlay"))
            .output();
    }
}

/// Run `argv`, which must succeed.
fn run(argv: &[&str]) {
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
