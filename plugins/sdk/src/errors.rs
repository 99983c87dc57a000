//! Tool errors: the generic codes, spelt once, and a `From` for every error
//! a capability returns, so `?` turns any of them into an error the model
//! can act on. A plugin whose seed fixes other codes (Godot's
//! `INVALID_ARGUMENT`, Copilot's `invalid_config`) builds those itself.

use crate::client::AskError;
use crate::containers::ContainerError;
use crate::git::GitError;
use crate::pty::PtyError;
use crate::{CapabilityError, ToolError};

/// The generic error codes. The host uses the same spellings for what it
/// refuses before a plugin runs (arguments outside the schema:
/// `invalid_request`).
pub mod codes {
    /// The policy does not grant it; the message names the config key.
    pub const DENIED: &str = "denied";
    /// The arguments (or what they point at) must change.
    pub const INVALID_REQUEST: &str = "invalid_request";
    /// The thing asked for does not exist.
    pub const NOT_FOUND: &str = "not_found";
    /// A program the capability needs is missing or broken on the host.
    pub const UNAVAILABLE: &str = "unavailable";
    /// A program ran and failed; the message says what it said.
    pub const FAILED: &str = "failed";
    /// The client cancelled the call.
    pub const CANCELLED: &str = "cancelled";
    /// The client cannot be asked what the call needs (it did not declare
    /// the capability); to an MCP 2026-07-28 client the host answers the
    /// call with MCP's missing-capability error naming it.
    pub const UNSUPPORTED: &str = "unsupported";
}

impl ToolError {
    /// A tool error the model sees, not retryable, without details.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        ToolError {
            code: code.to_string(),
            message: message.into(),
            retryable: false,
            details: None,
        }
    }

    /// Attach extra structured fields (merged into the error object).
    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details.to_string());
        self
    }
}

impl From<CapabilityError> for ToolError {
    fn from(e: CapabilityError) -> Self {
        match e {
            CapabilityError::Denied(why) => ToolError::new(codes::DENIED, why),
            CapabilityError::Invalid(why) => ToolError::new(codes::INVALID_REQUEST, why),
            CapabilityError::NotFound(why) => ToolError::new(codes::NOT_FOUND, why),
        }
    }
}

impl From<AskError> for ToolError {
    fn from(e: AskError) -> Self {
        match e {
            AskError::Denied(why) => ToolError::new(codes::DENIED, why),
            AskError::Invalid(why) => ToolError::new(codes::INVALID_REQUEST, why),
            AskError::Unsupported(why) => ToolError::new(codes::UNSUPPORTED, why),
            AskError::Failed(why) => ToolError::new(codes::FAILED, why),
        }
    }
}

impl From<GitError> for ToolError {
    fn from(e: GitError) -> Self {
        let code = match &e {
            GitError::Denied(_) => codes::DENIED,
            GitError::Invalid(_) | GitError::NotARepository(_) => codes::INVALID_REQUEST,
            GitError::Unavailable(_) => codes::UNAVAILABLE,
            GitError::Failed(_) => codes::FAILED,
        };
        ToolError::new(code, e.says())
    }
}

impl GitError {
    /// The error as a sentence for a person (never Rust's debug text).
    pub fn says(&self) -> String {
        match self {
            GitError::Denied(why)
            | GitError::Invalid(why)
            | GitError::Unavailable(why)
            | GitError::NotARepository(why) => why.clone(),
            // No exit code: a timeout or a step of the host's own (the
            // text says which), or a process killed without a word.
            GitError::Failed(f) => match (f.exit_code, f.stderr.trim()) {
                (Some(code), stderr) => {
                    format!("`{}` failed (exit code {code}): {stderr}", f.command)
                }
                (None, "") => format!("`{}` ended without an exit code (killed)", f.command),
                (None, stderr) => format!("`{}` failed: {stderr}", f.command),
            },
        }
    }
}

impl From<ContainerError> for ToolError {
    fn from(e: ContainerError) -> Self {
        match e {
            ContainerError::Denied(why) => ToolError::new(codes::DENIED, why),
            ContainerError::Invalid(why) => ToolError::new(codes::INVALID_REQUEST, why),
            ContainerError::Unavailable(why) => ToolError::new(codes::UNAVAILABLE, why),
            ContainerError::NotFound(why) => ToolError::new(codes::NOT_FOUND, why),
            ContainerError::Failed(why) => ToolError::new(codes::FAILED, why),
        }
    }
}

impl From<PtyError> for ToolError {
    fn from(e: PtyError) -> Self {
        match e {
            PtyError::Denied(why) => ToolError::new(codes::DENIED, why),
            PtyError::Invalid(why) => ToolError::new(codes::INVALID_REQUEST, why),
            PtyError::TtyUnavailable(why) | PtyError::SpawnFailed(why) => {
                ToolError::new(codes::UNAVAILABLE, why)
            }
            PtyError::Cancelled => ToolError::new(codes::CANCELLED, "the call was cancelled"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::GitFailure;

    #[test]
    fn git_errors_read_as_sentences() {
        let failed = GitError::Failed(GitFailure {
            command: "git push".into(),
            exit_code: Some(128),
            stderr: "fatal: no remote\n".into(),
        });
        assert_eq!(
            failed.says(),
            "`git push` failed (exit code 128): fatal: no remote"
        );
        let killed = GitError::Failed(GitFailure {
            command: "git add --all".into(),
            exit_code: None,
            stderr: String::new(),
        });
        assert!(killed.says().contains("without an exit code (killed)"));
        let host_step = GitError::Failed(GitFailure {
            command: "remove /r/.cofer/worktrees/x".into(),
            exit_code: None,
            stderr: "the worktree is locked (`git worktree lock`)".into(),
        });
        assert_eq!(
            host_step.says(),
            "`remove /r/.cofer/worktrees/x` failed: the worktree is locked (`git worktree lock`)"
        );
        assert_eq!(
            crate::ended_text(None, Some(9)),
            "killed by signal 9 (SIGKILL)"
        );
        assert_eq!(crate::ended_text(Some(2), Some(9)), "exit code 2");
        for text in [failed.says(), killed.says()] {
            assert!(!text.contains("Some(") && !text.contains("::"), "{text}");
        }
        let e = ToolError::from(failed);
        assert_eq!(
            (e.code.as_str(), e.message.contains("git push")),
            (codes::FAILED, true)
        );
    }

    #[test]
    fn every_capability_error_keeps_its_words() {
        let errors = [
            ToolError::from(CapabilityError::Denied("grant process".into())),
            ToolError::from(ContainerError::Unavailable("install podman".into())),
            ToolError::from(PtyError::TtyUnavailable("no /dev/ptmx".into())),
            ToolError::from(GitError::NotARepository("not a repo".into())),
        ];
        let codes: Vec<&str> = errors.iter().map(|e| e.code.as_str()).collect();
        assert_eq!(
            codes,
            [
                codes::DENIED,
                codes::UNAVAILABLE,
                codes::UNAVAILABLE,
                codes::INVALID_REQUEST
            ]
        );
        assert_eq!(errors[0].message, "grant process");
    }
}
