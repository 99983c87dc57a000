//! Paths between the host and its plugins.
//!
//! Confinement: is a path a plugin names inside one of its roots? Paths
//! are made absolute against the workspace, normalised lexically (so
//! `a/../../etc` cannot climb out), and the part that exists is resolved
//! through symlinks before comparing, so a link inside a root that points
//! outside it does not count as inside. Forms the platform gives another
//! meaning (Windows devices, streams, other machines' shares) are refused
//! before the file system is asked.
//!
//! The guest form: what a plugin is told is spelt the same way on every
//! system, with `/` between names (issue 40).

use std::path::{Component, Path, PathBuf};

use crate::platform;

/// Resolve `path` (absolute, or relative to `base`) and return it when it
/// lies inside one of `roots`.
pub fn confine(path: &str, base: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    if let Some(why) = platform::path_form_refused(Path::new(path), roots) {
        tracing::debug!(path, why, "path refused for its form");
        return None;
    }
    let joined = base.join(path);
    let resolved = resolve_existing_prefix(&normalize(&joined));
    roots
        .iter()
        .any(|root| resolved.starts_with(resolve_existing_prefix(&normalize(root))))
        .then_some(resolved)
}

/// Where `path` really leads when, as written, it lies inside one of
/// `roots` but a symbolic link on the way takes it out: a refusal must
/// name the link, not ask for a wider grant.
pub fn leads_out(path: &str, base: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    let lexical = normalize(&base.join(path));
    let inside = roots
        .iter()
        .any(|root| lexical.starts_with(normalize(root)));
    let real = resolve_existing_prefix(&lexical);
    (inside && real != lexical).then_some(real)
}

/// Remove `.` and `..` lexically. `..` at the root stays at the root.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The real path of an existing `path`, in the form users write (on
/// Windows without the `\\?\` prefix, which programs such as cmd.exe
/// do not take as a working directory).
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    dunce::canonicalize(path)
}

/// How a plugin is told the host's `path`: the name of its preopen, with
/// `/` between names on every system, so that it joins with `/`.
pub fn guest(path: &Path) -> String {
    dunce::simplified(path)
        .to_string_lossy()
        .replace(std::path::MAIN_SEPARATOR, "/")
}

/// A variable's value as a plugin is told it: a list of absolute paths
/// (split by the system's rule, as PATH is) becomes their guest forms,
/// joined by [`platform::PATH_LIST_SEPARATOR`]; any other value is kept.
pub fn guest_list(value: &str) -> String {
    let parts: Vec<PathBuf> = std::env::split_paths(value).collect();
    if parts.is_empty() || !parts.iter().all(|p| p.is_absolute()) {
        return value.to_owned();
    }
    let guests: Vec<String> = parts.iter().map(|p| guest(p)).collect();
    guests.join(platform::PATH_LIST_SEPARATOR)
}

/// Canonicalise the longest existing ancestor and append the rest.
fn resolve_existing_prefix(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = canonical(&existing) {
            return rest
                .iter()
                .rev()
                .fold(canonical, |acc, part: &std::ffi::OsString| acc.join(part));
        }
        match (
            existing.file_name().map(|n| n.to_os_string()),
            existing.parent(),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inside_outside_and_climbing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join("src")).unwrap();
        let roots = [root.clone()];
        assert!(confine("src/new/file.txt", &root, &roots).is_some());
        assert!(confine(".", &root, &roots).is_some());
        assert!(confine("../elsewhere", &root, &roots).is_none());
        assert!(confine("src/../../elsewhere", &root, &roots).is_none());
        assert!(confine("/etc/passwd", &root, &roots).is_none());
        // A sibling whose name starts with the root's name is not inside it.
        assert!(confine("../repo2/x", &root, &roots).is_none());
    }

    #[test]
    fn guest_forms_join_with_slashes() {
        let dir = tempfile::tempdir().unwrap();
        let root = canonical(dir.path()).unwrap();
        let guest = guest(&root);
        assert!(!guest.contains('\\'), "{guest}");
        assert!(!guest.starts_with("//?/"), "{guest}");
        // The guest form names the same place on the host.
        assert_eq!(canonical(Path::new(&guest)).unwrap(), root);
        // A plugin joining a name with `/` stays inside.
        let inside = format!("{guest}/src/a.txt");
        assert_eq!(
            confine(&inside, &root, std::slice::from_ref(&root)),
            Some(root.join("src").join("a.txt"))
        );
    }

    #[test]
    fn lists_of_paths_become_guest_lists() {
        let dir = tempfile::tempdir().unwrap();
        let a = canonical(dir.path()).unwrap();
        let b = a.join("b");
        let joined = std::env::join_paths([&a, &b]).unwrap();
        let told = guest_list(&joined.to_string_lossy());
        assert_eq!(
            told,
            format!(
                "{}{}{}",
                guest(&a),
                platform::PATH_LIST_SEPARATOR,
                guest(&b)
            )
        );
        // Other values are kept as they are.
        assert_eq!(guest_list("4.x"), "4.x");
        assert_eq!(guest_list("https://example.org/a"), "https://example.org/a");
        assert_eq!(guest_list(""), "");
    }

    #[test]
    fn symlink_out_of_root_is_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&root).unwrap();
        let at = cap_std::fs::Dir::open_ambient_dir(&root, cap_std::ambient_authority()).unwrap();
        if let Err(e) = platform::symlink(&at, dir.path(), Path::new("escape")) {
            eprintln!("symlink_out_of_root_is_outside: skipped, no symbolic links here ({e})");
            return;
        }
        assert!(confine("escape/x", &root, std::slice::from_ref(&root)).is_none());
    }
}
