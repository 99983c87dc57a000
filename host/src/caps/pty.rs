//! `pty`: a program in a pseudo-terminal (portable-pty), for plugins
//! granted `pty`. The program, cwd and environment pass the same checks as
//! `process` ([`CallState::allowed_program`]).
//!
//! A reader thread moves the terminal's output into a buffer that
//! `read-until` matches a regular expression against. The child is a
//! session leader (portable-pty calls `setsid`) and carries the timebox's
//! marker variable, so closing or dropping the session kills its whole tree
//! with [`timebox::kill_tree`], re-parented descendants included.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};
use tokio::sync::Notify;
use wasmtime::component::Resource;

use crate::bindings::CapabilityError;
use crate::bindings::mcphost::plugin::pty::{
    ExitStatus, Host, HostSession, PtyError, ReadResult, SpawnRequest,
};
use crate::caps::CallState;
use timebox::MARKER_VAR;

/// Output not yet read is capped: a program that floods its terminal
/// cannot grow host memory without bound (the oldest bytes go first).
const UNREAD_CAP: usize = 1024 * 1024;

/// One program on one pseudo-terminal.
pub struct Session {
    output: Arc<Output>,
    writer: Box<dyn Write + Send>,
    master: Box<dyn MasterPty + Send>,
    child: Box<dyn Child + Send + Sync>,
    leader: i32,
    marker: String,
    ended: Option<ExitStatus>,
}

#[derive(Default)]
struct Output {
    unread: Mutex<Vec<u8>>,
    eof: AtomicBool,
    more: Notify,
}

impl From<CapabilityError> for PtyError {
    fn from(e: CapabilityError) -> Self {
        match e {
            CapabilityError::Denied(m) => PtyError::Denied(m),
            CapabilityError::Invalid(m) => PtyError::Invalid(m),
            CapabilityError::NotFound(m) => PtyError::SpawnFailed(m),
        }
    }
}

impl Session {
    fn start(
        program: &std::path::Path,
        request: &SpawnRequest,
        cwd: &std::path::Path,
        env: &[(String, String)],
    ) -> Result<Session, PtyError> {
        let size = PtySize {
            rows: request.rows.max(1),
            cols: request.cols.max(1),
            pixel_width: 0,
            pixel_height: 0,
        };
        let pair = native_pty_system().openpty(size).map_err(|e| {
            PtyError::TtyUnavailable(format!("no pseudo-terminal could be opened: {e}"))
        })?;
        let marker = timebox::new_marker();
        let mut command = CommandBuilder::new(program);
        command.args(&request.args);
        command.cwd(cwd);
        command.env_clear();
        command.env("TERM", "xterm-256color");
        for (key, value) in env {
            command.env(key, value);
        }
        command.env(MARKER_VAR, &marker);
        let child = pair.slave.spawn_command(command).map_err(|e| {
            PtyError::SpawnFailed(format!("cannot start {}: {e}", program.display()))
        })?;
        // Our copy of the terminal's other end would keep the reader from
        // ever seeing the end of the output.
        drop(pair.slave);
        let leader = child.process_id().map(|p| p as i32).unwrap_or(-1);
        // portable-pty has no hook before exec: the leader joins the run's
        // cgroup right after it starts, before a shell gets to fork.
        timebox::cgroup::adopt(&marker, leader);
        let reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| PtyError::TtyUnavailable(format!("cannot read the terminal: {e}")))?;
        let writer = pair
            .master
            .take_writer()
            .map_err(|e| PtyError::TtyUnavailable(format!("cannot write to the terminal: {e}")))?;
        let output = Arc::new(Output::default());
        std::thread::Builder::new()
            .name("pty-reader".into())
            .spawn({
                let output = output.clone();
                move || pump(reader, &output)
            })
            .map_err(|e| PtyError::SpawnFailed(format!("cannot start the reader thread: {e}")))?;
        Ok(Session {
            output,
            writer,
            master: pair.master,
            child,
            leader,
            marker,
            ended: None,
        })
    }

    /// The exit status once the child is gone (reaped without blocking).
    fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.ended.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.ended = Some(to_wit(&status));
        }
        self.ended.clone()
    }

    /// Kill the tree (if the program still runs) and reap it.
    fn end(&mut self) -> ExitStatus {
        if let Some(status) = self.exit_status() {
            // Descendants may outlive the program itself.
            if !timebox::members(self.leader, &self.marker).is_empty() {
                timebox::kill_tree(self.leader, &self.marker);
            } else {
                timebox::cgroup::release(&self.marker);
            }
            return status;
        }
        timebox::kill_tree(self.leader, &self.marker);
        let status = self.child.wait().map(|s| to_wit(&s)).unwrap_or(ExitStatus {
            exit_code: None,
            signal: Some("SIGKILL".into()),
        });
        self.ended = Some(status.clone());
        status
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.ended.is_none() && self.leader > 0 {
            // Off the async thread: a tree kill waits out a grace period.
            timebox::kill_tree_in_background(self.leader, self.marker.clone());
        }
    }
}

fn pump(mut reader: Box<dyn Read + Send>, output: &Output) {
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf) {
            // EIO is how Linux says the terminal's other end closed.
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let mut unread = output.unread.lock().expect("pty buffer poisoned");
                unread.extend_from_slice(&buf[..n]);
                if unread.len() > UNREAD_CAP {
                    let excess = unread.len() - UNREAD_CAP;
                    unread.drain(..excess);
                }
            }
        }
        output.more.notify_one();
    }
    output.eof.store(true, Ordering::SeqCst);
    output.more.notify_one();
}

fn to_wit(status: &portable_pty::ExitStatus) -> ExitStatus {
    match status.signal() {
        Some(signal) => ExitStatus {
            exit_code: None,
            signal: Some(signal.to_string()),
        },
        None => ExitStatus {
            exit_code: Some(status.exit_code() as i32),
            signal: None,
        },
    }
}

type Answer<T> = wasmtime::Result<Result<T, PtyError>>;

impl Host for CallState {
    async fn spawn(&mut self, request: SpawnRequest) -> Answer<Resource<Session>> {
        let allowed = match self.allowed_program(
            "pty",
            &request.program,
            &request.cwd,
            request.env.clone(),
        ) {
            Ok(allowed) => allowed,
            Err(e) => return Ok(Err(e.into())),
        };
        let session = match Session::start(&allowed.program, &request, &allowed.cwd, &allowed.env) {
            Ok(session) => session,
            Err(e) => return Ok(Err(e)),
        };
        tracing::debug!(plugin = %self.grants.plugin, trace_id = %self.call.trace_id,
            program = %allowed.program.display(), pid = session.leader, "pty session started");
        Ok(Ok(self.table.push(session)?))
    }
}

impl HostSession for CallState {
    async fn write(&mut self, session: Resource<Session>, data: String) -> Answer<()> {
        let session = self.table.get_mut(&session)?;
        Ok(session
            .writer
            .write_all(data.as_bytes())
            .and_then(|()| session.writer.flush())
            .map_err(|e| {
                PtyError::Invalid(format!("the program no longer reads its terminal: {e}"))
            }))
    }

    async fn read_until(
        &mut self,
        session: Resource<Session>,
        pattern: Option<String>,
        timeout_ms: u64,
    ) -> Answer<ReadResult> {
        let pattern = match pattern.as_deref().map(regex::Regex::new).transpose() {
            Ok(p) => p,
            Err(e) => return Ok(Err(PtyError::Invalid(format!("pattern: {e}")))),
        };
        let deadline = (Instant::now() + Duration::from_millis(timeout_ms)).min(self.call.deadline);
        let cancel = self.call.cancel.clone();
        let output = self.table.get(&session)?.output.clone();
        loop {
            let notified = output.more.notified();
            let ended = {
                let mut unread = output.unread.lock().expect("pty buffer poisoned");
                let text = String::from_utf8_lossy(&unread).into_owned();
                if let Some(end) = pattern
                    .as_ref()
                    .and_then(|p| p.find(&text))
                    .map(|m| m.end())
                {
                    // Keep what follows the match for the next read.
                    let consumed = text[..end].len().min(unread.len());
                    let rest = unread.split_off(consumed);
                    *unread = rest;
                    return Ok(Ok(ReadResult {
                        text: text[..end].to_string(),
                        matched: true,
                        exited: None,
                    }));
                }
                let eof = output.eof.load(Ordering::SeqCst);
                (eof || Instant::now() >= deadline).then(|| {
                    unread.clear();
                    (text, eof)
                })
            };
            if let Some((text, eof)) = ended {
                let exited = if eof {
                    self.table.get_mut(&session)?.exit_status_soon().await
                } else {
                    None
                };
                return Ok(Ok(ReadResult {
                    text,
                    matched: false,
                    exited,
                }));
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
                _ = cancel.cancelled() => {
                    let session = self.table.get_mut(&session)?;
                    tokio::task::block_in_place(|| session.end());
                    return Ok(Err(PtyError::Cancelled));
                }
            }
        }
    }

    async fn resize(&mut self, session: Resource<Session>, rows: u16, cols: u16) -> Answer<()> {
        let session = self.table.get_mut(&session)?;
        let size = PtySize {
            rows: rows.max(1),
            cols: cols.max(1),
            pixel_width: 0,
            pixel_height: 0,
        };
        Ok(session
            .master
            .resize(size)
            .map_err(|e| PtyError::Invalid(format!("resize: {e}"))))
    }

    async fn close(&mut self, session: Resource<Session>) -> wasmtime::Result<ExitStatus> {
        let session = self.table.get_mut(&session)?;
        Ok(tokio::task::block_in_place(|| session.end()))
    }

    async fn drop(&mut self, session: Resource<Session>) -> wasmtime::Result<()> {
        // Session's own Drop kills whatever still runs.
        self.table.delete(session)?;
        Ok(())
    }
}

impl Session {
    /// After end of output the child exits at once; wait briefly for it
    /// without holding up the runtime's thread.
    async fn exit_status_soon(&mut self) -> Option<ExitStatus> {
        for _ in 0..100 {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        None
    }
}
