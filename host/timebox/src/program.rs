//! Finding the program to run: PATH lookup and, on Windows, PATHEXT.
//!
//! On Windows `pi` or `npm` are `.cmd` shims: `pi` must resolve to
//! `pi.cmd` through PATHEXT the way cmd.exe would. The lookup takes PATHEXT
//! as a parameter so the Windows rules are unit-tested on every platform.
//!
//! Relative PATH entries (`node_modules/.bin`, `.`, an empty entry) are
//! never searched: they name whatever directory a call runs in, which a
//! test project or a container writes. The host's own helpers (git, tar,
//! podman) are found once, at start, and outside the workspace as well
//! ([`find_host_programs`]).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Resolve `program` to a file. Names with a path separator are taken
/// relative to `cwd`; bare names are searched in `path`. With `pathext`
/// (Windows), a name without one of its extensions is tried with each.
pub fn resolve(
    program: &str,
    path: Option<&OsStr>,
    pathext: Option<&OsStr>,
    cwd: &Path,
) -> Option<PathBuf> {
    let extensions: Vec<String> = match pathext {
        Some(list) => {
            let list: Vec<String> = list
                .to_string_lossy()
                .split(';')
                .filter(|e| !e.is_empty())
                .map(|e| e.to_ascii_lowercase())
                .collect();
            let lower = program.to_ascii_lowercase();
            if list.iter().any(|e| lower.ends_with(e.as_str())) {
                vec![String::new()]
            } else {
                list
            }
        }
        None => vec![String::new()],
    };
    let candidates = |dir: &Path| -> Option<PathBuf> {
        extensions
            .iter()
            .map(|ext| dir.join(format!("{program}{ext}")))
            .find(|c| c.is_file())
    };
    if has_separator(program) {
        return candidates(cwd);
    }
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .find_map(|dir| candidates(&dir))
}

fn has_separator(program: &str) -> bool {
    program.contains('/') || (cfg!(windows) && program.contains('\\'))
}

/// PATHEXT where this platform has it (Windows), else none.
fn pathext() -> Option<std::ffi::OsString> {
    if cfg!(windows) {
        std::env::var_os("PATHEXT")
    } else {
        None
    }
}

/// Resolve with this platform's rules and the host's own PATH.
pub fn resolve_here(program: &str, cwd: &Path) -> Option<PathBuf> {
    resolve(
        program,
        std::env::var_os("PATH").as_deref(),
        pathext().as_deref(),
        cwd,
    )
}

/// Resolve `program` for a plugin, never in a folder of `untrusted` (those
/// a plugin may write or a container fill): PATH entries inside one are
/// skipped, and a file found elsewhere whose links lead into one is not
/// taken. Names with a separator are the policy's own absolute paths
/// (see [`allowed`]) and are taken as written.
pub fn resolve_trusted(program: &str, cwd: &Path, untrusted: &[PathBuf]) -> Option<PathBuf> {
    if has_separator(program) {
        return resolve_here(program, cwd);
    }
    let outside = |dir: &Path| !untrusted.iter().any(|root| inside(dir, root));
    let path = std::env::var_os("PATH")?;
    let trusted: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute() && outside(dir))
        .collect();
    let trusted = std::env::join_paths(trusted).ok()?;
    let found = resolve(program, Some(&trusted), pathext().as_deref(), cwd)?;
    outside(&found).then_some(found)
}

/// The programs the host runs itself.
pub const HOST_PROGRAMS: &[&str] = &["git", "tar", "podman", "ssh"];

static FOUND: OnceLock<HashMap<&'static str, Option<PathBuf>>> = OnceLock::new();

/// [`HOST_PROGRAMS`], found the first time this is asked, on the host's
/// PATH without its relative entries and without entries inside the
/// workspace (a project's `node_modules/.bin` on PATH would otherwise give
/// the host a `git` the project, or a container working on it, wrote).
fn found(workspace: impl FnOnce() -> PathBuf) -> Vec<(&'static str, Option<PathBuf>)> {
    let found = FOUND.get_or_init(|| {
        let workspace = workspace();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let trusted: Vec<PathBuf> = std::env::split_paths(&path)
            .filter(|dir| dir.is_absolute() && !inside(dir, &workspace))
            .collect();
        let trusted = std::env::join_paths(trusted).unwrap_or_default();
        let pathext = pathext();
        HOST_PROGRAMS
            .iter()
            .map(|&name| {
                let at = resolve(name, Some(&trusted), pathext.as_deref(), Path::new("/"));
                (name, at)
            })
            .collect()
    });
    let mut list: Vec<_> = found.iter().map(|(k, v)| (*k, v.clone())).collect();
    list.sort();
    list
}

/// Find [`HOST_PROGRAMS`] once, for the host serving `workspace`; later
/// calls keep the first answer. What was found, for the log.
pub fn find_host_programs(workspace: &Path) -> Vec<(&'static str, Option<PathBuf>)> {
    found(|| workspace.to_path_buf())
}

/// Whether `dir` is `root` or beneath it, compared as resolved paths.
pub fn inside(dir: &Path, root: &Path) -> bool {
    let resolve = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    resolve(dir).starts_with(resolve(root))
}

/// The absolute path of the host's helper `name` (one of
/// [`HOST_PROGRAMS`]), as found at start.
pub fn host_program(name: &str) -> Option<PathBuf> {
    host_program_list()
        .into_iter()
        .find(|(found, _)| *found == name)?
        .1
}

/// Every helper and where it was found at start; found now, with the
/// current directory as the workspace, if start-up did not look.
pub fn host_program_list() -> Vec<(&'static str, Option<PathBuf>)> {
    found(|| std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")))
}

/// Whether the policy's `programs` list allows `program` (as requested)
/// once resolved to `resolved`. Entries are bare names, matched against
/// the requested bare name, or absolute paths, matched against the file.
pub fn allowed(program: &str, resolved: &Path, programs: &[String]) -> bool {
    programs.iter().any(|entry| {
        let entry_path = Path::new(entry);
        if entry_path.is_absolute() {
            entry_path == resolved
        } else {
            !has_separator(program) && entry == program
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "").unwrap();
        p
    }

    #[test]
    fn windows_pathext_finds_cmd_shims() {
        let bin = tempfile::tempdir().unwrap();
        let shim = touch(bin.path(), "pi.cmd");
        let path = bin.path().as_os_str();
        let pathext = OsStr::new(".COM;.EXE;.BAT;.CMD");
        assert_eq!(
            resolve("pi", Some(path), Some(pathext), Path::new("/")),
            Some(shim.clone())
        );
        // A name that already carries an extension is taken as is.
        assert_eq!(
            resolve("pi.cmd", Some(path), Some(pathext), Path::new("/")),
            Some(shim)
        );
        // .exe wins over .cmd when both exist, in PATHEXT order.
        let exe = touch(bin.path(), "pi.exe");
        assert_eq!(
            resolve("pi", Some(path), Some(pathext), Path::new("/")),
            Some(exe)
        );
        // Without PATHEXT (Unix rules) the bare name must exist.
        assert_eq!(resolve("pi", Some(path), None, Path::new("/")), None);
    }

    #[test]
    fn path_order_and_relative_programs() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        touch(b.path(), "tool");
        let first = touch(a.path(), "tool");
        let path = std::env::join_paths([a.path(), b.path()]).unwrap();
        assert_eq!(
            resolve("tool", Some(&path), None, Path::new("/")),
            Some(first)
        );
        // A relative PATH entry names the directory a call runs in: never
        // searched (here relative to this process's own directory).
        let project = tempfile::tempdir_in(".").unwrap();
        let bin = project.path().file_name().unwrap();
        let here = Path::new(bin).join("node_modules/.bin");
        std::fs::create_dir_all(&here).unwrap();
        touch(&here, "git");
        assert!(here.join("git").is_file());
        assert_eq!(resolve("git", Some(here.as_os_str()), None, b.path()), None);
        let local = touch(b.path(), "script.sh");
        assert_eq!(
            resolve("./script.sh", None, None, b.path()),
            Some(b.path().join("./script.sh"))
        );
        assert!(local.exists());
    }

    #[test]
    fn allow_list_by_name_or_absolute_path() {
        // An absolute path as this platform writes one.
        let pi = std::env::temp_dir().join("opt").join("pi");
        let pi_text = pi.to_string_lossy().into_owned();
        let programs = vec!["cargo".to_string(), pi_text.clone()];
        assert!(allowed("cargo", Path::new("/usr/bin/cargo"), &programs));
        assert!(
            !allowed("./cargo", Path::new("/ws/cargo"), &programs),
            "a local file named like an allowed program is not it"
        );
        assert!(allowed(&pi_text, &pi, &programs));
        assert!(!allowed("sh", Path::new("/bin/sh"), &programs));
    }
}
