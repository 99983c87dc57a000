//! One turn on an environment: the step every tool that changes
//! /workdir takes (a command, a file tool, a setup command): wait for the
//! worktree, commit what background services wrote, run the step, commit
//! what it changed to the environment's branch and push it to the
//! `cofer` remote.

use plugin_sdk::{ToolError, git};

use crate::env::{self, Env};
use crate::errors::{from_git, transient_git};
use crate::{note, setting};

/// How long a command may run unless the call says.
pub const DEFAULT_TIMEOUT_MS: u64 = 600_000;
/// Files over this many MB are not committed (a 30 MB file under
/// node_modules once went into the repository twice).
const DEFAULT_MAX_FILE_MB: u64 = 10;

/// The message of the commit that keeps what background services wrote.
const BACKGROUND_MESSAGE: &str =
    "Background changes (made between commands: by services, or by hand in `cofer terminal`)";

/// A commit as people quote it: its first 12 hex digits.
pub fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

/// What one turn on an environment left: the step's own value, the
/// commits around it and every warning (background commit's, the step's,
/// its commit's, in that order).
pub struct Turn<T> {
    pub value: T,
    pub background_commit: Option<String>,
    pub commit: Option<String>,
    pub warnings: Vec<String>,
}

/// One turn on the environment: wait (up to `wait_ms`) until no one else
/// holds its worktree, commit on its own what background services wrote
/// since the last turn, run `step` (which may add warnings), and commit
/// what it changed with `message` (on an engine that cannot mount the
/// worktree, what /workdir holds is brought back before each commit). Turns on one environment run one at a
/// time, so each commit holds what its own step changed and nothing of
/// another's. A step that fails leaves its changes for the next turn.
pub fn turn<T>(
    env: &Env,
    wait_ms: u64,
    message: &str,
    step: impl FnOnce(&mut Vec<String>) -> Result<T, ToolError>,
) -> Result<Turn<T>, ToolError> {
    let _hold = git::hold_worktree(&env.repo, &env.worktree(), wait_ms)
        .map_err(|e| from_git("wait for the environment's previous command", e))?;
    // Between turns only services (containers of their own on the same
    // /workdir) write there: without them there is nothing to bring back.
    if env.copies_files && !crate::network::running(env)?.is_empty() {
        env.pull()?;
    }
    let (background_commit, mut warnings) = commit(env, BACKGROUND_MESSAGE)?;
    let value = step(&mut warnings);
    // Brought back even when the step failed: the next turn commits it.
    env.pull()?;
    let value = value?;
    let (commit, more) = commit(env, message)?;
    // The two commits of a turn say the same of an unchanged tree (the
    // 500,000-file limit was said twice per answer): once is enough.
    for warning in more {
        if !warnings.contains(&warning) {
            warnings.push(warning);
        }
    }
    Ok(Turn {
        value,
        background_commit,
        commit,
        warnings,
    })
}

/// Commit the workdir's changes with `message` and push them; the commit
/// (if anything changed) and the warnings (what the host repaired on the
/// way, files too large to commit).
fn commit(env: &Env, message: &str) -> Result<(Option<String>, Vec<String>), ToolError> {
    let max_file_bytes = setting("COFER_MAX_FILE_MB", DEFAULT_MAX_FILE_MB) * 1_000_000;
    let outcome = git::commit_all(&env.repo, &env.worktree(), message, max_file_bytes)
        .map_err(|e| from_git("commit the workdir", e))?;
    let mut warnings = outcome.warnings;
    warnings.extend(outcome.too_large.iter().map(|f| {
        format!(
            "{} ({} MB) was not committed: it is over the {} MB a file may have \
             (COFER_MAX_FILE_MB); ignore it in .gitignore or raise the limit",
            f.path,
            f.bytes / 1_000_000,
            max_file_bytes / 1_000_000
        )
    }));
    for warning in &warnings {
        note(format!("environment_run_cmd env={} {warning}", env.id));
    }
    if outcome.commit.is_some() {
        push(env)?;
    }
    Ok((outcome.commit, warnings))
}

/// Push the environment's branch to the `cofer` remote (one retry).
pub fn push(env: &Env) -> Result<(), ToolError> {
    let spec = format!("refs/heads/{0}:refs/heads/{0}", env.branch());
    let attempt = || git::push(&env.repo, env::REMOTE, std::slice::from_ref(&spec));
    match attempt() {
        Err(e) if transient_git(&e) => attempt(),
        other => other,
    }
    .map_err(|e| from_git("push to the cofer remote", e))
}
