//! What the host adds to WASI's file system (wasmtime-wasi's): no open of
//! a file that would wait.
//!
//! A plugin's file operations run on the thread that runs the call
//! ([`crate::store`]): opening a named pipe there waits for its other end,
//! and nothing (not the call's deadline, which that thread would have to
//! check) ends the wait. Whoever writes where a plugin reads (a test
//! project, a container) could leave one where a report or a
//! `package.json` is read, and the call would never come back. So
//! `open-at` first looks at what the path is, and refuses anything but a
//! file, a folder or (not followed) a link.

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, DescriptorType, ErrorCode, Host, HostDescriptor, OpenFlags, PathFlags,
};

/// The interface as wasmtime-wasi defines it (plugins' older 0.2 imports
/// are served by it too).
const TYPES: &str = "wasi:filesystem/types@0.2.12";

/// Put the checked `open-at` in place of wasmtime-wasi's in `linker`,
/// which already holds WASI.
pub fn refuse_opens_that_wait<T: WasiFilesystemView + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    linker.instance(TYPES)?.func_wrap_async(
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
                let mut fs = store.data_mut().filesystem();
                let looked = Resource::new_borrow(dir.rep());
                // What is not there yet (or cannot be looked at) is left to
                // the open itself to answer.
                if let Ok(stat) = fs.stat_at(looked, path_flags, path.clone()).await
                    && !matches!(
                        stat.type_,
                        DescriptorType::RegularFile
                            | DescriptorType::Directory
                            | DescriptorType::SymbolicLink
                    )
                {
                    return Ok((Err(ErrorCode::Unsupported),));
                }
                let opened = match fs.open_at(dir, path_flags, path, open_flags, flags).await {
                    Ok(file) => Ok(file),
                    Err(e) => Err(fs.convert_error_code(e)?),
                };
                Ok((opened,))
            })
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
