//! The spawn policy every capability that starts a program shares
//! (`process`, `pty`, `containers`' exec): which program, where and with
//! what environment a plugin may start, and how a timebox run is reported.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use timebox::Ending;
use timebox::confine::Confinement;

use crate::bindings::CapabilityError;
use crate::bindings::mcphost::plugin::process::{Chunk, RunResult, Status, Stream};
use crate::client::ClientLink;
use crate::paths::confine;
use crate::store::CallState;

/// Output tails above this are refused: the tail lives in host memory.
pub const MAX_TAIL_BYTES: u64 = 16 * 1024 * 1024;

/// How long a run may take: what it asked for, but ending a tenth of the
/// call's remaining time (at most 10 s) before the call's deadline, so
/// that the plugin's own timebox fires first and it still has time to
/// write its reports and answer (a run_test timeout above the policy's
/// deadline ended as plugin_timeout with no summary).
pub fn run_budget(deadline: std::time::Instant, requested_ms: u64) -> Duration {
    let remaining = deadline.saturating_duration_since(std::time::Instant::now());
    let answer = (remaining / 10).min(Duration::from_secs(10));
    Duration::from_millis(requested_ms).min(remaining - answer)
}

/// A program start the policy allows: the resolved program, the confined
/// working directory, and the complete environment of the child.
pub struct Allowed {
    pub program: PathBuf,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    /// What it and its tree may touch ([`crate::policy::Grants::confinement`]).
    pub confine: Option<Confinement>,
}

impl CallState {
    /// `program` as found from `cwd` (PATH, PATHEXT), if it is on the
    /// policy's `process.programs`.
    pub fn program_allowed(
        &self,
        program: &str,
        cwd: &std::path::Path,
    ) -> Result<PathBuf, CapabilityError> {
        let g = &self.grants;
        let resolved = timebox::resolve_trusted(program, cwd, &g.untrusted_dirs).ok_or_else(|| {
            CapabilityError::NotFound(match timebox::resolve_here(program, cwd) {
                Some(planted) => format!(
                    "program `{program}` was found only as {}, in a folder a plugin may write or a \
                     container fill (the workspace, the cache or an `fs.write` root), where the host \
                     never looks for programs: install it elsewhere on PATH, or name its absolute path \
                     in `process.programs`",
                    planted.display()
                ),
                None => format!("program `{program}` was not found on PATH"),
            })
        })?;
        if !timebox::allowed(program, &resolved, &g.programs) {
            return Err(CapabilityError::Denied(g.denial(
                &format!("the program `{program}`"),
                "process.programs",
                &format!("\"{program}\""),
            )));
        }
        Ok(resolved)
    }

    /// The checks `process` and `pty` share: the capability granted, `cwd`
    /// inside a root, the program on `process.programs`, no loader
    /// variables. The child's environment is the policy's pass-through
    /// variables, those every program of this system needs
    /// ([`crate::platform::SYSTEM_ENV`]), and the request's.
    pub fn allowed_program(
        &self,
        capability: &str,
        program: &str,
        cwd: &str,
        request_env: Vec<(String, String)>,
    ) -> Result<Allowed, CapabilityError> {
        let g = &self.grants;
        g.require(capability).map_err(CapabilityError::Denied)?;
        let cwd = confine(cwd, &g.workspace, &g.roots(false)).ok_or_else(|| {
            CapabilityError::Denied(g.denial(
                &format!("access to cwd `{cwd}`"),
                "fs.read",
                "a root containing it",
            ))
        })?;
        let resolved = self.program_allowed(program, &cwd)?;
        if let Some((key, _)) = request_env
            .iter()
            .find(|(k, _)| k.starts_with("LD_") || k.starts_with("DYLD_") || k.contains('='))
        {
            return Err(CapabilityError::Invalid(format!(
                "environment variable `{key}` may not be set by a plugin"
            )));
        }
        let system = crate::platform::SYSTEM_ENV.iter().map(|n| n.to_string());
        let mut names: Vec<String> = g.env.iter().cloned().chain(system).collect();
        names.sort_by_key(|n| n.to_ascii_uppercase());
        names.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
        let mut env: Vec<(String, String)> = names
            .into_iter()
            .filter_map(|name| std::env::var(&name).ok().map(|v| (name, v)))
            .collect();
        env.extend(request_env);
        let confine = self.confinement(&mut env)?;
        Ok(Allowed {
            program: resolved,
            cwd,
            env,
            confine,
        })
    }

    /// The plugin's confinement for one start: its grants, the call's
    /// private temporary folder (which `TMPDIR`, `TMP` and `TEMP` name in
    /// `env`), and its write folders made if missing (a cache not used
    /// yet). `None` when the policy says `process.confine = false`.
    fn confinement(
        &self,
        env: &mut Vec<(String, String)>,
    ) -> Result<Option<Confinement>, CapabilityError> {
        let Some(mut confine) = self.grants.confinement.clone() else {
            return Ok(None);
        };
        let failed = |what: &str, e: std::io::Error| {
            CapabilityError::Denied(format!("cannot prepare {what} for the program: {e}"))
        };
        if self.private_tmp.get().is_none() {
            let made = tempfile::Builder::new()
                .prefix("mcp-host-tmp-")
                .tempdir()
                .map_err(|e| failed("a private temporary folder", e))?;
            let _ = self.private_tmp.set(made);
        }
        let tmp = self
            .private_tmp
            .get()
            .expect("just made")
            .path()
            .to_path_buf();
        for folder in confine.write.iter().filter(|w| !w.starts_with("/dev")) {
            if !folder.exists() {
                std::fs::create_dir_all(folder)
                    .map_err(|e| failed(&format!("the folder {}", folder.display()), e))?;
            }
        }
        confine.write.push(tmp.clone());
        let tmp = tmp.to_string_lossy().into_owned();
        env.retain(|(k, _)| !["TMPDIR", "TMP", "TEMP"].contains(&k.as_str()));
        env.extend(["TMPDIR", "TMP", "TEMP"].map(|k| (k.to_string(), tmp.clone())));
        Ok(Some(confine))
    }
}

/// A tail with secret values masked ([`crate::scrub`]). A value may be cut
/// across chunks, so each stream is joined whole first and given back as
/// one chunk (in the order the streams first spoke): the interleaving is
/// the price of not leaking a value split in two.
pub fn scrubbed_tail(tail: Vec<Chunk>) -> Vec<Chunk> {
    let mut streams: Vec<(Stream, String)> = Vec::new();
    for chunk in tail {
        match streams.iter_mut().find(|(s, _)| *s == chunk.stream) {
            Some((_, text)) => text.push_str(&chunk.text),
            None => streams.push((chunk.stream, chunk.text)),
        }
    }
    streams
        .into_iter()
        .map(|(stream, text)| Chunk {
            stream,
            text: crate::scrub::scrubbed(text),
        })
        .collect()
}

/// A timebox outcome as the WIT `run-result` (shared with `containers.exec`).
pub fn run_result(outcome: timebox::Outcome) -> RunResult {
    RunResult {
        status: match outcome.ending {
            Ending::Exited => Status::Exited,
            Ending::Timeout => Status::Timeout,
            Ending::NoOutput => Status::NoOutput,
            Ending::SpawnFailed => Status::SpawnFailed,
            Ending::Cancelled => Status::Cancelled,
        },
        exit_code: outcome.exit_code,
        signal: outcome.signal,
        duration_ms: outcome.duration.as_millis() as u64,
        tail: outcome
            .tail
            .chunks()
            .into_iter()
            .map(|(stream, text)| Chunk {
                stream: match stream {
                    timebox::Stream::Stdout => Stream::Stdout,
                    timebox::Stream::Stderr => Stream::Stderr,
                },
                text,
            })
            .collect(),
        stdout_bytes: outcome.stdout_bytes,
        stderr_bytes: outcome.stderr_bytes,
        truncated: outcome.tail.truncated(),
        leftovers_killed: match (&outcome.ending, &outcome.kill) {
            (Ending::Exited, Some(kill)) => kill.killed as u32,
            _ => 0,
        },
        error: outcome.error,
    }
}

/// Progress notifications while a program runs.
pub struct RunProgress {
    client: Arc<dyn ClientLink>,
    program: String,
}

impl RunProgress {
    pub fn new(client: Arc<dyn ClientLink>, program: String) -> Self {
        RunProgress { client, program }
    }
}

impl timebox::Progress for RunProgress {
    fn running(&self, elapsed: Duration, output_bytes: u64) {
        self.client.progress(
            elapsed.as_secs_f64(),
            None,
            Some(format!(
                "{} running for {} s, {output_bytes} bytes of output",
                self.program,
                elapsed.as_secs()
            )),
        );
    }
}
