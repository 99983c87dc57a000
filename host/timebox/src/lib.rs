//! Run a program so that it always comes back: hard timeout, no-output
//! timeout, cancellation, kill of the whole tree, bounded memory for its
//! output and the full output streamed to a tagged log file.
//!
//! Used by the `process` capability and, for `podman exec`, by later
//! capabilities that need the same semantics.

pub mod confine;
mod lines;
mod program;
mod run_id;
mod tail;

// The platform's process trees, chosen here and nowhere else: a session,
// a cgroup and a marker scan of /proc on Unix; a Job Object on Windows.
#[cfg(unix)]
pub mod cgroup;
pub mod pty;
#[cfg_attr(unix, path = "sys/unix.rs")]
#[cfg_attr(windows, path = "sys/windows.rs")]
mod sys;
#[cfg(unix)]
mod tree;

pub use lines::{Ended, LineChild, LineEvent};
pub use program::{
    allowed, find_host_programs, host_program, host_program_list, inside, resolve_here,
    resolve_trusted,
};
pub use run_id::{KillReport, MARKER_VAR, instance, instance_alive, new_marker};
pub use tail::{Stream, Tail};
#[cfg(unix)]
pub use tree::{carries_marker, kill_tree, marked_by, members};

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, timeout};
use tokio_util::sync::CancellationToken;

/// What to run and under which limits.
#[derive(Debug, Clone)]
pub struct Spawn {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment of the child (nothing else is inherited).
    pub env: Vec<(String, String)>,
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    pub no_output_timeout: Option<Duration>,
    pub tail_bytes: usize,
    pub log: Option<LogFile>,
    /// What the program and its tree may touch ([`confine`]); `None`: the
    /// user's rights.
    pub confine: Option<confine::Confinement>,
}

/// Where the complete output goes, and how much of it at most.
#[derive(Debug, Clone)]
pub struct LogFile {
    /// Opened by the caller (beneath a directory handle, for a plugin: the
    /// path could be a link by the time it is written).
    pub file: std::sync::Arc<std::fs::File>,
    /// For messages.
    pub path: PathBuf,
    /// Past this the log keeps its head, and the tail is appended at the
    /// end with a note of what was cut.
    pub max_bytes: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Exited,
    Timeout,
    NoOutput,
    SpawnFailed,
    Cancelled,
}

#[derive(Debug)]
pub struct Outcome {
    pub ending: Ending,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub duration: Duration,
    pub tail: Tail,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub error: Option<String>,
    /// Set when the tree had to be killed (timeout, no output, cancel, or
    /// stragglers left behind by a child that exited).
    pub kill: Option<KillReport>,
}

impl Outcome {
    /// Nothing run yet: no output, no exit, `ending` until told otherwise.
    pub fn new(ending: Ending, tail_bytes: usize) -> Outcome {
        Outcome {
            ending,
            exit_code: None,
            signal: None,
            duration: Duration::ZERO,
            tail: Tail::new(tail_bytes),
            stdout_bytes: 0,
            stderr_bytes: 0,
            error: None,
            kill: None,
        }
    }
}

/// Receives progress while a run goes on.
pub trait Progress: Send + Sync {
    fn running(&self, elapsed: Duration, output_bytes: u64);
}

const READ_CHUNK: usize = 64 * 1024;
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// After the child exits or is killed, how long to wait for its pipes.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

pub async fn run(spec: &Spawn, cancel: &CancellationToken, progress: &dyn Progress) -> Outcome {
    let start = Instant::now();
    let mut outcome = Outcome::new(Ending::SpawnFailed, spec.tail_bytes);
    let mut log = match open_log(spec).await {
        Ok(log) => log,
        Err(e) => {
            outcome.error = Some(e);
            return outcome;
        }
    };
    let marker = new_marker();
    let started = piped_command(&spec.program, &spec.args, &spec.cwd, &spec.env, &marker)
        .and_then(|mut command| {
            command.stdin(if spec.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
            confine::prepare(&mut command, spec.confine.as_ref())?;
            command.spawn()
        })
        .and_then(|child| Ok((sys::Tree::adopt(&child, &marker)?, child)));
    let (tree, mut child) = match started {
        Ok((tree, child)) => (Arc::new(tree), child),
        Err(e) => {
            outcome.error = Some(format!("cannot start {}: {e}", spec.program.display()));
            outcome.duration = start.elapsed();
            finish_log(&mut log, &mut outcome).await;
            return outcome;
        }
    };
    // If this future is dropped before the end (the host shutting down),
    // the tree still goes.
    let mut guard = TreeGuard(Some(tree.clone()));
    if let (Some(bytes), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
        tokio::spawn(async move {
            let _ = stdin.write_all(&bytes).await;
        });
    }
    let (tx, mut rx) = mpsc::channel::<(Stream, Vec<u8>)>(8);
    tokio::spawn(pump(
        child.stdout.take().expect("piped"),
        Stream::Stdout,
        tx.clone(),
    ));
    tokio::spawn(pump(
        child.stderr.take().expect("piped"),
        Stream::Stderr,
        tx,
    ));

    let deadline = tokio::time::Instant::from_std(start + spec.timeout);
    let mut last_output = tokio::time::Instant::now();
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    ticker.tick().await;
    let mut status: Option<ExitStatus> = None;
    let mut pipes_open = true;
    let mut ending = None;
    while ending.is_none() && (status.is_none() || pipes_open) {
        let silence_end = spec.no_output_timeout.map(|d| last_output + d);
        tokio::select! {
            biased;
            _ = cancel.cancelled() => ending = Some(Ending::Cancelled),
            _ = sleep_until(deadline) => ending = Some(Ending::Timeout),
            _ = sleep_until(silence_end.unwrap_or(deadline)), if silence_end.is_some() => ending = Some(Ending::NoOutput),
            chunk = rx.recv(), if pipes_open => match chunk {
                Some((stream, data)) => {
                    last_output = tokio::time::Instant::now();
                    record(&mut outcome, &mut log, stream, &data).await;
                }
                None => pipes_open = false,
            },
            exit = child.wait(), if status.is_none() => {
                status = exit.ok();
                // The child is gone but something still holds its pipes:
                // descendants left running. They do not outlive the run.
                if pipes_open {
                    outcome.kill = Some(kill_blocking(&tree).await);
                }
            }
            _ = ticker.tick() => progress.running(start.elapsed(), outcome.stdout_bytes + outcome.stderr_bytes),
        }
    }
    if let Some(ending) = ending {
        outcome.kill = Some(kill_blocking(&tree).await);
        outcome.ending = ending;
        status = child.wait().await.ok();
        // Keep what the killed tree had already written.
        let _ = timeout(DRAIN_LIMIT, async {
            while let Some((stream, data)) = rx.recv().await {
                record(&mut outcome, &mut log, stream, &data).await;
            }
        })
        .await;
    } else {
        outcome.ending = Ending::Exited;
        // Background descendants that closed their pipes but live on.
        if tree.has_members() {
            outcome.kill = Some(kill_blocking(&tree).await);
        } else {
            tree.release();
        }
    }
    if let Some(status) = status {
        outcome.exit_code = status.code();
        outcome.signal = sys::signal(&status);
    }
    outcome.duration = start.elapsed();
    guard.0 = None;
    finish_log(&mut log, &mut outcome).await;
    outcome
}

/// Kills a run's tree (off the async thread) unless the run got to its end.
struct TreeGuard(Option<Arc<sys::Tree>>);

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if let Some(tree) = self.0.take() {
            tree.kill_in_background();
        }
    }
}

/// The command for a run's child: exactly `env` plus the run's marker,
/// stdout and stderr piped, the leader killed if the handle is dropped,
/// started as the platform starts a tree ([`sys::prepare`]).
fn piped_command(
    program: &std::path::Path,
    args: &[String],
    cwd: &std::path::Path,
    env: &[(String, String)],
    marker: &str,
) -> std::io::Result<tokio::process::Command> {
    sys::check_args(program, args)?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env(MARKER_VAR, marker)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    sys::prepare(&mut command, marker);
    Ok(command)
}

async fn kill_blocking(tree: &Arc<sys::Tree>) -> KillReport {
    let tree = tree.clone();
    tokio::task::spawn_blocking(move || tree.kill())
        .await
        .unwrap_or_default()
}

async fn pump(
    mut pipe: impl AsyncRead + Unpin,
    stream: Stream,
    tx: mpsc::Sender<(Stream, Vec<u8>)>,
) {
    let mut buf = vec![0u8; READ_CHUNK];
    while let Ok(n) = pipe.read(&mut buf).await {
        if n == 0 || tx.send((stream, buf[..n].to_vec())).await.is_err() {
            break;
        }
    }
}

async fn record(outcome: &mut Outcome, log: &mut Option<TaggedLog>, stream: Stream, data: &[u8]) {
    match stream {
        Stream::Stdout => outcome.stdout_bytes += data.len() as u64,
        Stream::Stderr => outcome.stderr_bytes += data.len() as u64,
    }
    outcome.tail.push(stream, data);
    if let Some(log) = log {
        log.write(stream, data).await;
    }
}

async fn open_log(spec: &Spawn) -> Result<Option<TaggedLog>, String> {
    let Some(log) = &spec.log else {
        return Ok(None);
    };
    let path = &log.path;
    let file = log
        .file
        .try_clone()
        .map(tokio::fs::File::from_std)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(Some(TaggedLog {
        out: BufWriter::with_capacity(256 * 1024, file),
        path: path.clone(),
        open_line: None,
        failed: None,
        written: 0,
        max_bytes: log.max_bytes,
        cut: 0,
    }))
}

/// Close the log; a log that could not be written is the run's error
/// (unless it already has one), so no one takes it for complete.
async fn finish_log(log: &mut Option<TaggedLog>, outcome: &mut Outcome) {
    if let Some(log) = log {
        log.finish(outcome).await;
        if let Some(why) = &log.failed
            && outcome.error.is_none()
        {
            outcome.error = Some(format!(
                "the log {} is incomplete: writing it failed ({why})",
                log.path.display()
            ));
        }
    }
}

/// The full output, each line prefixed with the stream it came from, up
/// to a size cap.
struct TaggedLog {
    out: BufWriter<tokio::fs::File>,
    path: PathBuf,
    /// The stream whose line is not finished yet.
    open_line: Option<Stream>,
    /// Why writing stopped, if it did.
    failed: Option<String>,
    written: u64,
    max_bytes: u64,
    /// Bytes of output not logged since the cap was reached.
    cut: u64,
}

impl TaggedLog {
    async fn write(&mut self, stream: Stream, data: &[u8]) {
        let mut buf = Vec::with_capacity(data.len() + 64);
        if self.open_line.is_some_and(|s| s != stream) {
            buf.push(b'\n');
            self.open_line = None;
        }
        for piece in data.split_inclusive(|b| *b == b'\n') {
            if self.open_line.is_none() {
                buf.extend_from_slice(if stream == Stream::Stdout {
                    b"[stdout] "
                } else {
                    b"[stderr] "
                });
            }
            buf.extend_from_slice(piece);
            self.open_line = if piece.ends_with(b"\n") {
                None
            } else {
                Some(stream)
            };
        }
        let room = self.max_bytes.saturating_sub(self.written) as usize;
        if buf.len() > room {
            self.cut += (buf.len() - room) as u64;
            buf.truncate(room);
        }
        self.written += buf.len() as u64;
        self.put(&buf).await;
    }

    async fn finish(&mut self, outcome: &Outcome) {
        let mut end = String::new();
        if self.open_line.take().is_some() || self.cut > 0 {
            end.push('\n');
        }
        if self.cut > 0 {
            // The head is in the file; the run's tail shows how it ended.
            end.push_str(&format!(
                "[host] the log reached its cap of {} bytes: {} bytes were not written here; the last output follows\n",
                self.max_bytes, self.cut
            ));
            for (stream, text) in outcome.tail.chunks() {
                let tag = if stream == Stream::Stdout {
                    "[stdout] "
                } else {
                    "[stderr] "
                };
                for line in text.split_inclusive('\n') {
                    end.push_str(tag);
                    end.push_str(line);
                }
            }
            if !end.ends_with('\n') {
                end.push('\n');
            }
        }
        end.push_str(&format!(
            "[host] ended: {:?}, exit code {:?}, signal {:?}, {} ms{}\n",
            outcome.ending,
            outcome.exit_code,
            outcome.signal,
            outcome.duration.as_millis(),
            outcome
                .error
                .as_deref()
                .map(|e| format!(", {e}"))
                .unwrap_or_default()
        ));
        self.put(end.as_bytes()).await;
        if self.failed.is_none()
            && let Err(e) = self.out.flush().await
        {
            self.failed = Some(e.to_string());
        }
    }

    async fn put(&mut self, bytes: &[u8]) {
        if self.failed.is_none()
            && let Err(e) = self.out.write_all(bytes).await
        {
            tracing::warn!(error = %e, "writing the run's log file failed; the log stops here");
            self.failed = Some(e.to_string());
        }
    }
}
