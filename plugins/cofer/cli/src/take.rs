//! `cofer merge` and `cofer apply`: an environment's work taken into the
//! branch the user is on, as a merge commit or as uncommitted changes.
//!
//! The environment's tree is the agent's: git runs here with the host's
//! safe settings (no hooks, no fsmonitor), every filter driver the
//! repository defines switched off, and attributes read from an empty tree
//! (`attr.tree`, git 2.46+), so a `.gitattributes` the agent committed
//! chooses no filter, merge driver or conversion of the user's.

use anyhow::{Result, bail};
use hostgit::{GitError, Repo};

use crate::repo::fetch;

/// Git's empty tree; in a SHA-256 repository it names nothing, which
/// `attr.tree` also reads as empty.
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

pub enum How {
    /// A merge commit on the current branch.
    Merge,
    /// The changes staged in the current tree, not committed.
    Apply,
}

/// Take environment `id`'s work into the current branch; what git said.
pub async fn take(repo: &Repo, id: &str, how: How) -> Result<String> {
    refuse_uncommitted(repo, id, &how).await?;
    let work = fetch(repo, id).await?;
    let message = format!("Merge environment {id}");
    let args: Vec<&str> = match how {
        How::Merge => vec!["merge", "--no-ff", "--no-edit", "-m", &message, &work],
        How::Apply => vec!["merge", "--squash", &work],
    };
    let settings = [format!("attr.tree={EMPTY_TREE}")];
    match repo.run_for_person(&settings, &args).await {
        Ok(said) => Ok(said),
        Err(GitError::Failed { stderr, .. }) => bail!(
            "git could not take {id}'s work into {}:\n{}\nresolve it as any merge (`git status`), or undo it with `git merge --abort` (`git reset --merge` after apply)",
            repo.work_tree().display(),
            stderr.trim_end()
        ),
        Err(e) => Err(e.into()),
    }
}

/// Refuse to start over the user's uncommitted work (untracked files are
/// theirs too, but git itself refuses to overwrite one).
async fn refuse_uncommitted(repo: &Repo, id: &str, how: &How) -> Result<()> {
    let status = repo
        .run_with(
            &[],
            &[
                "status",
                "--porcelain",
                "--ignore-submodules=all",
                "--untracked-files=no",
            ],
        )
        .await?;
    if status.trim().is_empty() {
        return Ok(());
    }
    let verb = match how {
        How::Merge => "merge",
        How::Apply => "apply",
    };
    bail!(
        "{} has uncommitted changes; nothing was done:\n{}\ncommit or stash them (`git stash`), then run `cofer {verb} {id}` again",
        repo.work_tree().display(),
        status.trim_end()
    )
}
