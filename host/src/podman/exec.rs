//! `exec` through Podman's API, the call every command of an environment
//! makes: one HTTP exchange on a socket instead of a `podman` process,
//! measured 137 ms against 320 ms for `podman exec` on the same machine.
//!
//! An exec runs under the same rules as a timeboxed process: hard and
//! no-output timeouts, cancellation, the tail, progress. Its processes
//! carry the run's marker, so on any abnormal end the whole tree inside the
//! container is killed by the /proc scan ([`timebox::kill_tree`]); on an
//! engine on another machine, whose processes this machine's /proc does
//! not show, by the same scan run inside the container ([`kill_inside`]),
//! where the scan for what a command left running also follows it in its
//! own exec ([`super::framed`]). When it has ended, the two `conmon`
//! processes Podman keeps for the session (to run its cleanup five minutes
//! later) are ended too: otherwise every command left them behind until
//! the environment was destroyed.

use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::time::sleep_until;
use tokio_util::sync::CancellationToken;

use super::framed::{Frame, SHELL_VAR};
pub use super::sweep::Then;
use super::sweep::{SWEEP, read_sweep};
use super::{PodmanError, failed, service};
use timebox::{Ending, KillReport, MARKER_VAR, Outcome, Progress, Stream};

/// What one exec runs, and under which limits.
pub struct ExecSpec {
    pub argv: Vec<String>,
    pub workdir: Option<String>,
    /// `KEY=value` entries (the run's marker is added here).
    pub env: Vec<String>,
    pub stdin: Option<Input>,
    /// The user it runs as (the container's own when `None`).
    pub user: Option<String>,
    pub timeout: Duration,
    pub no_output_timeout: Option<Duration>,
    pub tail_bytes: usize,
    /// The engine's URL when its processes are not this machine's (its
    /// /proc does not show them): the tree is then found and killed inside
    /// the container.
    pub remote: Option<String>,
    /// Whether to look, once it has ended well, for processes it left
    /// running (a user's `cmd &`); on another machine's engine in the
    /// command's own exec ([`super::framed`]). The host's own short
    /// commands need not.
    pub sweep: bool,
    /// On another machine's engine, a script run after the sweep in the
    /// same exec. Its stdout comes back in [`Ran::then`].
    pub then: Option<Then>,
}

/// Progress nobody is shown (the host's own short commands).
pub struct Quiet;
impl Progress for Quiet {
    fn running(&self, _: Duration, _: u64) {}
}

/// What an exec reads on its stdin.
pub enum Input {
    Bytes(Vec<u8>),
    /// Read as it is sent (a folder's tar: never whole in memory).
    Stream(Box<dyn tokio::io::AsyncRead + Send + Sync + Unpin>),
}

/// An exec's outcome, and what its [`Then`] printed (`None` when it did
/// not run: the command did not end well, or the engine is this
/// machine's, or the output was too long).
pub struct Ran {
    pub outcome: Outcome,
    pub then: Option<String>,
}

const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// After the tree was killed, how long to wait for the rest of its output.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Run `spec` in `container` through the API, timeboxed.
pub async fn exec(
    docker: Docker,
    container: &str,
    mut spec: ExecSpec,
    cancel: &CancellationToken,
    progress: &dyn Progress,
) -> Result<Ran, PodmanError> {
    // On another machine's engine the sweep (and `then`) come in the
    // command's own exec ([`framed`]), unless the image has no `sh`: that
    // try is then run again plainly, so its stdin must be there twice (an
    // exec fed a stream is not framed).
    let stdin = spec.stdin.take();
    let framable = spec.remote.is_some() && spec.sweep && !matches!(stdin, Some(Input::Stream(_)));
    if framable {
        let copy = match &stdin {
            Some(Input::Bytes(bytes)) => Some(Input::Bytes(bytes.clone())),
            _ => None,
        };
        let frame = Frame::new(spec.then.as_ref());
        match run(
            docker.clone(),
            container,
            &spec,
            copy,
            Some(frame),
            cancel,
            progress,
        )
        .await?
        {
            Some(ran) => return Ok(ran),
            None => tracing::debug!(
                container,
                "no sh in the container to frame the command: it runs on its own, its sweep after it"
            ),
        }
    }
    let ran = run(docker, container, &spec, stdin, None, cancel, progress).await?;
    Ok(ran.expect("only a framed run can find no sh"))
}

/// [`exec`], the command framed or not; `None` when the frame's `sh` did
/// not run (nothing of the command did either).
async fn run(
    docker: Docker,
    container: &str,
    spec: &ExecSpec,
    stdin: Option<Input>,
    mut frame: Option<Frame>,
    cancel: &CancellationToken,
    progress: &dyn Progress,
) -> Result<Option<Ran>, PodmanError> {
    let what = format!("exec in {container}");
    let start = Instant::now();
    let marker = timebox::new_marker();
    let mut env = spec.env.clone();
    let argv = match &frame {
        Some(frame) => {
            env.push(format!("{SHELL_VAR}={marker}"));
            frame.argv(&spec.argv, &marker)
        }
        None => {
            env.push(format!("{MARKER_VAR}={marker}"));
            spec.argv.clone()
        }
    };
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                attach_stdin: Some(stdin.is_some()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                tty: Some(false),
                env: Some(env),
                cmd: Some(argv),
                working_dir: spec.workdir.clone(),
                user: spec.user.clone(),
                ..Default::default()
            },
        )
        .await;
    let session = created.map_err(failed(&what))?.id;
    let started = docker
        .start_exec(&session, None)
        .await
        .map_err(failed(&what))?;
    let StartExecResults::Attached { mut output, input } = started else {
        return Err(PodmanError::Failed(format!(
            "{what}: the session did not attach"
        )));
    };
    // The exec's own pid: the tree to kill is led by it, if it is a
    // process of this machine (never so for an engine elsewhere: not asked).
    let leader = match spec.remote {
        Some(_) => None,
        None => docker
            .inspect_exec(&session)
            .await
            .ok()
            .and_then(|i| i.pid)
            .map(|pid| pid as i32)
            .filter(|pid| *pid > 0 && crate::platform::carries_marker(*pid, &marker)),
    };
    let tree = Tree {
        docker: docker.clone(),
        container: container.to_string(),
        leader,
        local: spec.remote.is_none() && crate::platform::SEES_ENGINE_PROCESSES,
    };
    // Should the host die mid-run, its watchdog kills the run there.
    let in_flight = spec
        .remote
        .as_deref()
        .and_then(|url| InFlight::record(url, container, &marker));
    let mut guard = Guard {
        tree: tree.clone(),
        marker: Some(marker.clone()),
    };
    // Fed beside the output loop: a command that writes while it reads
    // must not wait for us.
    let mut input = Some(input);
    let feeding = stdin.map(|stdin| {
        let mut input = input.take().expect("not taken yet");
        tokio::spawn(async move {
            let _ = match stdin {
                Input::Bytes(bytes) => input.write_all(&bytes).await,
                Input::Stream(mut reader) => {
                    tokio::io::copy(&mut reader, &mut input).await.map(drop)
                }
            };
            let _ = input.shutdown().await;
        })
    });

    let mut outcome = Outcome::new(Ending::Exited, spec.tail_bytes);
    // The command's time starts when it does, not while Podman sets up the
    // session (slow on a loaded machine, or the first exec on a new service).
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let mut last_output = tokio::time::Instant::now();
    let mut ticker = tokio::time::interval(PROGRESS_EVERY);
    ticker.tick().await;
    let mut ending = None;
    // Once a framed command has ended, the time its sweep may take.
    let mut sweeping = None;
    let mut overran = false;
    loop {
        let silence_end = spec
            .no_output_timeout
            .filter(|_| sweeping.is_none())
            .map(|d| last_output + d);
        tokio::select! {
            biased;
            _ = cancel.cancelled() => { ending = Some(Ending::Cancelled); break; }
            _ = sleep_until(sweeping.unwrap_or(deadline)) => {
                match sweeping {
                    Some(_) => overran = true,
                    None => ending = Some(Ending::Timeout),
                }
                break;
            }
            _ = sleep_until(silence_end.unwrap_or(deadline)), if silence_end.is_some() => {
                ending = Some(Ending::NoOutput);
                break;
            }
            chunk = output.next() => match chunk {
                Some(Ok(chunk)) => {
                    last_output = tokio::time::Instant::now();
                    record(&mut outcome, frame.as_mut(), chunk);
                    if sweeping.is_none() && frame.as_ref().is_some_and(Frame::closed) {
                        let then = spec.then.as_ref().map_or(Duration::ZERO, |t| t.timeout);
                        sweeping = Some(tokio::time::Instant::now() + KILL_INSIDE_LIMIT + then);
                    }
                }
                // The service going away ends the stream too; the exit
                // code below tells.
                Some(Err(_)) => break,
                None => break,
            },
            _ = ticker.tick() => progress.running(start.elapsed(), outcome.stdout_bytes + outcome.stderr_bytes),
        }
    }
    if let Some(ending) = ending {
        outcome.kill = Some(tree.kill(&marker).await);
        outcome.ending = ending;
        // Keep what the killed tree had already written.
        let _ = tokio::time::timeout(DRAIN_LIMIT, async {
            while let Some(Ok(chunk)) = output.next().await {
                record(&mut outcome, frame.as_mut(), chunk);
            }
        })
        .await;
    }
    if overran {
        // The command ended well; what hangs is the frame's sweep.
        tree.kill(&marker).await;
    }
    if let Some(frame) = &mut frame {
        outcome.tail.push(Stream::Stdout, &frame.finish());
    }
    drop(input);
    if let Some(feeding) = feeding {
        feeding.abort();
    }
    match exit_code(&docker, &session).await {
        Ok(code) => outcome.exit_code = code,
        // Podman's service went away mid-run: the command's fate is
        // unknown, so its tree goes, and the next exec connects again.
        Err(e) if ending.is_none() => {
            outcome.error = Some(format!(
                "{what}: Podman's service stopped answering during the command ({e}); its processes were killed"
            ));
            outcome.ending = Ending::SpawnFailed;
            outcome.kill = Some(tree.kill(&marker).await);
            ending = Some(Ending::SpawnFailed);
            service::lost();
        }
        Err(_) => {}
    }
    let framed = frame.as_ref().filter(|f| f.started());
    if let Some(status) = framed.and_then(Frame::status) {
        outcome.exit_code = Some(status);
    }
    // Not even the opening token, and the status of a program not found:
    // the frame's `sh` never ran, so nothing of the command did.
    let no_shell = frame.as_ref().is_some_and(Frame::silent)
        && ending.is_none()
        && matches!(outcome.exit_code, Some(126 | 127));
    // Background descendants that closed their output but live on (`cmd
    // &`, `setsid`), found by the marker they carry: the leader may have
    // been gone before its pid was known. A framed command's were swept
    // in its exec.
    let mut then = None;
    if ending.is_none() && spec.sweep && !no_shell {
        let report = match framed.and_then(Frame::sweep).filter(|_| !overran) {
            Some((report, printed)) => {
                then = printed.filter(|_| spec.then.is_some());
                report
            }
            None => tree.kill(&marker).await,
        };
        outcome.kill = (report.killed > 0).then_some(report);
    }
    guard.marker = None;
    drop(in_flight);
    let _ = tokio::task::spawn_blocking(move || reap_session(&session)).await;
    if no_shell {
        return Ok(None);
    }
    outcome.duration = start.elapsed();
    Ok(Some(Ran { outcome, then }))
}

fn record(outcome: &mut Outcome, frame: Option<&mut Frame>, chunk: LogOutput) {
    let (stream, bytes) = match chunk {
        LogOutput::StdErr { message } => (Stream::Stderr, message),
        LogOutput::StdOut { message } | LogOutput::Console { message } => match frame {
            Some(frame) => (Stream::Stdout, frame.stdout(&message).into()),
            None => (Stream::Stdout, message),
        },
        LogOutput::StdIn { .. } => return,
    };
    match stream {
        Stream::Stdout => outcome.stdout_bytes += bytes.len() as u64,
        Stream::Stderr => outcome.stderr_bytes += bytes.len() as u64,
    }
    outcome.tail.push(stream, &bytes);
}

/// The session's exit code, once Podman has it (it may take a moment after
/// the stream ends); an error when the service does not answer.
async fn exit_code(docker: &Docker, session: &str) -> Result<Option<i32>, bollard::errors::Error> {
    for _ in 0..100 {
        let info = docker.inspect_exec(session).await?;
        if info.running != Some(true) {
            return Ok(info.exit_code.map(|c| c as i32));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(None)
}

/// Where a run's processes are: led by the exec's process when Podman
/// told us its pid, and every process carrying the run's marker.
#[derive(Clone)]
struct Tree {
    docker: Docker,
    container: String,
    leader: Option<i32>,
    local: bool,
}

impl Tree {
    async fn kill(&self, marker: &str) -> KillReport {
        if !self.local {
            return kill_inside(&self.docker, &self.container, marker).await;
        }
        let marker = marker.to_string();
        // Without a leader only the marker finds the tree: a pid that
        // cannot exist leads nothing (and never our own group, as 0 would).
        let leader = self.leader.unwrap_or(i32::MAX);
        tokio::task::spawn_blocking(move || crate::platform::kill_tree(leader, &marker))
            .await
            .unwrap_or_default()
    }
}

/// How long the in-container kill may take (its grace is 200 ms).
const KILL_INSIDE_LIMIT: Duration = Duration::from_secs(10);

/// Kill the run's tree in `container` by its marker (a framed command's
/// script with it); what was killed.
pub async fn kill_inside(docker: &Docker, container: &str, marker: &str) -> KillReport {
    let cmd = vec![
        "sh".to_string(),
        "-c".into(),
        format!("m=$1 w=$2\n{SWEEP}"),
        "sh".into(),
        format!("{MARKER_VAR}={marker}"),
        format!("{SHELL_VAR}={marker}"),
    ];
    let run = async {
        let created = docker
            .create_exec(
                container,
                CreateExecOptions {
                    attach_stdout: Some(true),
                    attach_stderr: Some(true),
                    cmd: Some(cmd),
                    ..Default::default()
                },
            )
            .await
            .ok()?;
        let StartExecResults::Attached { mut output, .. } =
            docker.start_exec(&created.id, None).await.ok()?
        else {
            return None;
        };
        let mut said = Vec::new();
        while let Some(Ok(chunk)) = output.next().await {
            if let LogOutput::StdOut { message } = chunk {
                said.extend_from_slice(&message[..message.len().min(64)]);
            }
        }
        Some(read_sweep(&String::from_utf8_lossy(&said))?.0)
    };
    match tokio::time::timeout(KILL_INSIDE_LIMIT, run).await {
        Ok(Some(report)) => report,
        _ => {
            tracing::warn!(
                container,
                "could not end a run's processes inside the container"
            );
            KillReport::default()
        }
    }
}

/// A run on another machine's engine, recorded for the host's watchdog
/// (a file named by its marker in [`in_flight_dir`]: the engine's URL,
/// the container, and the host's ssh for an ssh engine); removed when the
/// run has ended.
struct InFlight(std::path::PathBuf);

impl InFlight {
    fn record(url: &str, container: &str, marker: &str) -> Option<InFlight> {
        let dir = in_flight_dir(timebox::instance());
        std::fs::create_dir_all(&dir).ok()?;
        let file = dir.join(marker);
        // The watchdog finds no program as the host does: ssh goes along.
        let ssh = url
            .starts_with("ssh://")
            .then(|| timebox::host_program("ssh"))
            .flatten()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        std::fs::write(&file, format!("{url}\n{container}\n{ssh}\n")).ok()?;
        Some(InFlight(file))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where the host instance `instance` records its runs on other machines'
/// engines.
pub fn in_flight_dir(instance: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mcp-host-remote-runs-{instance}"))
}

/// The engine at `url`, a record's: over ssh when it says `ssh://`.
async fn reconnect(
    url: &str,
    ssh: Option<&std::path::Path>,
    nth: usize,
) -> Result<Docker, PodmanError> {
    if !url.starts_with("ssh://") {
        return super::connect::connect(url).await;
    }
    let target = crate::policy::SshTarget::from_record(url).map_err(PodmanError::Unavailable)?;
    let remote = crate::policy::RemoteEngine {
        // Short (the tunnel's socket path must fit a unix address), and
        // no engine's name (a `.` is not allowed in one).
        name: format!("left.{nth}"),
        url: url.to_string(),
        address: target.host.clone(),
        ssh: Some(target.clone()),
    };
    super::ssh::connect_with(&remote, &target, ssh).await
}

/// Kill the runs recorded in `dir` (a host that is gone left them) on
/// their engines, and remove the records; how many runs were there.
pub async fn end_in_flight(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut ended = 0;
    for entry in entries.flatten() {
        let marker = entry.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let mut lines = text.lines();
        if let (Some(url), Some(container)) = (lines.next(), lines.next()) {
            let ssh = lines
                .next()
                .filter(|p| !p.is_empty())
                .map(std::path::Path::new);
            match reconnect(url, ssh, ended).await {
                Ok(docker) => {
                    kill_inside(&docker, container, &marker).await;
                    ended += 1;
                }
                // The watchdog's words go to the host's stderr.
                Err(e) => eprintln!(
                    "mcp-host watchdog: cannot reach the engine of a run left on {container} to end it: {e}"
                ),
            }
        }
        let _ = std::fs::remove_file(entry.path());
    }
    let _ = std::fs::remove_dir(dir);
    // Only the tunnels opened here: a serving host's own keep working.
    for nth in 0..=ended {
        super::ssh::close(&format!("left.{nth}"));
    }
    ended
}

/// Kills the run's tree if the exec future is dropped before its end.
struct Guard {
    tree: Tree,
    marker: Option<String>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let Some(marker) = self.marker.take() else {
            return;
        };
        if self.tree.local {
            let leader = self.tree.leader.unwrap_or(i32::MAX);
            std::thread::spawn(move || crate::platform::kill_tree(leader, &marker));
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let tree = self.tree.clone();
            runtime.spawn(async move { tree.kill(&marker).await });
        }
    }
}

/// End the `conmon` processes Podman keeps for an ended exec session.
fn reap_session(session: &str) {
    for pid in crate::platform::processes_naming(&[session]) {
        crate::platform::kill_process(pid);
    }
}
