//! A container's archive applied beneath a folder of this machine: the
//! other half of [`super::files`]'s `sync-out`, and what the fuzz target
//! `sync_archive` drives.
//!
//! The archive is hostile input. It is applied beneath a directory handle
//! of the target (cap-std), so no `..`, absolute path or link, not even
//! one the archive itself made a moment before, leads a write outside it.
//! Only files, folders and links are made; set-id bits are dropped; the
//! bytes it would write (hard links counted as copies) are bounded before
//! anything is written.

use std::collections::HashSet;
use std::io::{Read, Seek};
use std::path::{Component, Path, PathBuf};

use cap_std::fs::Dir;

use crate::platform;

/// Whether `path` is one of `exclude` or beneath one, or passes through a
/// `.git` (any case) at any depth: a nested repository's config, hooks or
/// attributes never reach the host's side (issue 34).
pub(super) fn excluded(path: &Path, exclude: &[PathBuf]) -> bool {
    exclude.iter().any(|e| path.starts_with(e))
        || path
            .components()
            .any(|c| c.as_os_str().eq_ignore_ascii_case(".git"))
}

/// The bytes applying the archive would write: every file's, and a hard
/// link's target again (a link is a full copy here, so 20 MB of archive
/// can expand to a gigabyte); `FileTooLarge` past `max_bytes`, before
/// anything is written.
fn expanded_size(
    mut archive: &std::fs::File,
    exclude: &[PathBuf],
    max_bytes: u64,
) -> std::io::Result<u64> {
    archive.rewind()?;
    let mut sizes: std::collections::HashMap<PathBuf, u64> = Default::default();
    let mut total = 0u64;
    for entry in tar::Archive::new(archive).entries()? {
        let entry = entry?;
        let Some(rel) = inner_path(&entry.path()?) else {
            continue;
        };
        if excluded(&rel, exclude) {
            continue;
        }
        let size = match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => entry.size(),
            tar::EntryType::Link => entry
                .link_name()?
                .and_then(|l| inner_path(&l))
                .and_then(|from| sizes.get(&from).copied())
                .unwrap_or(0),
            _ => 0,
        };
        sizes.insert(rel, size);
        total = total.saturating_add(size);
        if total > max_bytes {
            return Err(std::io::Error::new(
                std::io::ErrorKind::FileTooLarge,
                format!("its files come to more than {max_bytes} bytes once hard links are copied"),
            ));
        }
    }
    archive.rewind()?;
    Ok(total)
}

/// Apply the archive (the engine's: its first component is the folder's
/// own name) beneath `target`, at most `max_bytes` written (checked
/// before anything is); (written, removed).
pub(crate) fn apply(
    archive: std::fs::File,
    root: &Dir,
    exclude: &[PathBuf],
    max_bytes: u64,
) -> std::io::Result<(u32, u32)> {
    expanded_size(&archive, exclude, max_bytes)?;
    let store = archive.try_clone()?;
    let mut tar = tar::Archive::new(archive);
    let mut seen = HashSet::new();
    let mut written = 0u32;
    for entry in tar.entries()? {
        let mut entry = entry?;
        let Some(rel) = inner_path(&entry.path()?) else {
            continue;
        };
        if excluded(&rel, exclude) {
            continue;
        }
        seen.extend(rel.ancestors().map(Path::to_path_buf));
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        let changed = match entry.header().entry_type() {
            tar::EntryType::Directory => make_dir(root, &rel, mode)?,
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                write_entry(root, &rel, mode, &store, &mut entry)?
            }
            tar::EntryType::Symlink => match entry.link_name()? {
                Some(to) => make_link(root, &rel, &to)?,
                None => false,
            },
            tar::EntryType::Link => match entry.link_name()?.and_then(|l| inner_path(&l)) {
                // A hard link to a file written before: its bytes again,
                // streamed (never held in memory).
                Some(from) if !excluded(&from, exclude) => {
                    let open = || root.open(&from);
                    let size = open()?.metadata()?.len();
                    write_file(
                        root,
                        &rel,
                        mode,
                        size,
                        |own| same_stream(&mut open()?.take(size), own),
                        &mut open()?.take(size),
                    )?
                }
                _ => false,
            },
            // Devices, pipes, sockets: not files to keep.
            _ => false,
        };
        written += changed as u32;
    }
    let removed = remove_unseen(root, &seen, exclude)?;
    Ok((written, removed))
}

/// Apply the engine's archive of one file or link of the container's, at
/// `rel` beneath `root` (its archive names it by its own name only); at
/// most `max_bytes` written. Whether it changed anything.
pub(super) fn apply_one(
    archive: std::fs::File,
    root: &Dir,
    rel: &Path,
    max_bytes: u64,
) -> std::io::Result<bool> {
    let invalid = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
    let store = archive.try_clone()?;
    let mut tar = tar::Archive::new(archive);
    let mut entry = tar
        .entries()?
        .next()
        .ok_or_else(|| invalid("the engine sent an empty archive"))??;
    if entry.path()?.file_name() != rel.file_name() {
        return Err(invalid("the engine's archive names another file"));
    }
    let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
    match entry.header().entry_type() {
        tar::EntryType::Regular | tar::EntryType::Continuous => {
            let size = entry.size();
            if size > max_bytes {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::FileTooLarge,
                    format!("its changed files come to more than {max_bytes} bytes"),
                ));
            }
            write_entry(root, rel, mode, &store, &mut entry)
        }
        tar::EntryType::Symlink => match entry.link_name()? {
            Some(to) => make_link(root, rel, &to),
            None => Ok(false),
        },
        // It became something else since it was listed: the next whole
        // look at the folder finds it.
        _ => Err(invalid("the file changed kind while it was fetched")),
    }
}

/// `path` without its first component, if it is made of plain names.
fn inner_path(path: &Path) -> Option<PathBuf> {
    let mut components = path.components().skip_while(|c| *c == Component::CurDir);
    components.next()?;
    let rel: PathBuf = components.collect();
    (!rel.as_os_str().is_empty() && rel.components().all(|c| matches!(c, Component::Normal(_))))
        .then_some(rel)
}

/// Whatever is at `rel` goes (a folder with all it holds).
pub(super) fn clear(root: &Dir, rel: &Path) -> std::io::Result<()> {
    hostgit::remove::remove_all(root, rel)
}

pub(super) fn make_dir(root: &Dir, rel: &Path, mode: u32) -> std::io::Result<bool> {
    if root.symlink_metadata(rel).is_ok_and(|m| m.is_dir()) {
        return Ok(false);
    }
    clear(root, rel)?;
    root.create_dir_all(rel)?;
    // The owner keeps what it needs to walk and fill it.
    platform::set_mode(root, rel, mode | 0o700)?;
    Ok(true)
}

/// Write `rel` from `content` unless it is already a file of `size` bytes
/// that `same` finds equal; whether it was written.
fn write_file(
    root: &Dir,
    rel: &Path,
    mode: u32,
    size: u64,
    same: impl FnOnce(&mut cap_std::fs::File) -> std::io::Result<bool>,
    content: &mut impl Read,
) -> std::io::Result<bool> {
    if let Ok(m) = root.symlink_metadata(rel)
        && m.is_file()
        && m.len() == size
        && platform::has_mode(&m, mode)
        && same(&mut root.open(rel)?)?
    {
        return Ok(false);
    }
    clear(root, rel)?;
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        root.create_dir_all(parent)?;
    }
    let mut file = root.create(rel)?;
    std::io::copy(content, &mut file)?;
    drop(file);
    platform::set_mode(root, rel, mode)?;
    Ok(true)
}

/// A file entry of the archive at `rel`, unless the file there already
/// holds its bytes (compared in place in `store`, the archive's file).
fn write_entry(
    root: &Dir,
    rel: &Path,
    mode: u32,
    store: &std::fs::File,
    entry: &mut tar::Entry<'_, std::fs::File>,
) -> std::io::Result<bool> {
    let at = entry.raw_file_position();
    let size = entry.size();
    let stored = At {
        file: store,
        pos: at,
    };
    write_file(
        root,
        rel,
        mode,
        size,
        |own| same_stream(&mut stored.take(size), own),
        entry,
    )
}

/// The archive's bytes from `pos` on, read in place (the archive is also
/// being read by the tar reader, so its own offset is not touched).
struct At<'a> {
    file: &'a std::fs::File,
    pos: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = platform::read_at(self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

/// Whether two readers hold the same bytes.
fn same_stream(a: &mut impl Read, b: &mut impl Read) -> std::io::Result<bool> {
    let (mut x, mut y) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let n = read_full(a, &mut x)?;
        let m = read_full(b, &mut y)?;
        if n != m || x[..n] != y[..m] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Read until `buf` is full or the reader ends; how much was read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..])? {
            0 => break,
            n => done += n,
        }
    }
    Ok(done)
}

/// A link at `rel` to `to`, as the container has it (it is never
/// followed here: every later write goes through `root`).
fn make_link(root: &Dir, rel: &Path, to: &Path) -> std::io::Result<bool> {
    if root.read_link_contents(rel).is_ok_and(|have| have == to) {
        return Ok(false);
    }
    clear(root, rel)?;
    if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        root.create_dir_all(parent)?;
    }
    platform::symlink(root, to, rel)?;
    Ok(true)
}

/// Remove what is beneath `root` and not in `seen`; how many entries went.
fn remove_unseen(root: &Dir, seen: &HashSet<PathBuf>, exclude: &[PathBuf]) -> std::io::Result<u32> {
    let mut removed = 0;
    walk(root, exclude, |rel, entry| {
        if seen.contains(rel) {
            return Ok(entry.file_type()?.is_dir());
        }
        clear(root, rel)?;
        removed += 1;
        Ok(false)
    })?;
    Ok(removed)
}

/// Visit everything beneath `root` but `exclude`, folder by folder from a
/// list, not by recursion: the tree is as deep as the container made it.
/// `visit` says whether to go into what it was shown (a folder).
pub(super) fn walk(
    root: &Dir,
    exclude: &[PathBuf],
    mut visit: impl FnMut(&Path, cap_std::fs::DirEntry) -> std::io::Result<bool>,
) -> std::io::Result<()> {
    let mut folders = vec![PathBuf::new()];
    while let Some(dir) = folders.pop() {
        let entries = if dir.as_os_str().is_empty() {
            root.entries()?
        } else {
            root.read_dir(&dir)?
        };
        for entry in entries {
            let entry = entry?;
            let rel = dir.join(entry.file_name());
            if !excluded(&rel, exclude) && visit(&rel, entry)? {
                folders.push(rel);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::containers::files::tempfile_here;
    use std::io::Write;

    fn open(path: &Path) -> Dir {
        Dir::open_ambient_dir(path, cap_std::ambient_authority()).unwrap()
    }

    /// An archive as an engine sends it: `workdir/` first.
    fn archive(build: impl FnOnce(&mut tar::Builder<Vec<u8>>)) -> std::fs::File {
        let mut builder = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_size(0);
        builder
            .append_data(&mut dir, "workdir", std::io::empty())
            .unwrap();
        build(&mut builder);
        let bytes = builder.into_inner().unwrap();
        let mut file = tempfile_here().unwrap();
        file.write_all(&bytes).unwrap();
        file.rewind().unwrap();
        file
    }

    fn file(b: &mut tar::Builder<Vec<u8>>, path: &str, text: &str, mode: u32) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(mode);
        h.set_size(text.len() as u64);
        b.append_data(&mut h, path, text.as_bytes()).unwrap();
    }

    fn link(b: &mut tar::Builder<Vec<u8>>, path: &str, to: &str) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, path, to).unwrap();
    }

    fn hard_link(b: &mut tar::Builder<Vec<u8>>, path: &str, to: &str) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Link);
        h.set_size(0);
        b.append_link(&mut h, path, to).unwrap();
    }

    #[test]
    fn hard_links_count_as_copies_against_the_limit_and_nothing_is_written_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        let big = "x".repeat(1000);
        let make = || {
            archive(|b| {
                file(b, "workdir/big", &big, 0o644);
                for i in 0..9 {
                    hard_link(b, &format!("workdir/copy{i}"), "workdir/big");
                }
            })
        };
        let e = apply(make(), &open(t), &[], 5000).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge, "{e}");
        assert_eq!(
            std::fs::read_dir(t).unwrap().count(),
            0,
            "nothing was written"
        );
        let (written, _) = apply(make(), &open(t), &[], 10_000).unwrap();
        assert_eq!(written, 10);
        assert_eq!(std::fs::read_to_string(t.join("copy8")).unwrap(), big);
        // Applied again: nothing changes.
        assert_eq!(apply(make(), &open(t), &[], 10_000).unwrap().0, 0);
    }

    #[test]
    fn nested_repositories_never_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::create_dir_all(t.join("old/.git")).unwrap();
        std::fs::write(t.join("old/.git/config"), "[core]\n").unwrap();
        let a = archive(|b| {
            file(
                b,
                "workdir/sub/.git/config",
                "[filter \"x\"]\n\tclean = touch /tmp/x\n",
                0o644,
            );
            file(b, "workdir/sub/.GIT/hooks/pre-commit", "#!/bin/sh\n", 0o755);
            file(b, "workdir/sub/.gitattributes", "* filter=x\n", 0o644);
            file(b, "workdir/sub/file", "kept\n", 0o644);
        });
        apply(a, &open(t), &[PathBuf::from(".git")], u64::MAX).unwrap();
        assert_eq!(
            std::fs::read_to_string(t.join("sub/file")).unwrap(),
            "kept\n"
        );
        assert!(t.join("sub/.gitattributes").exists());
        assert!(!t.join("sub/.git").exists() && !t.join("sub/.GIT").exists());
        assert!(
            !t.join("old").exists(),
            "what the container no longer has goes"
        );
    }

    #[test]
    #[cfg(unix)] // Unix modes
    fn changes_arrive_and_what_is_gone_goes() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path();
        std::fs::write(t.join("same.txt"), "same\n").unwrap();
        std::fs::write(t.join("old.txt"), "old\n").unwrap();
        std::fs::create_dir(t.join("olddir")).unwrap();
        std::fs::write(t.join("olddir/x"), "x").unwrap();
        std::fs::write(t.join(".git"), "gitdir: /somewhere\n").unwrap();
        let a = archive(|b| {
            file(b, "workdir/same.txt", "same\n", 0o644);
            file(b, "workdir/new/deep.sh", "echo hi\n", 0o4755);
            link(b, "workdir/abs", "/etc/passwd");
        });
        let (written, removed) = apply(a, &open(t), &[PathBuf::from(".git")], u64::MAX).unwrap();
        assert_eq!(
            (written, removed),
            (2, 2),
            "new/deep.sh and abs; old.txt and olddir"
        );
        assert_eq!(
            std::fs::read_to_string(t.join("new/deep.sh")).unwrap(),
            "echo hi\n"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(t.join("new/deep.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "set-id dropped, exec kept");
        assert_eq!(
            std::fs::read_link(t.join("abs")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert!(!t.join("old.txt").exists() && !t.join("olddir").exists());
        assert!(t.join(".git").exists(), "excluded paths stay");
    }

    #[test]
    fn nothing_is_written_outside_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let t = dir.path().join("t");
        std::fs::create_dir(&t).unwrap();
        let a = archive(|b| {
            // A link out, then a file through it; then `..`.
            link(b, "workdir/out", &outside.path().display().to_string());
            file(b, "workdir/out/pwned", "x", 0o644);
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(1);
            h.set_mode(0o644);
            // `append_data` refuses `..`; the raw name goes in as is.
            h.as_gnu_mut().unwrap().name[..14].copy_from_slice(b"workdir/../esc");
            h.set_cksum();
            b.append(&h, &b"y"[..]).unwrap();
        });
        let result = apply(a, &open(&t), &[], u64::MAX);
        assert!(
            std::fs::read_dir(outside.path()).unwrap().next().is_none(),
            "wrote through the link ({result:?})"
        );
        assert!(!dir.path().join("esc").exists());
    }
}
