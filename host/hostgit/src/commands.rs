//! The git commands the host runs on a user's repository (never on a tree
//! a container writes): init, push and fetch between local repositories,
//! pruning, reading a ref, a remote's URL, an exclude and who commits.

use std::path::Path;

use crate::{GitError, Repo, fixed_settings, git_command, neutral, output, program, snapshot};

/// `git init --bare` in `dir` (which is not a repository yet).
pub async fn init_bare(dir: &Path) -> Result<(), GitError> {
    let settings = fixed_settings();
    let args = ["init", "--quiet", "--bare", "--", &*dir.to_string_lossy()];
    let mut command = git_command(&settings, &args);
    command.current_dir(dir);
    output(command, &args, dir).await.map(drop)
}

/// Force-push `refspecs` to the local remote `remote` of `repo` with no hook
/// running on either side. On a local push the remote's side is a
/// `git receive-pack` that reads the remote's own config and hooks, which
/// `-c` settings given here do not reach: it is started with its own.
pub async fn push(repo: &Repo, remote: &str, refspecs: &[&str]) -> Result<(), GitError> {
    // A remote's name is pushed to by its path: its config's
    // `receivepack` and URL rewrites choose nothing.
    let named;
    let remote = if Path::new(remote).is_absolute() {
        remote
    } else {
        named = remote_url(repo, remote)
            .await?
            .ok_or_else(|| GitError::Refused(format!("the repository has no remote `{remote}`")))?;
        named.as_str()
    };
    other_side(Path::new(remote))?;
    let receive = format!(
        "'{}' -c core.hooksPath=/dev/null -c core.fsmonitor=false -c receive.fsckObjects=false \
         -c core.alternateRefsCommand=true receive-pack",
        program().display()
    );
    let receive = format!("--receive-pack={receive}");
    let mut args = vec![
        "push",
        "--quiet",
        "--no-verify",
        "--force",
        &receive,
        "--",
        remote,
    ];
    args.extend_from_slice(refspecs);
    repo.run(&args).await.map(drop)
}

/// `git fetch` of `refspec` from the repository at `path` (a path, never
/// a remote's name: a remote's URL and `uploadpack` come from a config a
/// plugin may write), its upload-pack run as the host chooses.
pub async fn fetch(repo: &Repo, path: &Path, refspec: &str) -> Result<(), GitError> {
    other_side(path)?;
    let upload = format!(
        "--upload-pack='{}' -c core.hooksPath=/dev/null -c core.fsmonitor=false \
         -c core.alternateRefsCommand=true upload-pack",
        program().display()
    );
    let from = path.to_string_lossy();
    let args = [
        "fetch",
        "--quiet",
        "--no-tags",
        &upload,
        "--",
        &from,
        refspec,
    ];
    repo.run(&args).await.map(drop)
}

/// Drop the objects no ref of the bare repository `dir` reaches any more
/// (`git gc --prune=now`): what a deleted branch alone held.
pub async fn prune_bare(dir: &Path) -> Result<(), GitError> {
    other_side(dir)?;
    let git_dir = dir.to_string_lossy();
    let list: Vec<&str> = ["--git-dir", &*git_dir]
        .into_iter()
        .chain(neutral::LIST_KEYS)
        .collect();
    let mut command = git_command(&fixed_settings(), &list);
    command.current_dir(dir);
    let keys = output(command, &list, dir).await?;
    let mut settings = fixed_settings();
    settings.extend(neutral::over(&keys));
    let args = ["--git-dir", &*git_dir, "gc", "--quiet", "--prune=now"];
    let mut command = git_command(&settings, &args);
    command.current_dir(dir);
    output(command, &args, dir).await.map(drop)
}

/// Refuse the other side of a push, fetch or prune (a bare repository)
/// when its objects come from elsewhere ([`neutral::refuse_alternates`]).
fn other_side(dir: &Path) -> Result<(), GitError> {
    let open = cap_std::fs::Dir::open_ambient_dir(dir, cap_std::ambient_authority())
        .map_err(|_| GitError::NotARepository(dir.display().to_string()))?;
    neutral::refuse_alternates(&open, dir)
}

/// The commit `rev` names, if any.
pub async fn resolve(repo: &Repo, rev: &str) -> Result<Option<String>, GitError> {
    let spec = format!("{rev}^{{commit}}");
    let args = [
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        &spec,
    ];
    match repo.run(&args).await {
        Ok(out) => Ok(Some(out.trim().to_string())),
        Err(GitError::Failed {
            exit_code: Some(1), ..
        }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// URL of remote `name`, if the repository has one.
pub async fn remote_url(repo: &Repo, name: &str) -> Result<Option<String>, GitError> {
    repo.config_value(&format!("remote.{name}.url")).await
}

/// Add `pattern` to the repository's `info/exclude` unless it is there.
pub async fn exclude(repo: &Repo, pattern: &str) -> Result<(), GitError> {
    let git = &repo.handles.git;
    let current = git.read_to_string("info/exclude").unwrap_or_default();
    if current.lines().any(|line| line.trim() == pattern) {
        return Ok(());
    }
    let mut text = current;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(pattern);
    text.push('\n');
    git.create_dir_all("info")
        .and_then(|()| git.write("info/exclude", text))
        .map_err(|e| GitError::Failed {
            command: format!("append to {}", repo.git_dir.join("info/exclude").display()),
            exit_code: None,
            stderr: e.to_string(),
        })
}

/// Who the host's commits are by: the repository's identity, else the
/// host user's global one, else `name <name@localhost>` (the plugin's), so
/// a commit works on a machine where git was never configured. (Global
/// config is read for these two values only; everything else of it stays
/// off.)
pub async fn identity(repo: &Repo, name: &str) -> snapshot::Identity {
    let mut found = Vec::new();
    let email = format!("{name}@localhost");
    for (key, fallback) in [("user.name", name), ("user.email", email.as_str())] {
        let value = match repo.config_value(key).await {
            Ok(Some(value)) if !value.is_empty() => value,
            _ => global_value(key).await,
        };
        let value = value.trim();
        found.push(if value.is_empty() { fallback } else { value }.to_string());
    }
    let email = found.pop().unwrap_or_default();
    let name = found.pop().unwrap_or_default();
    snapshot::Identity { name, email }
}

/// The host user's global value of `key` (`~/.gitconfig` or
/// `$XDG_CONFIG_HOME/git/config`), empty when unset: read for who commits
/// only, everything else of the global config stays off.
pub async fn global_value(key: &str) -> String {
    let args = ["config", "--global", "--get", key];
    output(global_command(key), &args, Path::new("/"))
        .await
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// `git config --global --get key`, reading the global config where the
/// person keeps it, as their own git would look.
pub(crate) fn global_command(key: &str) -> tokio::process::Command {
    let mut command = git_command(&[], &["config", "--global", "--get", key]);
    command.env_remove("GIT_CONFIG_GLOBAL").current_dir("/");
    for var in ["GIT_CONFIG_GLOBAL", "XDG_CONFIG_HOME"] {
        if let Some(value) = std::env::var_os(var) {
            command.env(var, value);
        }
    }
    command
}
