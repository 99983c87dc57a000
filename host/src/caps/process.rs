//! `process`: spawn a program under a timebox, for plugins granted
//! `process`. Checks the grants ([`crate::caps::spawn`]: program
//! allow-list, cwd inside the plugin's roots, environment allow-list; here:
//! the log path), then hands the run to [`timebox`].

use std::time::{Duration, Instant};

use timebox::{LineChild, LogFile, Spawn};
use wasmtime::component::Resource;

use crate::bindings::mcphost::plugin::process::{
    ExitStatus, Host, HostChild, LineEvent, RunRequest, RunResult, StartRequest,
};
use crate::bindings::{CapabilityError, Refusal};
use crate::caps::spawn::{MAX_TAIL_BYTES, RunProgress, run_result};
use crate::paths::{confine, leads_out};
use crate::store::CallState;

/// The most of a program's file one `read-program` returns.
const MAX_READ_BYTES: u64 = 16 << 20;

impl Host for CallState {
    async fn run(&mut self, request: RunRequest) -> Result<RunResult, Refusal<CapabilityError>> {
        let spawn = self.check(request)?;
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
        Ok(run_result(outcome))
    }

    async fn read_program(
        &mut self,
        program: String,
        offset: u64,
        max_bytes: u64,
    ) -> Result<Vec<u8>, Refusal<CapabilityError>> {
        use std::io::{Read, Seek};
        self.grants
            .require("process")
            .map_err(CapabilityError::Denied)?;
        let path = self.program_allowed(&program, &self.grants.workspace.clone())?;
        let failed = |e: std::io::Error| {
            CapabilityError::NotFound(format!("cannot read {}: {e}", path.display()))
        };
        let mut file = open_program(&path).map_err(failed)?;
        file.seek(std::io::SeekFrom::Start(offset))
            .map_err(failed)?;
        let mut bytes = Vec::new();
        file.take(max_bytes.min(MAX_READ_BYTES))
            .read_to_end(&mut bytes)
            .map_err(failed)?;
        Ok(bytes)
    }

    async fn start(
        &mut self,
        request: StartRequest,
    ) -> Result<Resource<LineChild>, Refusal<CapabilityError>> {
        let allowed =
            self.allowed_program("process", &request.program, &request.cwd, request.env)?;
        let spawned = LineChild::spawn(
            &allowed.program,
            &request.args,
            &allowed.cwd,
            &allowed.env,
            request.abort_input,
            Duration::from_millis(u64::from(request.grace_ms)),
            request.stderr_tail_bytes.min(MAX_TAIL_BYTES) as usize,
            allowed.confine.as_ref(),
        );
        match spawned {
            Ok(child) => {
                tracing::debug!(plugin = %self.grants.plugin, trace_id = %self.call.trace_id,
                    program = %allowed.program.display(), "long-lived child started");
                Ok(self.table.push(child)?)
            }
            Err(e) => Err(CapabilityError::Invalid(format!(
                "cannot start {}: {e}",
                allowed.program.display()
            ))
            .into()),
        }
    }
}

impl HostChild for CallState {
    async fn write(
        &mut self,
        child: Resource<LineChild>,
        data: String,
    ) -> Result<(), Refusal<CapabilityError>> {
        let child = self.table.get_mut(&child)?;
        Ok(child
            .write(&data)
            .await
            .map_err(|e| CapabilityError::Invalid(format!("the program's stdin is closed: {e}")))?)
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

/// The program file at `path` (found outside every folder a plugin may
/// write), opened at its resolved path without following a link there
/// and without waiting on a pipe: a regular file that can be run, nothing
/// else (not `/proc/self/environ`, not another plugin's secret file).
fn open_program(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let file = crate::platform::open_regular(&path.canonicalize()?, false)?;
    if !crate::platform::runnable(&file.metadata()?) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a program file (a regular file that can be run)",
        ));
    }
    Ok(file)
}

fn exit_status(ended: &timebox::Ended) -> ExitStatus {
    ExitStatus {
        exit_code: ended.code,
        signal: ended.signal.map(signal_name),
    }
}

pub use crate::platform::signal_name;

impl CallState {
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
            Some(p) => {
                let path = confine(p, &g.workspace, &g.write_roots).ok_or_else(|| {
                    CapabilityError::Denied(match leads_out(p, &g.workspace, &g.write_roots) {
                        Some(real) => format!(
                            "the log file `{p}` leads through a symbolic link to {}, outside the folders plugin `{}` may write: replace the link with a folder (the host does not follow links out of a plugin's roots)",
                            real.display(),
                            g.plugin
                        ),
                        None => g.denial(
                            &format!("writing the log file `{p}`"),
                            "fs.write",
                            "a root containing it",
                        ),
                    })
                })?;
                // Opened now, beneath its root: the plugin could make the
                // path a link before the run writes it.
                let file = crate::pin::create_file(&path, &g.write_roots).map_err(|e| {
                    CapabilityError::Denied(format!("cannot write the log file `{p}`: {e}"))
                })?;
                Some(LogFile {
                    file: std::sync::Arc::new(file),
                    path,
                    max_bytes: g.log_bytes,
                })
            }
            None => None,
        };
        Ok(Spawn {
            program: allowed.program,
            args: request.args,
            cwd: allowed.cwd,
            env: allowed.env,
            stdin: request.stdin,
            timeout: crate::caps::spawn::run_budget(self.call.deadline, request.timeout_ms),
            no_output_timeout: request.no_output_timeout_ms.map(Duration::from_millis),
            tail_bytes: request.tail_bytes as usize,
            log,
            confine: allowed.confine,
        })
    }
}
