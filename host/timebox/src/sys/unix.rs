//! Process trees on Unix: the child leads its own session (one `killpg`
//! reaches its group), joins the run's cgroup where the host can make one,
//! and carries the run's marker; [`crate::tree`] finds and kills all of
//! that, descendants that left the group included.

use std::process::ExitStatus;

use crate::tree::{kill_tree, kill_tree_in_background, members};
use crate::{KillReport, cgroup};

/// One run's process tree.
pub struct Tree {
    leader: i32,
    marker: String,
}

/// Any argument reaches a Unix program as given.
pub fn check_args(_program: &std::path::Path, _args: &[String]) -> std::io::Result<()> {
    Ok(())
}

/// Make `command` start the run's child in a session of its own and,
/// where the host can make one, in the run's own cgroup.
pub fn prepare(command: &mut tokio::process::Command, marker: &str) {
    let procs = cgroup::create(marker);
    // SAFETY: setsid and write are async-signal-safe; the closure only
    // reads the descriptor it owns.
    unsafe {
        command.pre_exec(move || {
            if let Some(procs) = &procs {
                cgroup::join_self(procs)?;
            }
            nix::unistd::setsid()
                .map(drop)
                .map_err(std::io::Error::from)
        });
    }
}

impl Tree {
    /// The tree `child` (started as [`prepare`] made it) leads.
    pub fn adopt(child: &tokio::process::Child, marker: &str) -> std::io::Result<Tree> {
        Tree::of_pid(child.id().map_or(-1, |p| p as i32), marker)
    }

    /// The tree led by process `leader` (a pseudo-terminal's child: it
    /// joins the run's cgroup now, before a shell gets to fork).
    pub fn of_pid(leader: i32, marker: &str) -> std::io::Result<Tree> {
        if leader > 0 {
            cgroup::adopt(marker, leader);
        }
        Ok(Tree {
            leader,
            marker: marker.to_string(),
        })
    }

    /// Whether anything of the tree still runs.
    pub fn has_members(&self) -> bool {
        self.leader > 0 && !members(self.leader, &self.marker).is_empty()
    }

    /// Terminate the tree (SIGTERM, a grace period, SIGKILL). Blocking.
    pub fn kill(&self) -> KillReport {
        kill_tree(self.leader, &self.marker)
    }

    /// [`Tree::kill`] off the caller's thread: from `Drop`.
    pub fn kill_in_background(&self) {
        kill_tree_in_background(self.leader, self.marker.clone());
    }

    /// Let go of what the run held (its cgroup) once nothing of it runs.
    pub fn release(&self) {
        cgroup::release(&self.marker);
    }
}

/// The signal that ended a process, if one did.
pub fn signal(status: &ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

/// When process `pid` started (clock ticks since boot), to tell it from a
/// later process given the same pid.
pub fn start_time(pid: i32) -> Option<u64> {
    Some(
        procfs::process::Process::new(pid)
            .ok()?
            .stat()
            .ok()?
            .starttime,
    )
}
