//! `environment_create`: worktree, branch, push, container, record, in that
//! order, undone in reverse when a later step fails, so a failed create
//! leaves nothing behind.

use plugin_sdk::containers;
use plugin_sdk::{ToolError, ToolOutput, git};

use crate::args::Create;
use crate::env::{self, Env, Record};
use crate::errors::{error, from_container, from_git};
use crate::turn::push;
use crate::{destroy, note, open_repo, setting};

/// Live environments allowed at once on one engine (all repositories).
const DEFAULT_MAX_ENVIRONMENTS: u64 = 8;
const DEFAULT_IMAGE: &str = "docker.io/library/ubuntu:24.04";

pub fn create(args: Create) -> Result<ToolOutput, ToolError> {
    let repo = open_repo(&args.common.environment_source)?;
    // Read before anything changes: the warning is about the user's own work.
    let status = git::status(&repo).map_err(|e| from_git("read the repository's status", e))?;
    let remote =
        git::remote_url(&repo, env::REMOTE).map_err(|e| from_git("look up the cofer remote", e))?;
    if remote.as_deref() != Some(env::remote_dir(&repo).as_str()) {
        let what = match remote {
            Some(url) => format!(
                "its `{}` remote points at {url}, not at Cofer's own",
                env::REMOTE
            ),
            None => format!(
                "it has no `{}` remote, which environments are pushed to",
                env::REMOTE
            ),
        };
        return Err(error(
            "precondition_failed",
            format!("{repo} is not set up for Cofer: {what}"),
            &format!("run `cofer init` in {repo} once, then call environment_create again"),
        ));
    }
    // The person's defaults for this repository; read first, so a broken
    // file stops the create before anything is made.
    let defaults = crate::project::defaults(&repo)?;
    let project = &defaults.project;
    env::env_pairs(&project.envs)?;
    env::ensure_repository_id(&repo)?;
    let mut env = match &args.environment_id {
        Some(id) => Env::new(&repo, id),
        None => fresh_env(&repo)?,
    };
    // An environment there now is looked for where it runs.
    let old_record = env.read_record();
    env.use_engine(old_record.as_ref().map_or(env::LOCAL, |r| r.engine()))?;
    let exists = env.has_worktree() || old_record.is_some() || !env.containers()?.is_empty();
    if exists && !args.allow_replace {
        return Err(error(
            "conflict",
            format!(
                "environment `{}` already exists in {}; it was left as it is",
                env.id, repo
            ),
            "pass allow_replace=true to replace it, choose another environment_id, or use environment_open",
        ));
    }
    if exists {
        note(format!(
            "environment_create env={} replacing the existing environment",
            env.id
        ));
        destroy::remove_all(&env, true)?;
    }
    let engine = crate::engine::for_new(args.engine.as_deref());
    env.use_engine(&engine)?;
    check_limit()?;
    // devcontainer.json's Dockerfile, when nothing else names the image.
    let built = match &args.image {
        Some(_) => None,
        None => defaults.build_image(&repo, &env::ensure_repository_id(&repo)?)?,
    };

    let image = args
        .image
        .clone()
        .or(built)
        .or(project.base_image.clone())
        .or_else(|| {
            std::env::var("COFER_DEFAULT_IMAGE")
                .ok()
                .filter(|i| !i.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_IMAGE.into());
    let from = args.from_git_ref.clone().unwrap_or_else(|| "HEAD".into());
    let base = git::resolve(&repo, &from)
        .map_err(|e| from_git("resolve from_git_ref", e))?
        .ok_or_else(|| {
            error(
                "invalid_request",
                format!("from_git_ref `{from}` names no commit in {}", repo),
                "pass a branch, tag or commit that exists (or leave from_git_ref out for HEAD)",
            )
        })?;
    git::exclude(&repo, "/.cofer/").map_err(|e| from_git("exclude .cofer from git status", e))?;
    note(format!(
        "environment_create env={} mode=foreground engine={} image={image} from={from} explanation={:?}",
        env.id,
        env.engine,
        args.common.explanation.as_deref().unwrap_or("")
    ));

    git::worktree_add(&repo, &env.worktree(), &env.branch(), &base).map_err(|e| {
        // Another create of the same id got there first (its branch or
        // worktree exists now): that is a conflict, not a failed step.
        match &e {
            git::GitError::Failed(f) if f.stderr.contains("already exists") => error(
                "conflict",
                format!(
                    "environment `{}` was created in {} meanwhile; it was left as it is",
                    env.id, repo
                ),
                "choose another environment_id, or use environment_open",
            ),
            _ => from_git("create the worktree", e),
        }
    })?;
    let made = (|| {
        push(&env)?;
        let record = Record {
            id: env.id.clone(),
            title: args.title.clone(),
            image: image.clone(),
            from_git_ref: from.clone(),
            base_commit: base.clone(),
            created_at: plugin_sdk::iso8601(plugin_sdk::now_secs()),
            setup_commands: project.setup_commands.clone(),
            envs: project.envs.clone(),
            services: Vec::new(),
            engine: (env.engine != env::LOCAL).then(|| env.engine.clone()),
            forward_ports: defaults.forward_ports.clone(),
        };
        crate::container::start(&env, &record, &env.container_name())?;
        env.write_record(&record)?;
        Ok(record)
    })();
    let record = match made {
        Ok(record) => record,
        Err(e) => {
            // Leave nothing half-made; the original error is what matters.
            let _ = destroy::remove_all(&env, true);
            return Err(e);
        }
    };

    let mut described = env.describe(&record, &[]);
    if let Some(said) = defaults.said() {
        described["devcontainer"] = said;
    }
    if !record.forward_ports.is_empty() {
        described["forward_ports"] = serde_json::json!(record.forward_ports);
    }
    let mut text = serde_json::to_string_pretty(&described).expect("JSON serialises");
    if !status.is_empty() {
        text.push_str(&format!(
            "\n\nWARNING: the source repository has uncommitted changes; the environment was created from {from} \
             ({}) and does not contain them:\n{}\n",
            &base[..base.len().min(12)],
            status.join("\n")
        ));
    }
    Ok(ToolOutput {
        text,
        structured: None,
    })
}

/// A generated id that no environment of this repository uses.
fn fresh_env(repo: &str) -> Result<Env, ToolError> {
    for _ in 0..20 {
        let env = Env::new(repo, &env::petname());
        if !env.has_worktree() && env.read_record().is_none() {
            return Ok(env);
        }
    }
    Err(error(
        "conflict",
        "could not find an unused environment name",
        "pass environment_id explicitly",
    ))
}

fn check_limit() -> Result<(), ToolError> {
    let max = setting("COFER_MAX_ENVIRONMENTS", DEFAULT_MAX_ENVIRONMENTS);
    let live = containers::list(&[(env::LABEL_ROLE.into(), "main".into())])
        .map_err(|e| from_container("count live environments", e))?
        .iter()
        .filter(|c| c.state == "running")
        .count() as u64;
    if live >= max {
        return Err(error(
            "limit_exceeded",
            format!(
                "{live} environments are running and the limit is {max}; no environment was created"
            ),
            "destroy an environment you no longer need (environment_destroy), or raise COFER_MAX_ENVIRONMENTS in the host's config",
        ));
    }
    Ok(())
}
