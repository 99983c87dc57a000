//! The `.gitignore` files on a path, read as patterns (never as config),
//! at most [`MAX_IGNORE_PATTERNS`](super::MAX_IGNORE_PATTERNS) lines together.

use super::*;

/// Ignore patterns in force: the default excludes (when the tree has no
/// `.gitignore` at its top), `info/exclude`, then each directory's
/// `.gitignore` on the way down (later lists win, as in git).
pub(super) struct Ignores {
    pub(super) search: gix_ignore::Search,
    pub(super) root: std::path::PathBuf,
    /// The lines of each `.gitignore` in force.
    pub(super) lines: Vec<usize>,
    /// The `.gitignore` files left unapplied for want of lines.
    pub(super) unapplied: LeftOut<BString>,
}

impl Ignores {
    pub(super) fn new(main: &Repo, tree: &Worktree, top: &Dir) -> Ignores {
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
    pub(super) fn enter(&mut self, dir: &Dir, prefix: &BStr) -> bool {
        let Some(bytes) = read_small(dir, ".gitignore", 1 << 20) else {
            return false;
        };
        let Ok(relative) = gix_path::from_bstr(prefix) else {
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

    pub(super) fn leave(&mut self) {
        self.search.patterns.pop();
        self.lines.pop();
    }

    pub(super) fn ignored(&self, path: &BStr, is_dir: bool) -> bool {
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
