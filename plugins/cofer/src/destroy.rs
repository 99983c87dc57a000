//! `environment_destroy`: containers (and on another machine's engine the
//! /workdir volume), worktree, branch (local and on the remote), record,
//! and a report of each. Also used by create to replace
//! an environment and to clean up after a failed create.

use plugin_sdk::containers::{self, StopKind};
use plugin_sdk::{ToolError, ToolOutput, git};
use serde_json::{Value, json};

use crate::args::Destroy;
use crate::env::{self, Env};
use crate::errors::{error, from_container, from_git};
use crate::{note, open_repo};

/// How long a container gets to stop on SIGTERM before SIGKILL.
const STOP_GRACE_MS: u32 = 2_000;

pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "removed_paths": {"type": "array", "items": {"type": "string"}},
            "containers": {"type": "array", "items": {"type": "object", "properties": {
                "id": {"type": "string"}, "name": {"type": "string"}, "role": {"type": "string"},
                "stop": {"type": "string", "enum": ["not_running", "terminated", "killed"]},
                "leftover_processes_killed": {"type": "integer"},
            }}},
            "branch_deleted": {"type": "boolean"},
            "warnings": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["id", "removed_paths", "containers", "branch_deleted", "warnings"],
    })
}

pub fn destroy(args: Destroy) -> Result<ToolOutput, ToolError> {
    let repo = open_repo(&args.common.environment_source)?;
    let mut env = Env::new(&repo, &args.environment_id);
    if let Some(record) = env.read_record() {
        env.use_engine(record.engine())?;
    }
    let branch_exists = git::resolve(&repo, &format!("refs/heads/{}", env.branch()))
        .map_err(|e| from_git("look up the branch", e))?
        .is_some();
    if !env.has_worktree()
        && env.read_record().is_none()
        && !branch_exists
        && env.containers()?.is_empty()
    {
        return Err(env.not_found());
    }
    note(format!(
        "environment_destroy env={} mode=foreground force={}",
        env.id, args.force
    ));
    let report = remove_all(&env, args.force)?;
    Ok(plugin_sdk::structured_output(&report))
}

/// Remove every part of `env` that exists. Fails (after `force`'s retries)
/// only when the worktree cannot be removed, saying what was done so far.
pub fn remove_all(env: &Env, force: bool) -> Result<Value, ToolError> {
    // Refused before anything is removed: a destroy that stops half-way
    // would leave an environment with no containers and its worktree.
    if !force && env.has_worktree() && env.worktree_locked() {
        return Err(ToolError::new(
            "step_failed",
            format!(
                "the worktree {} is locked (`git worktree lock`)",
                env.worktree()
            ),
        )
        .with_details(json!({
            "step": "remove the worktree",
            "remediation": "call environment_destroy again with force=true (removes locked \
                worktrees), or run `git worktree unlock` first; nothing was removed",
        })));
    }
    let mut removed_containers = Vec::new();
    for info in env.containers()? {
        let role = info
            .labels
            .iter()
            .find(|(k, _)| k == env::LABEL_ROLE)
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        let removal = containers::remove(&info.id, STOP_GRACE_MS)
            .map_err(|e| from_container("remove a container", e))?;
        removed_containers.push(json!({
            "id": removal.id,
            "name": info.name,
            "role": role,
            "stop": match removal.stop {
                StopKind::NotRunning => "not_running",
                StopKind::Terminated => "terminated",
                StopKind::Killed => "killed",
            },
            "leftover_processes_killed": removal.leftovers_killed,
        }));
    }

    let mut warnings = Vec::new();
    if let Err(e) = containers::network_remove(&env.network()) {
        warnings.push(format!(
            "could not remove the network {}: {}",
            env.network(),
            ToolError::from(e).message
        ));
    }
    if env.copies_files
        && let Err(e) = containers::volume_remove(&env.volume())
    {
        warnings.push(format!(
            "could not remove the volume {} on engine {}: {}",
            env.volume(),
            env.engine,
            ToolError::from(e).message
        ));
    }
    let mut removed_paths = Vec::new();
    if env.has_worktree() {
        remove_worktree(env, force, &mut warnings).map_err(|mut e| {
            // Say what was already done: the containers are gone.
            let mut details: Value = e
                .details
                .as_deref()
                .and_then(|d| serde_json::from_str(d).ok())
                .unwrap_or_else(|| json!({}));
            details["containers"] = json!(removed_containers);
            e.details = Some(details.to_string());
            e
        })?;
        removed_paths.push(env.worktree());
    } else {
        // A worktree directory deleted by hand still has git's bookkeeping.
        git::worktree_prune(&env.repo).map_err(|e| from_git("prune worktrees", e))?;
    }
    let branch_deleted = git::delete_branch(&env.repo, &env.branch())
        .map_err(|e| from_git("delete the branch", e))?;
    let remote_gone = format!(":refs/heads/{}", env.branch());
    match git::push(&env.repo, env::REMOTE, &[remote_gone]) {
        // What only that branch held leaves the remote's object store too.
        Ok(()) => {
            if let Err(e) = git::prune_remote(&env.repo, env::REMOTE) {
                warnings.push(format!(
                    "could not prune the cofer remote after deleting {}: {}",
                    env.branch(),
                    e.says()
                ));
            }
        }
        Err(e) => warnings.push(format!(
            "could not delete {} on the cofer remote: {}",
            env.branch(),
            e.says()
        )),
    }
    match env.remove_record() {
        Ok(true) => removed_paths.push(env.record_path()),
        Ok(false) => {}
        Err(e) => warnings.push(format!(
            "could not remove the record {}: {}",
            env.record_path(),
            e.message
        )),
    }
    Ok(json!({
        "id": env.id,
        "removed_paths": removed_paths,
        "containers": removed_containers,
        "branch_deleted": branch_deleted,
        "warnings": warnings,
    }))
}

/// `git worktree remove`; with `force`, retried on a locked worktree, and
/// as a last resort the directory is deleted and git's record pruned.
fn remove_worktree(env: &Env, force: bool, warnings: &mut Vec<String>) -> Result<(), ToolError> {
    let first = match git::worktree_remove(&env.repo, &env.worktree(), false) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    if !force {
        return Err(from_git("remove the worktree", first).with_details(json!({
            "step": "remove the worktree",
            "remediation": "call environment_destroy again with force=true (removes locked worktrees and deletes the directory if git cannot)",
        })));
    }
    warnings.push(format!(
        "`git worktree remove` failed ({}); retried with force",
        first.says()
    ));
    if git::worktree_remove(&env.repo, &env.worktree(), true).is_ok() {
        return Ok(());
    }
    std::fs::remove_dir_all(env.worktree()).map_err(|e| {
        error(
            "step_failed",
            format!("the worktree {} could not be removed: {e}", env.worktree()),
            "remove the directory by hand, run `git worktree prune`, then destroy again",
        )
    })?;
    git::worktree_prune(&env.repo).map_err(|e| from_git("prune worktrees", e))?;
    warnings.push(format!(
        "deleted the directory {} and pruned git's worktree record",
        env.worktree()
    ));
    Ok(())
}
