//! Path confinement: is a path a plugin names inside one of its roots?
//!
//! Paths are made absolute against the workspace, normalised lexically (so
//! `a/../../etc` cannot climb out), and the part that exists is resolved
//! through symlinks before comparing, so a link inside a root that points
//! outside it does not count as inside.

use std::path::{Component, Path, PathBuf};

/// Resolve `path` (absolute, or relative to `base`) and return it when it
/// lies inside one of `roots`.
pub fn confine(path: &str, base: &Path, roots: &[PathBuf]) -> Option<PathBuf> {
    let joined = base.join(path);
    let resolved = resolve_existing_prefix(&normalize(&joined));
    roots
        .iter()
        .any(|root| resolved.starts_with(resolve_existing_prefix(&normalize(root))))
        .then_some(resolved)
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

/// Canonicalise the longest existing ancestor and append the rest.
fn resolve_existing_prefix(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
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
    fn symlink_out_of_root_is_outside() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&root).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("escape")).unwrap();
        assert!(confine("escape/x", &root, std::slice::from_ref(&root)).is_none());
    }
}
