//! Where an environment runs: this machine's Podman (`local`), or a Podman
//! service the host's config names (`containers.engines`), chosen at
//! create (`engine`, else COFER_ENGINE) and kept in the record, so every
//! later call, after a restart too, goes to the same engine.
//!
//! An engine on another machine cannot mount the worktree: there /workdir
//! is a volume of the environment's own. A container that starts on it
//! gets the worktree copied in ([`Env::push`]), a file tool's change is
//! sent the same way, and before every commit what the container changed
//! comes back into the worktree ([`Env::pull`]), so branches, `cofer log`
//! and `cofer diff` read the same as for a local environment.

use plugin_sdk::ToolError;
use plugin_sdk::containers::{self, ContainerError};

use crate::env::{self, Env};
use crate::errors::{error, from_container};
use crate::setting;

/// The most a pull takes back from the engine, MB (COFER_MAX_SYNC_MB).
const DEFAULT_MAX_SYNC_MB: u64 = 2048;
/// The worktree's `.git` is this machine's: it never travels.
const NEVER_COPIED: &str = ".git";

/// The engine a new environment runs on: `asked`, else COFER_ENGINE, else
/// the local one.
pub fn for_new(asked: Option<&str>) -> String {
    asked
        .map(str::to_string)
        .or_else(|| std::env::var("COFER_ENGINE").ok())
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| env::LOCAL.into())
}

impl Env {
    /// Send the rest of this call's container operations to `engine`.
    pub fn use_engine(&mut self, engine: &str) -> Result<(), ToolError> {
        let info = containers::use_engine(engine)
            .map_err(|e| from_container("use the environment's engine", e))?;
        self.engine = info.name;
        self.copies_files = !info.shares_files;
        Ok(())
    }

    /// The volume that is /workdir on an engine that cannot mount the
    /// worktree.
    pub fn volume(&self) -> String {
        format!("{}-workdir", self.container_name())
    }

    /// Copy `paths` of the worktree (all of it when none) into the
    /// container `container`'s /workdir, when the engine cannot mount it.
    pub fn push(&self, container: &str, paths: &[String]) -> Result<(), ToolError> {
        if !self.copies_files {
            return Ok(());
        }
        containers::copy_in(
            container,
            &self.worktree(),
            env::WORKDIR,
            paths,
            &[NEVER_COPIED.to_string()],
        )
        .map_err(|e| from_container("copy the worktree to the engine", e))
    }

    /// Make the worktree hold what the main container's /workdir holds,
    /// when the engine cannot mount it. A main container that is gone has
    /// nothing newer to give.
    pub fn pull(&self) -> Result<(), ToolError> {
        if !self.copies_files {
            return Ok(());
        }
        let max_bytes = setting("COFER_MAX_SYNC_MB", DEFAULT_MAX_SYNC_MB) * 1_000_000;
        match containers::sync_out(
            &self.container_name(),
            env::WORKDIR,
            &self.worktree(),
            &[NEVER_COPIED.to_string()],
            max_bytes,
        ) {
            Ok(report) => {
                if report.written + report.removed > 0 {
                    crate::note(format!(
                        "env={} pulled /workdir from engine {}: {} written, {} removed, {} bytes",
                        self.id, self.engine, report.written, report.removed, report.bytes
                    ));
                }
                Ok(())
            }
            Err(ContainerError::NotFound(_)) => Ok(()),
            Err(e) => Err(from_container("bring /workdir back from the engine", e)),
        }
    }
}

/// `e`, said of an environment whose engine is another machine's that
/// did not answer: it is not lost, only out of reach.
pub fn unreached(record: &env::Record, e: ToolError) -> ToolError {
    if record.engine() == env::LOCAL || e.code != "podman_unavailable" {
        return e;
    }
    let mut e = error(
        "engine_unreachable",
        format!(
            "the environment runs on engine `{}`, which does not answer: {}",
            record.engine(),
            e.message
        ),
        "nothing was lost (its worktree, branch and record are kept): call environment_open again once the engine's machine is back, or use another environment meanwhile",
    );
    e.retryable = true;
    e
}
