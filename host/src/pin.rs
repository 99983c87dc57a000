//! Paths pinned for a plugin (issue 34, class 3).
//!
//! [`crate::paths::confine`] says whether a path is inside a plugin's
//! roots, but the plugin can change its folders after that answer: swap a
//! checked folder for a link to `/` before the host (or Podman) uses the
//! path. So a path the host uses for a plugin is opened here, beneath a
//! handle of the root that holds it, one component at a time and never
//! through a link; what is then used is the open handle, not the path.

use std::io;
use std::path::{Component, Path, PathBuf};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, OpenOptions};

/// A path another program of this host can use for an open folder.
pub use hostgit::proc_path;

/// What a pinned path is.
pub enum Pinned {
    Dir(Dir),
    File(File),
}

/// The root among `roots` (resolved, as `confine` compares them) holding
/// `path` (as `confine` returned it), and the plain names below it.
fn beneath(path: &Path, roots: &[PathBuf]) -> io::Result<(PathBuf, Vec<std::ffi::OsString>)> {
    for root in roots {
        let root = crate::paths::canonical(root).unwrap_or_else(|_| root.clone());
        if let Ok(rest) = path.strip_prefix(&root) {
            let names = rest
                .components()
                .map(|c| match c {
                    Component::Normal(name) => Ok(name.to_os_string()),
                    _ => Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} is not a plain path", path.display()),
                    )),
                })
                .collect::<io::Result<_>>()?;
            return Ok((root, names));
        }
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{} is in none of the plugin's roots", path.display()),
    ))
}

fn open_root(root: &Path) -> io::Result<Dir> {
    Dir::open_ambient_dir(root, cap_std::ambient_authority())
}

/// A link met on the way: the error says which.
fn no_link(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| {
        if e.raw_os_error() == Some(40) || e.kind() == io::ErrorKind::NotADirectory {
            io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{} leads through a symbolic link, which the host does not follow for a plugin",
                    path.display()
                ),
            )
        } else {
            e
        }
    }
}

/// The folder `name` in `dir`, never through a link.
fn child_dir(dir: &Dir, name: &std::ffi::OsStr, path: &Path) -> io::Result<Dir> {
    dir.open_dir_nofollow(name).map_err(|e| {
        // A plain file where a folder belongs is not a link: say which.
        if dir.symlink_metadata(name).is_ok_and(|m| m.is_file()) {
            io::Error::new(
                io::ErrorKind::NotADirectory,
                format!(
                    "`{}` on the way to {} is a file, not a folder",
                    name.to_string_lossy(),
                    path.display()
                ),
            )
        } else {
            no_link(path)(e)
        }
    })
}

/// Open the existing folder or file at `path` (inside one of `roots`).
pub fn open(path: &Path, roots: &[PathBuf]) -> io::Result<Pinned> {
    let (root, names) = beneath(path, roots)?;
    let mut dir = open_root(&root)?;
    let Some((last, parents)) = names.split_last() else {
        return Ok(Pinned::Dir(dir));
    };
    for name in parents {
        dir = child_dir(&dir, name, path)?;
    }
    let meta = dir.symlink_metadata(last)?;
    if meta.is_dir() {
        Ok(Pinned::Dir(child_dir(&dir, last, path)?))
    } else if meta.is_file() {
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        Ok(Pinned::File(
            dir.open_with(last, &options).map_err(no_link(path))?,
        ))
    } else {
        Err(no_link(path)(io::Error::from_raw_os_error(40)))
    }
}

/// The folder at `path` (inside one of `roots`), made with the folders it
/// needs if missing, none of it through a link.
pub fn create_dirs(path: &Path, roots: &[PathBuf]) -> io::Result<Dir> {
    let (root, names) = beneath(path, roots)?;
    made_dirs(&root, &names, path)
}

/// `root`, then each of `names` beneath it, made if missing.
fn made_dirs(root: &Path, names: &[std::ffi::OsString], path: &Path) -> io::Result<Dir> {
    let mut dir = open_root(root)?;
    for name in names {
        match dir.create_dir(name) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        dir = child_dir(&dir, name, path)?;
    }
    Ok(dir)
}

/// Create (or truncate) the file at `path` (inside one of `roots`),
/// making the folders it needs, none of it through a link.
pub fn create_file(path: &Path, roots: &[PathBuf]) -> io::Result<std::fs::File> {
    let (root, names) = beneath(path, roots)?;
    let Some((last, parents)) = names.split_last() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is a root, not a file", path.display()),
        ));
    };
    let dir = made_dirs(&root, parents, path)?;
    let mut options = OpenOptions::new();
    options
        .write(true)
        .create(true)
        .truncate(false)
        .follow(FollowSymlinks::No);
    // A named pipe left at the path would hold this thread (and with it
    // the host's) until a reader came: refused at once instead, and
    // truncated only once known to be a file.
    crate::platform::without_waiting(&mut options);
    let not_a_file = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a named pipe, socket or device, not a file: remove it",
                path.display()
            ),
        )
    };
    let file = match dir.open_with(last, &options) {
        Ok(file) => file.into_std(),
        Err(e) if crate::platform::would_wait(&e) => return Err(not_a_file()),
        Err(e) => return Err(no_link(path)(e)),
    };
    if !file.metadata()?.is_file() {
        return Err(not_a_file());
    }
    file.set_len(0)?;
    Ok(file)
}

// Unix links to Unix folders; Windows forms are tested in platform/windows.rs.
#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn a_link_anywhere_on_the_way_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap().join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/f"), "x").unwrap();
        symlink("/", root.join("a/up")).unwrap();
        symlink("/etc/passwd", root.join("a/pw")).unwrap();
        let roots = [root.clone()];
        assert!(matches!(
            open(&root.join("a/b"), &roots),
            Ok(Pinned::Dir(_))
        ));
        assert!(matches!(
            open(&root.join("a/f"), &roots),
            Ok(Pinned::File(_))
        ));
        for bad in ["a/up", "a/up/etc", "a/pw"] {
            let e = open(&root.join(bad), &roots).err().expect(bad);
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{bad}: {e}");
        }
        assert!(
            open(Path::new("/etc"), &roots).is_err(),
            "outside every root"
        );

        let mut log = create_file(&root.join("logs/new/raw.log"), &roots).unwrap();
        std::io::Write::write_all(&mut log, b"ok").unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("logs/new/raw.log")).unwrap(),
            "ok"
        );
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, "keep").unwrap();
        symlink(&outside, root.join("logs/raw.log")).unwrap();
        assert!(create_file(&root.join("logs/raw.log"), &roots).is_err());
        assert!(create_file(&root.join("a/up/tmp/x.log"), &roots).is_err());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
    }
}
