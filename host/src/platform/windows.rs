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

/// Start-up is over; Windows trims a process's working set itself when
/// memory is short.
pub fn release_startup_pages() {}

/// Windows ends processes with exit codes, not signals.
pub fn signal_name(signal: i32) -> String {
    signal.to_string()
}

/// How runs are contained, for the first log line.
pub fn containment() -> String {
    "runs are contained in a Job Object each".into()
}

/// The Windows heap keeps its own arenas.
pub fn limit_heap_arenas() {}

/// Windows' heap gives free memory back on its own.
pub fn return_free_heap() -> bool {
    false
}

/// No watchdog: a Job Object kills its tree when the host's handle closes.
pub fn start_watchdog() -> Result<Option<i32>, String> {
    Ok(None)
}

/// Nothing to sweep: Job Objects leave nothing behind.
pub fn sweep_left_behind() {}

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

/// A folder for the user's secrets: beneath the user's profile Windows
/// already lets only the user (and administrators) in.
pub fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// A new file, as private as the folder it is in (see above).
pub fn create_private_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Windows has no named pipes among a folder's files: no open waits.
pub fn without_waiting(_options: &mut cap_std::fs::OpenOptions) {}

/// No open waits on Windows (see [`without_waiting`]).
pub fn would_wait(_e: &std::io::Error) -> bool {
    false
}

/// The regular file at `path`, opened to read (Windows opens never wait
/// on a pipe among a folder's files); anything else is refused.
pub fn open_regular(path: &std::path::Path, _follow: bool) -> std::io::Result<std::fs::File> {
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// Windows has no execute bit: a file found as a program can be run.
pub fn runnable(_meta: &std::fs::Metadata) -> bool {
    true
}

/// Windows files have no Unix mode to change.
pub fn mode_of(_meta: &cap_std::fs::Metadata) -> u32 {
    0
}

/// Variables every child gets besides the policy's: without them Windows
/// programs fail in odd ways (node cannot seed its crypto without
/// `SystemRoot`, npm's `.cmd` shims need `ComSpec` and `PATHEXT`, most
/// tools write to `TEMP` and `APPDATA`). None of them is a secret.
pub const SYSTEM_ENV: &[&str] = &[
    "SystemRoot",
    "windir",
    "SystemDrive",
    "ComSpec",
    "PATHEXT",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
    "USERNAME",
    "APPDATA",
    "LOCALAPPDATA",
    "ProgramData",
    "ProgramFiles",
    "ProgramFiles(x86)",
    "CommonProgramFiles",
    "NUMBER_OF_PROCESSORS",
    "PROCESSOR_ARCHITECTURE",
    "OS",
];

/// Lists of paths are joined with `;` here, as PATH is (`:` follows a
/// drive letter).
pub const PATH_LIST_SEPARATOR: &str = ";";

/// Why a path a plugin gave names something other than a file beneath a
/// root, whatever the roots say (issue 40): a device or verbatim path
/// (`\\.\`, `\\?\`), another machine's share (unless a root is on that
/// share: naming one makes Windows connect to it and offer the user's
/// credentials), a drive without its root (`C:x`, relative to that
/// drive's own current folder), an alternate data stream (`a.txt:s`), a
/// device name (`NUL`, `com1.txt`), a name Windows shortens (trailing dot or
/// space: `.git.` is `.git`), or a wildcard or control character.
pub fn path_form_refused(
    path: &std::path::Path,
    roots: &[std::path::PathBuf],
) -> Option<&'static str> {
    use std::path::{Component, Prefix};
    let mut components = path.components().peekable();
    if let Some(Component::Prefix(prefix)) = components.peek() {
        match prefix.kind() {
            Prefix::Disk(_) => {}
            Prefix::UNC(server, share) => {
                let same_share = |root: &std::path::PathBuf| {
                    matches!(root.components().next(), Some(Component::Prefix(p))
                        if matches!(p.kind(), Prefix::UNC(s, h)
                            if s.eq_ignore_ascii_case(server) && h.eq_ignore_ascii_case(share)))
                };
                if !roots.iter().any(same_share) {
                    return Some("names another machine's share, which holds no root");
                }
            }
            _ => return Some(r"is a device or verbatim path (\.\ or \?\)"),
        }
        components.next();
        if components.peek() != Some(&Component::RootDir) {
            return Some("names a drive without its root folder (C:x)");
        }
    }
    for component in components {
        if let Component::Normal(name) = component {
            if let Some(why) = name_refused(&name.to_string_lossy()) {
                return Some(why);
            }
        }
    }
    None
}

/// Why a single name is not a plain file name on Windows.
fn name_refused(name: &str) -> Option<&'static str> {
    if name.contains(':') {
        return Some("names an alternate data stream (a `:` in a name)");
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Some("ends a name with a dot or space, which Windows drops");
    }
    if name.chars().any(|c| c < ' ' || "<>\"|?*".contains(c)) {
        return Some("holds a wildcard or control character");
    }
    let stem = name
        .split('.')
        .next()
        .unwrap_or(name)
        .trim_end()
        .to_ascii_uppercase();
    let device = matches!(
        stem.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$"
    ) || ((stem.starts_with("COM") || stem.starts_with("LPT"))
        && stem.len() > 3
        && stem[3..]
            .chars()
            .all(|c| c.is_ascii_digit() || "¹²³".contains(c))
        && stem[3..].chars().count() == 1);
    device.then_some("is a device name (CON, NUL, COM1, ...)")
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// Run under Wine by scripts/windows-check.
    #[test]
    fn windows_forms_that_name_other_things_are_refused() {
        let roots = [PathBuf::from(r"C:\work\ws")];
        let refused = [
            r"\\?\C:\work\ws\a",
            r"//?/C:/work/ws/a",
            r"\\.\C:\work\ws\a",
            r"\\.\pipe\x",
            r"\\evil\share\x",
            "//evil/share/x",
            "C:x",
            r"C:\work\ws\a.txt:stream",
            r"C:\work\ws\a.txt::$DATA",
            r"C:\work\ws\.git.\hooks",
            r"C:\work\ws\.git \hooks",
            r"C:\work\ws\NUL",
            r"C:\work\ws\com1.txt",
            "C:/work/ws/con",
            r"C:\work\ws\COM¹",
            r"C:\work\ws\a*b",
            "a?b",
            "sub\\..\\NUL",
        ];
        for path in refused {
            assert!(
                path_form_refused(Path::new(path), &roots).is_some(),
                "{path}"
            );
        }
        let plain = [
            r"C:\work\ws\a.txt",
            "C:/work/ws/src/a.txt",
            r"C:\work/ws\mixed/seps",
            "src/a.txt",
            "..\\x",
            r"C:\work\ws\PROGRA~1",
            r"C:\work\ws\console.log",
            r"C:\work\ws\com10",
            r"C:\work\ws\.gitignore",
        ];
        for path in plain {
            assert_eq!(path_form_refused(Path::new(path), &roots), None, "{path}");
        }
        // A share holding a root may be named.
        let on_share = [PathBuf::from(r"\\server\projects\ws")];
        assert_eq!(
            path_form_refused(Path::new(r"\\SERVER\Projects\ws\a"), &on_share),
            None
        );
        assert!(path_form_refused(Path::new(r"\\server\other\a"), &on_share).is_some());
    }

    /// The confinement of Windows spellings of the same place: mixed
    /// separators and other letter cases of existing folders stay inside;
    /// climbing out, short names of outside folders and other drives do not.
    #[test]
    fn windows_spellings_are_confined() {
        use crate::paths::{canonical, confine, guest};
        let dir = tempfile::tempdir().unwrap();
        let root = canonical(dir.path()).unwrap().join("ws");
        std::fs::create_dir_all(root.join("Src")).unwrap();
        let roots = [root.clone()];
        let g = guest(&root);
        assert!(confine(&format!("{g}/Src/a.txt"), &root, &roots).is_some());
        assert!(confine(&format!("{g}\\Src/a.txt"), &root, &roots).is_some());
        assert!(confine(&g.to_uppercase(), &root, &roots).is_some(), "{g}");
        assert!(confine(&format!("{g}/../x"), &root, &roots).is_none());
        assert!(confine(&format!("{g}\\..\\x"), &root, &roots).is_none());
        assert!(confine(r"C:\windows\system32", &root, &roots).is_none());
        assert!(confine(r"\\?\C:\windows", &root, &roots).is_none());
        assert!(confine(&format!("{g}/Src/a.txt:evil"), &root, &roots).is_none());
    }
}

/// Make the calling thread yield to everything else: the background
/// embedding of documents must not slow calls down.
pub fn lower_thread_priority() {
    use windows_sys::Win32::System::Threading::{
        GetCurrentThread, SetThreadPriority, THREAD_PRIORITY_BELOW_NORMAL,
    };
    // SAFETY: the pseudo-handle of the calling thread needs no closing.
    unsafe { SetThreadPriority(GetCurrentThread(), THREAD_PRIORITY_BELOW_NORMAL) };
}
