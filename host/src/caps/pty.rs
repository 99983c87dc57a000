//! `pty`: a program in a pseudo-terminal, for plugins granted `pty`. The
//! program, cwd and environment pass the same checks as `process`
//! ([`crate::caps::spawn_policy`]); the session itself is
//! [`timebox::pty::Session`].

use std::time::{Duration, Instant};

use timebox::pty::{Exit, Program, Read, Session, StartError};
use wasmtime::component::Resource;

use crate::bindings::mcphost::plugin::pty::{
    ExitStatus, Host, HostSession, PtyError, ReadResult, SpawnRequest,
};
use crate::bindings::{CapabilityError, Refusal};
use crate::store::CallState;

impl From<CapabilityError> for PtyError {
    fn from(e: CapabilityError) -> Self {
        match e {
            CapabilityError::Denied(m) => PtyError::Denied(m),
            CapabilityError::Invalid(m) => PtyError::Invalid(m),
            CapabilityError::NotFound(m) => PtyError::SpawnFailed(m),
        }
    }
}

impl From<StartError> for PtyError {
    fn from(e: StartError) -> Self {
        match e {
            StartError::TtyUnavailable(m) => PtyError::TtyUnavailable(m),
            StartError::SpawnFailed(m) => PtyError::SpawnFailed(m),
        }
    }
}

fn status(exit: Exit) -> ExitStatus {
    ExitStatus {
        exit_code: exit.code,
        signal: exit.signal,
    }
}

type Answer<T> = Result<T, Refusal<PtyError>>;

impl Host for CallState {
    fn convert_pty_error(&mut self, err: Refusal<PtyError>) -> wasmtime::Result<PtyError> {
        err.into_wit()
    }

    async fn spawn(&mut self, request: SpawnRequest) -> Answer<Resource<Session>> {
        let allowed =
            self.allowed_program("pty", &request.program, &request.cwd, request.env.clone())?;
        let session = Session::start(Program {
            program: &allowed.program,
            args: &request.args,
            cwd: &allowed.cwd,
            env: &allowed.env,
            rows: request.rows,
            cols: request.cols,
            confine: allowed.confine.as_ref(),
        })?;
        tracing::debug!(plugin = %self.grants.plugin, trace_id = %self.call.trace_id,
            program = %allowed.program.display(), pid = session.leader(), "pty session started");
        Ok(self.table.push(session)?)
    }
}

impl HostSession for CallState {
    async fn write(&mut self, session: Resource<Session>, data: String) -> Answer<()> {
        Ok(self.table.get_mut(&session)?.write(&data).map_err(|e| {
            PtyError::Invalid(format!("the program no longer reads its terminal: {e}"))
        })?)
    }

    async fn read_until(
        &mut self,
        session: Resource<Session>,
        pattern: Option<String>,
        timeout_ms: u64,
    ) -> Answer<ReadResult> {
        let pattern = pattern
            .as_deref()
            .map(regex::Regex::new)
            .transpose()
            .map_err(|e| PtyError::Invalid(format!("pattern: {e}")))?;
        let deadline = (Instant::now() + Duration::from_millis(timeout_ms)).min(self.call.deadline);
        let cancel = self.call.cancel.clone();
        let session = self.table.get_mut(&session)?;
        match session
            .read_until(pattern.as_ref(), deadline, &cancel)
            .await
        {
            Read::Matched(text) => Ok(ReadResult {
                text,
                matched: true,
                exited: None,
            }),
            Read::Ended { text, exited } => Ok(ReadResult {
                text,
                matched: false,
                exited: exited.map(status),
            }),
            Read::Cancelled => Err(PtyError::Cancelled.into()),
        }
    }

    async fn resize(&mut self, session: Resource<Session>, rows: u16, cols: u16) -> Answer<()> {
        Ok(self
            .table
            .get_mut(&session)?
            .resize(rows, cols)
            .map_err(|e| PtyError::Invalid(format!("resize: {e}")))?)
    }

    async fn close(&mut self, session: Resource<Session>) -> wasmtime::Result<ExitStatus> {
        let session = self.table.get_mut(&session)?;
        Ok(status(tokio::task::block_in_place(|| session.end())))
    }

    async fn drop(&mut self, session: Resource<Session>) -> wasmtime::Result<()> {
        // Session's own Drop kills whatever still runs.
        self.table.delete(session)?;
        Ok(())
    }
}
