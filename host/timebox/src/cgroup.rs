//! Each run in a cgroup of its own, where the host can make one.
//!
//! Sessions, process groups and the environment marker all lose a process
//! that calls `setsid` and clears its environment (`env -i`). A cgroup does
//! not: every descendant stays in it whatever it does, and `cgroup.kill`
//! ends them all at once. The host makes one cgroup v2 directory for itself
//! (`<its own cgroup>/mcp-host-<instance>`) and one per run below it. Where
//! cgroup v2 is not mounted or not writable (an unprivileged user without a
//! delegated subtree), [`root`] is `None` and runs fall back to the session
//! and marker scan of [`super::tree`].
//!
//! The host's watchdog (`host/src/watchdog.rs`) kills this instance's cgroups when
//! the host dies; a later host sweeps what a dead one left ([`sweep`]).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use crate::instance;

/// Prefix of a host instance's cgroup directory.
const HOST_DIR: &str = "mcp-host-";

/// This host instance's cgroup, made on first use; `None` where the host
/// cannot make one.
pub fn root() -> Option<&'static Path> {
    static ROOT: OnceLock<Option<PathBuf>> = OnceLock::new();
    ROOT.get_or_init(|| {
        let dir = instance_dir(instance())?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                tracing::debug!(dir = %dir.display(), error = %e, "no cgroup for runs; using sessions and markers");
                return None;
            }
        }
        if !dir.join("cgroup.kill").exists() {
            // Before Linux 5.14: no way to kill a whole cgroup at once.
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(dir)
    })
    .as_deref()
}

/// Where host instance `id` has (or would have) its cgroup.
pub fn instance_dir(id: &str) -> Option<PathBuf> {
    Some(parent()?.join(format!("{HOST_DIR}{id}")))
}

/// The cgroup v2 directory the host runs in (where its own one goes).
fn parent() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split(' ').next() == Some("cgroup2")).then(|| left.split(' ').nth(4))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(Path::new(mount).join(path.trim_start_matches('/')))
}

fn run_dir(marker: &str) -> Option<PathBuf> {
    Some(root()?.join(format!("run-{marker}")))
}

/// Make the run's cgroup; the open `cgroup.procs` a child writes `0` to
/// before it executes ([`join_self`]), so it never runs outside.
pub fn create(marker: &str) -> Option<OwnedFd> {
    let dir = run_dir(marker)?;
    std::fs::create_dir(&dir).ok()?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .ok()?;
    Some(file.into())
}

/// In a just-forked child: move itself into the run's cgroup.
/// Async-signal-safe (one `write`).
pub fn join_self(procs: &OwnedFd) -> std::io::Result<()> {
    nix::unistd::write(procs, b"0")
        .map(drop)
        .map_err(std::io::Error::from)
}

/// Move `pid` into the run's cgroup, for children started by code that
/// offers no hook before `exec` (a pseudo-terminal).
pub fn adopt(marker: &str, pid: i32) {
    if let Some(procs) = create(marker) {
        let _ = nix::unistd::write(&procs, pid.to_string().as_bytes());
    }
}

/// The processes in the run's cgroup.
pub fn pids(marker: &str) -> Vec<i32> {
    let Some(dir) = run_dir(marker) else {
        return Vec::new();
    };
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Kill whatever is left in the run's cgroup and remove it.
pub fn release(marker: &str) {
    if let Some(dir) = run_dir(marker) {
        kill_and_remove(&dir);
    }
}

/// `cgroup.kill` on `dir` and every cgroup below it, then remove them,
/// deepest first, once their processes are gone (at most a second).
pub fn kill_and_remove(dir: &Path) {
    if !dir.is_dir() {
        return;
    }
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    let mut dirs = Vec::new();
    collect_dirs(dir, &mut dirs);
    for _ in 0..100 {
        dirs.retain(|d| std::fs::remove_dir(d).is_err() && d.exists());
        if dirs.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `dir` and the cgroups below it, children before parents.
fn collect_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                collect_dirs(&entry.path(), out);
            }
        }
    }
    out.push(dir.to_path_buf());
}

/// Cgroups of host instances that are gone, beside ours: killed and
/// removed. Their paths.
pub fn sweep() -> Vec<PathBuf> {
    let Some(parent) = parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    let mut swept = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(owner) = name.strip_prefix(HOST_DIR)
            && !crate::instance_alive(owner)
        {
            kill_and_remove(&entry.path());
            swept.push(entry.path());
        }
    }
    swept
}
