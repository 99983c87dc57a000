//! `process`: spawn a program under a timebox, for plugins granted
//! `process`. Checks the grants (program allow-list, cwd and log path inside
//! the plugin's roots, environment allow-list), then hands the run to
//! [`timebox`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bindings::CapabilityError;
use crate::bindings::mcphost::plugin::process::{
    Chunk, ExitStatus, Host, HostChild, LineEvent, RunRequest, RunResult, StartRequest, Status,
    Stream,
};
use crate::caps::CallState;
use crate::client::ClientLink;
use crate::paths::confine;
use timebox::{Ending, LineChild, LogFile, Spawn};
use wasmtime::component::Resource;

impl Host for CallState {
    async fn run(
        &mut self,
        request: RunRequest,
    ) -> wasmtime::Result<Result<RunResult, CapabilityError>> {
        let spawn = match self.check(request) {
            Ok(spawn) => spawn,
            Err(e) => return Ok(Err(e)),
        };
        let started = Instant::now();
        let progress = RunProgress::new(
            self.call.client.clone(),
            spawn.program.display().to_string(),
        );
        let outcome = timebox::run(&spawn, &self.call.cancel, &progress).await;
        tracing::debug!(
            plugin = %self.grants.plugin, trace_id = %self.call.trace_id, program = %spawn.program.display(),
            ending = ?outcome.ending, exit_code = ?outcome.exit_code, kill = ?outcome.kill,
            elapsed_ms = started.elapsed().as_millis() as u64, "process finished"
        );
        Ok(Ok(run_result(outcome)))
    }

    async fn start(
        &mut self,
        request: StartRequest,
    ) -> wasmtime::Result<Result<Resource<LineChild>, CapabilityError>> {
        let allowed =
            match self.allowed_program("process", &request.program, &request.cwd, request.env) {
                Ok(allowed) => allowed,
                Err(e) => return Ok(Err(e)),
            };
        let spawned = LineChild::spawn(
            &allowed.program,
            &request.args,
            &allowed.cwd,
            &allowed.env,
            request.abort_input,
            Duration::from_millis(u64::from(request.grace_ms)),
            request.stderr_tail_bytes.min(MAX_TAIL_BYTES) as usize,
        );
        match spawned {
            Ok(child) => {
                tracing::debug!(plugin = %self.grants.plugin, trace_id = %self.call.trace_id,
                    program = %allowed.program.display(), "long-lived child started");
                Ok(Ok(self.table.push(child)?))
            }
            Err(e) => Ok(Err(CapabilityError::Invalid(format!(
                "cannot start {}: {e}",
                allowed.program.display()
            )))),
        }
    }
}

impl HostChild for CallState {
    async fn write(
        &mut self,
        child: Resource<LineChild>,
        data: String,
    ) -> wasmtime::Result<Result<(), CapabilityError>> {
        let child = self.table.get_mut(&child)?;
        Ok(child
            .write(&data)
            .await
            .map_err(|e| CapabilityError::Invalid(format!("the program's stdin is closed: {e}"))))
    }

    async fn read_line(
        &mut self,
        child: Resource<LineChild>,
        timeout_ms: u64,
    ) -> wasmtime::Result<LineEvent> {
        let deadline = (Instant::now() + Duration::from_millis(timeout_ms)).min(self.call.deadline);
        let cancel = self.call.cancel.clone();
        let child = self.table.get_mut(&child)?;
        Ok(match child.next_line(deadline, &cancel).await {
            timebox::LineEvent::Line(line) => LineEvent::Line(line),
            timebox::LineEvent::Timeout => LineEvent::Timeout,
            timebox::LineEvent::Exited(ended) => LineEvent::Exited(exit_status(&ended)),
            timebox::LineEvent::Cancelled(ended) => LineEvent::Cancelled(exit_status(&ended)),
        })
    }

    async fn stderr_tail(&mut self, child: Resource<LineChild>) -> wasmtime::Result<String> {
        Ok(self.table.get(&child)?.stderr_tail())
    }

    async fn stop(&mut self, child: Resource<LineChild>) -> wasmtime::Result<ExitStatus> {
        let child = self.table.get_mut(&child)?;
        Ok(exit_status(&child.stop().await))
    }

    async fn drop(&mut self, child: Resource<LineChild>) -> wasmtime::Result<()> {
        // LineChild's own Drop stops a program that still runs.
        self.table.delete(child)?;
        Ok(())
    }
}

fn exit_status(ended: &timebox::Ended) -> ExitStatus {
    ExitStatus {
        exit_code: ended.code,
        signal: ended.signal.map(signal_name),
    }
}

/// `SIGKILL` for 9, and so on; the number when the name is unknown.
pub fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| signal.to_string())
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
        error: outcome.error,
    }
}

/// Output tails above this are refused: the tail lives in host memory.
pub const MAX_TAIL_BYTES: u64 = 16 * 1024 * 1024;

/// A program start the policy allows: the resolved program, the confined
/// working directory, and the complete environment of the child.
pub struct Allowed {
    pub program: PathBuf,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
}

impl CallState {
    /// The checks `process` and `pty` share: the capability granted, `cwd`
    /// inside a root, the program on `process.programs`, no loader
    /// variables. The child's environment is the policy's pass-through
    /// variables plus the request's.
    pub fn allowed_program(
        &self,
        capability: &str,
        program: &str,
        cwd: &str,
        request_env: Vec<(String, String)>,
    ) -> Result<Allowed, CapabilityError> {
        let g = &self.grants;
        g.require(capability).map_err(CapabilityError::Denied)?;
        let roots: Vec<PathBuf> = g.read_roots.iter().chain(&g.write_roots).cloned().collect();
        let cwd = confine(cwd, &g.workspace, &roots).ok_or_else(|| {
            CapabilityError::Denied(g.denial(
                &format!("access to cwd `{cwd}`"),
                "fs.read",
                "a root containing it",
            ))
        })?;
        let resolved = timebox::resolve_here(program, &cwd).ok_or_else(|| {
            CapabilityError::NotFound(format!("program `{program}` was not found on PATH"))
        })?;
        if !timebox::allowed(program, &resolved, &g.programs) {
            return Err(CapabilityError::Denied(g.denial(
                &format!("the program `{program}`"),
                "process.programs",
                &format!("\"{program}\""),
            )));
        }
        if let Some((key, _)) = request_env
            .iter()
            .find(|(k, _)| k.starts_with("LD_") || k.starts_with("DYLD_") || k.contains('='))
        {
            return Err(CapabilityError::Invalid(format!(
                "environment variable `{key}` may not be set by a plugin"
            )));
        }
        let mut env: Vec<(String, String)> = g
            .env
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
            .collect();
        env.extend(request_env);
        Ok(Allowed {
            program: resolved,
            cwd,
            env,
        })
    }

    /// Turn a plugin's request into a spawn the policy allows.
    fn check(&self, request: RunRequest) -> Result<Spawn, CapabilityError> {
        let g = &self.grants;
        if request.tail_bytes > MAX_TAIL_BYTES {
            return Err(CapabilityError::Invalid(format!(
                "tail-bytes {} is above the limit of {MAX_TAIL_BYTES}",
                request.tail_bytes
            )));
        }
        let allowed =
            self.allowed_program("process", &request.program, &request.cwd, request.env)?;
        let log = match &request.log_path {
            Some(p) => Some(LogFile {
                path: confine(p, &g.workspace, &g.write_roots).ok_or_else(|| {
                    CapabilityError::Denied(g.denial(
                        &format!("writing the log file `{p}`"),
                        "fs.write",
                        "a root containing it",
                    ))
                })?,
                max_bytes: g.log_bytes,
            }),
            None => None,
        };
        let remaining = self.call.deadline.saturating_duration_since(Instant::now());
        Ok(Spawn {
            program: allowed.program,
            args: request.args,
            cwd: allowed.cwd,
            env: allowed.env,
            stdin: request.stdin,
            timeout: Duration::from_millis(request.timeout_ms).min(remaining),
            no_output_timeout: request.no_output_timeout_ms.map(Duration::from_millis),
            tail_bytes: request.tail_bytes as usize,
            log,
        })
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
