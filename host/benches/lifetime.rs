//! How fast nothing is left when the host goes away:
//! `cargo bench -p host --bench lifetime` (after scripts/build-plugins;
//! needs npm and setsid). 20 rounds each of
//!
//! - SIGTERM to the host during a run_test whose tree hangs → the host has
//!   exited (graceful shutdown: calls cancelled, trees killed);
//! - SIGKILL to the host during the same run → the last process of the
//!   tree is gone (the watchdog's work);
//! - SIGINT to an idle host → it has exited, with stdin and stdout as
//!   pipes, as a socket (how Claude Code and Gemini CLI start servers) and
//!   as a pseudo-terminal.
//!
//! The tree: a grandchild in its own session, a double-forked daemon, one
//! that also cleared its environment, and the test's own `sleep`.

mod common;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{ms, percentile};
use harness::{Env, handshake, process_gone, run_test_args, serve_raw};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::json;
use tokio::io::AsyncWriteExt;

const ROUNDS: usize = 20;

const TREE: &str = "setsid sh -c 'echo $$ > a.pid; exec sleep 4701' & \
    (sh -c 'echo $$ > b.pid; exec sleep 4702' &) ; \
    setsid env -i sh -c 'echo $$ > c.pid; exec sleep 4703' & \
    echo $$ > d.pid; sleep 4704";

/// A host in the middle of the run; its process and the tree's pids.
async fn hanging_run(env: &Env) -> (tokio::process::Child, Vec<i32>) {
    for f in ["a.pid", "b.pid", "c.pid", "d.pid"] {
        let _ = std::fs::remove_file(env.workspace.join(f));
    }
    let mut host = serve_raw(env, Stdio::null());
    let mut stdin = host.stdin.take().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_test", "arguments": run_test_args("npm", json!({"timeout_ms": 600_000}))}});
    stdin
        .write_all(format!("{}{call}\n", handshake()).as_bytes())
        .await
        .unwrap();
    // Kept open: the host must not see the end of its input.
    std::mem::forget(stdin);
    let pids = loop {
        let pids: Vec<i32> = ["a.pid", "b.pid", "c.pid", "d.pid"]
            .iter()
            .filter_map(|f| {
                std::fs::read_to_string(env.workspace.join(f))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect();
        if pids.len() == 4 {
            break pids;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    (host, pids)
}

async fn all_gone(pids: &[i32]) {
    while !pids.iter().all(|p| process_gone(*p)) {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::main]
async fn main() {
    let env = Env::new(&["run_test"], "");
    std::fs::write(
        env.workspace.join("package.json"),
        json!({"name": "p", "version": "1.0.0", "scripts": {"test": TREE}}).to_string(),
    )
    .unwrap();
    let mut exited = Vec::new();
    let mut gone_after_term = Vec::new();
    for _ in 0..ROUNDS {
        let (mut host, pids) = hanging_run(&env).await;
        let start = Instant::now();
        kill(Pid::from_raw(host.id().unwrap() as i32), Signal::SIGTERM).unwrap();
        host.wait().await.unwrap();
        exited.push(start.elapsed());
        all_gone(&pids).await;
        gone_after_term.push(start.elapsed());
    }
    let mut gone_after_kill = Vec::new();
    for _ in 0..ROUNDS {
        let (mut host, pids) = hanging_run(&env).await;
        let start = Instant::now();
        kill(Pid::from_raw(host.id().unwrap() as i32), Signal::SIGKILL).unwrap();
        host.wait().await.unwrap();
        all_gone(&pids).await;
        gone_after_kill.push(start.elapsed());
    }
    let line = |what: &str, samples: &mut Vec<Duration>| {
        println!(
            "{what} ({ROUNDS} rounds): median {}, max {}",
            ms(percentile(samples, 0.5)),
            ms(percentile(samples, 1.0))
        )
    };
    let (mut piped, mut socketed, mut terminal) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        piped.push(idle_sigint(&env, Streams::Pipes).await);
        socketed.push(idle_sigint(&env, Streams::Socket).await);
        terminal.push(idle_sigint(&env, Streams::Pty).await);
    }
    line("SIGINT to an idle host -> exited, pipes", &mut piped);
    line("SIGINT to an idle host -> exited, a socket", &mut socketed);
    line("SIGINT to an idle host -> exited, a pty", &mut terminal);
    line("SIGTERM -> host exited", &mut exited);
    line(
        "SIGTERM -> last process of the tree gone",
        &mut gone_after_term,
    );
    line(
        "SIGKILL -> last process of the tree gone",
        &mut gone_after_kill,
    );
}

/// What the host's stdin and stdout are.
#[derive(Clone, Copy)]
enum Streams {
    Pipes,
    /// One socket for both (how Claude Code and Gemini CLI start servers).
    Socket,
    /// A pseudo-terminal in raw mode, as from a terminal.
    Pty,
}

/// SIGINT to a host that has answered `initialize` and waits; how long
/// until it has exited.
async fn idle_sigint(env: &Env, streams: Streams) -> Duration {
    use std::os::fd::OwnedFd;
    use tokio::io::AsyncBufReadExt;
    // The host on one end of a socket or terminal, both ways.
    let on = |theirs: OwnedFd| {
        env.host(&["serve", "--stdio"])
            .stdin(Stdio::from(theirs.try_clone().unwrap()))
            .stdout(Stdio::from(theirs))
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let (mut host, read, mut write): (
        _,
        Box<dyn tokio::io::AsyncRead + Unpin>,
        Box<dyn tokio::io::AsyncWrite + Unpin>,
    ) = match streams {
        Streams::Pipes => {
            let mut host = serve_raw(env, Stdio::piped());
            let (stdout, stdin) = (host.stdout.take().unwrap(), host.stdin.take().unwrap());
            (host, Box::new(stdout), Box::new(stdin))
        }
        Streams::Socket => {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            let host = on(theirs.into());
            ours.set_nonblocking(true).unwrap();
            let (read, write) = tokio::net::UnixStream::from_std(ours).unwrap().into_split();
            (host, Box::new(read), Box::new(write))
        }
        Streams::Pty => {
            let pty = nix::pty::openpty(None, None).unwrap();
            let mut raw = nix::sys::termios::tcgetattr(&pty.slave).unwrap();
            nix::sys::termios::cfmakeraw(&mut raw);
            nix::sys::termios::tcsetattr(&pty.slave, nix::sys::termios::SetArg::TCSANOW, &raw)
                .unwrap();
            let host = on(pty.slave);
            let master = std::fs::File::from(pty.master);
            let read = tokio::fs::File::from_std(master.try_clone().unwrap());
            (
                host,
                Box::new(read),
                Box::new(tokio::fs::File::from_std(master)),
            )
        }
    };
    write.write_all(handshake().as_bytes()).await.unwrap();
    write.flush().await.unwrap();
    let mut lines = tokio::io::BufReader::new(read).lines();
    lines.next_line().await.unwrap();
    let start = Instant::now();
    kill(Pid::from_raw(host.id().unwrap() as i32), Signal::SIGINT).unwrap();
    host.wait().await.unwrap();
    start.elapsed()
}
