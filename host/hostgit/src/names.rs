//! What git takes for its own files: the names it reads as `.git` on some
//! system, and the folders it opens as a repository whatever their name.
//!
//! The host uses these for two rules: nothing a container wrote is
//! committed under such a name ([`crate::snapshot`]), and no plugin
//! creates, writes, renames, links or deletes anything inside git's files
//! (the host's WASI file system, issue 70). A rule kept per key of git's
//! config failed three rounds running; a rule on the files holds for every
//! key, hook and driver git will ever add.

use std::ffi::OsStr;
use std::path::Path;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;
use gix_object::bstr::{BStr, ByteSlice};

/// The name git keeps a repository in, compared without case.
pub const DOT_GIT: &str = ".git";

/// git's own checks of a name, all of them on: a checkout on Windows or a
/// Mac reads `.git.`, `git~1`, `.GIT` or `.g\u{200c}it` as `.git`.
const ALL_SYSTEMS: gix_validate::path::component::Options =
    gix_validate::path::component::Options {
        protect_windows: true,
        protect_hfs: true,
        protect_ntfs: true,
    };

/// The entries that make a folder a repository git opens: `HEAD` with
/// `objects` and `refs`, or `HEAD` with `commondir` (a linked worktree's
/// admin folder). Compared without case (case-insensitive file systems).
const REPOSITORY_PARTS: [&str; 4] = ["HEAD", "objects", "refs", "commondir"];

/// Whether git, on some system, reads `name` as `.git`: the name itself in
/// any case, with trailing dots or spaces, its 8.3 short form, an NTFS
/// stream of it, or with characters no one sees put in.
pub fn is_git_name(name: &OsStr) -> bool {
    let bytes = name.as_encoded_bytes();
    if bytes.eq_ignore_ascii_case(DOT_GIT.as_bytes()) {
        return true;
    }
    let name = bytes.as_bstr();
    matches!(
        gix_validate::path::component(name, None, ALL_SYSTEMS),
        Err(gix_validate::path::component::Error::DotGitDir)
    ) || git_behind_invisibles(name)
}

/// Whether `name` is `.git` once characters no one sees are taken out
/// (zero-width spaces and joiners, direction marks, the byte-order mark):
/// git's own HFS rule knows only some of them, and a name a person reads
/// as `.git` has no place in a commit either.
pub fn git_behind_invisibles(name: &BStr) -> bool {
    let Ok(text) = std::str::from_utf8(name) else {
        return false;
    };
    let invisible = |c: char| {
        matches!(c, '\u{00ad}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}' | '\u{feff}')
    };
    let seen: String = text.chars().filter(|c| !invisible(*c)).collect();
    seen.len() != text.len() && seen.eq_ignore_ascii_case(DOT_GIT)
}

/// Which of [`REPOSITORY_PARTS`] `dir` has (bits in that order).
fn parts_of(has: impl Fn(&str) -> bool) -> u8 {
    REPOSITORY_PARTS
        .iter()
        .enumerate()
        .filter(|(_, part)| has(part) || has(&part.to_ascii_lowercase()))
        .fold(0, |bits, (i, _)| bits | 1 << i)
}

/// Whether these parts make a repository: `HEAD` and `objects` and `refs`,
/// or `HEAD` and `commondir`. (git also checks what `HEAD` holds; any
/// `HEAD` is counted here, since it can be written a moment later.)
fn is_repository(bits: u8) -> bool {
    let head = bits & 1 != 0;
    head && (bits & 0b0110 == 0b0110 || bits & 0b1000 != 0)
}

/// Whether the open folder `dir` is one git opens as a repository.
pub fn is_git_dir(dir: &Dir) -> bool {
    is_repository(parts_of(|part| dir.symlink_metadata(part).is_ok()))
}

/// Whether the folder at `path` is one git opens as a repository.
pub fn is_git_dir_at(path: &Path) -> bool {
    // One look for the entry every repository has before the others.
    if std::fs::symlink_metadata(path.join("HEAD")).is_err()
        && std::fs::symlink_metadata(path.join("head")).is_err()
    {
        return false;
    }
    is_repository(parts_of(|part| {
        std::fs::symlink_metadata(path.join(part)).is_ok()
    }))
}

/// Which of [`REPOSITORY_PARTS`] `name` is, compared without case.
pub fn repository_part(name: &OsStr) -> Option<usize> {
    REPOSITORY_PARTS.iter().position(|part| {
        name.as_encoded_bytes()
            .eq_ignore_ascii_case(part.as_bytes())
    })
}

/// Whether an entry `name` put into the open folder `dir` would make it a
/// repository git opens (it is not one yet).
pub fn would_make_git_dir(dir: &Dir, name: &OsStr) -> bool {
    let Some(index) = repository_part(name) else {
        return false;
    };
    let bits = parts_of(|part| dir.symlink_metadata(part).is_ok());
    is_repository(bits | 1 << index)
}

/// Why the host will not let a plugin change `name` in the folder at
/// `real` (its resolved path, open as `dir`), if it will not: `name` or a
/// folder on the way is git's, or the change would make `dir` a
/// repository. `adds` says whether the change puts an entry `name` there
/// (a create, a rename or link to it).
pub fn git_owned(real: &Path, dir: &Dir, name: &OsStr, adds: bool) -> Option<String> {
    if let Some(part) = real
        .components()
        .map(|c| c.as_os_str())
        .chain(std::iter::once(name))
        .find(|part| is_git_name(part))
    {
        return Some(format!(
            "`{}` is inside a git directory ({}): git's own files are the user's, never a plugin's",
            real.join(name).display(),
            part.to_string_lossy()
        ));
    }
    if let Some(repository) = real.ancestors().find(|folder| is_git_dir_at(folder)) {
        return Some(format!(
            "`{}` is inside the git repository {}: git's own files are the user's, never a plugin's",
            real.join(name).display(),
            repository.display()
        ));
    }
    if dir
        .open_dir_nofollow(name)
        .is_ok_and(|inner| is_git_dir(&inner))
    {
        return Some(format!(
            "`{}` is a git repository: git's own files are the user's, never a plugin's",
            real.join(name).display()
        ));
    }
    if adds && would_make_git_dir(dir, name) {
        return Some(format!(
            "`{}` would make {} a git repository (HEAD, objects, refs, commondir): a plugin never makes \
             a folder git would open",
            real.join(name).display(),
            real.display()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_git_reads_as_its_own() {
        for name in [
            ".git",
            ".GIT",
            ".Git",
            ".git.",
            ".git ",
            ".git. .",
            "git~1",
            "GIT~1",
            ".git::$INDEX_ALLOCATION",
            ".g\u{200c}it",
            ".gi\u{200b}t",
            "\u{feff}.git",
        ] {
            assert!(is_git_name(OsStr::new(name)), "{name:?}");
        }
        for name in [
            ".gitignore",
            ".github",
            "git",
            ".git2",
            "my.git",
            "git~2",
            "x",
        ] {
            assert!(!is_git_name(OsStr::new(name)), "{name:?}");
        }
    }

    #[test]
    fn a_folder_is_a_repository_by_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let open = || Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).unwrap();
        std::fs::create_dir(dir.path().join("objects")).unwrap();
        std::fs::create_dir(dir.path().join("refs")).unwrap();
        assert!(!is_git_dir(&open()));
        assert!(would_make_git_dir(&open(), OsStr::new("HEAD")));
        assert!(would_make_git_dir(&open(), OsStr::new("head")));
        assert!(!would_make_git_dir(&open(), OsStr::new("README")));
        std::fs::write(dir.path().join("HEAD"), "garbage").unwrap();
        assert!(is_git_dir(&open()));
        assert!(is_git_dir_at(dir.path()));

        let worktree_admin = tempfile::tempdir().unwrap();
        std::fs::write(worktree_admin.path().join("HEAD"), "x").unwrap();
        let admin =
            Dir::open_ambient_dir(worktree_admin.path(), cap_std::ambient_authority()).unwrap();
        assert!(!is_git_dir(&admin));
        assert!(would_make_git_dir(&admin, OsStr::new("commondir")));
    }

    #[test]
    fn changes_inside_a_repository_are_git_owned() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let bare = root.join("remote");
        for part in ["objects/info", "refs"] {
            std::fs::create_dir_all(bare.join(part)).unwrap();
        }
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let open = |p: &Path| Dir::open_ambient_dir(p, cap_std::ambient_authority()).unwrap();
        // Inside a repository named anything, at any depth.
        let info = bare.join("objects/info");
        assert!(git_owned(&info, &open(&info), OsStr::new("alternates"), true).is_some());
        assert!(git_owned(&bare, &open(&bare), OsStr::new("config"), true).is_some());
        // The repository itself, from its parent (renamed, removed).
        assert!(git_owned(&root, &open(&root), OsStr::new("remote"), false).is_some());
        // A `.git` anywhere on the way, or as the name.
        let work = root.join("work");
        std::fs::create_dir_all(work.join(".git/hooks")).unwrap();
        let hooks = work.join(".git/hooks");
        assert!(git_owned(&hooks, &open(&hooks), OsStr::new("pre-commit"), true).is_some());
        assert!(git_owned(&work, &open(&work), OsStr::new(".GIT"), true).is_some());
        // Ordinary files of the working tree are not.
        assert!(git_owned(&work, &open(&work), OsStr::new("README.md"), true).is_none());
        assert!(git_owned(&root, &open(&root), OsStr::new("work"), false).is_none());
    }
}
