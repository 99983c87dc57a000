//! Nothing outlives its call when the client or the host goes away: a
//! run_test whose tree hangs (a grandchild in its own session, a daemon
//! that double-forked, one that also cleared its environment) while the
//! host gets SIGKILL, SIGTERM, SIGINT or its stdin closed.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::harness::*;

/// Every escape we know of, each writing its pid to a file; `n` tells
/// this test's processes from those of the tests running beside it.
pub(crate) fn hanging_tree(n: u32) -> String {
    format!(
        "setsid sh -c 'echo $$ > a.pid; exec sleep {n}1' & \
         (sh -c 'echo $$ > b.pid; exec sleep {n}2' &) ; \
         setsid env -i sh -c 'echo $$ > c.pid; exec sleep {n}3' & \
         sleep {n}4"
    )
}

#[derive(Debug, Clone, Copy)]
#[repr(u32)]
enum End {
    Kill,
    Term,
    Int,
    StdinClosed,
}

pub(crate) async fn pids_written(dir: &Path) -> Vec<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pids: Vec<i32> = ["a.pid", "b.pid", "c.pid"]
            .iter()
            .filter_map(|f| {
                std::fs::read_to_string(dir.join(f))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect();
        if pids.len() == 3 {
            return pids;
        }
        assert!(Instant::now() < deadline, "the test's tree never started");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A host serving run_test, in the middle of a run of [`hanging_tree`]:
/// the host, its stdin, the escapees' pids and whether it uses cgroups.
struct Running {
    env: Env,
    host: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    pids: Vec<i32>,
    contained: bool,
}

async fn start_a_hanging_run(n: u32) -> Option<Running> {
    if !require_program("setsid", "install util-linux") {
        return None;
    }
    let env = crate::run_test::npm_env(&hanging_tree(n))?;
    let mut host = serve_raw(&env, Stdio::null());
    let mut stdin = host.stdin.take().unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "run_test", "arguments": run_test_args("npm", json!({"timeout_ms": 600_000, "no_output_timeout_ms": 600_000}))}});
    stdin
        .write_all(format!("{}{call}\n", handshake()).as_bytes())
        .await
        .unwrap();
    let pids = pids_written(&env.workspace).await;
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    let contained = require_cgroups(&log);
    Some(Running {
        env,
        host,
        stdin: Some(stdin),
        pids,
        contained,
    })
}

/// The run's processes still alive (the env-cleared one only where cgroups
/// can find it), after waiting up to `until` for them to go.
async fn left_until(run: &Running, n: u32, until: Instant) -> Vec<i32> {
    loop {
        let mut left: Vec<i32> = run
            .pids
            .iter()
            .copied()
            .filter(|p| !process_gone(*p))
            .collect();
        left.extend(processes_with(&format!("sleep {n}4")));
        if !run.contained {
            left.retain(|p| *p != run.pids[2]);
        }
        if left.is_empty() || Instant::now() > until {
            for p in &left {
                eprintln!(
                    "left: {p} {:?}",
                    std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                );
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*p),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            return left;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn end_host_during_a_run(end: End) {
    let n = end as u32 + 430;
    let Some(mut run) = start_a_hanging_run(n).await else {
        return;
    };
    let pid = nix::unistd::Pid::from_raw(run.host.id().unwrap() as i32);
    let signal = match end {
        End::Kill => Some(nix::sys::signal::Signal::SIGKILL),
        End::Term => Some(nix::sys::signal::Signal::SIGTERM),
        End::Int => Some(nix::sys::signal::Signal::SIGINT),
        End::StdinClosed => None,
    };
    let ended_at = Instant::now();
    match signal {
        Some(signal) => nix::sys::signal::kill(pid, signal).unwrap(),
        None => drop(run.stdin.take()),
    }
    let exited = tokio::time::timeout(Duration::from_secs(5), run.host.wait()).await;
    assert!(exited.is_ok(), "{end:?}: the host did not exit");
    let exit_time = ended_at.elapsed();
    if !matches!(end, End::Kill) {
        assert!(
            exit_time < Duration::from_millis(1500),
            "{end:?}: the host took {exit_time:?} to exit"
        );
    }
    // Within 2 s of the end, nothing of the call is left.
    let left = left_until(&run, n, ended_at + Duration::from_secs(2)).await;
    assert!(
        left.is_empty(),
        "{end:?}: processes {left:?} outlived the host"
    );
    let log = std::fs::read_to_string(run.env.stderr_log()).unwrap();
    if !matches!(end, End::Kill) {
        assert!(
            log.contains("call cancelled: the host is shutting down"),
            "{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_host_sweeps_what_a_killed_host_and_watchdog_left() {
    let n = 439;
    let Some(mut run) = start_a_hanging_run(n).await else {
        return;
    };
    // Fault injection: the watchdog dies first, then the host.
    let host_pid = run.host.id().unwrap() as i32;
    let watchdog = run
        .env
        .watchdog_of(host_pid as u32)
        .expect("the host's watchdog");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(watchdog),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    run.host.wait().await.unwrap();
    let started = Instant::now();
    let mut next = serve_raw(&run.env, Stdio::null());
    let left = left_until(&run, n, started + Duration::from_secs(2)).await;
    // (Any host starting meanwhile may be the one that sweeps: tests run
    // side by side; what matters is that a starting host does.)
    assert!(left.is_empty(), "the new host left {left:?} alive");
    next.kill().await.unwrap();
}
/// Issue 39, item 6: a client that kills the host and every process under
/// it at once (opencode does) does not kill the watchdog, which then ends
/// the run: nothing waits for the next start's sweep.
#[tokio::test(flavor = "multi_thread")]
async fn killing_the_hosts_whole_tree_leaves_the_watchdog_to_end_the_run() {
    let n = 438;
    let Some(mut run) = start_a_hanging_run(n).await else {
        return;
    };
    let host_pid = run.host.id().unwrap() as i32;
    // The host and every descendant, as a client walking children sees them.
    let mut tree = vec![host_pid];
    loop {
        let more: Vec<i32> = procfs::process::all_processes()
            .unwrap()
            .flatten()
            .filter_map(|p| p.stat().ok())
            .filter(|s| tree.contains(&s.ppid) && !tree.contains(&s.pid))
            .map(|s| s.pid)
            .collect();
        if more.is_empty() {
            break;
        }
        tree.extend(more);
    }
    let watchdog = run
        .env
        .watchdog_of(host_pid as u32)
        .expect("the host's watchdog");
    assert!(
        !tree.contains(&watchdog),
        "the watchdog is not under the host"
    );
    let ended_at = Instant::now();
    for pid in &tree {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    run.host.wait().await.unwrap();
    let left = left_until(&run, n, ended_at + Duration::from_secs(3)).await;
    assert!(
        left.is_empty(),
        "processes {left:?} outlived the host's tree"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn host_killed_with_sigkill() {
    end_host_during_a_run(End::Kill).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn host_sent_sigterm() {
    end_host_during_a_run(End::Term).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn host_sent_sigint() {
    end_host_during_a_run(End::Int).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn client_closes_stdin() {
    end_host_during_a_run(End::StdinClosed).await;
}

/// The watchdog is forked from the host, so it starts with the host's
/// files: it must keep none of the MCP channel (a client waits for the
/// host's stdout to close to know it is gone) and nothing of the
/// workspace, only its own pipe and stderr.
#[tokio::test(flavor = "multi_thread")]
async fn the_watchdog_keeps_none_of_the_hosts_channel() {
    let env = Env::new(&[], "");
    let mut host = serve_raw(&env, Stdio::piped());
    let pid = host.id().unwrap();
    env.wait_for_log("watchdog started", 1).await;
    let watchdog = env.watchdog_of(pid).expect("the host's watchdog");
    let target = |pid: u32, fd: &str| {
        std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    let channel = [target(pid, "0"), target(pid, "1")];
    assert!(
        channel.iter().all(|t| t.starts_with("pipe:")),
        "{channel:?}"
    );
    let held: Vec<String> = std::fs::read_dir(format!("/proc/{watchdog}/fd"))
        .unwrap()
        .flatten()
        .map(|e| target(watchdog as u32, &e.file_name().to_string_lossy()))
        .collect();
    assert!(
        !held.iter().any(|t| channel.contains(t)),
        "the watchdog holds {held:?}; the host's stdin and stdout are {channel:?}"
    );
    let mut kinds: Vec<&str> = held
        .iter()
        .map(|t| {
            if t.starts_with("pipe:") {
                "pipe"
            } else {
                t.as_str()
            }
        })
        .collect();
    kinds.sort();
    let log = env.stderr_log().display().to_string();
    let mut expected = vec!["/dev/null", "/dev/null", log.as_str(), "pipe"];
    expected.sort();
    assert_eq!(
        kinds, expected,
        "stdin and stdout on /dev/null, stderr, its pipe"
    );
    // It says what it is, not the host's command line.
    let cmdline = std::fs::read(format!("/proc/{watchdog}/cmdline")).unwrap();
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(
        cmdline.starts_with("host watchdog --instance") && !cmdline.contains("serve"),
        "{cmdline:?}"
    );
    // Nor the host's environment (a call's processes are told by theirs).
    let environ = std::fs::read(format!("/proc/{watchdog}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(!environ.contains("HOME="), "{environ:?}");
    // Once the host is gone, so is its watchdog.
    host.kill().await.unwrap();
    host.wait().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !process_gone(watchdog) {
        assert!(Instant::now() < deadline, "the watchdog outlived its host");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
