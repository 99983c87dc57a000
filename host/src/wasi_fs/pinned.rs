//! A plugin's change to the file system, checked where it lands: the
//! folder the change is made in is opened first (the way wasmtime-wasi
//! would reach it, beneath the plugin's root), its real path is read from
//! the open handle, and the change is then made in that handle, so a link
//! swapped in after the check changes nothing.
//!
//! The check is git's: no plugin creates, writes, renames, links or
//! deletes anything inside a git directory (a `.git` under any name git
//! accepts for it, or a folder git would open as a repository), nor makes
//! a folder one ([`hostgit::names::git_owned`]). Git runs programs its
//! files name (hooks, filters, `core.alternateRefsCommand`, `gpg.program`
//! …); the only way to close that class for good is that a plugin never
//! writes them (issue 70).

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use cap_std::fs::Dir;
use wasmtime::component::Resource;
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView};
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode;

/// A folder a change is made in, open, and the name changed there.
pub struct Landing {
    /// The folder, open (what wasmtime-wasi then works in).
    pub dir: Dir,
    /// Its real path now, read from the handle.
    pub real: PathBuf,
    /// The one name changed in it: a plain component, never `.` or `..`.
    pub name: OsString,
}

/// Where `path` beneath the open folder `dir` lands: its folder opened
/// beneath `dir` (links on the way followed inside it, as the change
/// would), and its last name. With `follow`, a last name that is a link is
/// resolved first, so the change lands where the link leads.
pub fn land(
    fs: &mut WasiFilesystemCtxView<'_>,
    dir: &Resource<Descriptor>,
    path: &str,
    follow: bool,
) -> Result<Landing, ErrorCode> {
    let base = match fs.table.get(dir) {
        Ok(Descriptor::Dir(d)) => Dir::from_std_file(d.dir.try_clone()?),
        Ok(Descriptor::File(_)) => return Err(ErrorCode::NotDirectory),
        Err(_) => return Err(ErrorCode::BadDescriptor),
    };
    let mut path = PathBuf::from(path);
    let is_link = |p: &Path| base.symlink_metadata(p).is_ok_and(|m| m.is_symlink());
    if (follow && is_link(&path)) || !plain_last(&path) {
        // A dangling link is refused rather than created through: its
        // target could be anywhere beneath the root, `.git` included.
        path = base.canonicalize(&path)?;
    }
    // A path that resolves to the root itself (`.`, `a/..`, the root's
    // own guest path) changes the root: its "name" there is `.`, which
    // wasmtime-wasi answers as before (a folder made there exists already).
    let (folder, name) = match (path.parent(), path.file_name()) {
        (_, None) => (base, OsString::from(".")),
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => {
            (base.open_dir(parent)?, name.to_os_string())
        }
        (_, Some(name)) => (base, name.to_os_string()),
    };
    let real = real_path(&folder)?;
    Ok(Landing {
        dir: folder,
        real,
        name,
    })
}

/// Whether `path`'s last component is a plain name (not `.`, `..` or a
/// root), so its folder is its parent.
fn plain_last(path: &Path) -> bool {
    matches!(path.components().next_back(), Some(Component::Normal(_)))
        && !path.as_os_str().as_encoded_bytes().ends_with(b"/..")
}

/// The path an open folder has now.
fn real_path(dir: &Dir) -> Result<PathBuf, ErrorCode> {
    let handle = hostgit::proc_path(dir);
    // On Linux the handle's path is `/proc/self/fd/N`, a link to where the
    // folder is; on Windows it is the folder's final path already.
    let real = if cfg!(unix) {
        std::fs::read_link(&handle)?
    } else {
        handle
    };
    if real.as_os_str().is_empty() {
        return Err(ErrorCode::Io);
    }
    Ok(real)
}

/// Refuse the change of `landing` if it touches git's files (`adds`: it
/// puts an entry of that name there), saying why in the host's log: the
/// plugin sees `not-permitted`.
pub fn refuse_git_owned(plugin: &str, landing: &Landing, adds: bool) -> Result<(), ErrorCode> {
    match hostgit::names::git_owned(&landing.real, &landing.dir, &landing.name, adds) {
        None => Ok(()),
        Some(why) => {
            tracing::warn!(plugin, "file change refused: {why}");
            Err(ErrorCode::NotPermitted)
        }
    }
}

/// `landing`'s folder as a descriptor of the call, with the rights of
/// `like` (the descriptor the plugin named): the change is then made in
/// it by wasmtime-wasi's own code. Removed again by [`forget`].
pub fn as_descriptor(
    fs: &mut WasiFilesystemCtxView<'_>,
    landing: &Landing,
    like: &Resource<Descriptor>,
    blocking: bool,
) -> Result<Resource<Descriptor>, ErrorCode> {
    let (perms, open_mode) = match fs.table.get(like) {
        Ok(Descriptor::Dir(d)) => (d.perms, d.open_mode),
        _ => return Err(ErrorCode::BadDescriptor),
    };
    let file = landing.dir.try_clone()?.into_std_file();
    let dir = wasmtime_wasi::filesystem::Dir::new(file, perms, open_mode, blocking);
    fs.table
        .push(Descriptor::Dir(dir))
        .map_err(|_| ErrorCode::InsufficientMemory)
}

/// Drop a descriptor [`as_descriptor`] made.
pub fn forget(fs: &mut WasiFilesystemCtxView<'_>, made: Resource<Descriptor>) {
    let _ = fs.table.delete(made);
}
