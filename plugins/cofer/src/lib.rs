//! Cofer: container-use compatible development environments on Podman
//! containers and git worktrees (seed 001).
//!
//! Tools: all of container-use's — `environment_create`,
//! `environment_run_cmd`, `environment_list`, `environment_open`,
//! `environment_update_metadata`, `environment_config` and
//! `environment_checkpoint` ([`container`]), `environment_add_service`
//! ([`services`]) and `environment_file_*` ([`files`]) — plus our
//! `environment_destroy`, `environment_log` and `environment_diff`. Git work goes through the host's `git` capability
//! and containers through `containers`; the plugin keeps no state, so every
//! call finds the environment again from git, its record file and Podman
//! labels ([`env`]).

mod args;
mod container;
mod create;
mod destroy;
mod engine;
mod env;
mod errors;
mod files;
mod listing;
mod network;
mod project;
mod run;
mod services;
mod turn;
mod workdir;

use plugin_sdk::log::{Level, log};
use plugin_sdk::{Hints, McpTool, TaskSupport, ToolError, ToolOutput, git};
use serde_json::Value;

use env::Env;
use errors::{error, from_git};

/// `environment_create`.
struct Create;

impl McpTool for Create {
    const NAME: &'static str = "environment_create";
    const TITLE: Option<&'static str> = Some("Create an environment");
    const VIEW: Option<&'static str> = Some("environment");
    const DESCRIPTION: &'static str = "Creates a new development environment: a git worktree on branch cofer/<id> of the source repository, \
        and a container from `image` with the worktree mounted at /workdir. Returns the environment's id, \
        config and the commands the user can run to check out, log and diff its work.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    });
    type Args = args::Create;

    fn call(args: args::Create) -> Result<ToolOutput, ToolError> {
        create::create(args)
    }
}

/// `environment_run_cmd`.
struct RunCmd;

impl McpTool for RunCmd {
    const NAME: &'static str = "environment_run_cmd";
    // It can run for minutes: a client that takes tasks polls for it.
    const TASKS: TaskSupport = TaskSupport::Optional;
    const TITLE: Option<&'static str> = Some("Run a command in an environment");
    const VIEW: Option<&'static str> = Some("environment");
    const DESCRIPTION: &'static str = "Run a terminal command inside an environment's container. Returns the exit code and the last 512 lines \
        of stdout and stderr, and commits the changes in /workdir to the environment's branch with \
        `explanation` as the message. Long-running commands (servers) must set `background`.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    });
    type Args = args::RunCmd;

    fn output_schema() -> Option<Value> {
        Some(run::output_schema())
    }

    fn call(args: args::RunCmd) -> Result<ToolOutput, ToolError> {
        run::run_cmd(args)
    }
}

/// `environment_destroy`.
struct Destroy;

impl McpTool for Destroy {
    const NAME: &'static str = "environment_destroy";
    const TITLE: Option<&'static str> = Some("Destroy an environment");
    const DESCRIPTION: &'static str = "Destroy an environment: stop and remove its containers, remove its worktree and branch. Returns what \
        was removed.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    });
    type Args = args::Destroy;

    fn output_schema() -> Option<Value> {
        Some(destroy::output_schema())
    }

    fn call(args: args::Destroy) -> Result<ToolOutput, ToolError> {
        destroy::destroy(args)
    }
}

/// `environment_list`.
struct List;

impl McpTool for List {
    const NAME: &'static str = "environment_list";
    const TITLE: Option<&'static str> = Some("List environments");
    const DESCRIPTION: &'static str =
        "List the environments of a source repository with their titles and container state.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = args::List;

    fn call(args: args::List) -> Result<ToolOutput, ToolError> {
        listing::list(args)
    }
}

/// `environment_open`.
struct Open;

impl McpTool for Open {
    const NAME: &'static str = "environment_open";
    const TITLE: Option<&'static str> = Some("Open an environment");
    const VIEW: Option<&'static str> = Some("environment");
    const DESCRIPTION: &'static str = "Open an existing environment (restarting its container if it is gone) and return the same description \
        as environment_create.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    });
    type Args = args::Open;

    fn call(args: args::Open) -> Result<ToolOutput, ToolError> {
        open(args)
    }
}

/// `environment_update_metadata`.
struct UpdateMetadata;

impl McpTool for UpdateMetadata {
    const NAME: &'static str = "environment_update_metadata";
    const TITLE: Option<&'static str> = Some("Update an environment's title and notes");
    const DESCRIPTION: &'static str = "Update an environment's metadata (its title, describing the work being done in it). Returns the \
        environment's description, as environment_open does.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    });
    type Args = args::UpdateMetadata;

    fn call(args: args::UpdateMetadata) -> Result<ToolOutput, ToolError> {
        update_metadata(args)
    }
}

/// `environment_log`.
struct Log;

impl McpTool for Log {
    const NAME: &'static str = "environment_log";
    const TITLE: Option<&'static str> = Some("Environment history");
    const VIEW: Option<&'static str> = Some("environment");
    const DESCRIPTION: &'static str = "The commits an environment made since it was created (git log of cofer/<id>), newest first; with \
        `patch`, each commit's changes. What `cofer log <id>` shows the user.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = args::Log;

    fn call(args: args::Log) -> Result<ToolOutput, ToolError> {
        history(
            &args.common,
            &args.environment_id,
            Some(args.patch),
            args.max_bytes,
        )
    }
}

/// `environment_diff`.
struct Diff;

impl McpTool for Diff {
    const NAME: &'static str = "environment_diff";
    const TITLE: Option<&'static str> = Some("Environment changes");
    const VIEW: Option<&'static str> = Some("environment");
    const DESCRIPTION: &'static str = "Everything an environment changed since it was created, as one diff (git diff from its base \
        commit to cofer/<id>).";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = args::Diff;

    fn call(args: args::Diff) -> Result<ToolOutput, ToolError> {
        history(&args.common, &args.environment_id, None, args.max_bytes)
    }
}

/// `environment_config`.
struct Config;

impl McpTool for Config {
    const NAME: &'static str = "environment_config";
    const TITLE: Option<&'static str> = Some("Configure an environment");
    const DESCRIPTION: &'static str = "Make environment config changes such as base image, setup commands and environment variables. \
        If the environment is missing any tools, call this to update it rather than installing them by hand: the container \
        is recreated from the base image and the setup commands run once in it (in /workdir, which is kept). The change \
        applies only when every setup command succeeds; otherwise the environment stays as it was.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    });
    type Args = args::Config;

    fn call(args: args::Config) -> Result<ToolOutput, ToolError> {
        container::configure(args)
    }
}

/// `environment_add_service`.
struct AddService;

impl McpTool for AddService {
    const NAME: &'static str = "environment_add_service";
    const TITLE: Option<&'static str> = Some("Add a service to an environment");
    const DESCRIPTION: &'static str = "Add a service to the environment (e.g. database, cache, etc.): a container of its own that the \
        environment reaches by the service's name, its ports also published on 127.0.0.1 for the user. Returns each \
        port's internal (for the environment) and external (for the user) address.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    });
    type Args = args::AddService;

    fn call(args: args::AddService) -> Result<ToolOutput, ToolError> {
        services::add(args)
    }
}

/// `environment_service_logs`.
struct ServiceLogs;

impl McpTool for ServiceLogs {
    const NAME: &'static str = "environment_service_logs";
    const TITLE: Option<&'static str> = Some("Service logs");
    const DESCRIPTION: &'static str = "The state, exit code and last output lines of an environment's services: those of \
        environment_add_service and the background commands of environment_run_cmd. Use it to see why a server \
        does not answer, or what a background job printed.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = args::ServiceLogs;

    fn call(args: args::ServiceLogs) -> Result<ToolOutput, ToolError> {
        services::logs(args)
    }
}

/// `environment_checkpoint`.
struct Checkpoint;

impl McpTool for Checkpoint {
    const NAME: &'static str = "environment_checkpoint";
    const TITLE: Option<&'static str> = Some("Checkpoint an environment as an image");
    const DESCRIPTION: &'static str = "Checkpoints an environment in its current state as a local container image (its container with \
        /workdir), under `destination`.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    });
    type Args = args::Checkpoint;

    fn call(args: args::Checkpoint) -> Result<ToolOutput, ToolError> {
        container::checkpoint(args)
    }
}

/// The hints of the file tools that change files.
const CHANGES_FILES: Option<Hints> = Some(Hints {
    read_only: false,
    destructive: true,
    idempotent: true,
    open_world: false,
});

/// `environment_file_read`.
struct FileRead;

impl McpTool for FileRead {
    const NAME: &'static str = "environment_file_read";
    const TITLE: Option<&'static str> = Some("Read a file in an environment");
    const DESCRIPTION: &'static str = "Read the contents of a file in an environment's /workdir, a line range (1-indexed, inclusive) or the \
        entire file.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = args::FileRead;

    fn call(args: args::FileRead) -> Result<ToolOutput, ToolError> {
        files::read(args)
    }
}

/// `environment_file_list`.
struct FileList;

impl McpTool for FileList {
    const NAME: &'static str = "environment_file_list";
    const TITLE: Option<&'static str> = Some("List files in an environment");
    const DESCRIPTION: &'static str = "List the contents of a directory in an environment's /workdir, one name per line, directories ending in `/`.";
    const HINTS: Option<Hints> = Some(Hints::READ_ONLY);
    type Args = args::FileList;

    fn call(args: args::FileList) -> Result<ToolOutput, ToolError> {
        files::list(args)
    }
}

/// `environment_file_write`.
struct FileWrite;

impl McpTool for FileWrite {
    const NAME: &'static str = "environment_file_write";
    const TITLE: Option<&'static str> = Some("Write a file in an environment");
    const DESCRIPTION: &'static str = "Write the contents of a file in an environment's /workdir (missing directories are made) and commit \
        it to the environment's branch with `explanation` as the message.";
    const HINTS: Option<Hints> = CHANGES_FILES;
    type Args = args::FileWrite;

    fn call(args: args::FileWrite) -> Result<ToolOutput, ToolError> {
        files::write(args)
    }
}

/// `environment_file_edit`.
struct FileEdit;

impl McpTool for FileEdit {
    const NAME: &'static str = "environment_file_edit";
    const TITLE: Option<&'static str> = Some("Edit a file in an environment");
    const DESCRIPTION: &'static str = "Find and replace text in a file of an environment's /workdir, and commit it. When search_text occurs \
        more than once, the error lists each match with an ID to pass as which_match.";
    const HINTS: Option<Hints> = CHANGES_FILES;
    type Args = args::FileEdit;

    fn call(args: args::FileEdit) -> Result<ToolOutput, ToolError> {
        files::edit(args)
    }
}

/// `environment_file_delete`.
struct FileDelete;

impl McpTool for FileDelete {
    const NAME: &'static str = "environment_file_delete";
    const TITLE: Option<&'static str> = Some("Delete a file in an environment");
    const DESCRIPTION: &'static str =
        "Delete a file in an environment's /workdir and commit the deletion.";
    const HINTS: Option<Hints> = CHANGES_FILES;
    type Args = args::FileDelete;

    fn call(args: args::FileDelete) -> Result<ToolOutput, ToolError> {
        files::delete(args)
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
    let repo = git::open(source).map_err(|e| from_git("open repository", e))?;
    env::check_layout(&repo)?;
    Ok(repo)
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

pub(crate) fn text(value: &Value) -> ToolOutput {
    ToolOutput {
        text: serde_json::to_string_pretty(value).expect("JSON values serialise"),
        structured: None,
    }
}

fn open(args: args::Open) -> Result<ToolOutput, ToolError> {
    let (env, record) = Env::find(&args.common.environment_source, &args.environment_id)?;
    env.require_worktree()?;
    let unreached = |e| engine::unreached(&record, e);
    container::ensure(&env, &record).map_err(unreached)?;
    let restarted = services::ensure(&env, &record).map_err(unreached)?;
    let services = network::running(&env)?;
    let mut out = text(&env.describe(&record, &services));
    if !restarted.is_empty() {
        out.text.push_str(&format!(
            "\n\nThese services were gone and were started again: {}.",
            restarted.join(", ")
        ));
    }
    Ok(out)
}

fn update_metadata(args: args::UpdateMetadata) -> Result<ToolOutput, ToolError> {
    let (env, mut record) = Env::find(&args.common.environment_source, &args.environment_id)?;
    if let Some(title) = args
        .title
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        record.title = title.to_string();
        env.write_record(&record)?;
    }
    let services = network::running(&env)?;
    let description =
        serde_json::to_string(&env.describe(&record, &services)).expect("JSON values serialise");
    Ok(ToolOutput {
        text: format!("Environment metadata updated successfully.\n{description}"),
        structured: None,
    })
}

/// The most of a log or diff an answer carries.
const MAX_HISTORY_BYTES: u64 = 256 * 1024;
/// What a log or diff shows unless asked for more: clients show a model
/// about 20 KB of an answer whole.
const DEFAULT_HISTORY_BYTES: u64 = plugin_sdk::text::ANSWER_BYTES as u64;

/// The environment's log (`Some(patch)`) or its whole diff (`None`), from
/// the commit it was created at.
fn history(
    common: &args::Common,
    id: &str,
    log: Option<bool>,
    max_bytes: Option<u32>,
) -> Result<ToolOutput, ToolError> {
    let (env, record) = Env::find(&common.environment_source, id)?;
    let (since, rev) = (record.base_commit.as_str(), env.branch());
    let max = max_bytes.map_or(DEFAULT_HISTORY_BYTES, u64::from);
    let out = match log {
        Some(patch) => git::log(&env.repo, since, &rev, patch, max),
        None => git::diff(&env.repo, since, &rev, max),
    }
    .map_err(|e| from_git("read the environment's history", e))?;
    let mut text = if out.trim().is_empty() {
        format!("Environment `{id}` has changed nothing since it was created.")
    } else {
        out
    };
    // The host ends a cut answer with `[cut: N more bytes]`: say how to
    // get the rest.
    if text.ends_with("more bytes]\n") {
        text.push_str(&format!(
            "For more, pass max_bytes up to {MAX_HISTORY_BYTES}; `cofer {} {id}` shows it all to the user.\n",
            if log.is_some() { "log" } else { "diff" }
        ));
    }
    Ok(plugin_sdk::text_output(text))
}

/// What an agent should know before it uses the environments (served in
/// the MCP `instructions`, as container-use serves its agent rules).
const INSTRUCTIONS: &str = "\
Cofer environments (environment_* tools) are isolated workspaces: a container with the \
repository's worktree at /workdir, on its own git branch cofer/<id>.
- Once you use an environment, do ALL file, code and shell work for that task through \
environment_run_cmd in it; never edit the source repository directly.
- Do not run git in the environment and never touch /workdir/.git: every command's changes \
are committed to the environment's branch for you, with your `explanation` as the message.
- Commands run one at a time per environment. Long-running programs (servers, watchers) need \
background=true, with the ports to publish.
- Only /workdir is kept: anything installed elsewhere is lost when the container is \
recreated, so put setup steps in the commands you run.
- When you are done, tell the user how to see the work: `cofer log <id>`, `cofer diff <id>` and \
`cofer checkout <id>` (the commands each answer names), and destroy environments you no \
longer need with environment_destroy.";

plugin_sdk::view!("environment", "Environment", "views/environment.html");

plugin_sdk::export! {
    tools: [
        Create, RunCmd, Destroy, List, Open, UpdateMetadata, Config, AddService, ServiceLogs, Checkpoint,
        Log, Diff, FileRead, FileList, FileWrite, FileEdit, FileDelete,
    ],
    instructions: INSTRUCTIONS,
}
