//! Running git for the host: the `git` capability and the `cofer` command
//! (a separate crate, so that command needs no wasmtime).
//!
//! Every git process starts here, and none of them lets the directory it
//! works on decide where the repository is or how git behaves. That matters
//! because Cofer's worktrees are written by containers: a `.git` file, a
//! repository config, `.gitattributes` or a hook planted there would
//! otherwise run programs on the host or read its files (issue 21).
//!
//! - A [`Repo`] is located by the host: a main working tree is found by
//!   looking for a `.git` *directory* (a `.git` file, which could point
//!   anywhere, is refused), and a linked worktree through its repository's
//!   own registry (`$GIT_DIR/worktrees/*/gitdir`), never through the
//!   worktree's `.git` file. Git then gets `GIT_DIR` and `GIT_WORK_TREE`, so
//!   it discovers nothing.
//! - The environment is cleared: no system or global config, no system
//!   attributes, none of the caller's `GIT_*` variables.
//! - [`SAFE`] settings switch off hooks, fsmonitor, signing and every
//!   transport but local files.
//! - No git process ever runs on a tree a container writes (issue 34):
//!   such a tree is a [`Worktree`], which has no way to run git. Its
//!   commits are built as data ([`snapshot`]); git runs only on the user's
//!   main working tree, its object store and refs.
//! - Paths are looked up once: a [`Repo`] and a [`Worktree`] hold open
//!   handles of their folders (pinned beneath a plugin's root by the host,
//!   [`Repo::pinned_to`]), and git and the host's own file work go through
//!   those handles (`/proc/<pid>/fd/<n>`), so a folder swapped for a link
//!   after the check changes nothing.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

mod commands;
mod hold;
pub mod names;
mod neutral;
pub mod remove;
pub mod snapshot;
pub mod state;

pub use commands::{exclude, fetch, identity, init_bare, prune_bare, push, remote_url, resolve};
pub use hold::{Hold, break_stale_index_lock, repo_lock, try_hold};
pub use remove::remove_worktree;

/// No git operation of ours takes longer on a healthy repository.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Settings put in front of every git command. Hooks point at `/dev/null`
/// rather than an empty directory: nothing can ever be created under it.
///
/// Submodules are never entered: git would run a child git there that
/// reads the submodule's own config (`.git/modules/<name>/config`, as
/// writable as the top one), whose filter drivers no setting here names
/// (issue 61). A protocol named in a repository's config
/// (`protocol.ext.allow`) would win over `protocol.allow`, so each one
/// that runs a program or reaches the network is named here.
const SAFE: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "commit.gpgsign=false",
    "tag.gpgsign=false",
    "core.quotePath=false",
    "submodule.recurse=false",
    "diff.ignoreSubmodules=all",
    "status.submoduleSummary=false",
    "fetch.recurseSubmodules=false",
    "push.recurseSubmodules=no",
    "gc.auto=0",
    "maintenance.auto=false",
    "protocol.allow=never",
    "protocol.ext.allow=never",
    "protocol.fd.allow=never",
    "protocol.ssh.allow=never",
    "protocol.git.allow=never",
    "protocol.http.allow=never",
    "protocol.https.allow=never",
    "protocol.ftp.allow=never",
    "protocol.ftps.allow=never",
    "protocol.file.allow=always",
];

/// [`SAFE`] and [`neutral::PROGRAMS_OFF`], as `-c` settings.
fn fixed_settings() -> Vec<String> {
    SAFE.iter()
        .chain(neutral::PROGRAMS_OFF)
        .map(|s| s.to_string())
        .collect()
}

/// Who a person's own commits are by, as plain git reads it.
const PERSON_VARS: &[&str] = &[
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
    "EMAIL",
];

/// Variables kept from the host's environment; everything else is cleared.
const KEPT_VARS: &[&str] = &["PATH", "HOME", "TMPDIR"];

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git was not found on PATH: install it (Debian/Ubuntu: `apt-get install git`)")]
    Unavailable,
    #[error("{0} is not inside a git repository")]
    NotARepository(String),
    /// A place the host will not treat as a repository, and why.
    #[error("{0}")]
    Refused(String),
    #[error("`{command}` failed ({}): {stderr}", match exit_code {
        Some(code) => format!("exit code {code}"),
        None => "killed, or no answer".to_string(),
    })]
    Failed {
        command: String,
        exit_code: Option<i32>,
        stderr: String,
    },
}

/// A main working tree (the user's) and its git directory, found by the
/// host.
#[derive(Debug, Clone)]
pub struct Repo {
    work_tree: PathBuf,
    git_dir: PathBuf,
    handles: Arc<Handles>,
}

/// The open folders of a [`Repo`]: what git and the host work on.
#[derive(Debug)]
struct Handles {
    tree: Dir,
    git: Dir,
}

/// A linked worktree of a [`Repo`] whose files a container writes. It has
/// no way to run git: it is committed as data ([`snapshot`]), locked
/// ([`try_hold`]) and removed by the host itself.
#[derive(Debug, Clone)]
pub struct Worktree {
    work_tree: PathBuf,
    /// Its admin directory in the main repository (`.git/worktrees/<name>`).
    git_dir: PathBuf,
    /// The worktree and its admin directory, open.
    tree: Arc<Dir>,
    admin: Arc<Dir>,
}

// The platform's view of open folders and running git, chosen here.
#[cfg_attr(unix, path = "sys/unix.rs")]
#[cfg_attr(windows, path = "sys/windows.rs")]
mod sys;

/// A path to an open folder that another program of this host can use:
/// it leads to what was opened, whatever its old path leads to now.
pub use sys::handle_path as proc_path;

fn io_failed(what: &Path) -> impl FnOnce(std::io::Error) -> GitError + '_ {
    move |e| GitError::Failed {
        command: format!("open {}", what.display()),
        exit_code: None,
        stderr: e.to_string(),
    }
}

impl Repo {
    /// The main working tree containing `path`, found by the host: the
    /// nearest ancestor with a `.git` directory. Refused when the nearest
    /// `.git` is a file or a link (a linked worktree or submodule: what it
    /// points to is not ours to trust), or when the tree is a registered
    /// linked worktree of an enclosing repository (a `.git` directory there
    /// was planted).
    pub fn open(path: &Path) -> Result<Repo, GitError> {
        let path = path
            .canonicalize()
            .map_err(|_| GitError::NotARepository(path.display().to_string()))?;
        let (work_tree, kind) = path
            .ancestors()
            .find_map(|dir| {
                let meta = std::fs::symlink_metadata(dir.join(".git")).ok()?;
                Some((dir.to_path_buf(), meta.file_type()))
            })
            .ok_or_else(|| GitError::NotARepository(path.display().to_string()))?;
        if !kind.is_dir() {
            return Err(GitError::Refused(format!(
                "{}/.git is not a directory: {} is a linked worktree or a submodule, which the host does \
                 not open (its .git could point anywhere); use the main working tree of its repository",
                work_tree.display(),
                work_tree.display()
            )));
        }
        for outer in work_tree.ancestors().skip(1) {
            let git_dir = outer.join(".git");
            if !std::fs::symlink_metadata(&git_dir).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            if let Some(linked) = linked_worktrees(&git_dir)
                .into_iter()
                .find(|(_, tree)| work_tree.starts_with(tree))
            {
                return Err(GitError::Refused(format!(
                    "{} is inside {}, a linked worktree of {}: its files (a .git directory among them) \
                     may be written by a container; use {}",
                    path.display(),
                    linked.1.display(),
                    outer.display(),
                    outer.display()
                )));
            }
        }
        let tree = Dir::open_ambient_dir(&work_tree, cap_std::ambient_authority())
            .map_err(io_failed(&work_tree))?;
        Repo::with_tree(work_tree, tree)
    }

    /// `work_tree` (the path, for messages) open as `tree`, with its `.git`
    /// directory.
    fn with_tree(work_tree: PathBuf, tree: Dir) -> Result<Repo, GitError> {
        let git_dir = work_tree.join(".git");
        let git = tree.open_dir_nofollow(".git").map_err(|_| {
            GitError::Refused(format!(
                "{} is not a directory (a link or a file now): the host does not follow it",
                git_dir.display()
            ))
        })?;
        Ok(Repo {
            work_tree,
            git_dir,
            handles: Arc::new(Handles { tree, git }),
        })
    }

    /// This repository, working on `tree` from now on: the host opened it
    /// beneath the plugin's root without following a link (after `open`
    /// checked the path), so git works on that folder whatever the path
    /// leads to later.
    pub fn pinned_to(self, tree: Dir) -> Result<Repo, GitError> {
        Repo::with_tree(self.work_tree, tree)
    }

    /// The linked worktree of this repository at `path`, whose files are
    /// hostile, open as `tree` (by the host, beneath the plugin's root).
    /// Found in this repository's registry; the worktree's own `.git` is
    /// never read.
    pub fn linked(&self, path: &Path, tree: Dir) -> Result<Worktree, GitError> {
        let path = path
            .canonicalize()
            .map_err(|_| GitError::NotARepository(path.display().to_string()))?;
        let (admin_name, work_tree) = linked_worktrees(&self.git())
            .into_iter()
            .find(|(_, tree)| *tree == path)
            .ok_or_else(|| {
                GitError::NotARepository(format!(
                    "{} (not a worktree of {})",
                    path.display(),
                    self.work_tree.display()
                ))
            })?;
        let git_dir = self.git_dir.join("worktrees").join(&admin_name);
        let admin = self
            .handles
            .git
            .open_dir_nofollow("worktrees")
            .and_then(|dir| dir.open_dir_nofollow(&admin_name))
            .map_err(io_failed(&git_dir))?;
        Ok(Worktree {
            work_tree,
            git_dir,
            tree: Arc::new(tree),
            admin: Arc::new(admin),
        })
    }

    /// The git directory, through its handle.
    fn git(&self) -> PathBuf {
        proc_path(&self.handles.git)
    }

    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// `git <args>` on this repository for the user's terminal (their
    /// pager, colours and config), with hooks and fsmonitor off.
    ///
    /// The repository's config still chooses no program: every key that
    /// names one is switched off as for the host's own commands
    /// ([`neutral`]), the pager is the person's (`GIT_PAGER`, their global
    /// `core.pager`, `PAGER`, else `less`), never the repository's.
    pub fn user_command(&self, args: &[&str]) -> std::process::Command {
        let keys = git_command(&fixed_settings(), &neutral::LIST_KEYS)
            .as_std_mut()
            .env("GIT_DIR", &self.git_dir)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let pager = person_pager();
        let mut settings: Vec<String> = ["core.hooksPath=/dev/null", "core.fsmonitor=false"]
            .into_iter()
            .chain(
                neutral::PROGRAMS_OFF
                    .iter()
                    .copied()
                    .filter(|s| !s.starts_with("core.pager=")),
            )
            .map(str::to_string)
            .collect();
        settings.push(format!("core.pager={pager}"));
        settings.extend(neutral::over(&keys));
        let mut command = std::process::Command::new(program());
        command
            .args(settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .args(args)
            .env("GIT_DIR", &self.git_dir)
            .env("GIT_WORK_TREE", &self.work_tree)
            .current_dir(&self.work_tree);
        command
    }

    /// Run `git <args>` on this repository; its stdout.
    pub async fn run(&self, args: &[&str]) -> Result<String, GitError> {
        self.run_with(&[], args).await
    }

    /// Like [`Repo::run`] with extra `-c name=value` settings. Every key of
    /// the repository's config that names a program (a filter, merge or
    /// diff driver, a helper, a pager: [`neutral`]) is switched off first,
    /// and a repository whose objects come from elsewhere is refused.
    /// (The config is read just before; one written between the two reads
    /// is the limit the book's security model names.)
    pub async fn run_with(&self, settings: &[String], args: &[&str]) -> Result<String, GitError> {
        self.run_neutral(settings, args, &[]).await
    }

    /// Like [`Repo::run_with`], for a command the person runs themselves
    /// (`cofer merge`): its commits are theirs, by the identity plain git
    /// would take (`GIT_AUTHOR_*`/`GIT_COMMITTER_*`/`EMAIL` where the
    /// command was started, the repository's `user.*`, else their global
    /// one), and nothing else of their global config is read.
    pub async fn run_for_person(
        &self,
        settings: &[String],
        args: &[&str],
    ) -> Result<String, GitError> {
        let mut all = Vec::new();
        for key in ["user.name", "user.email"] {
            let local = self.config_value(key).await.ok().flatten();
            if local.is_none_or(|v| v.is_empty()) {
                let global = commands::global_value(key).await;
                if !global.is_empty() {
                    all.push(format!("{key}={global}"));
                }
            }
        }
        all.extend_from_slice(settings);
        self.run_neutral(&all, args, PERSON_VARS).await
    }

    /// The repository's value of `key` (`git config --get`), none when
    /// unset. Reading a value runs nothing the config names, so the keys
    /// are not listed first ([`Repo::run_with`] does that for commands).
    pub async fn config_value(&self, key: &str) -> Result<Option<String>, GitError> {
        neutral::refuse_alternates(&self.handles.git, &self.git_dir)?;
        match self.run_as_is(&[], &["config", "--get", key], &[]).await {
            Ok(out) => Ok(Some(out.trim().to_string())),
            Err(GitError::Failed {
                exit_code: Some(1), ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn run_neutral(
        &self,
        settings: &[String],
        args: &[&str],
        vars: &[&str],
    ) -> Result<String, GitError> {
        neutral::refuse_alternates(&self.handles.git, &self.git_dir)?;
        let keys = self.run_as_is(&[], &neutral::LIST_KEYS, &[]).await?;
        let mut all = neutral::over(&keys);
        all.extend_from_slice(settings);
        self.run_as_is(&all, args, vars).await
    }

    /// `git <args>` with the host's fixed settings and `settings`, the
    /// repository's config not looked at first; `vars` kept from the
    /// host's environment besides [`KEPT_VARS`].
    async fn run_as_is(
        &self,
        settings: &[String],
        args: &[&str],
        vars: &[&str],
    ) -> Result<String, GitError> {
        let mut all = fixed_settings();
        all.push(format!("safe.directory={}", self.work_tree.display()));
        all.extend_from_slice(settings);
        let mut command = git_command(&all, args);
        command.envs(vars.iter().filter_map(|v| Some((v, std::env::var_os(v)?))));
        // Git is given the open folders, not their paths; it takes the work
        // tree's path from its working directory (getcwd), never walking it.
        let tree = proc_path(&self.handles.tree);
        command
            .env("GIT_DIR", self.git())
            .env("GIT_WORK_TREE", ".")
            .current_dir(&tree);
        output(command, args, &tree).await
    }
}

impl Worktree {
    pub fn work_tree(&self) -> &Path {
        &self.work_tree
    }

    /// The worktree, open.
    pub fn dir(&self) -> &Dir {
        &self.tree
    }

    /// The content git writes into a linked worktree's `.git` file.
    pub fn gitfile(&self) -> String {
        format!("gitdir: {}\n", self.git_dir.display())
    }
}

/// `(admin dir name, work tree)` of every linked worktree registered in the
/// git directory `git_dir`.
fn linked_worktrees(git_dir: &Path) -> Vec<(std::ffi::OsString, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(git_dir.join("worktrees")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let gitfile = std::fs::read_to_string(entry.path().join("gitdir")).ok()?;
            let tree = Path::new(gitfile.trim_end_matches('\n')).parent()?;
            // Compare resolved paths, as `open` and `linked` do.
            let tree = tree.canonicalize().unwrap_or_else(|_| tree.to_path_buf());
            Some((entry.file_name(), tree))
        })
        .collect()
}

/// The person's pager, as git itself chooses it: the global `core.pager`
/// (`GIT_PAGER` wins over it where git runs), `PAGER`, else `less`; never
/// a repository's.
pub fn person_pager() -> String {
    std::env::var("GIT_PAGER")
        .ok()
        .filter(|p| !p.is_empty())
        .or_else(|| {
            commands::global_command("core.pager")
                .as_std_mut()
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .filter(|p| !p.is_empty())
        })
        .or_else(|| std::env::var("PAGER").ok().filter(|p| !p.is_empty()))
        .unwrap_or_else(|| "less".into())
}

static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Run `git` as this absolute path from now on (the host finds it once at
/// start, never in a directory a project or container writes); without
/// it, `git` is looked up on PATH (the `cofer` command, run by the user).
pub fn use_program(path: PathBuf) {
    let _ = PROGRAM.set(path);
}

fn program() -> &'static Path {
    PROGRAM.get().map_or(Path::new("git"), PathBuf::as_path)
}

/// `git` with the host's settings and a cleared environment.
fn git_command(settings: &[String], args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program());
    command
        .args(settings.iter().flat_map(|s| ["-c", s.as_str()]))
        .args(args)
        .env_clear()
        .envs(
            KEPT_VARS
                .iter()
                .filter_map(|var| Some((var, std::env::var_os(var)?))),
        )
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_ATTR_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Run `command` (`git <args>` on `dir`) under [`GIT_TIMEOUT`]; its stdout.
async fn output(
    mut command: tokio::process::Command,
    args: &[&str],
    dir: &Path,
) -> Result<String, GitError> {
    let shown = || format!("git {}", args.join(" "));
    let output = match tokio::time::timeout(GIT_TIMEOUT, command.output()).await {
        Err(_) => {
            return Err(GitError::Failed {
                command: shown(),
                exit_code: None,
                stderr: format!("no answer within {} s", GIT_TIMEOUT.as_secs()),
            });
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            // Either git or the directory is missing; say which.
            return Err(if dir.is_dir() {
                GitError::Unavailable
            } else {
                GitError::NotARepository(dir.display().to_string())
            });
        }
        Ok(Err(e)) => {
            return Err(GitError::Failed {
                command: shown(),
                exit_code: None,
                stderr: e.to_string(),
            });
        }
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let mut stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    // git says this on stderr; what a command printed is not looked at.
    if stderr.contains("not a git repository") {
        return Err(GitError::NotARepository(dir.display().to_string()));
    }
    // What a failed command said on stdout belongs to the failure too (a
    // merge's `CONFLICT (content): …` lines): its last lines, first.
    let said = String::from_utf8_lossy(&output.stdout);
    let said = said.trim();
    if !said.is_empty() {
        let mut start = said.len().saturating_sub(4096);
        while !said.is_char_boundary(start) {
            start += 1;
        }
        stderr = format!("{}\n{stderr}", &said[start..]).trim().to_string();
    }
    Err(GitError::Failed {
        command: shown(),
        exit_code: output.status.code(),
        stderr,
    })
}

/// Build and cache output left out of a worktree's commits when the
/// repository ignores nothing itself (no `.gitignore` at its top).
const DEFAULT_EXCLUDES: &str = "__pycache__/\n*.py[cod]\n.pytest_cache/\n.mypy_cache/\n.tox/\n\
    .venv/\nnode_modules/\ntarget/\n.gradle/\n.dart_tool/\n.cache/\n";

#[cfg(test)]
mod tests;
