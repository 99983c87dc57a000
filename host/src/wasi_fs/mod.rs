//! What the host adds to WASI's file system (wasmtime-wasi's), in front of
//! the operations it replaces:
//!
//! - **No open of a file that would wait.** A plugin's file operations
//!   run on the thread that runs the call ([`crate::store`]): opening a
//!   named pipe there waits for its other end, and nothing (not the
//!   call's deadline, which that thread would have to check) ends the
//!   wait. Whoever writes where a plugin reads (a test project, a
//!   container) could leave one where a report or a `package.json` is
//!   read. So `open-at` first looks at what the path is, and refuses
//!   anything but a file, a folder or (not followed) a link.
//! - **No change to git's files** ([`pinned`]): every create, write,
//!   rename, link, removal and time change is made in its folder opened
//!   and checked first, and refused inside a git directory.
//! - **No drive-prefixed path on Windows** (wasmtime GHSA-f2pq-268w-886c:
//!   a path component such as `C:x` reached files outside the root; fixed
//!   in wasmtime 48.0.10, which the registry does not serve yet).

mod pinned;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemCtxView, WasiFilesystemView};
use wasmtime_wasi::p2::FsResult;
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, DescriptorType, ErrorCode, Host, HostDescriptor, NewTimestamp, OpenFlags,
    PathFlags,
};

/// The interface as wasmtime-wasi defines it (plugins' older 0.2 imports
/// are served by it too).
const TYPES: &str = "wasi:filesystem/types@0.2.12";

/// What the checks need to know of the call besides its file system.
pub trait Guarded: WasiFilesystemView + 'static {
    /// The plugin, for the log line that says what was refused.
    fn plugin(&self) -> &str;
    /// Whether file operations run on the call's own thread (the
    /// descriptors made for a change are made like the plugin's own).
    fn blocking_allowed(&self) -> bool;
}

/// One answer of a WASI function, as the component ABI wants it.
type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// A descriptor named by its number, for a call that borrows it.
fn borrow(d: &Resource<Descriptor>) -> Resource<Descriptor> {
    Resource::new_borrow(d.rep())
}

/// wasmtime-wasi's result, its error as the guest sees it.
fn answered<T>(fs: &mut WasiFilesystemCtxView<'_>, r: FsResult<T>) -> Answer<T> {
    match r {
        Ok(v) => Ok((Ok(v),)),
        Err(e) => Ok((Err(fs.convert_error_code(e)?),)),
    }
}

/// Refuse a guest path that names a drive on Windows (`C:`, `C:x`, a
/// stream `x:y`): no name of a plugin's is meant that way, and wasmtime
/// before 48.0.10 let such a component leave the root.
pub fn check_guest_path(path: &str) -> Result<(), ErrorCode> {
    if cfg!(windows) && path.contains(':') {
        return Err(ErrorCode::NotPermitted);
    }
    Ok(())
}

/// The change of `path` beneath `dir`, landed and checked ([`pinned`]):
/// the descriptor of its folder and its one name there.
fn prepare<T: Guarded>(
    store: &mut StoreContextMut<'_, T>,
    dir: &Resource<Descriptor>,
    path: &str,
    follow: bool,
    adds: bool,
) -> Result<(Resource<Descriptor>, String), ErrorCode> {
    check_guest_path(path)?;
    let plugin = store.data().plugin().to_string();
    let blocking = store.data().blocking_allowed();
    let mut fs = store.data_mut().filesystem();
    let landing = pinned::land(&mut fs, dir, path, follow)?;
    pinned::refuse_git_owned(&plugin, &landing, adds)?;
    let name = landing
        .name
        .clone()
        .into_string()
        .map_err(|_| ErrorCode::IllegalByteSequence)?;
    Ok((
        pinned::as_descriptor(&mut fs, &landing, dir, blocking)?,
        name,
    ))
}

/// Both ends of a rename or link, prepared; if either was refused, the
/// other's descriptor is dropped and the refusal answered.
type Prepared = Result<(Resource<Descriptor>, String), ErrorCode>;
#[allow(clippy::type_complexity)]
fn both(
    fs: &mut WasiFilesystemCtxView<'_>,
    from: Prepared,
    to: Prepared,
) -> Result<
    (
        (Resource<Descriptor>, String),
        (Resource<Descriptor>, String),
    ),
    ErrorCode,
> {
    match (from, to) {
        (Ok(from), Ok(to)) => Ok((from, to)),
        (from, to) => Err([from, to]
            .into_iter()
            .find_map(|r| match r {
                Ok((made, _)) => {
                    pinned::forget(fs, made);
                    None
                }
                Err(e) => Some(e),
            })
            .unwrap_or(ErrorCode::Invalid)),
    }
}

/// Put the host's versions of wasmtime-wasi's path operations in `linker`,
/// which already holds WASI.
pub fn add_checks<T: Guarded>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store,
         (dir, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                let writes = open_flags.contains(OpenFlags::CREATE)
                    || open_flags.contains(OpenFlags::TRUNCATE)
                    || flags.contains(DescriptorFlags::WRITE)
                    || flags.contains(DescriptorFlags::MUTATE_DIRECTORY);
                if !writes {
                    if let Err(e) = check_guest_path(&path) {
                        return Ok((Err(e),));
                    }
                    let mut fs = store.data_mut().filesystem();
                    return open_unless_it_waits(&mut fs, dir, path_flags, path, open_flags, flags)
                        .await;
                }
                let follow = path_flags.contains(PathFlags::SYMLINK_FOLLOW);
                let adds = open_flags.contains(OpenFlags::CREATE);
                let (at, name) = match prepare(&mut store, &dir, &path, follow, adds) {
                    Ok(prepared) => prepared,
                    Err(e) => return Ok((Err(e),)),
                };
                let mut fs = store.data_mut().filesystem();
                // The landing resolved a last link already: what is there
                // now is opened as it is, never through a link swapped in.
                let opened = open_unless_it_waits(
                    &mut fs,
                    borrow(&at),
                    PathFlags::empty(),
                    name,
                    open_flags,
                    flags,
                )
                .await;
                pinned::forget(&mut fs, at);
                opened
            })
        },
    )?;
    // The changes of one name beneath a folder: landed, checked, made.
    macro_rules! one_name {
        ($wit:literal, $method:ident, adds: $adds:literal) => {
            types.func_wrap_async(
                $wit,
                |mut store, (dir, path): (Resource<Descriptor>, String)| {
                    Box::new(async move {
                        let (at, name) = match prepare(&mut store, &dir, &path, false, $adds) {
                            Ok(prepared) => prepared,
                            Err(e) => return Ok((Err(e),)),
                        };
                        let mut fs = store.data_mut().filesystem();
                        let r = fs.$method(borrow(&at), name).await;
                        pinned::forget(&mut fs, at);
                        answered(&mut fs, r)
                    })
                },
            )?;
        };
    }
    one_name!("[method]descriptor.create-directory-at", create_directory_at, adds: true);
    one_name!("[method]descriptor.unlink-file-at", unlink_file_at, adds: false);
    one_name!("[method]descriptor.remove-directory-at", remove_directory_at, adds: false);
    types.func_wrap_async(
        "[method]descriptor.set-times-at",
        |mut store,
         (dir, path_flags, path, atim, mtim): (
            Resource<Descriptor>,
            PathFlags,
            String,
            NewTimestamp,
            NewTimestamp,
        )| {
            Box::new(async move {
                let follow = path_flags.contains(PathFlags::SYMLINK_FOLLOW);
                let (at, name) = match prepare(&mut store, &dir, &path, follow, false) {
                    Ok(prepared) => prepared,
                    Err(e) => return Ok((Err(e),)),
                };
                let mut fs = store.data_mut().filesystem();
                let r = fs
                    .set_times_at(borrow(&at), PathFlags::empty(), name, atim, mtim)
                    .await;
                pinned::forget(&mut fs, at);
                answered(&mut fs, r)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store, (dir, target, path): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                if let Err(e) = check_guest_path(&target) {
                    return Ok((Err(e),));
                }
                let (at, name) = match prepare(&mut store, &dir, &path, false, true) {
                    Ok(prepared) => prepared,
                    Err(e) => return Ok((Err(e),)),
                };
                let mut fs = store.data_mut().filesystem();
                let r = fs.symlink_at(borrow(&at), target, name).await;
                pinned::forget(&mut fs, at);
                answered(&mut fs, r)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.rename-at",
        |mut store, (dir, old, new_dir, new): (Resource<Descriptor>, String, Resource<Descriptor>, String)| {
            Box::new(async move {
                let from = prepare(&mut store, &dir, &old, false, false);
                let to = prepare(&mut store, &new_dir, &new, false, true);
                let mut fs = store.data_mut().filesystem();
                let ((from, old), (to, new)) = match both(&mut fs, from, to) {
                    Ok(both) => both,
                    Err(e) => return Ok((Err(e),)),
                };
                let r = fs.rename_at(borrow(&from), old, borrow(&to), new).await;
                pinned::forget(&mut fs, from);
                pinned::forget(&mut fs, to);
                answered(&mut fs, r)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store,
         (dir, old_flags, old, new_dir, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                let follow = old_flags.contains(PathFlags::SYMLINK_FOLLOW);
                let from = prepare(&mut store, &dir, &old, follow, false);
                let to = prepare(&mut store, &new_dir, &new, false, true);
                let mut fs = store.data_mut().filesystem();
                let ((from, old), (to, new)) = match both(&mut fs, from, to) {
                    Ok(both) => both,
                    Err(e) => return Ok((Err(e),)),
                };
                let r = fs
                    .link_at(borrow(&from), PathFlags::empty(), old, borrow(&to), new)
                    .await;
                pinned::forget(&mut fs, from);
                pinned::forget(&mut fs, to);
                answered(&mut fs, r)
            })
        },
    )?;
    reads_checked_for_drives(&mut types)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// The path operations that only read, with the drive check in front.
fn reads_checked_for_drives<T: Guarded>(
    types: &mut wasmtime::component::LinkerInstance<'_, T>,
) -> wasmtime::Result<()> {
    // The two that look at a path with flags, alike but for the method.
    macro_rules! looked_at {
        ($wit:literal, $method:ident) => {
            types.func_wrap_async(
                $wit,
                |mut store, (dir, flags, path): (Resource<Descriptor>, PathFlags, String)| {
                    Box::new(async move {
                        if let Err(e) = check_guest_path(&path) {
                            return Ok((Err(e),));
                        }
                        let mut fs = store.data_mut().filesystem();
                        let r = fs.$method(dir, flags, path).await;
                        answered(&mut fs, r)
                    })
                },
            )?;
        };
    }
    looked_at!("[method]descriptor.stat-at", stat_at);
    looked_at!("[method]descriptor.metadata-hash-at", metadata_hash_at);
    types.func_wrap_async(
        "[method]descriptor.readlink-at",
        |mut store, (dir, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                if let Err(e) = check_guest_path(&path) {
                    return Ok((Err(e),));
                }
                let mut fs = store.data_mut().filesystem();
                let r = fs.readlink_at(dir, path).await;
                answered(&mut fs, r)
            })
        },
    )?;
    Ok(())
}

/// wasmtime-wasi's `open-at`, unless what is at `path` is neither a file,
/// a folder nor a link (a named pipe, a device): what is not there yet
/// (or cannot be looked at) is left to the open itself to answer.
async fn open_unless_it_waits(
    fs: &mut WasiFilesystemCtxView<'_>,
    dir: Resource<Descriptor>,
    path_flags: PathFlags,
    path: String,
    open_flags: OpenFlags,
    flags: DescriptorFlags,
) -> Answer<Resource<Descriptor>> {
    if let Ok(stat) = fs.stat_at(borrow(&dir), path_flags, path.clone()).await
        && !matches!(
            stat.type_,
            DescriptorType::RegularFile | DescriptorType::Directory | DescriptorType::SymbolicLink
        )
    {
        return Ok((Err(ErrorCode::Unsupported),));
    }
    let r = fs.open_at(dir, path_flags, path, open_flags, flags).await;
    answered(fs, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drive-prefixed component is refused on Windows (under Wine in
    /// `scripts/windows-check`), and means nothing special elsewhere.
    #[test]
    fn drive_prefixes_are_refused_on_windows() {
        for path in ["C:", "C:x", "a/C:/b", "x:stream", "D:\\Windows"] {
            assert_eq!(check_guest_path(path).is_err(), cfg!(windows), "{path}");
        }
        assert!(check_guest_path("src/main.rs").is_ok());
    }
}
