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
use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice, ByteVec};
use gix::index::entry::{self, Stat};
use gix::objs::tree::{Entry, EntryKind};
use gix_ignore::glob::pattern::Case;

use crate::{GitError, Repo, Worktree};

/// Names never committed, compared without case (a checkout on a
/// case-insensitive file system would write `.GIT` into `.git`).
const NEVER: &str = ".git";
/// Never committed at the top of the tree.
const NEVER_AT_TOP: &str = ".cofer";
/// The names git refuses to check out on some system (`.git.`, `git~1`,
/// `.g\u{200b}it`, a linked `.gitmodules`): committed, they would break a
/// later checkout, so they are left out and named.
const NAME_RULES: gix::validate::path::component::Options =
    gix::validate::path::component::Options {
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
    let repo = gix::open_opts(main.git(), gix::open::Options::isolated())
        .map_err(|e| failed("open the repository", &e))?;
    let parent = repo
        .try_find_reference(branch.as_str())
        .map_err(|e| failed("read the branch", &e))?
        .map(|mut r| r.peel_to_id())
        .transpose()
        .map_err(|e| failed("read the branch", &e))?
        .map(|id| id.detach());
    let parent_tree = match parent {
        Some(id) => Some(
            repo.find_commit(id)
                .and_then(|c| c.tree_id())
                .map_err(|e| failed("read the last commit", &e))?
                .detach(),
        ),
        None => None,
    };
    let tracked = match parent_tree {
        Some(id) => Tracked::read(&repo, id).map_err(|e| failed("read the last commit", &e))?,
        None => Tracked::default(),
    };

    let root = tree
        .tree
        .try_clone()
        .map_err(|e| failed("open the worktree", &e))?;
    let index_path = crate::proc_path(&*tree.admin).join("index");
    let mut walk = Walk {
        repo: &repo,
        tracked,
        cache: StatCache::read(&index_path, repo.object_hash()),
        ignore: Ignores::new(main, tree, &root),
        max_file_bytes,
        too_large: LeftOut::default(),
        depth: 0,
        too_deep: LeftOut::default(),
        refused_names: LeftOut::default(),
        too_many: LeftOut::default(),
        linked: HashMap::new(),
        index: Vec::new(),
    };
    let new_tree = walk
        .dir(&root, BStr::new(""))
        .map_err(|e| failed("walk the worktree", &e))?
        .unwrap_or_else(|| ObjectId::empty_tree(repo.object_hash()));
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
    if let Err(e) = write_index(&index_path, repo.object_hash(), index) {
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
    let time = gix::date::Time::now_local_or_utc();
    let mut time_buf = gix::date::parse::TimeBuf::default();
    let signature = gix::actor::SignatureRef {
        name: who.name.as_bytes().as_bstr(),
        email: who.email.as_bytes().as_bstr(),
        time: time.to_str(&mut time_buf),
    };
    let commit = repo
        .commit_as(
            signature,
            signature,
            branch.as_str(),
            message,
            new_tree,
            parent,
        )
        .map_err(|e| failed("write the commit", &e))?;
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

/// What the last commit holds: files by path, and every directory.
#[derive(Default)]
struct Tracked {
    files: HashMap<BString, (ObjectId, EntryKind)>,
    dirs: HashSet<BString>,
}

impl Tracked {
    fn read(repo: &gix::Repository, root: ObjectId) -> WalkResult<Tracked> {
        let mut tracked = Tracked::default();
        let mut pending = vec![(BString::default(), root)];
        while let Some((prefix, id)) = pending.pop() {
            let object = repo.find_object(id)?;
            for entry in
                gix::objs::TreeRefIter::from_bytes(&object.data, repo.object_hash()).flatten()
            {
                let path = join(prefix.as_bstr(), entry.filename);
                match entry.mode.kind() {
                    EntryKind::Tree => {
                        tracked.dirs.insert(path.clone());
                        pending.push((path, entry.oid.to_owned()));
                    }
                    kind => {
                        tracked.files.insert(path, (entry.oid.to_owned(), kind));
                    }
                }
            }
        }
        Ok(tracked)
    }
}

/// The worktree's last index: blob ids of files whose stat has not changed.
struct StatCache(Option<gix::index::File>);

const STAT: gix::index::entry::stat::Options = gix::index::entry::stat::Options {
    trust_ctime: true,
    check_stat: true,
    use_nsec: true,
    use_stdev: false,
};

impl StatCache {
    fn read(path: &Path, hash: gix::hash::Kind) -> StatCache {
        StatCache(gix::index::File::at(path, hash, false, Default::default()).ok())
    }

    /// The blob `path` still holds if its stat says it is unchanged (and
    /// was not changed in the same instant the index was written).
    fn unchanged(&self, path: &BStr, stat: &Stat, mode: entry::Mode) -> Option<ObjectId> {
        let index = self.0.as_ref()?;
        let cached = index.entry_by_path(path)?;
        (cached.mode == mode
            && cached.stat.matches(stat, STAT)
            && !cached.stat.is_racy(index.timestamp(), STAT))
        .then_some(cached.id)
    }
}

/// Ignore patterns in force: the default excludes (when the tree has no
/// `.gitignore` at its top), `info/exclude`, then each directory's
/// `.gitignore` on the way down (later lists win, as in git).
struct Ignores {
    search: gix_ignore::Search,
    root: std::path::PathBuf,
    /// The lines of each `.gitignore` in force.
    lines: Vec<usize>,
    /// The `.gitignore` files left unapplied for want of lines.
    unapplied: LeftOut<BString>,
}

impl Ignores {
    fn new(main: &Repo, tree: &Worktree, top: &Dir) -> Ignores {
        let mut search = gix_ignore::Search::default();
        let parse = gix_ignore::search::Ignore::default();
        let root = tree.work_tree.clone();
        if top.symlink_metadata(".gitignore").is_err() {
            let _ = search.add_patterns_buffer(
                crate::DEFAULT_EXCLUDES.as_bytes(),
                root.join(".default-excludes"),
                Some(&root),
                parse,
            );
        }
        if let Ok(bytes) = main.handles.git.read("info/exclude") {
            let _ =
                search.add_patterns_buffer(&bytes, root.join(".info-exclude"), Some(&root), parse);
        }
        Ignores {
            search,
            root,
            lines: Vec::new(),
            unapplied: LeftOut::default(),
        }
    }

    /// Take `dir`'s `.gitignore` (a regular file, at most 1 MiB) into
    /// account below `prefix`; whether a list was added.
    fn enter(&mut self, dir: &Dir, prefix: &BStr) -> bool {
        let Some(bytes) = read_small(dir, ".gitignore", 1 << 20) else {
            return false;
        };
        let Ok(relative) = gix::path::from_bstr(prefix) else {
            return false;
        };
        let lines = bytes.split(|b| *b == b'\n').count();
        if self.lines.iter().sum::<usize>() + lines > MAX_IGNORE_PATTERNS {
            self.unapplied.push(join(prefix, ".gitignore".into()));
            return false;
        }
        let source = self.root.join(relative).join(".gitignore");
        let added = self
            .search
            .add_patterns_buffer(&bytes, source, Some(&self.root), Default::default())
            .is_ok();
        if added {
            self.lines.push(lines);
        }
        added
    }

    fn leave(&mut self) {
        self.search.patterns.pop();
        self.lines.pop();
    }

    fn ignored(&self, path: &BStr, is_dir: bool) -> bool {
        self.search
            .pattern_matching_relative_path(path, Some(is_dir), Case::Sensitive)
            .is_some_and(|m| !m.pattern.is_negative())
    }
}

/// A regular file `name` in `dir` of at most `limit` bytes, never through a
/// link.
fn read_small(dir: &Dir, name: &str, limit: u64) -> Option<Vec<u8>> {
    let meta = dir.symlink_metadata(name).ok()?;
    if !meta.is_file() || meta.len() > limit {
        return None;
    }
    let mut bytes = Vec::new();
    open_nofollow(dir, name.as_ref())
        .ok()?
        .take(limit)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

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

struct Walk<'r> {
    repo: &'r gix::Repository,
    tracked: Tracked,
    cache: StatCache,
    ignore: Ignores,
    max_file_bytes: u64,
    too_large: LeftOut<(BString, u64)>,
    /// How deep the folder being walked is (the top is 0).
    depth: usize,
    too_deep: LeftOut<BString>,
    refused_names: LeftOut<BString>,
    too_many: LeftOut<BString>,
    /// Files with several hard links read in this walk, by inode: a
    /// container can give one large file a thousand names, and each is
    /// read once (issue 61, item 11).
    linked: HashMap<(u64, u64), (Stat, ObjectId)>,
    /// Entries of the new index: path, stat (none: check next time), blob, mode.
    index: Vec<(BString, Option<Stat>, ObjectId, entry::Mode)>,
}

type WalkResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

impl Walk<'_> {
    /// The tree of `dir` (at `prefix`, empty for the top), none when
    /// nothing in it is committed.
    fn dir(&mut self, dir: &Dir, prefix: &BStr) -> WalkResult<Option<ObjectId>> {
        let entered = self.ignore.enter(dir, prefix);
        let result = self.entries(dir, prefix);
        if entered {
            self.ignore.leave();
        }
        let mut entries = result?;
        if entries.is_empty() {
            return Ok(None);
        }
        entries.sort();
        Ok(Some(
            self.repo
                .write_object(&gix::objs::Tree { entries })?
                .detach(),
        ))
    }

    fn entries(&mut self, dir: &Dir, prefix: &BStr) -> WalkResult<Vec<Entry>> {
        let mut entries = Vec::new();
        for item in dir.entries()? {
            let item = item?;
            let name = gix::path::os_str_into_bstr(&item.file_name())?.to_owned();
            if name.eq_ignore_ascii_case(NEVER.as_bytes())
                || (prefix.is_empty() && name.eq_ignore_ascii_case(NEVER_AT_TOP.as_bytes()))
            {
                continue;
            }
            let path = join(prefix, name.as_bstr());
            let meta = item.metadata()?;
            let file_type = meta.file_type();
            let link = file_type.is_symlink();
            let mode = link.then_some(gix::validate::path::component::Mode::Symlink);
            if gix::validate::path::component(name.as_bstr(), mode, NAME_RULES).is_err()
                || git_behind_invisibles(name.as_bstr())
            {
                self.refused_names.push(path);
                continue;
            }
            let ignored = self.ignore.ignored(path.as_bstr(), file_type.is_dir());
            let found = if file_type.is_dir() {
                // An ignored directory is entered only for what is tracked in it.
                if ignored && !self.tracked.dirs.contains(&path) {
                    continue;
                }
                if self.depth == MAX_DEPTH {
                    self.too_deep.push(path);
                    continue;
                }
                let sub = dir.open_dir_nofollow(item.file_name())?;
                self.depth += 1;
                let tree = self.dir(&sub, path.as_bstr());
                self.depth -= 1;
                tree?.map(|oid| (EntryKind::Tree, oid))
            } else if ignored && !self.tracked.files.contains_key(&path) {
                continue;
            } else if self.index.len() >= MAX_FILES {
                self.too_many.push(path.clone());
                self.as_committed(path)
            } else if link {
                let target = dir.read_link_contents(item.file_name())?;
                let target = gix::path::into_bstr(target)?;
                let oid = self.repo.write_blob(target.as_ref() as &[u8])?.detach();
                self.index.push((
                    path.clone(),
                    Some(crate::sys::stat_of(&meta)),
                    oid,
                    entry::Mode::SYMLINK,
                ));
                Some((EntryKind::Link, oid))
            } else if file_type.is_file() {
                self.file(dir, &item.file_name(), path.clone(), &meta)?
            } else {
                None // sockets, fifos, devices
            };
            if let Some((kind, oid)) = found {
                entries.push(Entry {
                    mode: kind.into(),
                    filename: name,
                    oid,
                });
            }
        }
        Ok(entries)
    }

    /// A regular file's blob and kind; a file over the limit keeps its last
    /// committed version, or is left out.
    fn file(
        &mut self,
        dir: &Dir,
        name: &std::ffi::OsStr,
        path: BString,
        meta: &Metadata,
    ) -> WalkResult<Option<(EntryKind, ObjectId)>> {
        // Where the file system has no executable bit, the committed mode stays.
        let executable = crate::sys::executable(meta).unwrap_or_else(|| {
            self.tracked
                .files
                .get(&path)
                .is_some_and(|&(_, kind)| kind == EntryKind::BlobExecutable)
        });
        let (kind, mode) = if executable {
            (EntryKind::BlobExecutable, entry::Mode::FILE_EXECUTABLE)
        } else {
            (EntryKind::Blob, entry::Mode::FILE)
        };
        let stat = crate::sys::stat_of(meta);
        if let Some(oid) = self.cache.unchanged(path.as_bstr(), &stat, mode) {
            self.index.push((path, Some(stat), oid, mode));
            return Ok(Some((kind, oid)));
        }
        let inode = crate::sys::shared_inode(meta);
        if let Some((seen, oid)) = inode.and_then(|i| self.linked.get(&i))
            && seen.matches(&stat, STAT)
        {
            let oid = *oid;
            self.index.push((path, Some(stat), oid, mode));
            return Ok(Some((kind, oid)));
        }
        // Too large by its stat: not read (a sparse file costs the container
        // nothing and would cost the host the whole limit in reading).
        if meta.len() > self.max_file_bytes {
            return Ok(self.left_out(path, meta.len()));
        }
        let file = match open_nofollow(dir, name) {
            // Gone, or no longer a file, since it was listed.
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::InvalidInput) => {
                return Ok(None);
            }
            opened => opened?,
        };
        // And by what is read: the container may be writing it right now.
        let mut bytes = Vec::new();
        file.take(self.max_file_bytes.saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > self.max_file_bytes {
            return Ok(self.left_out(path, bytes.len() as u64));
        }
        let oid = self.repo.write_blob(&bytes)?.detach();
        if let Some(inode) = inode {
            self.linked.insert(inode, (stat, oid));
        }
        self.index.push((path, Some(stat), oid, mode));
        Ok(Some((kind, oid)))
    }

    /// A file over the limit, of `bytes`: left out, or kept at its
    /// committed version.
    fn left_out(&mut self, path: BString, bytes: u64) -> Option<(EntryKind, ObjectId)> {
        self.too_large.push((path.clone(), bytes));
        self.as_committed(path)
    }

    /// A file left out: its last committed version, if it has one.
    fn as_committed(&mut self, path: BString) -> Option<(EntryKind, ObjectId)> {
        self.tracked.files.get(&path).map(|&(oid, kind)| {
            let mode = match kind {
                EntryKind::BlobExecutable => entry::Mode::FILE_EXECUTABLE,
                EntryKind::Link => entry::Mode::SYMLINK,
                _ => entry::Mode::FILE,
            };
            self.index.push((path, None, oid, mode));
            (kind, oid)
        })
    }
}

/// Whether `name` is `.git` once characters no one sees are taken out
/// (zero-width spaces and joiners, direction marks, the byte-order mark):
/// git's own HFS rule knows only some of them, and a name a person reads
/// as `.git` has no place in a commit either.
fn git_behind_invisibles(name: &BStr) -> bool {
    let Ok(text) = std::str::from_utf8(name) else {
        return false;
    };
    let invisible = |c: char| {
        matches!(c, '\u{00ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}' | '\u{feff}')
    };
    let seen: String = text.chars().filter(|c| !invisible(*c)).collect();
    seen.len() != text.len() && seen.eq_ignore_ascii_case(NEVER)
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
    hash: gix::hash::Kind,
    entries: Vec<(BString, Option<Stat>, ObjectId, entry::Mode)>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut state = gix::index::State::new(hash);
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
    gix::index::File::from_state(state, path).write(Default::default())?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::PathBuf;
    use std::process::Command;

    /// `git` as a user runs it in tests (no global or system config).
    pub(crate) fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A repository with one commit and a worktree on `cofer/t`.
    pub(crate) fn setup(files: &[(&str, &str)]) -> (tempfile::TempDir, Repo, Worktree) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        git(&root, &["init", "-q"]);
        for (name, text) in files {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        git(&root, &["add", "--all", "--force"]);
        git(&root, &["commit", "-q", "-m", "base"]);
        git(
            &root,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "cofer/t",
                ".cofer/worktrees/t",
            ],
        );
        let repo = Repo::open(&root).unwrap();
        let path = root.join(".cofer/worktrees/t");
        let open = Dir::open_ambient_dir(&path, cap_std::ambient_authority()).unwrap();
        let tree = repo.linked(&path, open).unwrap();
        (dir, repo, tree)
    }

    pub(crate) fn who() -> Identity {
        Identity {
            name: "cofer".into(),
            email: "cofer@localhost".into(),
        }
    }

    /// Commit the worktree with a 1 MiB limit; the new commit, if any.
    fn commit(repo: &Repo, tree: &Worktree) -> Option<String> {
        commit_worktree(repo, tree, "m", &who(), 1 << 20)
            .unwrap()
            .commit
    }

    fn files_of(repo: &Repo, commit: &str) -> Vec<String> {
        git(repo.work_tree(), &["ls-tree", "-r", "--name-only", commit])
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn wt(tree: &Worktree, name: &str) -> PathBuf {
        tree.work_tree.join(name)
    }

    #[test]
    fn a_commit_holds_what_git_add_all_would_and_nothing_of_gits_or_cofers() {
        let (_dir, repo, tree) = setup(&[
            ("README", "hi\n"),
            ("keep/x.log", "tracked\n"),
            (".gitignore", "*.log\n"),
        ]);
        std::fs::write(wt(&tree, "new.txt"), "new\n").unwrap();
        std::fs::write(wt(&tree, "ignored.log"), "no\n").unwrap();
        std::fs::write(wt(&tree, "keep/x.log"), "tracked, changed\n").unwrap();
        std::fs::write(wt(&tree, "run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(wt(&tree, "run.sh"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        symlink("/etc/passwd", wt(&tree, "link")).unwrap();
        // A nested repository whose config defines a filter its attributes apply.
        std::fs::create_dir_all(wt(&tree, "sub/.git")).unwrap();
        std::fs::write(
            wt(&tree, "sub/.git/config"),
            "[filter \"x\"]\n\tclean = touch /tmp/pwned\n",
        )
        .unwrap();
        std::fs::write(wt(&tree, "sub/.gitattributes"), "* filter=x\n").unwrap();
        std::fs::write(wt(&tree, "sub/file"), "in sub\n").unwrap();
        // Cofer's state and git's own names, in any case.
        for planted in [
            ".cofer/remote.git/hooks/post-receive",
            ".COFER/x",
            "a/.GIT/hooks/x",
            "a/b",
        ] {
            std::fs::create_dir_all(wt(&tree, planted).parent().unwrap()).unwrap();
            std::fs::write(wt(&tree, planted), "planted\n").unwrap();
        }
        std::fs::write(wt(&tree, ".gitignore"), "*.log\n!/.cofer/\n").unwrap();

        let done = commit_worktree(&repo, &tree, "work", &who(), 1 << 20).unwrap();
        let commit = done.commit.expect("a commit");
        assert_eq!(
            git(repo.work_tree(), &["rev-parse", "cofer/t"]).trim(),
            commit
        );
        let mut files = files_of(&repo, &commit);
        files.sort();
        assert_eq!(
            files,
            [
                ".gitignore",
                "README",
                "a/b",
                "keep/x.log",
                "link",
                "new.txt",
                "run.sh",
                "sub/.gitattributes",
                "sub/file"
            ]
        );
        let modes = git(repo.work_tree(), &["ls-tree", "-r", &commit]);
        assert!(
            modes.contains("100755 blob") && modes.contains("120000 blob"),
            "{modes}"
        );
        assert_eq!(
            git(repo.work_tree(), &["show", &format!("{commit}:link")]),
            "/etc/passwd"
        );
        assert_eq!(
            git(repo.work_tree(), &["show", &format!("{commit}:keep/x.log")]),
            "tracked, changed\n"
        );
        let parent = git(repo.work_tree(), &["rev-parse", &format!("{commit}^")]);
        assert_eq!(
            parent.trim(),
            git(repo.work_tree(), &["rev-parse", "main"]).trim()
        );
        // git agrees with the index the host wrote: nothing to commit.
        let status = git(&tree.work_tree, &["status", "--porcelain", "--ignored=no"]);
        assert!(
            !status.contains("new.txt") && !status.contains("README"),
            "{status}"
        );
        assert!(!Path::new("/tmp/pwned").exists());
    }

    #[test]
    fn an_unchanged_tree_makes_no_commit_and_a_change_of_the_same_size_is_seen() {
        let (_dir, repo, tree) = setup(&[("a.txt", "one\n")]);
        assert_eq!(commit(&repo, &tree), None);
        std::fs::write(wt(&tree, "a.txt"), "two\n").unwrap();
        let first = commit(&repo, &tree).unwrap();
        assert_eq!(commit(&repo, &tree), None);
        std::fs::write(wt(&tree, "a.txt"), "six\n").unwrap();
        let second = commit(&repo, &tree).unwrap();
        assert_ne!(first, second);
        assert_eq!(
            git(repo.work_tree(), &["show", &format!("{second}:a.txt")]),
            "six\n"
        );
        std::fs::remove_file(wt(&tree, "a.txt")).unwrap();
        let third = commit(&repo, &tree).unwrap();
        assert!(files_of(&repo, &third).is_empty());
    }

    #[test]
    fn a_file_over_the_limit_is_left_out_or_keeps_its_committed_version() {
        let (_dir, repo, tree) = setup(&[("big.bin", "small\n")]);
        std::fs::write(wt(&tree, "big.bin"), vec![b'x'; 100]).unwrap();
        std::fs::write(wt(&tree, "new.bin"), vec![b'y'; 100]).unwrap();
        std::fs::write(wt(&tree, "ok.txt"), "fine\n").unwrap();
        let done = commit_worktree(&repo, &tree, "m", &who(), 50).unwrap();
        let commit = done.commit.unwrap();
        let mut large: Vec<_> = done
            .too_large
            .first
            .iter()
            .map(|(p, _)| p.as_str())
            .collect();
        large.sort();
        assert_eq!(large, ["big.bin", "new.bin"]);
        assert_eq!(files_of(&repo, &commit), ["big.bin", "ok.txt"]);
        assert_eq!(
            git(repo.work_tree(), &["show", &format!("{commit}:big.bin")]),
            "small\n"
        );
    }

    #[test]
    fn a_symlinked_directory_is_committed_as_a_link_and_not_followed() {
        let (_dir, repo, tree) = setup(&[("a", "a\n")]);
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "host secret\n").unwrap();
        symlink(outside.path(), wt(&tree, "out")).unwrap();
        let commit = commit(&repo, &tree).unwrap();
        assert_eq!(files_of(&repo, &commit), ["a", "out"]);
        let all = git(repo.work_tree(), &["log", "--all", "-p"]);
        assert!(!all.contains("host secret"), "{all}");
    }

    /// Nest `levels` folders named `d` in `top`, each with a file `f`, one
    /// handle at a time (as a container's `cd` would: the whole path is
    /// past PATH_MAX).
    pub(crate) fn nest(top: &Dir, levels: usize) {
        let mut dir = top.try_clone().unwrap();
        for _ in 0..levels {
            dir.create_dir("d").unwrap();
            dir.write("d/f", "x").unwrap();
            dir = dir.open_dir("d").unwrap();
        }
    }

    /// Run `f` on a thread with the stack of tokio's blocking pool, where
    /// the host commits.
    pub(crate) fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    #[test]
    fn folders_nested_past_the_limit_are_left_out_not_a_crash() {
        let (_dir, repo, tree) = setup(&[("a", "1")]);
        nest(&tree.tree, 5_000);
        let tree = on_small_stack(move || {
            let snapshot = commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap();
            let commit = snapshot.commit.expect("the levels within the limit");
            let deep = snapshot.too_deep;
            assert_eq!(deep.count, 1);
            assert_eq!(deep.first, [vec!["d"; MAX_DEPTH + 1].join("/")]);
            let files = git(
                repo.work_tree(),
                &["ls-tree", "-r", "-t", "--name-only", &commit],
            );
            let deepest = files.lines().map(|l| l.split('/').count()).max();
            // d/…/d/f, the last d at the limit.
            assert_eq!(deepest, Some(MAX_DEPTH + 1));
            tree
        });
        crate::remove_worktree(&tree, true).unwrap();
        assert!(!tree.work_tree.exists());
    }

    #[test]
    fn a_fifo_put_where_a_file_was_is_not_waited_on() {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let open = Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(open_nofollow(&open, "fifo".as_ref()).map(|_| ()));
        });
        let opened = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the open waited for a writer");
        assert_eq!(opened.unwrap_err().kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn gitignore_files_past_the_line_budget_of_their_path_are_not_applied() {
        // `lines` lines, the last of which ignores `name`.
        let list = |lines: usize, name: &str| format!("{}{name}\n", "#\n".repeat(lines - 2));
        let (_dir, repo, tree) = setup(&[("base", "1")]);
        let files: [(&str, String); 9] = [
            (".gitignore", list(15_000, "top-ignored")),
            ("top-ignored", "x".into()),
            ("a/.gitignore", list(4_000, "gone")),
            ("a/gone", "x".into()),
            // b's list fits only once a's lines are given back.
            ("b/.gitignore", list(4_000, "gone")),
            ("b/gone", "x".into()),
            ("c/.gitignore", list(6_000, "kept")),
            ("c/kept", "x".into()),
            ("c/also", "x".into()),
        ];
        for (name, text) in &files {
            let path = wt(&tree, name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let snapshot = commit_worktree(&repo, &tree, "m", &who(), 1 << 20).unwrap();
        assert_eq!(snapshot.unapplied_ignores.first, ["c/.gitignore"]);
        assert_eq!(snapshot.unapplied_ignores.count, 1);
        let committed = files_of(&repo, &snapshot.commit.unwrap());
        for name in ["top-ignored", "a/gone", "b/gone"] {
            assert!(
                !committed.contains(&name.to_string()),
                "{name}: {committed:?}"
            );
        }
        for name in ["c/kept", "c/also", "c/.gitignore", "a/.gitignore"] {
            assert!(
                committed.contains(&name.to_string()),
                "{name}: {committed:?}"
            );
        }
    }
}

#[cfg(test)]
mod names_and_links {
    use super::tests::{git, setup};
    use super::*;

    /// Names git refuses on some system are left out and counted; every
    /// name of a hard-linked file is committed with the one blob.
    #[test]
    fn refused_names_are_left_out_and_hard_links_share_a_blob() {
        let (_dir, repo, tree) = setup(&[("README", "hi\n")]);
        let wt = |name: &str| tree.work_tree().join(name);
        for name in [
            ".git.",
            "git~1",
            "GIT~1",
            ".g\u{200b}it",
            ".gi\u{200c}t",
            "kept.txt",
        ] {
            std::fs::write(wt(name), "x\n").unwrap();
        }
        std::fs::create_dir_all(wt(".git /sub")).unwrap();
        std::fs::write(wt(".git /sub/config"), "x\n").unwrap();
        std::fs::write(wt("big"), "same\n").unwrap();
        for i in 0..3 {
            std::fs::hard_link(wt("big"), wt(&format!("link{i}"))).unwrap();
        }
        let done = commit_worktree(&repo, &tree, "m", &super::tests::who(), 1 << 20).unwrap();
        assert_eq!(
            done.refused_names.count, 6,
            "{:?}",
            done.refused_names.first
        );
        let commit = done.commit.unwrap();
        let listed = git(repo.work_tree(), &["ls-tree", "-r", "-z", commit.as_str()]);
        let blob_of = |name: &str| {
            listed
                .split('\0')
                .find(|l| l.ends_with(&format!("\t{name}")))
                .map(|l| l.split_whitespace().nth(2).unwrap().to_string())
        };
        assert!(blob_of("kept.txt").is_some(), "{listed}");
        for refused in [".git.", "git~1", "GIT~1", ".g\u{200b}it", ".gi\u{200c}t"] {
            assert!(blob_of(refused).is_none(), "{refused:?} in {listed}");
        }
        assert!(!listed.contains(".git /"), "{listed}");
        let blob = blob_of("big").unwrap();
        for i in 0..3 {
            assert_eq!(blob_of(&format!("link{i}")).as_deref(), Some(blob.as_str()));
        }
    }
}
