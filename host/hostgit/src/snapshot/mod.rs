//! An environment's commit, built as data (issue 34).
//!
//! A container writes its worktree, so no git process may ever read that
//! tree: git would take the container's `.gitattributes` filters, a nested
//! repository's config (a gitlink's work tree is checked by `git add`),
//! hooks or `core.worktree` from it. Here the host walks the worktree
//! itself, beneath a directory handle, one component at a time and never
//! through a symbolic link, and writes blobs, trees and the commit with
//! gitoxide into the object store of the user's repository (which the host
//! owns). Nothing from the tree is configuration: `.gitignore` files are
//! read as patterns, nothing else is read at all.
//!
//! What is left out, whatever `.gitignore` says:
//! - every `.git` at any depth (a nested repository's files are committed
//!   as plain files, its `.git` never);
//! - `.cofer` at the top: Cofer's own state is never part of a commit, so
//!   no checkout of an environment's branch can write it;
//! - special files (sockets, fifos, devices) and files over the size limit
//!   (a tracked one keeps its committed version);
//! - folders nested deeper than [`MAX_DEPTH`].
//!
//! The `.gitignore` files on one path may hold [`MAX_IGNORE_PATTERNS`]
//! lines together; one past that is not applied (and said).
//!
//! The worktree's index (in its admin directory, out of the container's
//! reach) is kept as git would: it serves as a stat cache, so an unchanged
//! file is not read again, and a user running git in the worktree sees it
//! clean.

use std::collections::{HashMap, HashSet};
use std::io::{ErrorKind, Read};
use std::path::Path;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, Metadata, OpenOptions};
use gix_hash::ObjectId;
use gix_ignore::glob::pattern::Case;
use gix_index::entry::{self, Stat};
use gix_object::bstr::{BStr, BString, ByteSlice, ByteVec};
use gix_object::tree::{Entry, EntryKind};

use crate::{GitError, Repo, Worktree};

mod cache;
mod ignores;
mod store;
mod walk;

use cache::{StatCache, Tracked};
use ignores::Ignores;
use store::{HASH, Store};
use walk::Walk;

#[cfg(test)]
pub(crate) mod tests;

/// Names never committed, compared without case (a checkout on a
/// case-insensitive file system would write `.GIT` into `.git`).
const NEVER: &str = ".git";
/// Never committed at the top of the tree.
const NEVER_AT_TOP: &str = ".cofer";
/// The names git refuses to check out on some system (`.git.`, `git~1`,
/// `.g\u{200b}it`, a linked `.gitmodules`): committed, they would break a
/// later checkout, so they are left out and named.
const NAME_RULES: gix_validate::path::component::Options = gix_validate::path::component::Options {
    protect_windows: false,
    protect_hfs: true,
    protect_ntfs: true,
};
/// How deep folders may nest to be committed. A container can nest them
/// without end (one `cd` at a time), and the walk holds a folder handle
/// and a stack frame for each level: past this it would run its thread out
/// of stack and take the host down. git itself refuses trees deeper than
/// its `core.maxTreeDepth` (2048); no project comes near either.
pub const MAX_DEPTH: usize = 256;
/// How many files one commit holds. A container can make millions of
/// empty files at no cost to itself; each costs the host a stat, an index
/// entry and a tree entry at every command (a million took 563 MB), so
/// past this the rest are left out (a tracked one keeps its committed
/// version) and the answer says so. Far above any project's source tree.
pub const MAX_FILES: usize = 500_000;
/// How many lines the `.gitignore` files on one path (the top's, its
/// folder's, ...) may hold together. Each file is matched against all of
/// them: a container writing a megabyte of patterns into every folder
/// would take gigabytes and hours of the host's; real lists are a few
/// hundred lines.
pub const MAX_IGNORE_PATTERNS: usize = 20_000;

/// Who a commit is by.
pub struct Identity {
    pub name: String,
    pub email: String,
}

/// What [`commit_worktree`] did.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The new commit, none when the tree did not change.
    pub commit: Option<String>,
    /// Files left out for their size: path and bytes.
    pub too_large: LeftOut<(String, u64)>,
    /// Folders left out for their depth ([`MAX_DEPTH`]): their paths.
    pub too_deep: LeftOut<String>,
    /// `.gitignore` files not applied ([`MAX_IGNORE_PATTERNS`]): their paths.
    pub unapplied_ignores: LeftOut<String>,
    /// Files and folders left out for a name git refuses ([`NAME_RULES`]).
    pub refused_names: LeftOut<String>,
    /// Files left out past [`MAX_FILES`].
    pub too_many: LeftOut<String>,
}

/// What a commit left out for one reason: the first [`LeftOut::NAMED`],
/// and how many in all (a container may make millions; each named one
/// becomes a line of an answer).
#[derive(Debug)]
pub struct LeftOut<T> {
    pub first: Vec<T>,
    pub count: usize,
}

impl<T> Default for LeftOut<T> {
    fn default() -> Self {
        LeftOut {
            first: Vec::new(),
            count: 0,
        }
    }
}

impl<T> LeftOut<T> {
    pub const NAMED: usize = 20;

    fn push(&mut self, item: T) {
        if self.first.len() < Self::NAMED {
            self.first.push(item);
        }
        self.count += 1;
    }

    fn map<U>(self, f: impl FnMut(T) -> U) -> LeftOut<U> {
        LeftOut {
            first: self.first.into_iter().map(f).collect(),
            count: self.count,
        }
    }
}

/// Commit everything in the linked worktree `tree` of `main` onto the
/// branch its `HEAD` names, with `message` by `who`. Blocking: call it off
/// the async runtime.
pub fn commit_worktree(
    main: &Repo,
    tree: &Worktree,
    message: &str,
    who: &Identity,
    max_file_bytes: u64,
) -> Result<Snapshot, GitError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| GitError::Failed {
        command: format!("commit {}: {what}", tree.work_tree.display()),
        exit_code: None,
        stderr: e.to_string(),
    };
    let branch = branch_of(tree)?;
    let repo = Store::open(&main.git()).map_err(|e| failed("open the repository", &*e))?;
    let parent = repo
        .tip(&branch)
        .map_err(|e| failed("read the branch", &*e))?;
    let parent_tree = match parent {
        Some(id) => Some(
            repo.tree_of(&id)
                .map_err(|e| failed("read the last commit", &*e))?,
        ),
        None => None,
    };
    let tracked = Tracked::of(parent_tree);

    let root = tree
        .tree
        .try_clone()
        .map_err(|e| failed("open the worktree", &e))?;
    let index_path = crate::proc_path(&*tree.admin).join("index");
    let mut walk = Walk {
        repo: &repo,
        tracked,
        cache: StatCache::read(&index_path),
        ignore: Ignores::new(main, tree, &root),
        max_file_bytes,
        too_large: LeftOut::default(),
        depth: 0,
        too_deep: LeftOut::default(),
        refused_names: LeftOut::default(),
        too_many: LeftOut::default(),
        linked: HashMap::new(),
        index: Vec::new(),
        changed: false,
    };
    let new_tree = walk
        .dir(&root, BStr::new(""))
        .map_err(|e| failed("walk the worktree", &e))?
        .unwrap_or_else(|| ObjectId::empty_tree(HASH));
    // Every entry as the index has it: nothing to write (100 MB for a
    // million files, at every command).
    let unchanged = !walk.changed && walk.cache.len() == Some(walk.index.len());
    let Walk {
        too_large,
        too_deep,
        refused_names,
        too_many,
        index,
        ignore,
        ..
    } = walk;
    let refused_names = refused_names.map(|path| path.to_string());
    let too_many = too_many.map(|path| path.to_string());
    let unapplied_ignores = ignore.unapplied.map(|path| path.to_string());
    // The index is a cache: a failure to write it costs time, not data.
    if !unchanged && let Err(e) = write_index(&index_path, index) {
        tracing::debug!("cannot write {}: {e}", index_path.display());
    }
    let too_large = too_large.map(|(path, bytes)| (path.to_string(), bytes));
    let too_deep = too_deep.map(|path| path.to_string());
    if Some(new_tree) == parent_tree {
        return Ok(Snapshot {
            commit: None,
            too_large,
            too_deep,
            unapplied_ignores,
            refused_names,
            too_many,
        });
    }
    let time = gix_date::Time::now_local_or_utc();
    let mut time_buf = gix_date::parse::TimeBuf::default();
    let signature = gix_actor::SignatureRef {
        name: who.name.as_bytes().as_bstr(),
        email: who.email.as_bytes().as_bstr(),
        time: time.to_str(&mut time_buf),
    };
    let commit = repo
        .commit(signature, &branch, message, new_tree, parent)
        .map_err(|e| failed("write the commit", &*e))?;
    Ok(Snapshot {
        commit: Some(commit.to_string()),
        too_large,
        too_deep,
        unapplied_ignores,
        refused_names,
        too_many,
    })
}

/// The branch a linked worktree is on, from its `HEAD` in the admin
/// directory (which the host owns).
fn branch_of(tree: &Worktree) -> Result<String, GitError> {
    let head = tree.admin.read_to_string("HEAD").unwrap_or_default();
    head.trim_end()
        .strip_prefix("ref: ")
        .filter(|r| r.starts_with("refs/heads/"))
        .map(str::to_string)
        .ok_or_else(|| {
            GitError::Refused(format!(
                "the worktree {} is not on a branch (its HEAD is `{}`)",
                tree.work_tree.display(),
                head.trim()
            ))
        })
}

type WalkResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The regular file `name` of `dir`, opened for reading, never through a
/// link. The container may have swapped what was statted for a fifo or
/// a device since: that is opened without waiting, and refused.
fn open_nofollow(dir: &Dir, name: &std::ffi::OsStr) -> std::io::Result<cap_std::fs::File> {
    let mut options = OpenOptions::new();
    options.read(true).follow(FollowSymlinks::No);
    crate::sys::without_waiting(&mut options);
    let file = dir.open_with(name, &options)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            ErrorKind::InvalidInput,
            "no longer a regular file",
        ));
    }
    Ok(file)
}

fn join(prefix: &BStr, name: &BStr) -> BString {
    let mut path = BString::from(prefix.to_vec());
    if !path.is_empty() {
        path.push_byte(b'/');
    }
    path.push_str(name);
    path
}

fn write_index(
    path: &Path,
    entries: Vec<(BString, Option<Stat>, ObjectId, entry::Mode)>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut state = gix_index::State::new(HASH);
    for (path, stat, oid, mode) in entries {
        state.dangerously_push_entry(
            stat.unwrap_or_default(),
            oid,
            entry::Flags::empty(),
            mode,
            path.as_bstr(),
        );
    }
    state.sort_entries();
    gix_index::File::from_state(state, path).write(Default::default())?;
    Ok(())
}
