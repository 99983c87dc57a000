//! `cofer`: the person's side of Cofer environments, run in the repository
//! beside the agents, with container-use's commands:
//!
//! - [`repo`]: `init` (the `cofer` remote, in `.git/cofer/`), and an
//!   environment's work brought here: `checkout`, `log`, `diff`;
//! - [`take`]: `merge` and `apply` into the current branch;
//! - [`host`]: what goes through the environment tools (`list`, `create`,
//!   `run`, `delete`, `prune`), called through the user's own MCP host, so
//!   by hand is exactly what an agent's call does;
//! - [`list`] (`list`, `watch`), [`terminal`], [`config`] (the
//!   repository's defaults) and [`secrets`] (references only).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use hostgit::Repo;
use serde_json::json;

mod config;
mod host;
mod list;
mod repo;
mod secrets;
mod shown;
mod take;
mod terminal;

use host::Host;

#[derive(Parser)]
#[command(
    name = "cofer",
    version,
    about = "Cofer environments from the terminal: list, watch, open a shell in, run in, take the work of, and delete the environments agents work in"
)]
struct Cli {
    /// The repository (default: the one containing the current directory).
    #[arg(long, global = true)]
    repo: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create the `cofer` remote environments are pushed to (idempotent).
    Init,
    /// The repository's environments: id, title, state, created, branch, engine.
    #[command(alias = "ls")]
    List {
        /// As JSON (what environment_list answers).
        #[arg(long)]
        json: bool,
        /// Only the ids.
        #[arg(short, long)]
        quiet: bool,
    },
    /// The list and each environment's last commands, refreshed until Ctrl-C.
    Watch {
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 2)]
        interval: u64,
    },
    /// An interactive shell in an environment's container, in /workdir;
    /// what you change is committed when the shell exits.
    Terminal {
        id: String,
        /// The Podman service's URL, for an environment on another
        /// machine's engine (as `containers.engines` names it).
        #[arg(long)]
        url: Option<String>,
    },
    /// Run one command in an environment (committed as an agent's is);
    /// its exit code is cofer's.
    Run {
        id: String,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Create an environment to hand to an agent (`environment_open` finds it).
    Create {
        #[arg(long)]
        title: String,
        /// Its id (default: a generated one).
        #[arg(long)]
        id: Option<String>,
        /// Its image (default: the repository's config, else the host's).
        #[arg(long)]
        image: Option<String>,
        /// The commit, branch or tag it starts from (default: HEAD).
        #[arg(long)]
        from: Option<String>,
    },
    /// Check out an environment's work on the local branch `cofer-<id>`
    /// (made for it; a branch of yours of that name is never moved).
    Checkout { id: String },
    /// Show an environment's commits with their patches.
    Log { id: String },
    /// Show what an environment changed since it was made (against the
    /// commit it was made from, whatever branch you are on).
    Diff { id: String },
    /// Merge an environment's work into the current branch (a merge commit).
    Merge {
        id: String,
        /// Delete the environment once its work is merged.
        #[arg(short, long)]
        delete: bool,
    },
    /// Put an environment's changes in the current tree, uncommitted.
    Apply {
        id: String,
        /// Delete the environment once its changes are applied.
        #[arg(short, long)]
        delete: bool,
    },
    /// Delete environments: their containers, worktrees and branches
    /// (nothing of your branches).
    #[command(alias = "rm")]
    Delete {
        ids: Vec<String>,
        /// Every environment of the repository.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
    },
    /// Delete the environments whose work is already in the current branch,
    /// and those whose worktree is gone.
    Prune {
        /// Only say what would be deleted.
        #[arg(long)]
        dry_run: bool,
    },
    /// The repository's defaults for new environments, and its secrets.
    #[command(subcommand)]
    Config(config::ConfigCommand),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    quietpipe::quiet_when_the_reader_leaves();
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cofer: {}", termtext::lines(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let start = match cli.repo {
        Some(repo) => repo,
        None => std::env::current_dir()?,
    };
    let repo = Repo::open(&start)
        .with_context(|| format!("{} is not in a git repository", start.display()))?;
    let host = Host::find(repo.work_tree());
    let done = Ok(ExitCode::SUCCESS);
    match cli.command {
        Command::Init => repo::init(&repo).await.and(done),
        Command::List { json, quiet } => {
            let environments = list::environments(&host)?;
            if json {
                println!(
                    "{}",
                    termtext::json(&serde_json::to_string_pretty(&environments)?)
                );
            } else if quiet {
                for env in &environments {
                    println!("{}", termtext::line(env["id"].as_str().unwrap_or("")));
                }
            } else {
                print!("{}", list::table(&environments));
            }
            done
        }
        Command::Watch { interval } => {
            list::watch(&host, &repo, Duration::from_secs(interval.max(1)))
                .await
                .and(done)
        }
        Command::Terminal { id, url } => {
            repo::check_id(&id)?;
            terminal::terminal(&host, &id, url.as_deref())
        }
        Command::Run { id, command } => run_one(&host, &id, &command),
        Command::Create {
            title,
            id,
            image,
            from,
        } => {
            let mut args =
                json!({"title": title, "explanation": "Created by hand with `cofer create`"});
            for (key, value) in [
                ("environment_id", id),
                ("image", image),
                ("from_git_ref", from),
            ] {
                if let Some(value) = value {
                    args[key] = json!(value);
                }
            }
            let made = host.call("environment_create", args)?;
            let id = made.value["id"].as_str().unwrap_or_default();
            println!("{}", termtext::lines(&made.text));
            eprintln!(
                "cofer: environment `{id}` is ready; tell the agent to open it (environment_open with environment_id `{id}`)"
            );
            done
        }
        Command::Checkout { id } => repo::checkout(&repo, &id).await,
        Command::Log { id } => {
            let work = repo::fetch(&repo, &id).await?;
            // The environment's own commits: from where it was made.
            let range = match repo::base_commit(&repo, &id) {
                Some(base) => format!("{base}..{work}"),
                None => work,
            };
            shown::show(
                &repo,
                &["log", "--patch", "--no-ext-diff", "--no-textconv", &range],
            )
        }
        Command::Diff { id } => {
            let work = repo::fetch(&repo, &id).await?;
            // Against the commit it was made from, as environment_diff and
            // `cofer log` are: not against the branch the user is on now.
            match repo::base_commit(&repo, &id) {
                Some(base) => shown::show(
                    &repo,
                    &["diff", "--no-ext-diff", "--no-textconv", &base, &work],
                ),
                None => shown::show(
                    &repo,
                    &[
                        "diff",
                        "--no-ext-diff",
                        "--no-textconv",
                        &format!("HEAD...{work}"),
                    ],
                ),
            }
        }
        Command::Merge { id, delete } => {
            print!("{}", take::take(&repo, &id, take::How::Merge).await?);
            if delete {
                delete_one(&host, &repo, &id).await?;
            }
            done
        }
        Command::Apply { id, delete } => {
            print!("{}", take::take(&repo, &id, take::How::Apply).await?);
            // `diff --cached --quiet` fails when something is staged.
            let staged = repo
                .run(&["diff", "--cached", "--quiet", "--no-ext-diff"])
                .await
                .is_err();
            if staged {
                eprintln!(
                    "cofer: {id}'s changes are staged in your tree, not committed (`git diff --cached`)"
                );
            } else {
                eprintln!(
                    "cofer: {id} has nothing your branch does not have already; nothing was staged"
                );
            }
            if delete {
                delete_one(&host, &repo, &id).await?;
            }
            done
        }
        Command::Delete { ids, all } => {
            let ids = if all {
                list::environments(&host)?
                    .iter()
                    .filter_map(|e| e["id"].as_str().map(str::to_string))
                    .collect()
            } else if ids.is_empty() {
                bail!("name the environments to delete (`cofer list` shows them), or pass --all");
            } else {
                ids
            };
            for id in &ids {
                delete_one(&host, &repo, id).await?;
            }
            done
        }
        Command::Prune { dry_run } => prune(&host, &repo, dry_run).await.and(done),
        Command::Config(command) => config::config(&repo, &host, command).and(done),
    }
}

/// `cofer run`: one command (its words quoted for the shell, unless it is
/// one line already), its output on ours, its exit code as ours.
fn run_one(host: &Host, id: &str, command: &[String]) -> Result<ExitCode> {
    repo::check_id(id)?;
    let line = match command {
        [one] => one.clone(),
        words => words
            .iter()
            .map(|w| quoted(w))
            .collect::<Vec<_>>()
            .join(" "),
    };
    let ran = host.call(
        "environment_run_cmd",
        json!({"environment_id": id, "command": line, "explanation": format!("Run {line} (by hand, `cofer run`)")}),
    )?;
    print!("{}", ran.value["stdout"].as_str().unwrap_or(""));
    eprint!("{}", ran.value["stderr"].as_str().unwrap_or(""));
    Ok(match ran.value["exit_code"].as_i64() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(code.clamp(1, 255) as u8),
        None => ExitCode::FAILURE,
    })
}

/// A word for `sh`: in single quotes unless it is plain.
fn quoted(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Destroy environment `id`, and the local branch `cofer checkout` made
/// for it unless it holds work of the person's ([`repo::forget_checkout`]).
async fn delete_one(host: &Host, repo: &Repo, id: &str) -> Result<()> {
    repo::check_id(id)?;
    let tip = hostgit::resolve(repo, &format!("refs/heads/cofer/{id}")).await?;
    let removed = host.call("environment_destroy", json!({"environment_id": id}))?;
    println!(
        "deleted {id}: {}",
        termtext::line(removed.text.lines().next().unwrap_or(""))
    );
    if let Some(said) = repo::forget_checkout(repo, id, tip.as_deref()).await? {
        println!("{said}");
    }
    Ok(())
}

/// `cofer prune`: environments whose work is in HEAD already (they made
/// commits, and HEAD has them all), and those whose worktree is gone.
async fn prune(host: &Host, repo: &Repo, dry_run: bool) -> Result<()> {
    let mut gone = Vec::new();
    for env in list::environments(host)? {
        let Some(id) = env["id"].as_str() else {
            continue;
        };
        let branch = format!("refs/heads/cofer/{id}");
        let why = if env["worktree"].is_null() {
            Some("its worktree is gone")
        } else {
            let tip = hostgit::resolve(repo, &branch).await?;
            let base = repo::base_commit(repo, id);
            let merged = match &tip {
                Some(tip) if Some(tip) != base.as_ref() => repo
                    .run(&["merge-base", "--is-ancestor", tip, "HEAD"])
                    .await
                    .is_ok(),
                _ => false,
            };
            merged.then_some("its work is in the current branch")
        };
        if let Some(why) = why {
            gone.push((id.to_string(), why));
        }
    }
    if gone.is_empty() {
        println!("nothing to prune");
    }
    for (id, why) in gone {
        if dry_run {
            println!("would delete {id}: {why}");
        } else {
            delete_one(host, repo, &id).await?;
        }
    }
    Ok(())
}
