//! Who may work on a tree: a hold on a linked worktree across calls and
//! processes, one lock per work tree within this process, and the
//! `index.lock` a commit cut off in the middle leaves behind.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use crate::{Worktree, sys};

/// Remove the worktree's `index.lock` when no git process works on it: a
/// host killed in the middle of a commit leaves it, and the index (the
/// commits' stat cache) could not be written again. The warning to report,
/// if one was removed.
pub fn break_stale_index_lock(tree: &Worktree) -> Option<String> {
    if !tree.admin.exists("index.lock") || git_working_on(tree) {
        return None;
    }
    tree.admin.remove_file("index.lock").ok()?;
    Some(format!(
        "removed {}, left by a commit that was cut off (the host ended mid-commit); nothing else was lost",
        tree.git_dir.join("index.lock").display()
    ))
}

/// Whether a live `git` works on `repo`.
fn git_working_on(repo: &Worktree) -> bool {
    sys::git_working_on(&repo.work_tree, &repo.git_dir)
}

/// Exclusive use of a linked worktree, across calls and processes: a
/// `flock` on a file in the worktree's admin directory (`.git/worktrees/<name>`,
/// which the worktree's own users, a container included, cannot reach).
/// Released when dropped, or when the holding process dies.
pub struct Hold {
    /// Held for its lock: closing it releases the `flock`.
    _locked: std::fs::File,
}

/// Hold `tree` if no one else does; `None` when someone does.
pub fn try_hold(tree: &Worktree) -> std::io::Result<Option<Hold>> {
    let mut options = cap_std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    let file = tree
        .admin
        .open_with("mcphost-hold.lock", &options)?
        .into_std();
    match file.try_lock() {
        Ok(()) => Ok(Some(Hold { _locked: file })),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// One lock per work tree (a repository's or a worktree's): git's lock
/// files make concurrent writers fail rather than wait.
pub fn repo_lock(work_tree: &Path) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> =
        LazyLock::new(Default::default);
    LOCKS
        .lock()
        .expect("lock map poisoned")
        .entry(work_tree.to_path_buf())
        .or_default()
        .clone()
}
