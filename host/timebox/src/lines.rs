//! A long-lived child spoken to in lines: the plugin writes to its stdin
//! and reads its stdout a line at a time (JSON-lines protocols such as pi's
//! RPC mode). Same session + marker set-up as a timeboxed run, so stopping
//! it kills the whole tree; stderr is kept as a bounded tail.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Stream, Tail, kill_blocking, piped_command, sys};

/// Longer stdout lines are cut (the rest of the line is dropped).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// How a child ended: exit code, or the signal that killed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

pub enum LineEvent {
    Line(String),
    Timeout,
    Exited(Ended),
    Cancelled(Ended),
}

pub struct LineChild {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<Tail>>,
    tree: Arc<sys::Tree>,
    abort_input: Option<String>,
    grace: Duration,
    ended: Option<Ended>,
}

impl LineChild {
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        program: &Path,
        args: &[String],
        cwd: &Path,
        env: &[(String, String)],
        abort_input: Option<String>,
        grace: Duration,
        stderr_tail: usize,
        confinement: Option<&crate::confine::Confinement>,
    ) -> std::io::Result<LineChild> {
        let marker = super::new_marker();
        let mut command = piped_command(program, args, cwd, env, &marker)?;
        command.stdin(Stdio::piped());
        crate::confine::prepare(&mut command, confinement)?;
        let mut child = command.spawn()?;
        let tree = Arc::new(sys::Tree::adopt(&child, &marker)?);
        let (tx, lines) = mpsc::channel(256);
        tokio::spawn(read_lines(child.stdout.take().expect("piped"), tx));
        let stderr = Arc::new(Mutex::new(Tail::new(stderr_tail)));
        tokio::spawn({
            let (mut pipe, stderr) = (child.stderr.take().expect("piped"), stderr.clone());
            async move {
                let mut buf = vec![0u8; 8192];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    stderr
                        .lock()
                        .expect("stderr tail")
                        .push(Stream::Stderr, &buf[..n]);
                }
            }
        });
        Ok(LineChild {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            tree,
            abort_input,
            grace,
            ended: None,
        })
    }

    pub async fn write(&mut self, data: &str) -> std::io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin is closed")
        })?;
        stdin.write_all(data.as_bytes()).await?;
        stdin.flush().await
    }

    /// The next stdout line, or why there is none.
    pub async fn next_line(&mut self, deadline: Instant, cancel: &CancellationToken) -> LineEvent {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => LineEvent::Cancelled(self.stop().await),
            line = self.lines.recv() => match line {
                Some(line) => LineEvent::Line(line),
                None => LineEvent::Exited(self.reap().await),
            },
            _ = tokio::time::sleep_until(deadline.into()) => LineEvent::Timeout,
        }
    }

    pub fn stderr_tail(&self) -> String {
        self.stderr
            .lock()
            .expect("stderr tail")
            .chunks()
            .into_iter()
            .map(|(_, text)| text)
            .collect()
    }

    /// Ask the program to stop (`abort_input`), give it the grace period,
    /// then kill whatever of its tree is left.
    pub async fn stop(&mut self) -> Ended {
        if let Some(ended) = &self.ended {
            return ended.clone();
        }
        if let Some(abort) = self.abort_input.clone() {
            let _ = self.write(&abort).await;
        }
        self.stdin = None;
        if let Ok(status) = tokio::time::timeout(self.grace, self.child.wait()).await {
            let ended = ended_from(status.ok());
            // Descendants may outlive it.
            kill_blocking(&self.tree).await;
            self.ended = Some(ended.clone());
            return ended;
        }
        kill_blocking(&self.tree).await;
        self.reap().await
    }

    async fn reap(&mut self) -> Ended {
        if self.ended.is_none() {
            let status = self.child.wait().await.ok();
            self.ended = Some(ended_from(status));
        }
        self.ended.clone().expect("just set")
    }
}

impl Drop for LineChild {
    fn drop(&mut self) {
        if self.ended.is_some() {
            // What it held goes with it (and anything that slipped in).
            let tree = self.tree.clone();
            std::thread::spawn(move || tree.release());
            return;
        }
        // Dropped while running (the plugin is done with it, or the call
        // ended): `kill_on_drop` has the leader killed; its descendants go
        // with its tree, off the async thread.
        self.tree.kill_in_background();
    }
}

fn ended_from(status: Option<std::process::ExitStatus>) -> Ended {
    let Some(status) = status else {
        return Ended {
            code: None,
            signal: None,
        };
    };
    Ended {
        code: status.code(),
        signal: sys::signal(&status),
    }
}

/// Split stdout at `\n` only (JSON strings may hold U+2028), drop a
/// trailing `\r`, cut overlong lines.
async fn read_lines(stdout: tokio::process::ChildStdout, tx: mpsc::Sender<String>) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    loop {
        let (done, used) = match reader.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(buf) => match buf.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    append(&mut line, &buf[..i]);
                    (true, i + 1)
                }
                None => {
                    append(&mut line, buf);
                    (false, buf.len())
                }
            },
        };
        reader.consume(used);
        if done {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            line.clear();
            if tx.send(text).await.is_err() {
                return;
            }
        }
    }
    if !line.is_empty() {
        let _ = tx.send(String::from_utf8_lossy(&line).into_owned()).await;
    }
}

fn append(line: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_LINE.saturating_sub(line.len());
    line.extend_from_slice(&bytes[..bytes.len().min(room)]);
}
