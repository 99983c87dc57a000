//! Confinement where the platform has none the host can use (Windows,
//! macOS, other Unix): the program runs with the user's rights, and
//! [`probe`] says so, so that `host check` and the log never claim more.

use std::io;

use super::{Confinement, Enforcement};

pub fn prepare(_command: &mut tokio::process::Command, _c: &Confinement) -> io::Result<()> {
    Ok(())
}

pub fn start<T: Send>(
    _c: &Confinement,
    start: impl FnOnce() -> io::Result<T> + Send,
) -> io::Result<T> {
    start()
}

pub fn probe() -> Enforcement {
    Enforcement::None {
        why: if cfg!(windows) {
            "Windows: a Job Object ends the program's whole tree with its call, but confines no file, \
             folder or port"
                .into()
        } else {
            "this platform has no confinement the host uses (Landlock is Linux's)".into()
        },
    }
}
