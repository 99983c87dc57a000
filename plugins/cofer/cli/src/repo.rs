//! The repository side of `cofer`: Cofer's remote, and an environment's
//! work brought into the user's repository (fetched by path, checked out on
//! a branch of its own, shown with the user's git).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use hostgit::{self as git, Repo};

pub const REMOTE: &str = "cofer";

pub async fn init(repo: &Repo) -> Result<()> {
    let state = repo.git_dir().join("cofer");
    let bare = state.join("remote.git");
    let old = repo.work_tree().join(".cofer");
    git::exclude(repo, "/.cofer/").await?;
    if !bare.join("HEAD").exists() {
        std::fs::create_dir_all(&bare)?;
        git::init_bare(&bare).await?;
    }
    let url = bare.to_string_lossy();
    match git::remote_url(repo, REMOTE).await? {
        Some(current) if Path::new(&current) == bare => {
            println!("remote `{REMOTE}` already set up ({url}); nothing to do");
        }
        None => {
            repo.run(&["remote", "add", REMOTE, &url]).await?;
            println!(
                "added remote `{REMOTE}` -> {url}; environments can now be created in {}",
                repo.work_tree().display()
            );
        }
        Some(current) if Path::new(&current) == old.join("remote.git") => {
            // Everything the old remote held is on the repository's own
            // cofer/* branches: push those to the new one, drop the old.
            repo.run(&["remote", "set-url", REMOTE, &url]).await?;
            let branches = repo
                .run(&["for-each-ref", "--format=%(refname)", "refs/heads/cofer/"])
                .await?;
            if !branches.trim().is_empty() {
                git::push(repo, REMOTE, &["refs/heads/cofer/*:refs/heads/cofer/*"]).await?;
            }
            std::fs::remove_dir_all(old.join("remote.git"))?;
            println!("moved remote `{REMOTE}` from {current} to {url}");
        }
        Some(current) => bail!(
            "remote `{REMOTE}` points at {current}, not at Cofer's own {url}: remove it \
             (`git remote remove {REMOTE}`) and run `cofer init` again"
        ),
    }
    move_records(&old, &state)
}

/// Move the records and the repository id an older Cofer kept in `.cofer/`
/// to `.git/cofer/` (plain files only; links are dropped).
fn move_records(old: &Path, state: &Path) -> Result<()> {
    let records = state.join("environments");
    std::fs::create_dir_all(&records)?;
    let mut moved = 0;
    let old_records = old.join("environments");
    if let Ok(entries) = std::fs::read_dir(&old_records) {
        for entry in entries.flatten() {
            let name = entry.file_name();
            let is_record = name.to_string_lossy().ends_with(".json")
                && entry.file_type().is_ok_and(|t| t.is_file());
            if is_record && !records.join(&name).exists() {
                std::fs::rename(entry.path(), records.join(&name))?;
                moved += 1;
            }
        }
        std::fs::remove_dir_all(&old_records)?;
    }
    let id = old.join("id");
    if std::fs::symlink_metadata(&id).is_ok() {
        if std::fs::symlink_metadata(&id)?.is_file() && !state.join("id").exists() {
            std::fs::rename(&id, state.join("id"))?;
        } else {
            std::fs::remove_file(&id)?;
        }
    }
    if moved > 0 {
        println!(
            "moved {moved} environment record(s) to {}",
            records.display()
        );
    }
    Ok(())
}

/// Bring the environment's work from Cofer's remote; its commit. No
/// tracking ref is made (none is left behind once the environment is
/// destroyed); one an older `cofer` made is removed.
pub async fn fetch(repo: &Repo, id: &str) -> Result<String> {
    if git::remote_url(repo, REMOTE).await?.is_none() {
        bail!(
            "{} has no `{REMOTE}` remote: run `cofer init` first",
            repo.work_tree().display()
        );
    }
    check_id(id)?;
    let stale = format!("refs/remotes/{REMOTE}/cofer/{id}");
    if git::resolve(repo, &stale).await?.is_some() {
        repo.run(&["update-ref", "-d", &stale]).await?;
    }
    let bare = repo.git_dir().join("cofer").join("remote.git");
    git::fetch(repo, &bare, &format!("refs/heads/cofer/{id}"))
        .await
        .with_context(|| format!("there is no environment `{id}` on the `{REMOTE}` remote"))?;
    git::resolve(repo, "FETCH_HEAD")
        .await?
        .with_context(|| format!("the `{REMOTE}` remote gave nothing for `{id}`"))
}

/// An environment id as the tools make them: no option, no ref syntax.
pub fn check_id(id: &str) -> Result<()> {
    let plain = !id.is_empty()
        && !id.starts_with(['-', '.'])
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !id.contains("..");
    if !plain {
        bail!("`{id}` is not an environment id: `cofer list` shows them");
    }
    Ok(())
}

/// The local branch an environment is checked out on.
fn local_branch(id: &str) -> String {
    format!("cofer-{id}")
}

/// `cofer checkout`: the environment's work on its own local branch,
/// made for it, or moved forward if an earlier checkout made it. A branch
/// of the user's that happens to have that name is never touched.
pub async fn checkout(repo: &Repo, id: &str) -> Result<ExitCode> {
    let work = fetch(repo, id).await?;
    let branch = local_branch(id);
    let marker = format!("branch.{branch}.cofer-environment");
    let exists = git::resolve(repo, &format!("refs/heads/{branch}"))
        .await?
        .is_some();
    if !exists {
        let code = person_runs(repo, &["checkout", "-b", &branch, &work])?;
        if code == ExitCode::SUCCESS {
            repo.run(&["config", &marker, id]).await?;
        }
        return Ok(code);
    }
    if !made_by_checkout(repo, id).await {
        bail!(
            "a branch `{branch}` exists that `cofer checkout` did not make: it is left as it is; \
             rename it (`git branch -m {branch} OTHER`) and run `cofer checkout {id}` again"
        );
    }
    let code = person_runs(repo, &["checkout", &branch])?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    person_runs(repo, &["merge", "--ff-only", &work])
}

/// Whether the local branch `cofer-<id>` is the one `cofer checkout` made
/// for environment `id` (its config carries the marker), not the user's.
async fn made_by_checkout(repo: &Repo, id: &str) -> bool {
    let marker = format!("branch.{}.cofer-environment", local_branch(id));
    repo.run(&["config", "--get", &marker])
        .await
        .is_ok_and(|value| value.trim() == id)
}

/// After environment `id` is destroyed: the local branch `cofer checkout`
/// made for it goes too, when it holds nothing but the environment's work
/// (it points into `tip`, the environment's last commit) and is not the
/// branch the person is on; otherwise it stays, and the answer says why.
/// A branch of that name `cofer checkout` did not make is not looked at.
pub async fn forget_checkout(repo: &Repo, id: &str, tip: Option<&str>) -> Result<Option<String>> {
    let branch = local_branch(id);
    let Some(at) = git::resolve(repo, &format!("refs/heads/{branch}")).await? else {
        return Ok(None);
    };
    if !made_by_checkout(repo, id).await {
        return Ok(None);
    }
    let head = repo
        .run(&["symbolic-ref", "--quiet", "HEAD"])
        .await
        .unwrap_or_default();
    if head.trim() == format!("refs/heads/{branch}") {
        return Ok(Some(format!(
            "kept branch {branch}: you are on it; switch to another branch and `git branch -D {branch}` when done"
        )));
    }
    let only_its_work = match tip {
        Some(tip) => repo
            .run(&["merge-base", "--is-ancestor", &at, tip])
            .await
            .is_ok(),
        None => false,
    };
    if !only_its_work {
        return Ok(Some(format!(
            "kept branch {branch}: it has commits that were not the environment's; `git branch -D {branch}` removes it"
        )));
    }
    // `branch -D` removes its config section (the marker) with it.
    repo.run(&["branch", "-D", &branch]).await?;
    Ok(Some(format!(
        "removed branch {branch} (made by `cofer checkout`)"
    )))
}

/// The commit environment `id` was made from, from its record.
pub fn base_commit(repo: &Repo, id: &str) -> Option<String> {
    let record = repo
        .git_dir()
        .join("cofer/environments")
        .join(format!("{id}.json"));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(record).ok()?).ok()?;
    let base = record["base_commit"].as_str()?;
    base.chars()
        .all(|c| c.is_ascii_hexdigit())
        .then(|| base.to_string())
}

/// Run a git command of the person's on their terminal (a checkout, a
/// fast-forward): what git prints there is about refs and paths, and git
/// quotes a path with control characters itself (`core.quotePath`).
/// Agent-written text (messages, contents) goes through [`crate::shown`].
fn person_runs(repo: &Repo, args: &[&str]) -> Result<ExitCode> {
    let status = repo.user_command(args).status().context("cannot run git")?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8)
    })
}
