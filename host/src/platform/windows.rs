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
