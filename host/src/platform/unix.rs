//! What the host needs from Unix (Linux): its standard streams as
//! non-blocking pipes, its signals, its file limit, and the watchdog that
//! ends a dead host's process trees.

use std::os::fd::AsFd;

use tokio::net::unix::pipe;

use crate::stdio::{Reader, Writer};

/// stdin and stdout, driven by the event loop when they are pipes (a
/// blocking reader thread is the fallback for files and terminals).
pub fn std_streams() -> (Reader, Writer) {
    let reader: Reader = match dup(std::io::stdin().as_fd()).and_then(pipe::Receiver::from_file) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    };
    let writer: Writer = match dup(std::io::stdout().as_fd()).and_then(pipe::Sender::from_file) {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    };
    (reader, writer)
}

fn dup(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<std::fs::File> {
    Ok(std::fs::File::from(fd.try_clone_to_owned()?))
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

/// Start the watchdog that outlives the host ([`crate::watchdog`]).
pub fn start_watchdog() {
    crate::watchdog::start_in_background();
}

/// `host watchdog`: watch the host instance `instance` ([`crate::watchdog`]).
pub fn watchdog(instance: &str) -> std::process::ExitCode {
    crate::watchdog::run(instance)
}
