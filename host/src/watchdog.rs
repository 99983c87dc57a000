//! What outlives the host, so that nothing a call started does.
//!
//! `host serve` forks its watchdog first thing, before any thread or
//! plugin exists: it shares the pages the host has loaded by then instead
//! of loading a second copy of the binary (an exec'd watchdog held 1.7 MiB
//! of its own, mostly relocated data). It leaves the host's process tree at
//! once (a second fork; a client may kill the host and everything under
//! it) in a session of its own, and reads a pipe only the host holds.
//! However the host ends (exit, SIGKILL, the OOM killer, a panic abort)
//! the kernel closes that pipe; the watchdog then kills this host
//! instance's cgroups ([`timebox::cgroup`]) and every process carrying one
//! of its run markers (inside containers too: their processes are in the
//! host's `/proc`; on another machine's engine, by the runs the host
//! recorded there, [`crate::podman::exec::end_in_flight`]), and exits.
//! After a graceful shutdown it finds nothing left.
//!
//! A watchdog can be killed as well: the next host's [`sweep`] kills what a
//! host instance no longer alive left behind.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid, fork, pipe2};

use timebox::cgroup;

/// Off the path to the first answer (a /proc scan): kill what dead hosts
/// left behind.
pub fn sweep_in_background() {
    std::thread::spawn(sweep);
}

/// Fork this host instance's watchdog; its pid. Call it before any other
/// thread starts: a fork copies only the calling thread, and a lock
/// another one held would stay locked in the watchdog.
pub fn start() -> nix::Result<i32> {
    let instance = timebox::instance().to_string();
    // The host keeps `held` open until it ends; the watchdog says its pid
    // on `report` (only its parent, which exits at once, knows it).
    let (watched, held) = pipe2(OFlag::O_CLOEXEC)?;
    let (report_read, report) = pipe2(OFlag::O_CLOEXEC)?;
    // SAFETY: no other thread runs yet (see above).
    match unsafe { fork() }? {
        ForkResult::Parent { child } => {
            drop((watched, report));
            waitpid(child, None)?;
            let mut pid = [0u8; 4];
            std::fs::File::from(report_read)
                .read_exact(&mut pid)
                .map_err(|_| nix::Error::ECHILD)?;
            static HELD: std::sync::OnceLock<OwnedFd> = std::sync::OnceLock::new();
            let _ = HELD.set(held);
            Ok(i32::from_le_bytes(pid))
        }
        ForkResult::Child => {
            drop((held, report_read));
            // Its own session keeps it out of a kill aimed at the host's
            // process group; the second fork out of the host's tree.
            let _ = nix::unistd::setsid();
            // SAFETY: still the only thread.
            match unsafe { fork() } {
                Ok(ForkResult::Child) => {}
                // SAFETY: ends this process at once, running nothing of the host's.
                _ => unsafe { nix::libc::_exit(0) },
            }
            forget_environment();
            rename(&instance);
            keep_only_its_files(&[watched.as_raw_fd(), report.as_raw_fd()]);
            // It waits, maybe for days: nothing it ran to start is needed
            // now. Before its pid is said, as that reads /proc/self/smaps
            // through a file of its own for a while.
            crate::platform::release_startup_pages();
            // Its pid is said once it is what it will stay: the host logs
            // it as started, and anyone may look at it from then on.
            let _ = std::fs::File::from(report).write_all(&std::process::id().to_le_bytes());
            watch(&instance, watched)
        }
    }
}

/// The watchdog needs nothing of the host's environment but where
/// temporary files go, and keeps none of it: a call's processes are told
/// apart by theirs, and the host's may hold secrets. Not even in
/// `/proc/<pid>/environ`, which shows the block the process started with
/// (a fork's is its parent's): that block is blanked.
fn forget_environment() {
    let tmp = std::env::temp_dir();
    for (key, _) in std::env::vars_os() {
        // SAFETY: the watchdog's only thread.
        unsafe { std::env::remove_var(key) };
    }
    if let Some((start, end)) = started_with(ENVIRONMENT) {
        // SAFETY: the strings the process started with, on its own stack;
        // nothing points into them now that every variable is removed.
        unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
    }
    // SAFETY: as above.
    unsafe { std::env::set_var("TMPDIR", tmp) };
}

/// Say what it is where `ps` and `/proc/<pid>/cmdline` look, instead of
/// the host's command line it forked with (which names the host's
/// folders: it would pass for the host): `host watchdog --instance <id>`,
/// cut to the room the command line had.
fn rename(instance: &str) {
    let Some((start, end)) = started_with(ARGUMENTS) else {
        return;
    };
    let name = format!("host watchdog --instance {instance}");
    let room = end - start;
    let mut block = vec![0u8; room];
    let kept = name.len().min(room - 1);
    block[..kept].copy_from_slice(&name.as_bytes()[..kept]);
    // SAFETY: the command line the process started with, on its own
    // stack; the watchdog reads its arguments no more.
    unsafe { std::ptr::copy_nonoverlapping(block.as_ptr(), start as *mut u8, room) };
}

/// The fields of /proc/self/stat where the arguments (`arg_start`,
/// `arg_end`) and the environment (`env_start`, `env_end`) the process
/// started with begin.
const ARGUMENTS: usize = 48;
const ENVIRONMENT: usize = 50;

/// The range of /proc/self/stat's fields `field` and `field + 1`: where
/// the [`ARGUMENTS`] or the [`ENVIRONMENT`] the process started with lie
/// in its memory.
fn started_with(field: usize) -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name (in parentheses, which may hold spaces) come
    // the fields from the third on.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let start: usize = fields.get(field - 3)?.parse().ok()?;
    let end: usize = fields.get(field + 1 - 3)?.parse().ok()?;
    (start < end).then_some((start, end))
}

/// Let go of the host's files: stdin and stdout are the MCP channel, never
/// the watchdog's (the client must see the host's end when it comes), nor
/// anything else the host had open when it forked; only stderr and `keep`.
fn keep_only_its_files(keep: &[i32]) {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        let _ = nix::unistd::dup2_stdin(&null);
        let _ = nix::unistd::dup2_stdout(&null);
    }
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in open.into_iter().filter(|fd| *fd > 2 && !keep.contains(fd)) {
        let _ = nix::unistd::close(fd);
    }
}

/// The watchdog itself: wait for the host's end, then end its runs.
fn watch(instance: &str, watched: OwnedFd) -> ! {
    let mut buf = [0u8; 64];
    let mut pipe = std::fs::File::from(watched);
    while matches!(pipe.read(&mut buf), Ok(n) if n > 0) {}
    let processes = end_instance(instance);
    if processes > 0 {
        eprintln!(
            "mcp-host watchdog: host {instance} is gone; killed {processes} processes of its calls"
        );
    }
    std::process::exit(0)
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
