//! Tool errors: a stable code, a message, and always a remediation, so the
//! model (or the person reading over its shoulder) knows what to do next.
//! The host adds the call's trace id to every error.

use plugin_sdk::ToolError;
use plugin_sdk::containers::ContainerError;
use plugin_sdk::git::GitError;
use serde_json::json;

/// An error with its remediation.
pub fn error(code: &str, message: impl Into<String>, remediation: &str) -> ToolError {
    ToolError::new(code, message).with_details(json!({ "remediation": remediation }))
}

/// A step that failed after its retries: which step, why, and what to do.
pub fn step_failed(step: &str, why: impl std::fmt::Display, remediation: &str) -> ToolError {
    let mut e = ToolError::new("step_failed", format!("{step} failed: {why}"))
        .with_details(json!({ "step": step, "remediation": remediation }));
    e.retryable = restarts(&e.message);
    e
}

/// Whether the host said that Podman's service, gone mid-command, is
/// started again by the next command: then asking again works (issue 54,
/// item 6: it said `retryable: false`).
fn restarts(message: &str) -> bool {
    // The host's words for a service that went away: the next command
    // connects (or starts it) again.
    message.contains("Podman's service stopped answering")
}

/// A git capability error raised during `step`.
pub fn from_git(step: &str, e: GitError) -> ToolError {
    match e {
        GitError::Denied(why) => error(
            "denied",
            why,
            "grant the repository in the host config (see the message), or use a repository inside the granted roots",
        ),
        GitError::Invalid(why) => error("invalid_request", why, "correct the arguments"),
        GitError::Unavailable(why) => error("git_unavailable", why, "install git on the host"),
        GitError::NotARepository(why) => error(
            "precondition_failed",
            why,
            "point environment_source at a git repository (run `git init` and commit first)",
        ),
        GitError::Failed(_) => step_failed(
            step,
            e.says(),
            "check the repository's state with `git status` and `git worktree list`, then retry",
        ),
    }
}

/// A containers capability error raised during `step`.
pub fn from_container(step: &str, e: ContainerError) -> ToolError {
    match e {
        ContainerError::Denied(why) => error(
            "denied",
            why,
            "grant it in the host config as the message says",
        ),
        // The host's words for an image it may not pull (see containers.pull).
        ContainerError::Invalid(why) if why.contains("is not in local storage") => error(
            "image_missing",
            why,
            "get the image on the host (`podman pull` or `podman build`), pick an image that is there (`podman images`), or allow pulling it with containers.pull",
        ),
        ContainerError::Invalid(why) if why.contains("could not be pulled") => {
            let mut e = error(
                "image_pull_failed",
                why,
                "make the image's registry reachable from the host (`podman pull IMAGE` shows the cause), \
                 or use a local image (`image`, or COFER_DEFAULT_IMAGE)",
            );
            // The network may be back on the next call.
            e.retryable = true;
            e
        }
        // The host's words for a secret reference it cannot resolve: the
        // arguments are fine; the person fixes it where the host runs.
        ContainerError::Invalid(why) if why.starts_with("secret `") => error(
            "secret_unresolved",
            why,
            "ask the person to do what the message says on the host's machine (set the variable where the host starts, install the secret manager's CLI, or `cofer config secret unset NAME`); other arguments will not help",
        ),
        ContainerError::Invalid(why) => error("invalid_request", why, "correct the arguments"),
        ContainerError::Unavailable(why) => {
            let again = restarts(&why);
            let mut e = error(
                "podman_unavailable",
                why,
                "do what the message says (install Podman, or start its service), then check `podman info`",
            );
            e.retryable = again;
            e
        }
        ContainerError::NotFound(why) => error(
            "not_found",
            why,
            "the container is gone: environment_open recreates it, or environment_destroy cleans up",
        ),
        // Podman's network helper (or what it runs: iptables, nft) was
        // not found or failed; the image is not the cause.
        ContainerError::Failed(why) if why.contains("netavark") || why.contains("aardvark") => {
            error(
                "podman_network_failed",
                format!("{step} failed: Podman's network helper failed: {why}"),
                "Podman runs netavark from helper_binaries_dir in containers.conf (/usr/libexec/podman, /usr/lib/podman) and it runs iptables or nft from the PATH of Podman's service: check `podman info --format '{{.Host.NetworkBackend}}'`, install netavark and iptables/nftables, and make sure the service (or the host that starts it) has /usr/sbin on its PATH",
            )
        }
        ContainerError::Failed(why) => step_failed(
            step,
            why,
            "check `podman ps -a` and that the image exists locally (`podman images`); then retry",
        ),
    }
}

/// Is this failure worth one more try? (Podman and git hiccups, not
/// refusals or missing things.)
pub fn transient_container(e: &ContainerError) -> bool {
    matches!(e, ContainerError::Failed(_))
}

pub fn transient_git(e: &GitError) -> bool {
    matches!(e, GitError::Failed(_))
}

/// A container that ended right after its start (a background command, an
/// added service): `service_exited`, with `what` ended, its exit code and
/// the last lines it wrote; the container is removed, as nothing will run
/// there.
pub fn ended_at_start(
    id: &str,
    exit_code: Option<i32>,
    what: &str,
    remediation: &str,
) -> ToolError {
    let output = plugin_sdk::containers::logs(id, 4096).unwrap_or_default();
    let _ = plugin_sdk::containers::remove(id, 0);
    let last: Vec<&str> = output.lines().rev().take(20).collect();
    let last: Vec<&str> = last.into_iter().rev().collect();
    ToolError::new(
        "service_exited",
        format!(
            "{what} ({}); its last output:\n{}",
            plugin_sdk::exit_text(exit_code),
            last.join("\n")
        ),
    )
    .with_details(json!({
        "exit_code": exit_code,
        "output": output,
        "remediation": remediation,
    }))
}
