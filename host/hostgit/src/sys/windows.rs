//! What finding and pinning repositories needs from Windows.

use std::os::windows::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use windows_sys::Win32::Storage::FileSystem::{FILE_NAME_NORMALIZED, GetFinalPathNameByHandleW};

/// The path the open `handle` has now (Windows has no `/proc/<pid>/fd`; a
/// folder opened by the host cannot be removed or renamed while it is
/// open, so its path keeps leading to it).
pub fn handle_path(handle: &impl std::os::windows::io::AsRawHandle) -> PathBuf {
    let mut buf = vec![0u16; 1024];
    loop {
        // SAFETY: the buffer's length is passed with it; the handle is open.
        let len = unsafe {
            GetFinalPathNameByHandleW(
                handle.as_raw_handle(),
                buf.as_mut_ptr(),
                buf.len() as u32,
                FILE_NAME_NORMALIZED,
            )
        } as usize;
        if len == 0 {
            return PathBuf::new();
        }
        if len < buf.len() {
            return PathBuf::from(std::ffi::OsString::from_wide(&buf[..len]));
        }
        buf.resize(len + 1, 0);
    }
}

/// Whether a live `git` may work on the tree: without a process table to
/// read its environment from, one may, so a stale lock is left in place.
pub fn git_working_on(_work_tree: &Path, _git_dir: &Path) -> bool {
    true
}

/// Opening a file never waits for a writer on Windows.
pub fn without_waiting(_options: &mut cap_std::fs::OpenOptions) {}

/// Windows files have no executable bit: the committed mode stays.
pub fn executable(_meta: &cap_std::fs::Metadata) -> Option<bool> {
    None
}

/// Hard links are not told apart here: each name is read on its own.
pub fn shared_inode(_meta: &cap_std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// The index's view of a file's metadata (git's stat cache): times and
/// size, as Git for Windows keeps them.
pub fn stat_of(meta: &cap_std::fs::Metadata) -> gix_index::entry::Stat {
    let time = |at: std::io::Result<cap_std::time::SystemTime>| {
        let since = at
            .ok()
            .and_then(|t| t.into_std().duration_since(std::time::UNIX_EPOCH).ok())
            .unwrap_or_default();
        gix_index::entry::stat::Time {
            secs: since.as_secs() as u32,
            nsecs: since.subsec_nanos(),
        }
    };
    gix_index::entry::Stat {
        mtime: time(meta.modified()),
        ctime: time(meta.created()),
        size: meta.len() as u32,
        ..Default::default()
    }
}
