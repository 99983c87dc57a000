//! What the host needs from Unix (Linux): its standard streams as
//! non-blocking pipes, its signals, its file limit, and the watchdog that
//! ends a dead host's process trees.

use std::os::fd::AsFd;

use tokio::net::unix::pipe;

use crate::stdio::{Reader, Writer};

/// stdin and stdout, driven by the event loop when they are pipes,
/// sockets (Claude Code and Gemini CLI start servers on sockets) or
/// terminals; a blocking reader thread is the fallback for files, and it
/// delays the exit (a SIGINT took 106 ms to end the host on a socket).
pub fn std_streams() -> (Reader, Writer) {
    let stdin = std::io::stdin();
    let reader: Reader = if let Ok(pipe) = dup(stdin.as_fd()).and_then(pipe::Receiver::from_file) {
        Box::new(pipe)
    } else if let Some(socket) = socket(stdin.as_fd()) {
        Box::new(socket)
    } else if let Some(tty) = terminal(stdin.as_fd(), false)
        .and_then(|file| pipe::Receiver::from_file_unchecked(file).ok())
    {
        Box::new(tty)
    } else {
        Box::new(tokio::io::stdin())
    };
    let stdout = std::io::stdout();
    let writer: Writer = if let Ok(pipe) = dup(stdout.as_fd()).and_then(pipe::Sender::from_file) {
        Box::new(pipe)
    } else if let Some(socket) = socket(stdout.as_fd()) {
        Box::new(socket)
    } else if let Some(tty) =
        terminal(stdout.as_fd(), true).and_then(|file| pipe::Sender::from_file_unchecked(file).ok())
    {
        Box::new(tty)
    } else {
        Box::new(tokio::io::stdout())
    };
    (reader, writer)
}

/// The terminal `fd` is, opened again non-blocking: a file description
/// of our own, so the shell sharing the terminal keeps its blocking one.
/// tokio's pipe types read and write it as they do a pipe (a terminal
/// polls like one).
fn terminal(fd: std::os::fd::BorrowedFd<'_>, write: bool) -> Option<std::fs::File> {
    use std::io::IsTerminal;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    if !fd.is_terminal() {
        return None;
    }
    let flags = nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY;
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(flags.bits())
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()
}

fn dup(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<std::fs::File> {
    Ok(std::fs::File::from(fd.try_clone_to_owned()?))
}

/// A copy of `fd` as a non-blocking stream, when it is a socket.
fn socket(fd: std::os::fd::BorrowedFd<'_>) -> Option<tokio::net::UnixStream> {
    use std::os::unix::fs::FileTypeExt;
    let file = dup(fd).ok()?;
    if !file.metadata().ok()?.file_type().is_socket() {
        return None;
    }
    let stream = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
    stream.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(stream).ok()
}

/// The first of SIGTERM, SIGINT and SIGHUP (what clients send when a chat
/// ends or an editor reloads), by name.
pub async fn shutdown_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    let mut hup = signal(SignalKind::hangup()).expect("SIGHUP handler");
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}

/// Start-up is over: let go of the pages of files the host has mapped only
/// to read (its own code above all: start-up ran code nothing runs again)
/// that hold nothing private. What runs later maps its pages again from
/// the page cache (a minor fault), as it would after the kernel reclaimed
/// them, which it may do with such pages at any time; the rest stops
/// counting as the host's memory. A mapping with private pages (relocated
/// data looks read-only too) is left alone: those would be lost.
/// And the allocator returns what start-up freed (compiling plugins and
/// building indexes leave tens of MiB free in its arenas).
pub fn release_startup_pages() {
    let freed = return_free_heap();
    let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
        return;
    };
    let mut released = 0;
    for (start, end) in read_only_file_mappings(&smaps) {
        let (Some(at), Some(len)) = (
            std::ptr::NonNull::new(start as *mut std::ffi::c_void),
            std::num::NonZeroUsize::new(end - start),
        ) else {
            continue;
        };
        // SAFETY: a read-only mapping of a file with no private pages:
        // dropping its pages loses nothing; they are read again on use.
        if unsafe {
            nix::sys::mman::madvise(at, len.get(), nix::sys::mman::MmapAdvise::MADV_DONTNEED)
        }
        .is_ok()
        {
            released += len.get();
        }
    }
    tracing::info!(
        mapped_bytes = released,
        heap_returned = freed,
        "start-up over: read-only file pages released"
    );
}

/// At most one heap arena per core (glibc makes up to eight per core, one
/// per thread that allocates at once): what start-up frees in many arenas
/// stays pinned there by a few live allocations, which kept a cold start's
/// host at 33 MiB private instead of 20 (five plugins compiled). Call it
/// before any other thread starts.
#[cfg(target_env = "gnu")]
pub fn limit_heap_arenas() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: mallopt only changes a setting of the allocator.
    unsafe { nix::libc::mallopt(nix::libc::M_ARENA_MAX, cores as i32) };
}

/// Other C libraries keep their own arenas.
#[cfg(not(target_env = "gnu"))]
pub fn limit_heap_arenas() {}

/// Give the free memory of the allocator's arenas back to the system
/// (glibc keeps it for reuse, in every thread's arena); whether it did.
#[cfg(target_env = "gnu")]
pub fn return_free_heap() -> bool {
    // SAFETY: malloc_trim only returns free memory; it may be called any time.
    unsafe { nix::libc::malloc_trim(0) == 1 }
}

/// Other C libraries give free memory back on their own.
#[cfg(not(target_env = "gnu"))]
pub fn return_free_heap() -> bool {
    false
}

/// The address ranges of `smaps` (as /proc/self/smaps prints it) that map
/// a file, are not writable and hold no private (anonymous) pages.
fn read_only_file_mappings(smaps: &str) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        let mut fields = line.split_whitespace();
        let first = fields.next().unwrap_or_default();
        if let Some(value) = line.strip_prefix("Anonymous:") {
            if let Some(range) = current.take()
                && value.trim() == "0 kB"
            {
                found.push(range);
            }
            continue;
        }
        let Some((start, end)) = first.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            continue;
        };
        // perms, offset, device, inode, path.
        let (perms, inode, path) = (fields.next(), fields.nth(2), fields.next());
        current = match (perms, inode, path) {
            (Some(perms), Some(inode), Some(path))
                if !perms.contains('w') && inode != "0" && path.starts_with('/') =>
            {
                Some((start, end))
            }
            _ => None,
        };
    }
    found
}

/// Raise the open-file limit to its hard limit: each connection is a
/// descriptor, and the soft default (often 1024) is reached long before
/// the HTTP connection cap on a busy host.
pub fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    {
        tracing::debug!("cannot raise the open-file limit from {soft} to {hard}: {e}");
    }
}

/// `SIGKILL` for 9, and so on; the number when the name is unknown.
pub fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| signal.to_string())
}

/// How runs are contained, for the first log line.
pub fn containment() -> String {
    match timebox::cgroup::root() {
        Some(dir) => format!("runs are contained in cgroups under {}", dir.display()),
        None => "runs are contained by sessions and markers (no writable cgroup v2 here)".into(),
    }
}

/// Start the watchdog that outlives the host ([`crate::watchdog`]), before
/// any other thread: its pid, or why there is none.
pub fn start_watchdog() -> Result<Option<i32>, String> {
    crate::watchdog::start()
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Kill what hosts that are gone left running, in the background.
pub fn sweep_left_behind() {
    crate::watchdog::sweep_in_background();
}

/// Give `rel` beneath `root` the Unix `mode` a container's archive says.
pub fn set_mode(root: &cap_std::fs::Dir, rel: &std::path::Path, mode: u32) -> std::io::Result<()> {
    use cap_std::fs::PermissionsExt;
    root.set_permissions(rel, cap_std::fs::Permissions::from_mode(mode))
}

/// Whether a file already has the permission bits `mode`.
pub fn has_mode(meta: &cap_std::fs::Metadata, mode: u32) -> bool {
    use cap_std::fs::PermissionsExt;
    meta.permissions().mode() & 0o777 == mode
}

/// A folder only the user may enter (made with its parents if missing).
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
}

/// A new file only the user may read or write.
pub fn create_private_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Opens with `options` fail at once where they would wait (a named
/// pipe's other end), rather than hold a thread of the host.
pub fn without_waiting(options: &mut cap_std::fs::OpenOptions) {
    use cap_std::fs::OpenOptionsExt;
    options.custom_flags(nix::libc::O_NONBLOCK);
}

/// Whether an open [`without_waiting`] failed because it would have
/// waited: a named pipe with nobody at its other end.
pub fn would_wait(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(nix::libc::ENXIO)
}

/// The regular file at `path`, opened to read without waiting on a pipe
/// (and, unless `follow`, without following a link there); anything but
/// a regular file (a pipe, a device, `/dev/zero`) is refused.
pub fn open_regular(path: &std::path::Path, follow: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let nofollow = if follow { 0 } else { nix::libc::O_NOFOLLOW };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nofollow | nix::libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file (a pipe, a socket or a device?)",
        ));
    }
    Ok(file)
}

/// Whether a file's mode lets it be run.
pub fn runnable(meta: &std::fs::Metadata) -> bool {
    std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0
}

/// A file's permission bits, to tell when they change.
pub fn mode_of(meta: &cap_std::fs::Metadata) -> u32 {
    use cap_std::fs::PermissionsExt;
    meta.permissions().mode() & 0o7777
}

/// Variables every child gets besides the policy's: none here (a Unix
/// program runs without any).
pub const SYSTEM_ENV: &[&str] = &[];

/// Lists of paths are joined with `:` here, as PATH is.
pub const PATH_LIST_SEPARATOR: &str = ":";

/// Every path is a plain path here: none is refused for its form.
pub fn path_form_refused(
    _path: &std::path::Path,
    _roots: &[std::path::PathBuf],
) -> Option<&'static str> {
    None
}

/// Read `file` at `pos`, leaving its own offset alone.
pub fn read_at(file: &std::fs::File, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, pos)
}

/// A symbolic link at `rel` beneath `root` to `to`, as given (not followed).
pub fn symlink(
    root: &cap_std::fs::Dir,
    to: &std::path::Path,
    rel: &std::path::Path,
) -> std::io::Result<()> {
    root.symlink_contents(to, rel)
}

/// A bind of the open handle at a fresh path in `dir` (made private if
/// missing); none when the host may not mount (not root) or the bind fails.
pub fn bind(pinned: &crate::pin::Pinned, dir: &std::path::Path) -> Option<std::path::PathBuf> {
    use crate::pin::Pinned;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::DirBuilderExt;
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .ok()?;
    let at = dir.join(uuid::Uuid::new_v4().simple().to_string());
    let fd = match pinned {
        Pinned::Dir(d) => {
            std::fs::create_dir(&at).ok()?;
            d.as_raw_fd()
        }
        Pinned::File(f) => {
            std::fs::File::create_new(&at).ok()?;
            f.as_raw_fd()
        }
    };
    let source = format!("/proc/self/fd/{fd}");
    match nix::mount::mount(
        Some(source.as_str()),
        &at,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    ) {
        Ok(()) => Some(at),
        Err(e) => {
            tracing::debug!("cannot bind {source} at {}: {e}", at.display());
            let _ = std::fs::remove_dir(&at).or_else(|_| std::fs::remove_file(&at));
            None
        }
    }
}

/// Undo a bind [`bind`] made (lazily: a container may still hold it).
pub fn unbind(at: &std::path::Path) {
    let _ = nix::mount::umount2(at, nix::mount::MntFlags::MNT_DETACH);
}

/// Podman's processes are this machine's (the engine runs on this kernel):
/// a local run's tree is found and killed here.
pub const SEES_ENGINE_PROCESSES: bool = true;

/// Live `conmon` and `podman` processes whose command line names any of
/// `names` (a container's id or name, an exec session's id): what Podman
/// keeps around a container or a session.
pub fn processes_naming(names: &[&str]) -> Vec<i32> {
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    let me = std::process::id() as i32;
    all.flatten()
        .filter(|p| p.pid != me)
        .filter(|p| !p.stat().is_ok_and(|s| s.state == 'Z'))
        .filter(|p| {
            p.cmdline().is_ok_and(|cmdline| {
                cmdline
                    .first()
                    .is_some_and(|p| p.ends_with("podman") || p.ends_with("conmon"))
                    && cmdline.iter().any(|arg| names.contains(&arg.as_str()))
            })
        })
        .map(|p| p.pid)
        .collect()
}

/// Kill process `pid` at once; whether it was signalled.
pub fn kill_process(pid: i32) -> bool {
    use nix::sys::signal::{Signal, kill};
    kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).is_ok()
}

/// Whether process `pid` carries a run's `marker` ([`timebox`]'s).
pub fn carries_marker(pid: i32, marker: &str) -> bool {
    timebox::carries_marker(pid, marker)
}

/// Kill the run led by `leader` and marked `marker` ([`timebox`]'s tree).
pub fn kill_tree(leader: i32, marker: &str) -> timebox::KillReport {
    timebox::kill_tree(leader, marker)
}

/// Where Podman's own service listens on this machine, most likely first.
pub fn podman_sockets() -> Vec<std::path::PathBuf> {
    let mut sockets = Vec::new();
    if nix::unistd::geteuid().is_root() {
        sockets.push(std::path::PathBuf::from("/run/podman/podman.sock"));
    }
    if let Some(dir) = std::env::var_os("XDG_RUNTIME_DIR") {
        sockets.push(std::path::PathBuf::from(dir).join("podman/podman.sock"));
    }
    sockets
}

/// A client of the Podman service at the Unix socket `path`.
pub fn connect_podman(
    path: &str,
    timeout_s: u64,
) -> Result<bollard::Docker, bollard::errors::Error> {
    bollard::Docker::connect_with_unix(path, timeout_s, bollard::API_DEFAULT_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_read_only_file_mappings_without_private_pages_are_released() {
        let smaps = "\
5593456d7000-5593461b3000 r--p 00000000 fe:00 5316833 /usr/bin/host
Rss: 3740 kB
Anonymous: 0 kB
5593461b3000-5593480fc000 r-xp 00adb000 fe:00 5316833 /usr/bin/host
Anonymous: 0 kB
5593480fc000-55934826a000 r--p 02a23000 fe:00 5316833 /usr/bin/host
Anonymous: 1464 kB
55934826a000-55934827a000 rw-p 02b91000 fe:00 5316833 /usr/bin/host
Anonymous: 0 kB
5593696a1000-5593698dc000 rw-p 00000000 00:00 0 [heap]
Anonymous: 2216 kB
7f95d6801000-7f95d6934000 r-xp 00001000 fe:00 10576019 /cache/a b.cwasm
Anonymous: 0 kB
7f95d7000000-7f95d7001000 r--p 00000000 00:00 0
Anonymous: 0 kB
7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]
Anonymous: 0 kB
";
        assert_eq!(
            read_only_file_mappings(smaps),
            [
                (0x5593456d7000, 0x5593461b3000),
                (0x5593461b3000, 0x5593480fc000),
                (0x7f95d6801000, 0x7f95d6934000)
            ]
        );
    }
}

/// Make the calling thread yield to everything else (nice 10): the
/// background embedding of documents must not slow calls down. Linux
/// applies a thread's niceness to that thread alone.
pub fn lower_thread_priority() {
    // SAFETY: setpriority on the calling thread's id; no memory involved.
    let tid = unsafe { nix::libc::syscall(nix::libc::SYS_gettid) } as nix::libc::id_t;
    let _ = unsafe { nix::libc::setpriority(nix::libc::PRIO_PROCESS, tid, 10) };
}
