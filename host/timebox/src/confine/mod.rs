//! What a plugin's programs may touch: the folders they may write and
//! read, what stays hidden inside those they read, and the TCP ports they
//! may reach (issue 71). A plugin is a sandboxed component; the programs
//! it starts (a test suite, pi's `bash`, Copilot's commands) are confined
//! to its grants the same way, by the kernel, before they run.
//!
//! The rules are data ([`Confinement`]); each platform enforces what it
//! can ([`Enforcement`] says what, never more): Landlock on Linux
//! ([`landlock.rs`](self)), nothing elsewhere (Windows' Job Objects bound
//! a tree's life, not its files).

#[cfg_attr(target_os = "linux", path = "landlock.rs")]
#[cfg_attr(not(target_os = "linux"), path = "none.rs")]
mod sys;

use std::path::{Path, PathBuf};

/// The limits a program and everything it starts runs under.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Folders (or files) it may read and change beneath.
    pub write: Vec<PathBuf>,
    /// Folders it may read and run programs from beneath.
    pub read: Vec<PathBuf>,
    /// Beneath a `read` folder, what it may not read nor run (credential
    /// stores, other plugins' secrets, the host's cache) unless a `write`
    /// or `read` entry names it or a folder inside it. Its names can
    /// still be listed; its contents cannot be opened.
    pub hidden: Vec<PathBuf>,
    /// The TCP ports it may connect to; `None`: any.
    pub connect: Option<Vec<u16>>,
    /// The TCP ports it may listen on; `None`: any.
    pub bind: Option<Vec<u16>>,
}

/// How much of a [`Confinement`] this machine enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enforcement {
    /// Every rule: files, ports, signals.
    Full { how: String },
    /// Some rules, and which are not.
    Partial { how: String, missing: String },
    /// None: the programs run with the user's rights.
    None { why: String },
}

impl Enforcement {
    /// One sentence for `host check` and the host's first log line.
    pub fn describe(&self) -> String {
        match self {
            Enforcement::Full { how } => format!("confined ({how})"),
            Enforcement::Partial { how, missing } => {
                format!("partly confined ({how}); not enforced: {missing}")
            }
            Enforcement::None { why } => {
                format!("NOT confined: a plugin's programs run with the user's full rights ({why})")
            }
        }
    }
}

/// What this machine enforces of a confinement (probed once: the kernel
/// does not change under a running host).
pub fn enforcement() -> Enforcement {
    static PROBED: std::sync::OnceLock<Enforcement> = std::sync::OnceLock::new();
    PROBED.get_or_init(sys::probe).clone()
}

/// Make `command` start its program confined by `confinement` (`None`:
/// as it is). A confinement the platform cannot enforce is not one
/// ([`enforcement`] says so); one it cannot build (a kernel error) is the
/// start's error, never a silent run without it.
pub fn prepare(
    command: &mut tokio::process::Command,
    confinement: Option<&Confinement>,
) -> std::io::Result<()> {
    match confinement {
        None => Ok(()),
        Some(c) => sys::prepare(command, c),
    }
}

/// Run `start` (which starts a program with no hook before exec: a
/// pseudo-terminal's) so that what it starts is confined by
/// `confinement`; `None` starts it as it is. On Linux `start` runs on a
/// thread of its own that restricts itself first (a Landlock domain is a
/// thread's, and a child inherits it), so nothing else of the host is
/// restricted; it costs that thread (a few milliseconds). A confinement the platform cannot
/// enforce is not one ([`enforcement`] says so); one it cannot build (a
/// kernel error) is the start's error, never a silent run without it.
pub fn start<T: Send>(
    confinement: Option<&Confinement>,
    start: impl FnOnce() -> std::io::Result<T> + Send,
) -> std::io::Result<T> {
    match confinement {
        None => start(),
        Some(c) => sys::start(c, start),
    }
}

/// The folders that are readable beneath `root` when `hidden` are not:
/// `root` itself when nothing hidden lies beneath it, else each entry of
/// it that is not hidden, whole or (when something hidden lies deeper)
/// in turn. A root that is hidden itself, or inside something hidden, was
/// named to be read: it is. Entries made after this are not among them.
pub fn visible(root: &Path, hidden: &[PathBuf]) -> Vec<PathBuf> {
    // A root inside something hidden was granted by name: it is seen.
    let inside: Vec<&PathBuf> = hidden
        .iter()
        .filter(|h| h.starts_with(root) && h.as_path() != root)
        .collect();
    if inside.is_empty() {
        return vec![root.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if inside.iter().any(|h| path.starts_with(h)) {
            continue;
        }
        if is_dir && inside.iter().any(|h| h.starts_with(&path)) {
            out.extend(visible(&path, hidden));
        } else {
            out.push(path);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_leaves_out_what_is_hidden_and_keeps_its_siblings() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in ["a/secret", "a/open", "b", "c/d/e"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("a/file"), "x").unwrap();
        let hidden = vec![
            root.join("a/secret"),
            root.join("c/d"),
            root.join("elsewhere"),
        ];
        let mut seen = visible(root, &hidden);
        seen.sort();
        assert_eq!(
            seen,
            vec![root.join("a/file"), root.join("a/open"), root.join("b")]
        );
        assert_eq!(visible(&root.join("b"), &hidden), vec![root.join("b")]);
        assert_eq!(visible(&root.join("c/d"), &hidden), vec![root.join("c/d")]);
    }
}
