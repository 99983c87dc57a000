//! What finding and pinning repositories needs from Linux: `/proc`.

use std::path::{Path, PathBuf};

/// A path to the open `handle` that another program of this host can use
/// (`/proc/<pid>/fd/<n>`): it leads to what was opened, whatever its path
/// leads to now.
pub fn handle_path(handle: &impl std::os::fd::AsRawFd) -> PathBuf {
    PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        handle.as_raw_fd()
    ))
}

/// Whether a live `git` works on the tree `work_tree` whose git directory
/// is `git_dir`: one with its cwd in the tree (a user's), or with that
/// `GIT_DIR`. When the processes cannot be read, one may.
pub fn git_working_on(work_tree: &Path, git_dir: &Path) -> bool {
    let Ok(all) = procfs::process::all_processes() else {
        return true;
    };
    let ours = format!("GIT_DIR={}", git_dir.display());
    all.flatten().any(|p| {
        let is_git = p.stat().is_ok_and(|s| s.comm.starts_with("git"));
        is_git
            && (p.cwd().is_ok_and(|cwd| cwd.starts_with(work_tree))
                || std::fs::read(format!("/proc/{}/environ", p.pid))
                    .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == ours.as_bytes())))
    })
}

/// Open without waiting: a fifo put where a file was would otherwise hold
/// the open until something writes to it.
pub fn without_waiting(options: &mut cap_std::fs::OpenOptions) {
    use cap_std::fs::OpenOptionsExt;
    options.custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits());
}

/// Whether the file is executable (its owner's execute bit).
pub fn executable(meta: &cap_std::fs::Metadata) -> Option<bool> {
    use cap_std::fs::MetadataExt;
    Some(meta.mode() & 0o100 != 0)
}

/// A file with other hard links: its inode (device and number), the same
/// for all of them; `None` for a file with one name.
pub fn shared_inode(meta: &cap_std::fs::Metadata) -> Option<(u64, u64)> {
    use cap_std::fs::MetadataExt;
    (meta.nlink() > 1).then(|| (meta.dev(), meta.ino()))
}

/// The index's view of a file's metadata (git's stat cache).
pub fn stat_of(meta: &cap_std::fs::Metadata) -> gix_index::entry::Stat {
    use cap_std::fs::MetadataExt;
    let time = |secs: i64, nsecs: i64| gix_index::entry::stat::Time {
        secs: secs as u32,
        nsecs: nsecs as u32,
    };
    gix_index::entry::Stat {
        mtime: time(meta.mtime(), meta.mtime_nsec()),
        ctime: time(meta.ctime(), meta.ctime_nsec()),
        dev: meta.dev() as u32,
        ino: meta.ino() as u32,
        uid: meta.uid(),
        gid: meta.gid(),
        size: meta.len() as u32,
    }
}
