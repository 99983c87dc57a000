//! Cofer: container-use compatible development environments on Podman
//! containers and git worktrees (seed 001).
//!
//! Tools: `environment_create`, `environment_run_cmd`,
//! `environment_destroy`, plus container-use's `environment_list` and
//! `environment_open`. Git work goes through the host's `git` capability
//! and containers through `containers`; the plugin keeps no state, so every
//! call finds the environment again from git, its record file and Podman
//! labels ([`env`]).

mod args;
mod create;
mod destroy;
mod env;
mod errors;
mod run;

use plugin_sdk::log::{Level, log};
use plugin_sdk::{Guest, Hints, Tool, ToolError, ToolOutput, git, tool};
use serde_json::{Value, json};

use env::Env;
use errors::{error, from_git};

struct Cofer;

impl Guest for Cofer {
    fn list() -> Vec<Tool> {
        vec![
            tool(
                "environment_create",
                "Creates a new development environment: a git worktree on branch cofer/<id> of the source repository, \
                 and a container from `image` with the worktree mounted at /workdir. Returns the environment's id, \
                 config and the commands the user can run to check out, log and diff its work.",
                args::create_schema(),
                None,
            )
            .with_hints(Hints { read_only: false, destructive: false, idempotent: false, open_world: false }),
            tool(
                "environment_run_cmd",
                "Run a terminal command inside an environment's container. Returns the exit code and the last 512 lines \
                 of stdout and stderr, and commits the changes in /workdir to the environment's branch with \
                 `explanation` as the message. Long-running commands (servers) must set `background`.",
                args::run_schema(),
                Some(run::output_schema()),
            )
            .with_hints(Hints { read_only: false, destructive: true, idempotent: false, open_world: false }),
            tool(
                "environment_destroy",
                "Destroy an environment: stop and remove its containers, remove its worktree and branch. Returns what \
                 was removed.",
                args::destroy_schema(),
                Some(destroy::output_schema()),
            )
            .with_hints(Hints { read_only: false, destructive: true, idempotent: true, open_world: false }),
            tool(
                "environment_list",
                "List the environments of a source repository with their titles and container state.",
                args::list_schema(),
                None,
            )
            .with_hints(Hints::READ_ONLY),
            tool(
                "environment_open",
                "Open an existing environment (restarting its container if it is gone) and return the same description \
                 as environment_create.",
                args::open_schema(),
                None,
            )
            .with_hints(Hints { read_only: false, destructive: false, idempotent: true, open_world: false }),
        ]
    }

    fn call(name: String, arguments: String) -> Result<ToolOutput, ToolError> {
        match name.as_str() {
            "environment_create" => create::create(plugin_sdk::parse_args(&arguments)?),
            "environment_run_cmd" => run::run_cmd(plugin_sdk::parse_args(&arguments)?),
            "environment_destroy" => destroy::destroy(plugin_sdk::parse_args(&arguments)?),
            "environment_list" => list(plugin_sdk::parse_args(&arguments)?),
            "environment_open" => open(plugin_sdk::parse_args(&arguments)?),
            other => Err(ToolError::new(
                "not_found",
                format!("no tool `{other}` in cofer"),
            )),
        }
    }
}

/// The top-level directory of the repository `source` belongs to.
pub(crate) fn open_repo(source: &str) -> Result<String, ToolError> {
    if !source.starts_with('/') {
        return Err(error(
            "invalid_request",
            format!("environment_source `{source}` is not an absolute path"),
            "pass the absolute path of the repository",
        ));
    }
    git::open(source).map_err(|e| from_git("open repository", e))
}

/// A log record for the call (the host adds the timestamp and trace id).
pub(crate) fn note(message: String) {
    log(Level::Info, &message);
}

/// A number from the plugin's environment (set by the host's policy `vars`).
pub(crate) fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn text(value: &Value) -> ToolOutput {
    ToolOutput {
        text: serde_json::to_string_pretty(value).expect("JSON values serialise"),
        structured: None,
    }
}

fn list(args: args::Source) -> Result<ToolOutput, ToolError> {
    let repo = open_repo(&args.environment_source)?;
    let mut ids: Vec<String> = std::fs::read_dir(format!("{}/.cofer/environments", repo))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".json")
                .map(str::to_string)
        })
        .collect();
    let containers = plugin_sdk::containers::list(&[(env::LABEL_SOURCE.into(), repo.clone())])
        .map_err(|e| errors::from_container("list containers", e))?;
    for c in &containers {
        if let Some((_, id)) = c.labels.iter().find(|(k, _)| k == env::LABEL_ENV) {
            ids.push(id.clone());
        }
    }
    ids.sort();
    ids.dedup();
    let environments: Vec<Value> = ids
        .iter()
        .map(|id| {
            let env = Env::new(&repo, id);
            let record = env.read_record();
            let of_env: Vec<_> = containers
                .iter()
                .filter(|c| c.labels.iter().any(|(k, v)| k == env::LABEL_ENV && v == id))
                .collect();
            let main = of_env
                .iter()
                .find(|c| c.labels.iter().any(|(k, v)| k == env::LABEL_ROLE && v == "main"));
            json!({
                "id": id,
                "title": record.as_ref().map(|r| r.title.clone()),
                "image": record.as_ref().map(|r| r.image.clone()),
                "created_at": record.as_ref().map(|r| r.created_at.clone()),
                "worktree": env.has_worktree().then(|| env.worktree()),
                "container_state": main.map(|c| c.state.clone()).unwrap_or_else(|| "missing".into()),
                "services": of_env.len() - usize::from(main.is_some()),
            })
        })
        .collect();
    Ok(text(&json!({ "environments": environments })))
}

fn open(args: args::Scoped) -> Result<ToolOutput, ToolError> {
    let repo = open_repo(&args.environment_source)?;
    let env = Env::new(&repo, &args.environment_id);
    let record = env.read_record().ok_or_else(|| env.not_found())?;
    if !env.has_worktree() {
        return Err(error(
            "precondition_failed",
            format!(
                "environment `{}` has lost its worktree {}",
                env.id,
                env.worktree()
            ),
            "destroy the environment (environment_destroy with force=true) and create it again",
        ));
    }
    run::ensure_main_container(&env, &record)?;
    let services = run::services(&env)?;
    Ok(text(&env.describe(&record, &services)))
}

plugin_sdk::export!(Cofer);
