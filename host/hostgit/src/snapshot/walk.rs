//! The walk of a worktree beneath its directory handle: one component at
//! a time, never through a link, names git refuses left out.

use super::cache::STAT;
use super::*;

pub(super) struct Walk<'r> {
    pub(super) repo: &'r Store,
    pub(super) tracked: Tracked,
    pub(super) cache: StatCache,
    pub(super) ignore: Ignores,
    pub(super) max_file_bytes: u64,
    pub(super) too_large: LeftOut<(BString, u64)>,
    /// How deep the folder being walked is (the top is 0).
    pub(super) depth: usize,
    pub(super) too_deep: LeftOut<BString>,
    pub(super) refused_names: LeftOut<BString>,
    pub(super) too_many: LeftOut<BString>,
    /// Files with several hard links read in this walk, by inode: a
    /// container can give one large file a thousand names, and each is
    /// read once (issue 61, item 11).
    pub(super) linked: HashMap<(u64, u64), (Stat, ObjectId)>,
    /// Entries of the new index: path, stat (none: check next time), blob, mode.
    pub(super) index: Vec<(BString, Option<Stat>, ObjectId, entry::Mode)>,
    /// Whether any entry differs from the stat cache's (a file read, a
    /// link, one kept at its committed version): the index is written.
    pub(super) changed: bool,
}

impl Walk<'_> {
    /// The tree of `dir` (at `prefix`, empty for the top), none when
    /// nothing in it is committed.
    pub(super) fn dir(&mut self, dir: &Dir, prefix: &BStr) -> WalkResult<Option<ObjectId>> {
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
        Ok(Some(self.repo.write(&gix_object::Tree { entries })?))
    }

    pub(super) fn entries(&mut self, dir: &Dir, prefix: &BStr) -> WalkResult<Vec<Entry>> {
        let mut entries = Vec::new();
        for item in dir.entries()? {
            let item = item?;
            let name = gix_path::os_str_into_bstr(&item.file_name())?.to_owned();
            if name.eq_ignore_ascii_case(NEVER.as_bytes())
                || (prefix.is_empty() && name.eq_ignore_ascii_case(NEVER_AT_TOP.as_bytes()))
            {
                continue;
            }
            let path = join(prefix, name.as_bstr());
            let meta = item.metadata()?;
            let file_type = meta.file_type();
            let link = file_type.is_symlink();
            let mode = link.then_some(gix_validate::path::component::Mode::Symlink);
            if gix_validate::path::component(name.as_bstr(), mode, NAME_RULES).is_err()
                || crate::names::git_behind_invisibles(name.as_bstr())
            {
                self.refused_names.push(path);
                continue;
            }
            let ignored = self.ignore.ignored(path.as_bstr(), file_type.is_dir());
            let found = if file_type.is_dir() {
                // An ignored directory is entered only for what is tracked in it.
                if ignored && !self.tracked.has_dir(self.repo, &path)? {
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
            } else if ignored && self.tracked.file(self.repo, &path)?.is_none() {
                continue;
            } else if self.index.len() >= MAX_FILES {
                self.too_many.push(path.clone());
                self.as_committed(path)?
            } else if link {
                let target = dir.read_link_contents(item.file_name())?;
                let target = gix_path::into_bstr(target)?;
                let oid = self.repo.write_blob(target.as_ref())?;
                self.changed = true;
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
    pub(super) fn file(
        &mut self,
        dir: &Dir,
        name: &std::ffi::OsStr,
        path: BString,
        meta: &Metadata,
    ) -> WalkResult<Option<(EntryKind, ObjectId)>> {
        // Where the file system has no executable bit, the committed mode stays.
        let executable = match crate::sys::executable(meta) {
            Some(executable) => executable,
            None => self
                .tracked
                .file(self.repo, &path)?
                .is_some_and(|(_, kind)| kind == EntryKind::BlobExecutable),
        };
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
        self.changed = true;
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
            return self.left_out(path, meta.len());
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
            return self.left_out(path, bytes.len() as u64);
        }
        let oid = self.repo.write_blob(&bytes)?;
        if let Some(inode) = inode {
            self.linked.insert(inode, (stat, oid));
        }
        self.index.push((path, Some(stat), oid, mode));
        Ok(Some((kind, oid)))
    }

    /// A file over the limit, of `bytes`: left out, or kept at its
    /// committed version.
    pub(super) fn left_out(
        &mut self,
        path: BString,
        bytes: u64,
    ) -> WalkResult<Option<(EntryKind, ObjectId)>> {
        self.too_large.push((path.clone(), bytes));
        self.as_committed(path)
    }

    /// A file left out: its last committed version, if it has one.
    pub(super) fn as_committed(
        &mut self,
        path: BString,
    ) -> WalkResult<Option<(EntryKind, ObjectId)>> {
        self.changed = true;
        Ok(self.tracked.file(self.repo, &path)?.map(|(oid, kind)| {
            let mode = match kind {
                EntryKind::BlobExecutable => entry::Mode::FILE_EXECUTABLE,
                EntryKind::Link => entry::Mode::SYMLINK,
                _ => entry::Mode::FILE,
            };
            self.index.push((path, None, oid, mode));
            (kind, oid)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::tests::{git, setup};

    /// Names git refuses on some system are left out and counted; every
    /// name of a hard-linked file is committed with the one blob.
    #[test]
    pub(super) fn refused_names_are_left_out_and_hard_links_share_a_blob() {
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
        let done =
            commit_worktree(&repo, &tree, "m", &crate::snapshot::tests::who(), 1 << 20).unwrap();
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
