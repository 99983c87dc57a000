//! Killing a whole process tree, including descendants that left it.
//!
//! Children start as session leaders (`setsid`), so one `killpg` reaches
//! everything that stayed in the group. Descendants that called `setsid`
//! themselves or were re-parented after their parent died escape both the
//! group and the parent chain, so each run also carries a marker variable
//! in its environment: every process that still has it belongs to the run.
//! One that also clears its environment escapes the marker too; where the
//! host can make cgroups, the run's cgroup ([`super::cgroup`]) holds it.
//! Members get SIGTERM, a short grace period, then SIGKILL, repeated until
//! a scan of /proc finds none (a member may fork while we look).
//!
//! A marker is `<host instance>-<run>`: the watchdog and the start-up
//! sweep find every run of a host instance, dead or alive, by its prefix.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::{KillReport, MARKER_VAR};

/// Time between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_millis(200);

/// Every process (not this one) whose marker names a host instance that
/// `pick` selects, with that instance.
pub fn marked_by(pick: impl Fn(&str) -> bool) -> Vec<(i32, String)> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    let prefix = format!("{MARKER_VAR}=");
    all.flatten()
        .filter(|p| p.pid != me)
        .filter_map(|p| {
            let env = std::fs::read(format!("/proc/{}/environ", p.pid)).ok()?;
            let marker = env
                .split(|b| *b == 0)
                .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))?;
            let marker = String::from_utf8_lossy(marker);
            let owner = marker.split_once('-')?.0.to_string();
            pick(&owner).then_some((p.pid, owner))
        })
        .collect()
}

/// Whether process `pid` carries `marker` (a pid another machine reported
/// names some unrelated process here, or none).
pub fn carries_marker(pid: i32, marker: &str) -> bool {
    has_entry(pid, &marker_entry(marker))
}

fn marker_entry(marker: &str) -> String {
    format!("{MARKER_VAR}={marker}")
}

/// Whether `entry` (`KEY=value`) is in the environment of process `pid`.
fn has_entry(pid: i32, entry: &str) -> bool {
    // environ() parses into a map; reading raw bytes is cheaper and exact.
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == entry.as_bytes()))
}

struct Proc {
    ppid: i32,
    session: i32,
    pgrp: i32,
    zombie: bool,
}

/// Every live process that belongs to the run led by `leader`: in its
/// session or group, below it in the parent chain, or carrying `marker`.
pub fn members(leader: i32, marker: &str) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    let needle = marker_entry(marker);
    let mut table: HashMap<i32, Proc> = HashMap::new();
    let mut marked = Vec::new();
    for process in all.flatten() {
        let Ok(stat) = process.stat() else { continue };
        if stat.pid == me {
            continue;
        }
        if has_entry(stat.pid, &needle) {
            marked.push(stat.pid);
        }
        table.insert(
            stat.pid,
            Proc {
                ppid: stat.ppid,
                session: stat.session,
                pgrp: stat.pgrp,
                zombie: stat.state == 'Z',
            },
        );
    }
    let descends = |mut pid: i32| -> bool {
        for _ in 0..64 {
            match table.get(&pid) {
                Some(p) if p.ppid == leader => return true,
                Some(p) if p.ppid > 1 => pid = p.ppid,
                _ => return false,
            }
        }
        false
    };
    let mut out: Vec<i32> = table
        .iter()
        .filter(|(pid, p)| {
            !p.zombie
                && (**pid == leader
                    || p.session == leader
                    || p.pgrp == leader
                    || descends(**pid)
                    || marked.contains(pid))
        })
        .map(|(pid, _)| *pid)
        .collect();
    out.extend(
        super::cgroup::pids(marker)
            .into_iter()
            .filter(|pid| *pid != me),
    );
    out.sort_unstable();
    out.dedup();
    out
}

/// [`kill_tree`] on a thread of its own: from `Drop` and other places that
/// must not wait out the grace period.
pub fn kill_tree_in_background(leader: i32, marker: String) {
    std::thread::spawn(move || kill_tree(leader, &marker));
}

/// Terminate the run led by `leader`. Blocking: at most the grace period
/// plus a few /proc scans.
pub fn kill_tree(leader: i32, marker: &str) -> KillReport {
    let mut seen = std::collections::BTreeSet::new();
    let first = members(leader, marker);
    let _ = killpg(Pid::from_raw(leader), Signal::SIGTERM);
    for pid in &first {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGTERM);
        seen.insert(*pid);
    }
    let grace_end = Instant::now() + GRACE;
    let mut left = first;
    while !left.is_empty() && Instant::now() < grace_end {
        std::thread::sleep(Duration::from_millis(20));
        left = members(leader, marker);
    }
    let mut forced = std::collections::BTreeSet::new();
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        let _ = killpg(Pid::from_raw(leader), Signal::SIGKILL);
        for pid in &left {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            seen.insert(*pid);
            forced.insert(*pid);
        }
        std::thread::sleep(Duration::from_millis(5));
        left = members(leader, marker);
    }
    super::cgroup::release(marker);
    KillReport {
        killed: seen.len(),
        forced: forced.len(),
    }
}
