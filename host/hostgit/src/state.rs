//! Cofer's state in a repository's git directory (`.git/cofer/`: the
//! repository's id, each environment's record), written by the host as
//! data for a plugin, which may not write inside `.git` itself (issue 70).
//!
//! The plugin names a file and gives its text; the host checks the name
//! (one or two plain names, none that git reads: no `.git`, `HEAD`,
//! `objects`, `refs`, `config`, hooks or `remote.git`), writes beneath the
//! git directory's open handle without following a link, and replaces a
//! file whole (a reader never sees half of it).

use std::io::Write;

use cap_fs_ext::DirExt;
use cap_std::fs::{Dir, OpenOptions};

use crate::{GitError, Repo};

/// The folder of Cofer's state in the git directory.
pub const FOLDER: &str = "cofer";
/// The largest state file: a record is a few hundred bytes.
pub const MAX_BYTES: usize = 1 << 20;
/// Names at the top of the state folder that are git's or the host's own.
const RESERVED: &[&str] = &["remote.git", "config.json"];

fn refused(name: &str, why: &str) -> GitError {
    GitError::Refused(format!(
        "`{name}` is not a name of Cofer's state ({why}): use `id` or `environments/<id>.json`"
    ))
}

/// The parts of `name`, checked.
fn parts(name: &str) -> Result<Vec<&str>, GitError> {
    let parts: Vec<&str> = name.split('/').collect();
    if parts.len() > 2 || name.len() > 200 {
        return Err(refused(name, "at most two names, 200 characters"));
    }
    for part in &parts {
        let plain = part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && part
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric());
        if !plain {
            return Err(refused(
                name,
                "letters, digits, `-`, `_` and `.`, starting with a letter or digit",
            ));
        }
        let lower = part.to_ascii_lowercase();
        let as_name = std::ffi::OsStr::new(part);
        if crate::names::is_git_name(as_name)
            || crate::names::repository_part(as_name).is_some()
            || lower.ends_with(".git")
            || ["config", "hooks", "info"].contains(&lower.as_str())
        {
            return Err(refused(name, "a name git reads"));
        }
    }
    if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(parts[0])) {
        return Err(refused(name, "the user's or git's"));
    }
    Ok(parts)
}

fn failed(what: &str, e: std::io::Error) -> GitError {
    GitError::Failed {
        command: what.to_string(),
        exit_code: None,
        stderr: e.to_string(),
    }
}

/// The folder holding state file `parts`, made if `create`, never through
/// a link; `None` when it is not there.
fn folder(repo: &Repo, parts: &[&str], create: bool) -> Result<Option<Dir>, GitError> {
    let mut dir = repo
        .handles
        .git
        .try_clone()
        .map_err(|e| failed("open .git", e))?;
    let folders = std::iter::once(FOLDER).chain(parts[..parts.len() - 1].iter().copied());
    for name in folders {
        if create {
            match dir.create_dir(name) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(failed(&format!("create .git/{FOLDER}"), e)),
            }
        }
        dir = match dir.open_dir_nofollow(name) {
            Ok(inner) => inner,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => return Err(failed(&format!("open .git/{FOLDER}/{name}"), e)),
        };
    }
    Ok(Some(dir))
}

/// Write state file `name` of `repo` whole; with `only_new`, only when
/// there is none (false then, nothing written).
pub fn write(repo: &Repo, name: &str, text: &str, only_new: bool) -> Result<bool, GitError> {
    let parts = parts(name)?;
    if text.len() > MAX_BYTES {
        return Err(GitError::Refused(format!(
            "state file `{name}` would be {} bytes; at most {MAX_BYTES}",
            text.len()
        )));
    }
    let dir = folder(repo, &parts, true)?.expect("made");
    let file = parts[parts.len() - 1];
    // One name per write: two calls writing the same file at once (two
    // creates of one id) each removed the other's file by a shared name.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let fresh = format!(".{file}.{}.{n}.tmp", std::process::id());
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    let _ = dir.remove_file(&fresh);
    dir.open_with(&fresh, &options)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .map_err(|e| failed(&format!("write .git/{FOLDER}/{name}"), e))?;
    // A hard link fails if something is there (the first writer wins); a
    // rename replaces what is there whole.
    let placed = if only_new {
        match dir.hard_link(&fresh, &dir, file) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    } else {
        dir.rename(&fresh, &dir, file).map(|()| true)
    };
    let _ = dir.remove_file(&fresh);
    placed.map_err(|e| failed(&format!("write .git/{FOLDER}/{name}"), e))
}

/// Remove state file `name` of `repo`; false when there was none.
pub fn remove(repo: &Repo, name: &str) -> Result<bool, GitError> {
    let parts = parts(name)?;
    let Some(dir) = folder(repo, &parts, false)? else {
        return Ok(false);
    };
    match dir.remove_file(parts[parts.len() - 1]) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(failed(&format!("remove .git/{FOLDER}/{name}"), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repo) {
        let dir = tempfile::tempdir().unwrap();
        crate::snapshot::tests::git(dir.path(), &["init", "-q"]);
        let repo = Repo::open(dir.path()).unwrap();
        (dir, repo)
    }

    #[test]
    fn records_and_the_id_are_written_whole_beneath_dot_git() {
        let (dir, repo) = repo();
        assert!(write(&repo, "id", "abc\n", true).unwrap());
        assert!(!write(&repo, "id", "other\n", true).unwrap());
        assert!(write(&repo, "environments/e1.json", "{}", false).unwrap());
        assert!(write(&repo, "environments/e1.json", "{\"a\":1}", false).unwrap());
        let state = dir.path().join(".git/cofer");
        assert_eq!(std::fs::read_to_string(state.join("id")).unwrap(), "abc\n");
        assert_eq!(
            std::fs::read_to_string(state.join("environments/e1.json")).unwrap(),
            "{\"a\":1}"
        );
        assert!(remove(&repo, "environments/e1.json").unwrap());
        assert!(!remove(&repo, "environments/e1.json").unwrap());
        let left: Vec<_> = std::fs::read_dir(state.join("environments"))
            .unwrap()
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn names_git_reads_are_refused() {
        let (_dir, repo) = repo();
        for name in [
            "../config",
            "remote.git/config",
            "config",
            "hooks/pre-push",
            ".git/x",
            "a/b/c",
            "HEAD",
            "x/objects",
            "",
            "config.json",
            "env/../../x",
        ] {
            assert!(write(&repo, name, "x", false).is_err(), "{name}");
        }
    }

    /// A link planted where the state folder goes is not followed.
    #[cfg(unix)]
    #[test]
    fn a_linked_state_folder_is_not_followed() {
        let (dir, repo) = repo();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join(".git/cofer")).unwrap();
        assert!(write(&repo, "id", "x", true).is_err());
        assert!(
            std::fs::read_dir(elsewhere.path())
                .unwrap()
                .next()
                .is_none()
        );
    }
}
