//! `git`: typed git operations for plugins granted `git`.
//!
//! Why not `process` with `git` allowed: git's own options (`-C`,
//! `-c core.fsmonitor=<program>`, `--git-dir`, aliases, hooks, `worktree add
//! <anywhere>`) let an argv write outside any root or run any program, and
//! an argv filter for all of them would be a losing game. Here the plugin
//! names an operation; the host builds the command line ([`hostgit`]),
//! confines every path to the plugin's writable roots (a repository is
//! written to even by "read" commands: index refresh, lock files), locates
//! the repository itself ([`Repo`]: a `.git` file is never followed) and
//! serialises operations on one repository.

use std::path::{Path, PathBuf};

use crate::bindings::Refusal;
use std::time::{Duration, Instant};

use wasmtime::component::Resource;

use crate::bindings::mcphost::plugin::git::{
    CommitOutcome, GitError, GitFailure, Host, HostHold, LargeFile,
};
use crate::paths::confine;
use crate::pin::{self, Pinned};
use crate::policy::Grants;
use crate::store::CallState;
use cap_std::fs::Dir;
use hostgit::{self as git, GitError as RunError, Hold, Repo, Worktree};

type Answer<T> = Result<T, Refusal<GitError>>;

impl From<RunError> for GitError {
    fn from(e: RunError) -> Self {
        match e {
            RunError::Unavailable => GitError::Unavailable(e.to_string()),
            RunError::NotARepository(_) => GitError::NotARepository(e.to_string()),
            RunError::Refused(why) => GitError::Denied(why),
            RunError::Failed {
                command,
                exit_code,
                stderr,
            } => GitError::Failed(GitFailure {
                command,
                exit_code,
                stderr,
            }),
        }
    }
}

/// `path` inside a writable root, with the `git` grant checked.
fn git_path(g: &Grants, path: &str) -> Result<PathBuf, GitError> {
    g.require("git").map_err(GitError::Denied)?;
    if !Path::new(path).is_absolute() {
        return Err(GitError::Invalid(format!(
            "`{path}` is not an absolute path"
        )));
    }
    confine(path, &g.workspace, &g.write_roots).ok_or_else(|| {
        GitError::Denied(g.denial(
            &format!("git access to `{path}`"),
            "fs.write",
            "a root containing it",
        ))
    })
}

/// The folder at `path` (checked by [`git_path`]), opened beneath the
/// plugin's writable root without following a link: what git and the host
/// then work on, whatever the path leads to later.
fn pinned_dir(g: &Grants, path: &Path) -> Result<Dir, GitError> {
    match pin::open(path, &g.write_roots) {
        Ok(Pinned::Dir(dir)) => Ok(dir),
        Ok(Pinned::File(_)) => Err(GitError::Invalid(format!(
            "{} is a file, not a folder",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(GitError::NotARepository(path.display().to_string()))
        }
        Err(e) => Err(GitError::Denied(e.to_string())),
    }
}

/// The repository containing `path`, all of it inside a writable root,
/// pinned there.
fn repository(g: &Grants, path: &str) -> Result<Repo, GitError> {
    let repo = Repo::open(&git_path(g, path)?)?;
    // The whole repository must be writable, not just `path` in it.
    let top = git_path(g, &repo.work_tree().to_string_lossy())?;
    let tree = pinned_dir(g, &top)?;
    Ok(repo.pinned_to(tree)?)
}

/// The linked worktree of `repo` at `path`, pinned beneath a writable root.
fn linked_worktree(g: &Grants, repo: &Repo, path: &str) -> Result<Worktree, GitError> {
    let path = git_path(g, path)?;
    let tree = pinned_dir(g, &path)?;
    Ok(repo.linked(&path, tree)?)
}

/// The directory of remote `remote` of `repo`, which must be a local path
/// inside a writable root (a push or a prune writes there), pinned there;
/// `host:path` (scp-like) and `scheme://` other than file:// are network
/// remotes.
async fn local_remote(g: &Grants, repo: &Repo, remote: &str) -> Result<Dir, GitError> {
    let Some(url) = git::remote_url(repo, remote).await? else {
        return Err(GitError::Invalid(format!(
            "the repository has no remote `{remote}`"
        )));
    };
    let network = url
        .split('/')
        .next()
        .is_some_and(|first| first.contains(':'));
    let local = match url.strip_prefix("file://") {
        Some(path) => path,
        None if network => {
            return Err(GitError::Denied(format!(
                "plugin `{}` may write only to local remotes; remote `{remote}` is {url}",
                g.plugin
            )));
        }
        None => &url,
    };
    pinned_dir(
        g,
        &git_path(g, &repo.work_tree().join(local).to_string_lossy())?,
    )
}

/// Run one git command on `repo` under the repository's lock.
async fn git_locked(repo: &Repo, args: &[&str]) -> Result<String, GitError> {
    let lock = git::repo_lock(repo.work_tree());
    let _held = lock.lock().await;
    Ok(repo.run(args).await?)
}

/// Put back the `.git` file git wrote into a linked worktree if something
/// else is there now (a container may have replaced it to redirect git);
/// the warning to report. `create_new` never follows a link planted
/// between the removal and the write.
fn restore_gitfile(tree: &Worktree) -> Result<Option<String>, GitError> {
    let dir = tree.dir();
    let path = tree.work_tree().join(".git");
    let expected = tree.gitfile();
    let failed = |e: std::io::Error| {
        GitError::Failed(GitFailure {
            command: format!("restore {}", path.display()),
            exit_code: None,
            stderr: e.to_string(),
        })
    };
    let found = match dir.symlink_metadata(".git") {
        Ok(meta) if meta.is_file() => {
            if dir
                .read_to_string(".git")
                .is_ok_and(|text| text == expected)
            {
                return Ok(None);
            }
            dir.remove_file(".git").map_err(failed)?;
            "a different .git file"
        }
        Ok(meta) if meta.is_dir() => {
            git::remove::remove_all(dir, Path::new(".git")).map_err(failed)?;
            "a .git directory"
        }
        Ok(_) => {
            dir.remove_file(".git").map_err(failed)?;
            "a .git link"
        }
        Err(_) => "no .git",
    };
    use std::io::Write;
    let mut options = cap_std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    dir.open_with(".git", &options)
        .and_then(|mut file| file.write_all(expected.as_bytes()))
        .map_err(failed)?;
    Ok(Some(format!(
        "the worktree {} had {found} where git's .git file belongs (written from inside the \
         container?); it was not followed and the .git file was restored",
        tree.work_tree().display()
    )))
}

impl Host for CallState {
    fn convert_git_error(&mut self, err: Refusal<GitError>) -> wasmtime::Result<GitError> {
        err.into_wit()
    }

    async fn open(&mut self, path: String) -> Answer<String> {
        let g = self.grants.clone();
        let repo = repository(&g, &path)?;
        Ok(crate::paths::guest(repo.work_tree()))
    }

    async fn status(&mut self, repo: String) -> Answer<Vec<String>> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        let lock = git::repo_lock(repo.work_tree());
        let held = lock.lock().await;
        let out = repo
            .run_with(
                &[],
                &[
                    "status",
                    "--porcelain",
                    "--untracked-files=all",
                    "--ignore-submodules=all",
                ],
            )
            .await?;
        drop(held);
        Ok(out.lines().map(str::to_string).collect())
    }

    async fn remote_url(&mut self, repo: String, name: String) -> Answer<Option<String>> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        Ok(git::remote_url(&repo, &name).await?)
    }

    async fn resolve(&mut self, repo: String, rev: String) -> Answer<Option<String>> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        Ok(git::resolve(&repo, &rev).await?)
    }

    async fn worktree_add(
        &mut self,
        repo: String,
        path: String,
        branch: String,
        start: String,
    ) -> Answer<()> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        let path = git_path(&g, &path)?;
        check_ref_name(&branch)?;
        let name = path
            .file_name()
            .ok_or_else(|| GitError::Invalid(format!("`{}` names no folder", path.display())))?;
        // Git gets the new worktree beneath its parent's open handle: the
        // parent made and pinned here cannot lead elsewhere by then.
        let parent = pin::create_dirs(path.parent().unwrap_or(&path), &g.write_roots)
            .map_err(|e| GitError::Denied(e.to_string()))?;
        let path = hostgit::proc_path(&parent).join(name);
        let path = path.to_string_lossy();
        let lock = git::repo_lock(repo.work_tree());
        let _held = lock.lock().await;
        // Parallel checkout (one worker per core): a 10k-file worktree is
        // written 2-4x faster than by git's default single worker.
        let args = ["worktree", "add", "-b", &branch, "--", &path, &start];
        repo.run_with(&["checkout.workers=0".into()], &args)
            .await
            .map(drop)
            .map_err(Into::into)
    }

    async fn worktree_remove(&mut self, repo: String, path: String, force: bool) -> Answer<()> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        let tree = linked_worktree(&g, &repo, &path)?;
        // The host removes it itself: `git worktree remove` would read the
        // worktree's `.git`, and without --force run `git status` in it.
        let lock = git::repo_lock(repo.work_tree());
        let _held = lock.lock().await;
        Ok(git::remove_worktree(&tree, force)?)
    }

    async fn worktree_prune(&mut self, repo: String) -> Answer<()> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        git_locked(&repo, &["worktree", "prune"]).await?;
        Ok(())
    }

    async fn delete_branch(&mut self, repo: String, branch: String) -> Answer<bool> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        check_ref_name(&branch)?;
        if git::resolve(&repo, &format!("refs/heads/{branch}"))
            .await?
            .is_none()
        {
            return Ok(false);
        }
        git_locked(&repo, &["branch", "-D", "--", &branch]).await?;
        Ok(true)
    }

    async fn hold_worktree(
        &mut self,
        repo: String,
        worktree: String,
        timeout_ms: u64,
    ) -> Answer<Resource<Hold>> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        let tree = linked_worktree(&g, &repo, &worktree)?;
        let started = Instant::now();
        let deadline = (started + Duration::from_millis(timeout_ms)).min(self.call.deadline);
        let failed = |why: String| {
            GitError::Failed(GitFailure {
                command: format!("hold {worktree}"),
                exit_code: None,
                stderr: why,
            })
        };
        // flock has no timeout: poll, so the deadline and cancellation hold.
        let hold = loop {
            match git::try_hold(&tree) {
                Ok(Some(hold)) => break hold,
                Ok(None) => {}
                Err(e) => return Err(failed(format!("cannot lock it: {e}")).into()),
            }
            if self.call.cancel.is_cancelled() {
                return Err(failed("the call was cancelled while waiting".into()).into());
            }
            if Instant::now() >= deadline {
                return Err(failed(format!(
                    "another call held it for all of {} ms",
                    started.elapsed().as_millis()
                ))
                .into());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Ok(self.table.push(hold)?)
    }

    async fn commit_all(
        &mut self,
        repo: String,
        worktree: String,
        message: String,
        max_file_bytes: u64,
    ) -> Answer<CommitOutcome> {
        let g = self.grants.clone();
        if message.trim().is_empty() {
            return Err(GitError::Invalid(
                "the commit message is empty: say what the commit holds".into(),
            )
            .into());
        }
        let repo = repository(&g, &repo)?;
        let tree = linked_worktree(&g, &repo, &worktree)?;
        let lock = git::repo_lock(tree.work_tree());
        let _held = lock.lock().await;
        let mut warnings: Vec<String> = restore_gitfile(&tree)?.into_iter().collect();
        warnings.extend(git::break_stale_index_lock(&tree));
        let who = git::identity(&repo, &g.plugin).await;
        let snapshot = tokio::task::spawn_blocking(move || {
            git::snapshot::commit_worktree(&repo, &tree, &message, &who, max_file_bytes)
        })
        .await
        .map_err(|e| {
            GitError::Failed(GitFailure {
                command: "commit".into(),
                exit_code: None,
                stderr: e.to_string(),
            })
        })??;
        let git::snapshot::Snapshot {
            commit,
            too_large,
            too_deep,
            unapplied_ignores,
            refused_names,
            too_many,
        } = snapshot;
        if let Some(first) = too_many.first.first() {
            warnings.push(format!(
                "{} files were not committed: a commit holds {} files at most (the first left \
                 out: {}); ignore generated files in .gitignore",
                too_many.count,
                git::snapshot::MAX_FILES,
                shortened(first)
            ));
        }
        if let Some(first) = refused_names.first.first() {
            warnings.push(format!(
                "{} files or folders were not committed: git refuses their names on some \
                 systems (`.git` written another way, `git~1`, invisible characters; the first: \
                 {}), so a checkout would fail; rename them",
                refused_names.count,
                shortened(first)
            ));
        }
        if let Some(first) = too_deep.first.first() {
            warnings.push(format!(
                "{} folders were not committed: they nest deeper than {} levels \
                 (the first: {}); no checkout could hold them",
                too_deep.count,
                git::snapshot::MAX_DEPTH,
                shortened(first)
            ));
        }
        if let Some(first) = unapplied_ignores.first.first() {
            warnings.push(format!(
                "{} .gitignore files were not applied (the first: {}): the \
                 .gitignore files on one path may hold {} lines together, so what \
                 they ignore was committed; shorten them",
                unapplied_ignores.count,
                shortened(first),
                git::snapshot::MAX_IGNORE_PATTERNS
            ));
        }
        if too_large.count > too_large.first.len() {
            warnings.push(format!(
                "{} more files over the size limit were not committed",
                too_large.count - too_large.first.len()
            ));
        }
        Ok(CommitOutcome {
            commit,
            warnings,
            too_large: too_large
                .first
                .into_iter()
                .map(|(path, bytes)| LargeFile { path, bytes })
                .collect(),
        })
    }

    async fn push(&mut self, repo: String, remote: String, refspecs: Vec<String>) -> Answer<()> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        let to = local_remote(&g, &repo, &remote).await?;
        for spec in &refspecs {
            if spec.starts_with('-') {
                return Err(GitError::Invalid(format!("refspec `{spec}` starts with '-'")).into());
            }
        }
        let refspecs: Vec<&str> = refspecs.iter().map(String::as_str).collect();
        let lock = git::repo_lock(repo.work_tree());
        let _held = lock.lock().await;
        // To the open folder, not the remote's URL: the one checked.
        git::push(&repo, &hostgit::proc_path(&to).to_string_lossy(), &refspecs).await?;
        Ok(())
    }

    async fn prune_remote(&mut self, repo: String, remote: String) -> Answer<()> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        let dir = local_remote(&g, &repo, &remote).await?;
        let lock = git::repo_lock(repo.work_tree());
        let _held = lock.lock().await;
        Ok(git::prune_bare(&hostgit::proc_path(&dir)).await?)
    }

    async fn exclude(&mut self, repo: String, pattern: String) -> Answer<()> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        if pattern.contains('\n') {
            return Err(GitError::Invalid("an exclude pattern is one line".into()).into());
        }
        let lock = git::repo_lock(repo.work_tree());
        let _held = lock.lock().await;
        Ok(git::exclude(&repo, &pattern).await?)
    }

    async fn log(
        &mut self,
        repo: String,
        since: String,
        rev: String,
        patch: bool,
        max_bytes: u64,
    ) -> Answer<String> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        let range = format!(
            "{}..{}",
            commit_of(&repo, &since).await?,
            commit_of(&repo, &rev).await?
        );
        let mut args = vec!["log", "--no-color", "--max-count=500"];
        if patch {
            args.extend(["--patch", "--no-ext-diff", "--no-textconv"]);
        }
        args.push(&range);
        Ok(cut(repo.run(&args).await?, max_bytes))
    }

    async fn diff(
        &mut self,
        repo: String,
        since: String,
        rev: String,
        max_bytes: u64,
    ) -> Answer<String> {
        let g = self.grants.clone();
        let repo = repository(&g, &repo)?;
        let (since, rev) = (
            commit_of(&repo, &since).await?,
            commit_of(&repo, &rev).await?,
        );
        let args = [
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            &since,
            &rev,
        ];
        Ok(cut(repo.run(&args).await?, max_bytes))
    }

    async fn state_write(
        &mut self,
        repo: String,
        name: String,
        text: String,
        only_new: bool,
    ) -> Answer<bool> {
        let repo = repository(&self.grants.clone(), &repo)?;
        Ok(git::state::write(&repo, &name, &text, only_new)?)
    }

    async fn state_remove(&mut self, repo: String, name: String) -> Answer<bool> {
        let repo = repository(&self.grants.clone(), &repo)?;
        Ok(git::state::remove(&repo, &name)?)
    }
}

/// The commit `rev` names (so that only a hash reaches a git command line),
/// or why there is none.
async fn commit_of(repo: &Repo, rev: &str) -> Result<String, GitError> {
    git::resolve(repo, rev)
        .await?
        .ok_or_else(|| GitError::Invalid(format!("`{rev}` names no commit")))
}

/// A path a container made, for a warning: its first three names and its
/// last, when it has more.
fn shortened(path: &str) -> String {
    let names: Vec<&str> = path.split('/').collect();
    match names.len() {
        0..=4 => path.to_string(),
        n => format!("{}/…/{} ({n} levels)", names[..3].join("/"), names[n - 1]),
    }
}

/// `text` cut to `max_bytes` (on a character boundary), saying so.
fn cut(mut text: String, max_bytes: u64) -> String {
    let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let dropped = text.len() - end;
        text.truncate(end);
        text.push_str(&format!("\n[cut: {dropped} more bytes]\n"));
    }
    text
}

impl HostHold for CallState {
    async fn drop(&mut self, hold: Resource<Hold>) -> wasmtime::Result<()> {
        self.table.delete(hold)?;
        Ok(())
    }
}

/// Branch names the plugin gives: no options, nothing git would reject late.
fn check_ref_name(name: &str) -> Result<(), GitError> {
    let bad = name.is_empty()
        || name.starts_with('-')
        || name.contains("..")
        || name
            .chars()
            .any(|c| c.is_whitespace() || "~^:?*[\\".contains(c));
    if bad {
        Err(GitError::Invalid(format!(
            "`{name}` is not a valid branch name"
        )))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
