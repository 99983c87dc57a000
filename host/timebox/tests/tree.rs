//! A run's whole process tree ends with it, on every platform (on Windows
//! through its Job Object, checked under Wine in CI). The processes are
//! this test binary itself, given a role: it needs no shell or tool that
//! one of the platforms lacks.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use timebox::{Ending, Progress, Spawn};
use tokio_util::sync::CancellationToken;

struct Quiet;
impl Progress for Quiet {
    fn running(&self, _: Duration, _: u64) {}
}

/// Not a test of its own: what a child of these tests does, by
/// `TIMEBOX_ROLE` (nothing when it is unset).
#[test]
fn role() {
    let pid_file = std::env::var_os("TIMEBOX_PID_FILE").map(PathBuf::from);
    match std::env::var("TIMEBOX_ROLE").as_deref() {
        Ok("say") => println!("said on stdout"),
        Ok("sleep") => {
            if let Some(file) = pid_file {
                std::fs::write(file, std::process::id().to_string()).unwrap();
            }
            std::thread::sleep(Duration::from_secs(120));
        }
        // Leaves a grandchild behind and waits.
        Ok("spawn") => {
            let child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(role_args())
                .env("TIMEBOX_ROLE", "sleep")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            std::mem::forget(child);
            std::thread::sleep(Duration::from_secs(120));
        }
        _ => {}
    }
}

fn role_args() -> Vec<String> {
    ["role", "--exact", "--nocapture", "--test-threads=1"]
        .map(String::from)
        .to_vec()
}

fn spawn(role: &str, pid_file: &Path, timeout: Duration) -> Spawn {
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    env.push(("TIMEBOX_ROLE".into(), role.into()));
    env.push(("TIMEBOX_PID_FILE".into(), pid_file.to_string_lossy().into()));
    Spawn {
        program: std::env::current_exe().unwrap(),
        args: role_args(),
        cwd: std::env::temp_dir(),
        env,
        stdin: None,
        timeout,
        no_output_timeout: None,
        tail_bytes: 64 * 1024,
        log: None,
        confine: None,
    }
}

#[cfg(unix)]
fn alive(pid: u32) -> bool {
    // Signal 0: whether the process exists (a zombie counts as gone).
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty() && !stat.contains(") Z ")
}

#[cfg(windows)]
fn alive(pid: u32) -> bool {
    use windows_sys::Win32::Foundation::{CloseHandle, STILL_ACTIVE};
    use windows_sys::Win32::System::Threading::{
        GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
    };
    // SAFETY: the handle is checked and closed; the code is an out value.
    unsafe {
        let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if process.is_null() {
            return false;
        }
        let mut code = 0u32;
        let ok = GetExitCodeProcess(process, &mut code);
        CloseHandle(process);
        ok != 0 && code == STILL_ACTIVE as u32
    }
}

#[tokio::test]
async fn output_and_exit_code_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spawn("say", &dir.path().join("pid"), Duration::from_secs(60));
    let outcome = timebox::run(&spec, &CancellationToken::new(), &Quiet).await;
    assert_eq!(outcome.ending, Ending::Exited, "{outcome:?}");
    assert_eq!(outcome.exit_code, Some(0));
    let text: String = outcome.tail.chunks().into_iter().map(|(_, t)| t).collect();
    assert!(text.contains("said on stdout"), "{text}");
}

#[tokio::test]
async fn a_timeout_ends_the_grandchild_too() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild");
    let spec = spawn("spawn", &pid_file, Duration::from_secs(3));
    let outcome = timebox::run(&spec, &CancellationToken::new(), &Quiet).await;
    assert_eq!(outcome.ending, Ending::Timeout, "{outcome:?}");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("the grandchild started")
        .trim()
        .parse()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(10);
    while alive(pid) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "grandchild {pid} outlived the run");
    assert!(
        outcome.kill.is_some_and(|k| k.killed >= 2),
        "the tree was counted"
    );
}
