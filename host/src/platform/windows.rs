//! What the host needs from Windows: its standard streams, Ctrl-C, and
//! nothing for the file limit or a watchdog (each run's Job Object is
//! closed, and its tree killed, when the host process ends).

use crate::stdio::{Reader, Writer};

/// stdin and stdout, read and written by tokio's blocking threads.
pub fn std_streams() -> (Reader, Writer) {
    (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
}

/// Ctrl-C, Ctrl-Break or the console closing, by name.
pub async fn shutdown_signal() -> &'static str {
    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
    let mut c = ctrl_c().expect("Ctrl-C handler");
    let mut brk = ctrl_break().expect("Ctrl-Break handler");
    let mut close = ctrl_close().expect("console close handler");
    tokio::select! {
        _ = c.recv() => "Ctrl-C",
        _ = brk.recv() => "Ctrl-Break",
        _ = close.recv() => "console closed",
    }
}

/// Windows has no per-process descriptor limit to raise.
pub fn raise_fd_limit() {}

/// Windows ends processes with exit codes, not signals.
pub fn signal_name(signal: i32) -> String {
    signal.to_string()
}

/// How runs are contained, for the first log line.
pub fn containment() -> String {
    "runs are contained in a Job Object each".into()
}

/// No watchdog: a Job Object kills its tree when the host's handle closes.
pub fn start_watchdog() {}

/// `host watchdog`: not used on Windows (Job Objects end the trees).
pub fn watchdog(_instance: &str) -> std::process::ExitCode {
    eprintln!("host watchdog: not used on Windows, where each run's Job Object ends its tree");
    std::process::ExitCode::FAILURE
}

/// Windows files have no Unix mode: a container's is not kept.
pub fn set_mode(
    _root: &cap_std::fs::Dir,
    _rel: &std::path::Path,
    _mode: u32,
) -> std::io::Result<()> {
    Ok(())
}

/// Windows files have no Unix mode: any is the one they have.
pub fn has_mode(_meta: &cap_std::fs::Metadata, _mode: u32) -> bool {
    true
}

/// Read `file` at `pos`, leaving its own offset where it was (Windows'
/// positioned read moves it, and sync-out's tar reader reads the same file).
pub fn read_at(file: &std::fs::File, buf: &mut [u8], pos: u64) -> std::io::Result<usize> {
    use std::io::Seek;
    let mut handle = file;
    let offset = handle.stream_position()?;
    let read = std::os::windows::fs::FileExt::seek_read(file, buf, pos);
    handle.seek(std::io::SeekFrom::Start(offset))?;
    read
}

/// A symbolic link at `rel` beneath `root` to `to` (a file link: Windows
/// needs to know the kind; making one needs the right to).
pub fn symlink(
    root: &cap_std::fs::Dir,
    to: &std::path::Path,
    rel: &std::path::Path,
) -> std::io::Result<()> {
    root.symlink_file(to, rel)
}

/// No bind mounts on Windows: Podman gets the checked path (and probes).
pub fn bind(_pinned: &crate::pin::Pinned, _dir: &std::path::Path) -> Option<std::path::PathBuf> {
    None
}

/// Nothing was bound on Windows.
pub fn unbind(_at: &std::path::Path) {}

/// Podman on Windows runs in a virtual machine (`podman machine`): its
/// processes are not this machine's, so a run's tree is killed through the
/// engine, as on another machine's.
pub const SEES_ENGINE_PROCESSES: bool = false;

/// Podman's processes are in its virtual machine: none here.
pub fn processes_naming(_names: &[&str]) -> Vec<i32> {
    Vec::new()
}

/// Only reached for Podman's processes, of which none are here.
pub fn kill_process(_pid: i32) -> bool {
    false
}

/// No process of this machine runs an engine's command.
pub fn carries_marker(_pid: i32, _marker: &str) -> bool {
    false
}

/// Not reached: runs are killed through the engine
/// ([`SEES_ENGINE_PROCESSES`] is false).
pub fn kill_tree(_leader: i32, _marker: &str) -> timebox::KillReport {
    timebox::KillReport::default()
}

/// Where `podman machine` serves its API: the default machine's pipe.
pub fn podman_sockets() -> Vec<std::path::PathBuf> {
    vec![std::path::PathBuf::from(r"\\.\pipe\podman-machine-default")]
}

/// A client of the Podman service at the named pipe `path`.
pub fn connect_podman(
    path: &str,
    timeout_s: u64,
) -> Result<bollard::Docker, bollard::errors::Error> {
    bollard::Docker::connect_with_named_pipe(path, timeout_s, bollard::API_DEFAULT_VERSION)
}
