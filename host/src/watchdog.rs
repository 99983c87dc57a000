//! What outlives the host, so that nothing a call started does.
//!
//! `host serve` starts `host watchdog` (this same binary) in a session of
//! its own, its stdin the read end of a pipe only the host holds. However
//! the host ends (exit, SIGKILL, the OOM killer, a panic abort) the kernel
//! closes that pipe; the watchdog then kills this host instance's cgroups
//! ([`timebox::cgroup`]) and every process carrying one of its run
//! markers (inside containers too: their processes are in the host's
//! `/proc`; on another machine's engine, by the runs the host recorded
//! there, [`crate::podman::exec::end_in_flight`]), and exits. After a
//! graceful shutdown it finds nothing left.
//!
//! It leaves the host's process tree at once (a client may kill the host
//! and everything under it). A watchdog can be killed as well: the next
//! host's [`sweep`] kills what a host instance no longer alive left behind.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use timebox::cgroup;

/// Off the path to the first answer (they cost a process start and a
/// /proc scan): sweep what dead hosts left, then start this host's
/// watchdog, whose pipe is then held until the process ends.
pub fn start_in_background() {
    static WATCHDOG: std::sync::OnceLock<Child> = std::sync::OnceLock::new();
    std::thread::spawn(|| {
        sweep();
        match start() {
            Ok(child) => {
                let _ = WATCHDOG.set(child);
            }
            Err(e) => tracing::warn!(
                "no watchdog ({e}): if the host is killed, its calls' processes may survive it"
            ),
        }
    });
}

/// Start this host instance's watchdog. Keep the child: dropping it closes
/// the pipe, and the watchdog then ends every run of this host.
fn start() -> std::io::Result<Child> {
    let exe = std::env::current_exe()?;
    let mut command = Command::new(exe);
    command
        .args(["watchdog", "--instance", timebox::instance()])
        // It needs nothing of the host's environment (and is then not
        // mistaken for something a call started) but where its temporary
        // files are.
        .env_clear()
        .env("TMPDIR", std::env::temp_dir())
        .stdin(Stdio::piped())
        // stdout is the MCP channel: never the watchdog's.
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: setsid is async-signal-safe. Its own session keeps it out of
    // a kill aimed at the host's process group.
    unsafe {
        command.pre_exec(|| {
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
    command.spawn()
}

/// The watchdog itself: wait for the host's end, then end its runs.
pub fn run(instance: &str) -> ExitCode {
    // Out of the host's process tree: a client that ends the host by
    // killing it and every process under it (opencode does) must not reach
    // the watchdog. The process the host started exits at once; its child,
    // re-parented, is the watchdog, with the same pipe for stdin.
    // SAFETY: nothing but this thread runs yet (no runtime was started).
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Parent { .. }) => return ExitCode::SUCCESS,
        Ok(nix::unistd::ForkResult::Child) => {}
        Err(e) => eprintln!("mcp-host watchdog: cannot leave the host's process tree: {e}"),
    }
    // It waits, maybe for days: nothing it ran to start is needed now.
    crate::platform::release_startup_pages();
    let mut buf = [0u8; 64];
    let mut stdin = std::io::stdin();
    while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
    let processes = end_instance(instance);
    if processes > 0 {
        eprintln!(
            "mcp-host watchdog: host {instance} is gone; killed {processes} processes of its calls"
        );
    }
    ExitCode::SUCCESS
}

/// Kill what a host instance started: its cgroups, then (for processes
/// outside them: containers, machines without cgroups) its markers; how
/// many marked processes were left.
fn end_instance(instance: &str) -> usize {
    if let Some(dir) = cgroup::instance_dir(instance) {
        cgroup::kill_and_remove(&dir);
    }
    let killed = kill_marked(|owner| owner == instance);
    // The socket of the Podman service it started (killed just now).
    let _ = std::fs::remove_dir_all(crate::podman::service_dir(instance));
    crate::caps::containers::mounts::remove_binds(instance);
    killed + end_remote_runs(instance)
}

/// The runs `instance` had on other machines' engines, killed there.
fn end_remote_runs(instance: &str) -> usize {
    let dir = crate::podman::exec::in_flight_dir(instance);
    if !dir.exists() {
        return 0;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return 0;
    };
    runtime.block_on(crate::podman::exec::end_in_flight(&dir))
}

/// SIGKILL every process whose marker names an instance `pick` selects,
/// until none is left (they may fork meanwhile); how many were killed.
fn kill_marked(pick: impl Fn(&str) -> bool) -> usize {
    let mut killed = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let found = timebox::marked_by(&pick);
        if found.is_empty() {
            break;
        }
        for (pid, _) in found {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            killed.insert(pid);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    killed.len()
}

/// At start-up: kill what host instances that are gone left behind (their
/// watchdog was killed too), and say what was found.
fn sweep() {
    let cgroups = cgroup::sweep();
    let mut processes = kill_marked(|owner| !timebox::instance_alive(owner));
    processes += dead_instances("mcp-host-remote-runs-")
        .iter()
        .map(|instance| end_remote_runs(instance))
        .sum::<usize>();
    remove_dead_service_dirs();
    for instance in dead_instances(crate::caps::containers::mounts::BINDS_PREFIX) {
        crate::caps::containers::mounts::remove_binds(&instance);
    }
    if processes > 0 || !cgroups.is_empty() {
        tracing::warn!(
            processes,
            cgroups = cgroups.len(),
            "killed what earlier host instances left running"
        );
    }
}

/// The Podman socket directories of host instances that are gone.
fn remove_dead_service_dirs() {
    for instance in dead_instances("mcp-host-podman-") {
        let _ = std::fs::remove_dir_all(crate::podman::service_dir(&instance));
    }
}

/// Host instances that are gone and left a `<prefix><instance>` folder in
/// the temporary folder.
fn dead_instances(prefix: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| Some(e.file_name().to_str()?.strip_prefix(prefix)?.to_string()))
        .filter(|instance| is_instance(instance) && !timebox::instance_alive(instance))
        .collect()
}

/// Whether `name` is a host instance as [`timebox::instance`] writes it
/// (`<pid>.<start time>`), nothing else.
fn is_instance(name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    name.split_once('.')
        .is_some_and(|(pid, started)| digits(pid) && digits(started))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_instances_that_are_gone_left_is_found_by_their_name() {
        assert!(is_instance("12.345"));
        for not in ["12", "12.", ".5", "1.2.3", "a.b", "../x"] {
            assert!(!is_instance(not), "{not}");
        }
        let gone = format!("1.{}", std::process::id());
        let dir = std::env::temp_dir().join(format!("mcp-host-sweep-test-{gone}"));
        std::fs::create_dir_all(&dir).unwrap();
        let found = dead_instances("mcp-host-sweep-test-");
        let _ = std::fs::remove_dir(&dir);
        assert!(found.contains(&gone), "{found:?}");
    }
}
