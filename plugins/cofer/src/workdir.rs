//! The worktree as the file tools see it: a directory handle every path
//! is opened beneath (the host's WASI resolves it there, so `..`, an
//! absolute symlink or one a command swaps in cannot lead out), paths
//! taken relative to /workdir with `.git` refused by name, and the
//! filesystem's errors in words.

use plugin_sdk::ToolError;
use wasip2::filesystem::preopens::get_directories;
use wasip2::filesystem::types::{
    Descriptor, DescriptorFlags, DescriptorType, ErrorCode, OpenFlags, PathFlags,
};

use crate::env;
use crate::errors::{error, step_failed};

/// Files larger than this are not read whole into an answer.
const MAX_READ_BYTES: u64 = 4 << 20;

/// `target` (absolute under /workdir, or relative to it) as a path relative
/// to the workdir, or why it may not be used.
pub fn relative(target: &str) -> Result<String, ToolError> {
    let refuse = |why: &str, remediation: &str| {
        error("invalid_request", format!("`{target}` {why}"), remediation)
    };
    let rest = match target.strip_prefix(env::WORKDIR) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ if target.starts_with('/') => {
            return Err(refuse(
                "is outside the environment's /workdir",
                "give a path under /workdir, or relative to it",
            ));
        }
        _ => target,
    };
    if rest.contains('\0') {
        return Err(refuse("contains a NUL character", "remove it"));
    }
    let mut parts = Vec::new();
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(refuse(
                    "contains `..`",
                    "give the path inside /workdir without `..`",
                ));
            }
            ".git" if parts.is_empty() => {
                return Err(refuse(
                    "is the environment's .git, which Cofer keeps",
                    "leave .git alone: every change is committed for you",
                ));
            }
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// A directory handle of the worktree: every path is resolved beneath it.
pub struct Workdir {
    root: Descriptor,
}

impl Workdir {
    pub fn open(worktree: &str) -> Result<Workdir, ToolError> {
        // The preopen (policy fs.write) that holds the worktree.
        let (base, rest) = get_directories()
            .into_iter()
            .filter_map(|(dir, path)| {
                let rest = worktree.strip_prefix(path.trim_end_matches('/'))?;
                let rest = rest.strip_prefix('/')?;
                Some((dir, rest.to_string()))
            })
            .min_by_key(|(_, rest)| rest.len())
            .ok_or_else(|| {
                error(
                    "denied",
                    format!("the worktree {worktree} is outside the directories Cofer may write"),
                    "keep the repository under COFER_ROOT (the plugin's fs.write)",
                )
            })?;
        let root = base
            .open_at(
                PathFlags::empty(),
                &rest,
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ | DescriptorFlags::MUTATE_DIRECTORY,
            )
            .map_err(|e| fs_error(e, "open the workdir", env::WORKDIR))?;
        Ok(Workdir { root })
    }

    pub fn read(&self, path: &str, target: &str) -> Result<Vec<u8>, ToolError> {
        let file = self
            .root
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                path,
                OpenFlags::empty(),
                DescriptorFlags::READ,
            )
            .map_err(|e| fs_error(e, "read", target))?;
        let stat = file.stat().map_err(|e| fs_error(e, "read", target))?;
        if stat.type_ == DescriptorType::Directory {
            return Err(fs_error(ErrorCode::IsDirectory, "read", target));
        }
        if stat.size > MAX_READ_BYTES {
            return Err(error(
                "invalid_request",
                format!(
                    "`{target}` has {} MB, more than the {} MB a file may have to be read whole",
                    stat.size >> 20,
                    MAX_READ_BYTES >> 20
                ),
                "read a line range, or look at it with environment_run_cmd (head, grep)",
            ));
        }
        let mut bytes = Vec::new();
        loop {
            let (chunk, end) = file
                .read(1 << 16, bytes.len() as u64)
                .map_err(|e| fs_error(e, "read", target))?;
            bytes.extend_from_slice(&chunk);
            if end || chunk.is_empty() || bytes.len() as u64 > MAX_READ_BYTES {
                return Ok(bytes);
            }
        }
    }

    pub fn write(&self, path: &str, contents: &[u8], target: &str) -> Result<(), ToolError> {
        if path.is_empty() {
            return Err(fs_error(ErrorCode::IsDirectory, "write", target));
        }
        // Missing parent directories are made, as container-use does.
        let mut parent = String::new();
        for dir in path
            .split('/')
            .rev()
            .skip(1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
        {
            if !parent.is_empty() {
                parent.push('/');
            }
            parent.push_str(dir);
            match self.root.create_directory_at(&parent) {
                Ok(()) | Err(ErrorCode::Exist) => {}
                Err(e) => return Err(fs_error(e, "write", target)),
            }
        }
        let file = self
            .root
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                path,
                OpenFlags::CREATE | OpenFlags::TRUNCATE,
                DescriptorFlags::WRITE,
            )
            .map_err(|e| fs_error(e, "write", target))?;
        let mut written = 0;
        while written < contents.len() {
            let n = file
                .write(&contents[written..], written as u64)
                .map_err(|e| fs_error(e, "write", target))?;
            written += n as usize;
        }
        Ok(())
    }

    pub fn delete(&self, path: &str, target: &str) -> Result<(), ToolError> {
        self.root
            .unlink_file_at(path)
            .map_err(|e| fs_error(e, "delete", target))
    }

    pub fn list(&self, path: &str, target: &str) -> Result<Vec<String>, ToolError> {
        let dir = self
            .root
            .open_at(
                PathFlags::SYMLINK_FOLLOW,
                if path.is_empty() { "." } else { path },
                OpenFlags::DIRECTORY,
                DescriptorFlags::READ,
            )
            .map_err(|e| fs_error(e, "list", target))?;
        let entries = dir
            .read_directory()
            .map_err(|e| fs_error(e, "list", target))?;
        let mut names = Vec::new();
        while let Some(entry) = entries
            .read_directory_entry()
            .map_err(|e| fs_error(e, "list", target))?
        {
            if path.is_empty() && entry.name == ".git" {
                continue;
            }
            let slash = if entry.type_ == DescriptorType::Directory {
                "/"
            } else {
                ""
            };
            names.push(format!("{}{slash}", entry.name));
        }
        Ok(names)
    }
}

/// A filesystem error on `target` while doing `what`, for the caller.
fn fs_error(e: ErrorCode, what: &str, target: &str) -> ToolError {
    match e {
        ErrorCode::NoEntry => error(
            "not_found",
            format!("`{target}` does not exist in the environment's /workdir"),
            "list the directory with environment_file_list",
        ),
        // cap-std's answer to a path that resolves outside the worktree.
        ErrorCode::NotPermitted | ErrorCode::Access | ErrorCode::CrossDevice => error(
            "invalid_request",
            format!("`{target}` leads outside the environment's /workdir (through a symlink)"),
            "give a path whose every part stays inside /workdir",
        ),
        ErrorCode::Loop => error(
            "invalid_request",
            format!("`{target}` is a symlink loop"),
            "give a path without the loop",
        ),
        // The host's answer to an open of what is not a file, a folder or a
        // link (it would wait for the other end).
        ErrorCode::Unsupported => error(
            "invalid_request",
            format!(
                "`{target}` is a named pipe, socket or device, not a file: it cannot be opened to {what}"
            ),
            "use it inside the environment with environment_run_cmd",
        ),
        ErrorCode::IsDirectory => error(
            "invalid_request",
            format!("`{target}` is a directory, so it cannot be {what}"),
            "give a file (environment_file_list shows what is there)",
        ),
        ErrorCode::NotDirectory => error(
            "invalid_request",
            format!("a part of `{target}` is a file, not a directory"),
            "give a path through directories (environment_file_list shows what is there)",
        ),
        e => step_failed(
            &format!("{what} {target}"),
            e.message(),
            "check the worktree on the host (`cofer` commands name it), then retry",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_taken_relative_to_the_workdir_and_kept_inside() {
        assert_eq!(relative("src/a.py").unwrap(), "src/a.py");
        assert_eq!(relative("/workdir/src//./a.py").unwrap(), "src/a.py");
        assert_eq!(relative("/workdir").unwrap(), "");
        assert_eq!(relative(".").unwrap(), "");
        assert_eq!(relative("src/.git/x").unwrap(), "src/.git/x");
        for bad in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "/workdirx/a",
            ".git/config",
            "/workdir/.git",
            "a\0b",
        ] {
            let e = relative(bad).unwrap_err();
            assert_eq!(e.code, "invalid_request", "{bad:?}");
        }
    }
}
