//! Running git for the host: the `git` capability and the `cofer` command.
//!
//! Every command line is built here with the same safety settings: hooks and
//! fsmonitor off (a repository's config cannot make us run its programs),
//! no pager, no prompts, no signing, and none of the caller's `GIT_*`
//! variables that would point git at another repository.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

/// No git operation of ours takes longer on a healthy repository.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);

/// Settings put in front of every git command.
const SAFE: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "commit.gpgsign=false",
    "-c",
    "tag.gpgsign=false",
    "-c",
    "core.quotePath=false",
];

/// Variables that would make git act on something other than `cwd`.
const REDIRECTING_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
];

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git was not found on PATH: install it (Debian/Ubuntu: `apt-get install git`)")]
    Unavailable,
    #[error("{0} is not inside a git repository")]
    NotARepository(String),
    #[error("`{command}` failed (exit code {exit_code:?}): {stderr}")]
    Failed {
        command: String,
        exit_code: Option<i32>,
        stderr: String,
    },
}

/// Run `git <SAFE> <args>` in `cwd` and return its stdout.
pub async fn run(cwd: &Path, args: &[&str]) -> Result<String, GitError> {
    run_with(cwd, &[], args).await
}

/// Like [`run`] with extra `-c name=value` settings.
pub async fn run_with(cwd: &Path, settings: &[String], args: &[&str]) -> Result<String, GitError> {
    let mut command = tokio::process::Command::new("git");
    command
        .args(SAFE)
        .args(settings.iter().flat_map(|s| ["-c", s.as_str()]))
        .args(args)
        .current_dir(cwd)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    for var in REDIRECTING_VARS {
        command.env_remove(var);
    }
    let shown = || format!("git {}", args.join(" "));
    let output = match tokio::time::timeout(GIT_TIMEOUT, command.output()).await {
        Err(_) => {
            return Err(GitError::Failed {
                command: shown(),
                exit_code: None,
                stderr: format!("no answer within {} s", GIT_TIMEOUT.as_secs()),
            });
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            // Either git or the directory is missing; say which.
            return Err(if cwd.is_dir() {
                GitError::Unavailable
            } else {
                GitError::NotARepository(cwd.display().to_string())
            });
        }
        Ok(Err(e)) => {
            return Err(GitError::Failed {
                command: shown(),
                exit_code: None,
                stderr: e.to_string(),
            });
        }
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    if stderr.contains("not a git repository") {
        return Err(GitError::NotARepository(cwd.display().to_string()));
    }
    Err(GitError::Failed {
        command: shown(),
        exit_code: output.status.code(),
        stderr,
    })
}

/// The top-level directory of the work tree containing `path`.
pub async fn toplevel(path: &Path) -> Result<PathBuf, GitError> {
    let out = run(path, &["rev-parse", "--show-toplevel"]).await?;
    Ok(PathBuf::from(out.trim()))
}

/// The commit `rev` names, if any.
pub async fn resolve(repo: &Path, rev: &str) -> Result<Option<String>, GitError> {
    let spec = format!("{rev}^{{commit}}");
    match run(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ],
    )
    .await
    {
        Ok(out) => Ok(Some(out.trim().to_string())),
        Err(GitError::Failed {
            exit_code: Some(1), ..
        }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// URL of remote `name`, if the repository has one.
pub async fn remote_url(repo: &Path, name: &str) -> Result<Option<String>, GitError> {
    let key = format!("remote.{name}.url");
    match run(repo, &["config", "--get", &key]).await {
        Ok(out) => Ok(Some(out.trim().to_string())),
        Err(GitError::Failed {
            exit_code: Some(1), ..
        }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Add `pattern` to the repository's `info/exclude` unless it is there.
pub async fn exclude(repo: &Path, pattern: &str) -> Result<(), GitError> {
    let out = run(repo, &["rev-parse", "--git-path", "info/exclude"]).await?;
    let file = repo.join(out.trim());
    let current = std::fs::read_to_string(&file).unwrap_or_default();
    if current.lines().any(|line| line.trim() == pattern) {
        return Ok(());
    }
    let failed = |e: std::io::Error| GitError::Failed {
        command: format!("append to {}", file.display()),
        exit_code: None,
        stderr: e.to_string(),
    };
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(failed)?;
    }
    let mut text = current;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(pattern);
    text.push('\n');
    std::fs::write(&file, text).map_err(failed)
}

/// `-c user.name/-c user.email` when the repository has no identity, so a
/// commit works on a machine where git was never configured.
pub async fn identity_fallback(repo: &Path) -> Vec<String> {
    match run(repo, &["config", "user.email"]).await {
        Ok(email) if !email.trim().is_empty() => Vec::new(),
        _ => vec![
            "user.name=Cofer".into(),
            "user.email=cofer@localhost".into(),
        ],
    }
}

/// One lock per repository: git's lock files make concurrent writers fail
/// rather than wait.
pub fn repo_lock(repo: &Path) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: LazyLock<Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>> =
        LazyLock::new(Default::default);
    LOCKS
        .lock()
        .expect("lock map poisoned")
        .entry(repo.to_path_buf())
        .or_default()
        .clone()
}
