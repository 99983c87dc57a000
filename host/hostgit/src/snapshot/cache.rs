//! What the worktree's index knows: the files and folders of the last
//! commit, and each file's stat, so an unchanged file is not read again.

use super::*;

/// What the last commit holds: files by path, and every directory. Read
/// only when the walk first needs it (an ignored folder or file, a file
/// left out, a file system without an executable bit): a command over an
/// unchanged tree that needs none of that reads no tree at all (a million
/// files' paths were read and held at every command).
pub(super) struct Tracked {
    root: Option<ObjectId>,
    read: Option<Read>,
}

#[derive(Default)]
struct Read {
    files: HashMap<BString, (ObjectId, EntryKind)>,
    dirs: HashSet<BString>,
}

impl Tracked {
    /// What the tree `root` holds (none: an empty tree), read when asked.
    pub(super) fn of(root: Option<ObjectId>) -> Tracked {
        Tracked { root, read: None }
    }

    pub(super) fn has_dir(&mut self, repo: &Store, path: &BString) -> WalkResult<bool> {
        Ok(self.read(repo)?.dirs.contains(path))
    }

    pub(super) fn file(
        &mut self,
        repo: &Store,
        path: &BString,
    ) -> WalkResult<Option<(ObjectId, EntryKind)>> {
        Ok(self.read(repo)?.files.get(path).copied())
    }

    fn read(&mut self, repo: &Store) -> WalkResult<&Read> {
        if self.read.is_none() {
            let mut read = Read::default();
            let mut pending: Vec<(BString, ObjectId)> = self
                .root
                .map(|root| (BString::default(), root))
                .into_iter()
                .collect();
            while let Some((prefix, id)) = pending.pop() {
                let data = repo.tree_data(&id)?;
                for entry in gix_object::TreeRefIter::from_bytes(&data, HASH).flatten() {
                    let path = join(prefix.as_bstr(), entry.filename);
                    match entry.mode.kind() {
                        EntryKind::Tree => {
                            read.dirs.insert(path.clone());
                            pending.push((path, entry.oid.to_owned()));
                        }
                        kind => {
                            read.files.insert(path, (entry.oid.to_owned(), kind));
                        }
                    }
                }
            }
            self.read = Some(read);
        }
        Ok(self.read.as_ref().expect("read just now"))
    }
}

/// The worktree's last index: blob ids of files whose stat has not changed.
pub(super) struct StatCache(pub(super) Option<gix_index::File>);

pub(super) const STAT: gix_index::entry::stat::Options = gix_index::entry::stat::Options {
    trust_ctime: true,
    check_stat: true,
    use_nsec: true,
    use_stdev: false,
};

impl StatCache {
    pub(super) fn read(path: &Path) -> StatCache {
        StatCache(gix_index::File::at(path, HASH, false, Default::default()).ok())
    }

    /// How many entries it holds (none without an index).
    pub(super) fn len(&self) -> Option<usize> {
        self.0.as_ref().map(|index| index.entries().len())
    }

    /// The blob `path` still holds if its stat says it is unchanged (and
    /// was not changed in the same instant the index was written).
    pub(super) fn unchanged(
        &self,
        path: &BStr,
        stat: &Stat,
        mode: entry::Mode,
    ) -> Option<ObjectId> {
        let index = self.0.as_ref()?;
        let cached = index.entry_by_path(path)?;
        (cached.mode == mode
            && cached.stat.matches(stat, STAT)
            && !cached.stat.is_racy(index.timestamp(), STAT))
        .then_some(cached.id)
    }
}
