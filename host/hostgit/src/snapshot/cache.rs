//! What the worktree's index knows: the files and folders of the last
//! commit, and each file's stat, so an unchanged file is not read again.

use super::*;

/// What the last commit holds: files by path, and every directory.
#[derive(Default)]
pub(super) struct Tracked {
    pub(super) files: HashMap<BString, (ObjectId, EntryKind)>,
    pub(super) dirs: HashSet<BString>,
}

impl Tracked {
    pub(super) fn read(repo: &gix::Repository, root: ObjectId) -> WalkResult<Tracked> {
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
pub(super) struct StatCache(pub(super) Option<gix::index::File>);

pub(super) const STAT: gix::index::entry::stat::Options = gix::index::entry::stat::Options {
    trust_ctime: true,
    check_stat: true,
    use_nsec: true,
    use_stdev: false,
};

impl StatCache {
    pub(super) fn read(path: &Path, hash: gix::hash::Kind) -> StatCache {
        StatCache(gix::index::File::at(path, hash, false, Default::default()).ok())
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
