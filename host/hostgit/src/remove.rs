//! Removing a folder a container wrote, beneath a handle.
//!
//! A container can nest folders without end (one `cd` at a time): a
//! recursive removal (std's, cap-std's) takes a stack frame and a handle per
//! level and, a few thousand levels down, runs the host's thread out of
//! stack. This one holds at most [`OPEN`] folders open; a folder found
//! deeper is first moved up to the top, to be emptied from there. Nothing
//! is followed: links, like files, are removed themselves.

use std::ffi::OsString;
use std::io::{Error, ErrorKind, Result};
use std::path::Path;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

use crate::{GitError, Worktree};

/// The most folders held open at once.
const OPEN: usize = 32;

/// Remove `rel` beneath `root` and all it holds; a file or link is removed
/// itself, and what is already gone is no error.
pub fn remove_all(root: &Dir, rel: &Path) -> Result<()> {
    match root.symlink_metadata(rel) {
        Ok(meta) if meta.is_dir() => {
            empty(&root.open_dir_nofollow(rel)?)?;
            root.remove_dir(rel)
        }
        Ok(_) => root.remove_file(rel),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Remove everything in `top`, keeping `top` itself.
pub fn empty(top: &Dir) -> Result<()> {
    // The open folders from `top` down, each with its name in the one above.
    let mut open: Vec<(Dir, OsString)> = vec![(top.try_clone()?, OsString::new())];
    let mut moved = 0u64;
    while let Some((dir, _)) = open.last() {
        match first_folder_after_removing_the_rest(dir)? {
            Some(name) if open.len() < OPEN => {
                let sub = dir.open_dir_nofollow(&name)?;
                open.push((sub, name));
            }
            Some(name) => move_to_top(dir, &name, top, &mut moved)?,
            None => {
                let (_, name) = open.pop().expect("the folder just looked at");
                if let Some((parent, _)) = open.last() {
                    parent.remove_dir(&name)?;
                }
            }
        }
    }
    Ok(())
}

/// Remove `dir`'s files and links until a folder is met; that folder's
/// name, or none when `dir` is now empty.
fn first_folder_after_removing_the_rest(dir: &Dir) -> Result<Option<OsString>> {
    for entry in dir.entries()? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            return Ok(Some(entry.file_name()));
        }
        match dir.remove_file(entry.file_name()) {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(None)
}

/// Move the folder `name` of `dir` to `top` under a name of its own.
fn move_to_top(dir: &Dir, name: &OsString, top: &Dir, moved: &mut u64) -> Result<()> {
    // The names are the container's: one may already be taken.
    for _ in 0..64 {
        *moved += 1;
        let fresh = format!(".removing-{moved}");
        match dir.rename(name, top, &fresh) {
            Err(e)
                if e.kind() == ErrorKind::AlreadyExists
                    || e.kind() == ErrorKind::DirectoryNotEmpty => {}
            done => return done,
        }
    }
    Err(Error::other("no free name to move a deep folder up to"))
}

/// Remove a linked worktree: its files, then its admin directory, as `git
/// worktree remove --force` does, without running git (which would read the
/// worktree's `.git`). A locked worktree (`git worktree lock`) only with
/// `force`. Links in the tree are removed, never followed.
pub fn remove_worktree(tree: &Worktree, force: bool) -> std::result::Result<(), GitError> {
    let failed = |what: &Path, e: Error| GitError::Failed {
        command: format!("remove {}", what.display()),
        exit_code: None,
        stderr: e.to_string(),
    };
    if !force && tree.admin.exists("locked") {
        return Err(failed(
            &tree.work_tree,
            Error::other("the worktree is locked (`git worktree lock`)"),
        ));
    }
    // Through the handles: a folder renamed or swapped for a link since
    // it was opened is not what gets removed.
    for (dir, path) in [(&tree.tree, &tree.work_tree), (&tree.admin, &tree.git_dir)] {
        match empty(dir)
            .and_then(|()| dir.try_clone())
            .and_then(Dir::remove_open_dir)
        {
            Err(e) if e.kind() != ErrorKind::NotFound => return Err(failed(path, e)),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(path: &Path) -> Dir {
        Dir::open_ambient_dir(path, cap_std::ambient_authority()).unwrap()
    }

    #[test]
    fn a_tree_deeper_than_the_stack_goes_and_links_are_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        let top = tmp.path().join("top");
        std::fs::create_dir(&top).unwrap();
        let root = open(&top);
        // A name the moves would pick, taken, and not empty.
        root.create_dir(".removing-1").unwrap();
        root.write(".removing-1/f", "x").unwrap();
        crate::snapshot::tests::nest(&root, 5_000);
        let shallow = top.join(["d"; 100].join("/"));
        std::os::unix::fs::symlink(&outside, shallow.join("link")).unwrap();
        std::fs::write(shallow.join("file"), "x").unwrap();
        let removed = crate::snapshot::tests::on_small_stack(move || {
            remove_all(&open(tmp.path()), Path::new("top")).map(|()| tmp)
        });
        let tmp = removed.unwrap();
        assert!(!tmp.path().join("top").exists());
        assert!(outside.join("keep").exists());
        // A file or a missing name is no folder, and no error.
        std::fs::write(tmp.path().join("f"), "x").unwrap();
        remove_all(&open(tmp.path()), Path::new("f")).unwrap();
        remove_all(&open(tmp.path()), Path::new("f")).unwrap();
    }
}
