//! A program on a pseudo-terminal (portable-pty) whose whole tree ends
//! with the session.
//!
//! A reader thread moves the terminal's output into a buffer that
//! [`Session::read_until`] matches a regular expression against. The
//! child is a session leader (portable-pty calls `setsid`), carries the
//! run marker and joins the run's cgroup, so closing or dropping the
//! session kills its whole tree with [`crate::kill_tree`], re-parented
//! descendants included.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};
use regex::Regex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::MARKER_VAR;

/// Output not yet read is capped: a program that floods its terminal
/// cannot grow host memory without bound (the oldest bytes go first).
const UNREAD_CAP: usize = 1024 * 1024;

/// How a terminal program ended: its exit code, or the signal's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<String>,
}

/// Why a session could not start.
#[derive(Debug)]
pub enum StartError {
    /// No pseudo-terminal could be opened or used.
    TtyUnavailable(String),
    /// The program (or the reader thread) could not be started.
    SpawnFailed(String),
}

/// What a [`Session::read_until`] found.
pub enum Read {
    /// The pattern matched: the output up to the end of the match.
    Matched(String),
    /// Everything read at the deadline, or at the end of the output (then
    /// with the exit status, when the program was reaped in time).
    Ended { text: String, exited: Option<Exit> },
    /// The call was cancelled; the session's tree was killed.
    Cancelled,
}

/// What to start on a terminal: `env` is the whole environment (plus
/// `TERM`, which it may override).
pub struct Program<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub cwd: &'a Path,
    pub env: &'a [(String, String)],
    pub rows: u16,
    pub cols: u16,
    /// What the program and its tree may touch; `None`: the user's rights.
    pub confine: Option<&'a crate::confine::Confinement>,
}

/// One program on one pseudo-terminal.
pub struct Session {
    output: Arc<Output>,
    writer: Box<dyn Write + Send>,
    master: Box<dyn MasterPty + Send>,
    child: Box<dyn Child + Send + Sync>,
    leader: i32,
    tree: crate::sys::Tree,
    ended: Option<Exit>,
}

#[derive(Default)]
struct Output {
    unread: Mutex<Vec<u8>>,
    eof: AtomicBool,
    more: Notify,
}

fn size(rows: u16, cols: u16) -> PtySize {
    PtySize {
        rows: rows.max(1),
        cols: cols.max(1),
        pixel_width: 0,
        pixel_height: 0,
    }
}

/// portable-pty words an OS error with Rust's debug form (`failed to
/// openpty: Os { code: 2, kind: NotFound, message: "No such file or
/// directory" }`): a person reads `failed to openpty: No such file or
/// directory (os error 2)`.
fn plain_os_error(text: &str) -> String {
    let Some(start) = text.find("Os { code: ") else {
        return text.to_string();
    };
    let rest = &text[start + "Os { code: ".len()..];
    let code: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let message = rest
        .split_once("message: \"")
        .and_then(|(_, m)| m.split_once("\" }"));
    match message {
        Some((message, after)) => format!("{}{message} (os error {code}){after}", &text[..start]),
        None => text.to_string(),
    }
}

impl Session {
    pub fn start(p: Program<'_>) -> Result<Session, StartError> {
        let pair = native_pty_system()
            .openpty(size(p.rows, p.cols))
            .map_err(|e| {
                StartError::TtyUnavailable(format!(
                    "no pseudo-terminal could be opened: {}",
                    plain_os_error(&e.to_string())
                ))
            })?;
        crate::sys::check_args(p.program, p.args)
            .map_err(|e| StartError::SpawnFailed(e.to_string()))?;
        let marker = crate::new_marker();
        let mut command = CommandBuilder::new(p.program);
        command.args(p.args);
        command.cwd(p.cwd);
        command.env_clear();
        command.env("TERM", "xterm-256color");
        for (key, value) in p.env {
            command.env(key, value);
        }
        command.env(MARKER_VAR, &marker);
        let slave = pair.slave;
        let (child, slave) = crate::confine::start(p.confine, move || {
            let child = slave
                .spawn_command(command)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            Ok((child, slave))
        })
        .map_err(|e| {
            StartError::SpawnFailed(format!("cannot start {}: {e}", p.program.display()))
        })?;
        // Our copy of the terminal's other end would keep the reader from
        // ever seeing the end of the output.
        drop(slave);
        let leader = child.process_id().map(|p| p as i32).unwrap_or(-1);
        // portable-pty has no hook before exec: the leader joins the run's
        // cgroup right after it starts, before a shell gets to fork.
        let tree = crate::sys::Tree::of_pid(leader, &marker).map_err(|e| {
            StartError::SpawnFailed(format!("cannot contain {}: {e}", p.program.display()))
        })?;
        let reader = pair
            .master
            .try_clone_reader()
            .map_err(|e| StartError::TtyUnavailable(format!("cannot read the terminal: {e}")))?;
        let writer = pair.master.take_writer().map_err(|e| {
            StartError::TtyUnavailable(format!("cannot write to the terminal: {e}"))
        })?;
        let output = Arc::new(Output::default());
        std::thread::Builder::new()
            .name("pty-reader".into())
            .spawn({
                let output = output.clone();
                move || pump(reader, &output)
            })
            .map_err(|e| StartError::SpawnFailed(format!("cannot start the reader thread: {e}")))?;
        Ok(Session {
            output,
            writer,
            master: pair.master,
            child,
            leader,
            tree,
            ended: None,
        })
    }

    /// The process id of the program (the session leader).
    pub fn leader(&self) -> i32 {
        self.leader
    }

    /// Send keystrokes.
    pub fn write(&mut self, data: &str) -> std::io::Result<()> {
        self.writer.write_all(data.as_bytes())?;
        self.writer.flush()
    }

    pub fn resize(&mut self, rows: u16, cols: u16) -> Result<(), String> {
        self.master
            .resize(size(rows, cols))
            .map_err(|e| e.to_string())
    }

    /// Read until `pattern` matches the output not yet returned, the
    /// output ends, `deadline` passes or `cancel` fires (which kills the
    /// tree).
    pub async fn read_until(
        &mut self,
        pattern: Option<&Regex>,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Read {
        let output = self.output.clone();
        loop {
            let notified = output.more.notified();
            let ended = {
                let mut unread = output.unread.lock().expect("pty buffer poisoned");
                let text = String::from_utf8_lossy(&unread).into_owned();
                if let Some(end) = pattern.and_then(|p| p.find(&text)).map(|m| m.end()) {
                    // Keep what follows the match for the next read.
                    let consumed = text[..end].len().min(unread.len());
                    let rest = unread.split_off(consumed);
                    *unread = rest;
                    return Read::Matched(text[..end].to_string());
                }
                let eof = output.eof.load(Ordering::SeqCst);
                (eof || Instant::now() >= deadline).then(|| {
                    unread.clear();
                    (text, eof)
                })
            };
            if let Some((text, eof)) = ended {
                let exited = if eof {
                    self.exit_status_soon().await
                } else {
                    None
                };
                return Read::Ended { text, exited };
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
                _ = cancel.cancelled() => {
                    tokio::task::block_in_place(|| self.end());
                    return Read::Cancelled;
                }
            }
        }
    }

    /// The exit status once the child is gone (reaped without blocking).
    fn exit_status(&mut self) -> Option<Exit> {
        if self.ended.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.ended = Some(exit(&status));
        }
        self.ended.clone()
    }

    /// After end of output the child exits at once; wait briefly for it
    /// without holding up the runtime's thread.
    async fn exit_status_soon(&mut self) -> Option<Exit> {
        for _ in 0..100 {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        None
    }

    /// Kill the tree (if the program still runs) and reap it. Blocks for
    /// the kill's grace period: call it off the async threads.
    pub fn end(&mut self) -> Exit {
        if let Some(status) = self.exit_status() {
            // Descendants may outlive the program itself.
            if self.tree.has_members() {
                self.tree.kill();
            } else {
                self.tree.release();
            }
            return status;
        }
        self.tree.kill();
        let status = self.child.wait().map(|s| exit(&s)).unwrap_or(Exit {
            code: None,
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
            self.tree.kill_in_background();
        }
    }
}

fn pump(mut reader: Box<dyn std::io::Read + Send>, output: &Output) {
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

fn exit(status: &portable_pty::ExitStatus) -> Exit {
    match status.signal() {
        Some(signal) => Exit {
            code: None,
            signal: Some(signal.to_string()),
        },
        None => Exit {
            code: Some(status.exit_code() as i32),
            signal: None,
        },
    }
}

#[cfg(test)]
mod words {
    #[test]
    fn an_os_error_in_debug_form_is_put_in_words() {
        assert_eq!(
            super::plain_os_error(
                "failed to openpty: Os { code: 2, kind: NotFound, message: \"No such file or directory\" }"
            ),
            "failed to openpty: No such file or directory (os error 2)"
        );
        assert_eq!(super::plain_os_error("plain words"), "plain words");
    }
}
