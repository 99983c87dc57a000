//! `cofer`: the user's side of Cofer environments, run in the repository.
//!
//! - `cofer init` sets up the `cofer` remote (a bare repository in
//!   `.cofer/remote.git`) that environments are pushed to, and keeps
//!   `.cofer/` out of `git status`. Safe to run again.
//! - `cofer checkout|log|diff <id>` are the commands the environment tools
//!   tell the user to run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use hostgit::{self as git, Repo};

const REMOTE: &str = "cofer";

#[derive(Parser)]
#[command(
    name = "cofer",
    version,
    about = "Cofer environments: set up a repository, check out, log and diff an environment's work"
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
    /// Check out an environment's work on a local branch named after it.
    Checkout { id: String },
    /// Show an environment's commits with their patches.
    Log { id: String },
    /// Show what an environment changed since it branched off.
    Diff { id: String },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cofer: {e:#}");
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
    match cli.command {
        Command::Init => init(&repo).await.map(|()| ExitCode::SUCCESS),
        Command::Checkout { id } => {
            let remote_ref = fetch(&repo, &id).await?;
            let exists = git::resolve(&repo, &format!("refs/heads/{id}"))
                .await?
                .is_some();
            if exists {
                show(&repo, &["checkout", &id])?;
                show(&repo, &["merge", "--ff-only", &remote_ref])
            } else {
                show(&repo, &["checkout", "--track", "-b", &id, &remote_ref])
            }
        }
        Command::Log { id } => {
            let remote_ref = fetch(&repo, &id).await?;
            show(&repo, &["log", "--patch", &remote_ref])
        }
        Command::Diff { id } => {
            let remote_ref = fetch(&repo, &id).await?;
            show(&repo, &["diff", &format!("HEAD...{remote_ref}")])
        }
    }
}

async fn init(repo: &Repo) -> Result<()> {
    let bare = repo.work_tree().join(".cofer/remote.git");
    git::exclude(repo, "/.cofer/").await?;
    match git::remote_url(repo, REMOTE).await? {
        Some(url) => println!("remote `{REMOTE}` already set up ({url}); nothing to do"),
        None => {
            if !bare.join("HEAD").exists() {
                std::fs::create_dir_all(&bare)?;
                git::init_bare(&bare).await?;
            }
            let url = bare.to_string_lossy();
            repo.run(&["remote", "add", REMOTE, &url]).await?;
            println!(
                "added remote `{REMOTE}` -> {url}; environments can now be created in {}",
                repo.work_tree().display()
            );
        }
    }
    Ok(())
}

/// Bring the environment's branch from the remote; the ref to use.
async fn fetch(repo: &Repo, id: &str) -> Result<String> {
    if git::remote_url(repo, REMOTE).await?.is_none() {
        bail!(
            "{} has no `{REMOTE}` remote: run `cofer init` first",
            repo.work_tree().display()
        );
    }
    let spec = format!("+refs/heads/cofer/{id}:refs/remotes/{REMOTE}/cofer/{id}");
    repo.run(&["fetch", "--quiet", REMOTE, &spec])
        .await
        .with_context(|| format!("there is no environment `{id}` on the `{REMOTE}` remote"))?;
    Ok(format!("{REMOTE}/cofer/{id}"))
}

/// Run a git command with the user's terminal (their pager, colours).
fn show(repo: &Repo, args: &[&str]) -> Result<ExitCode> {
    let status = repo.user_command(args).status().context("cannot run git")?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8)
    })
}
