//! A confined program and its children touch only what their
//! [`Confinement`] grants (issue 71), enforced by the kernel; the host
//! that started them is not confined. Linux only (Landlock); elsewhere
//! the platform says it confines nothing, which is checked too.

use std::path::Path;
use std::time::Duration;

use timebox::confine::{Confinement, Enforcement, enforcement};
use timebox::{Ending, Progress, Spawn};
use tokio_util::sync::CancellationToken;

struct Quiet;
impl Progress for Quiet {
    fn running(&self, _: Duration, _: u64) {}
}

/// `script` run by `sh -c` under `confine`; its exit code and output.
async fn sh(script: &str, confine: Option<Confinement>) -> (Option<i32>, String) {
    let spec = Spawn {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: "/".into(),
        env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
        stdin: None,
        timeout: Duration::from_secs(60),
        no_output_timeout: None,
        tail_bytes: 64 * 1024,
        log: None,
        confine,
    };
    let outcome = timebox::run(&spec, &CancellationToken::new(), &Quiet).await;
    assert_eq!(outcome.ending, Ending::Exited, "{:?}", outcome.error);
    let text: String = outcome.tail.chunks().into_iter().map(|(_, t)| t).collect();
    (outcome.exit_code, text)
}

fn landlock_here() -> bool {
    let e = enforcement();
    if cfg!(target_os = "linux") && !matches!(e, Enforcement::Full { .. }) {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("CI's kernel must confine fully: {}", e.describe());
        }
        eprintln!("skipped: {}", e.describe());
        return false;
    }
    cfg!(target_os = "linux")
}

fn granted(write: &Path) -> Confinement {
    Confinement {
        write: vec![write.to_path_buf(), "/dev/null".into()],
        read: vec!["/".into()],
        ..Confinement::default()
    }
}

#[tokio::test]
async fn a_confined_tree_writes_only_where_it_is_granted() {
    if !landlock_here() {
        return;
    }
    let ours = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (inside, outside) = (ours.path().join("in"), other.path().join("out"));
    let script = format!(
        "echo in > {} && (sh -c 'echo out > {}') 2>&1; echo end > /dev/null; echo done",
        inside.display(),
        outside.display()
    );
    let (code, text) = sh(&script, Some(granted(ours.path()))).await;
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    assert!(inside.exists() && !outside.exists());
    // The host is not confined by having started it.
    std::fs::write(&outside, "host").unwrap();
    // Unconfined, the same script writes both.
    std::fs::remove_file(&outside).unwrap();
    let (code, _) = sh(&script, None).await;
    assert_eq!(code, Some(0));
    assert!(outside.exists());
}

#[tokio::test]
async fn hidden_folders_are_not_read_unless_granted() {
    if !landlock_here() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let secret = home.path().join(".ssh/id");
    std::fs::create_dir_all(secret.parent().unwrap()).unwrap();
    std::fs::write(&secret, "KEY").unwrap();
    std::fs::write(home.path().join("notes"), "open").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut c = granted(scratch.path());
    c.hidden = vec![home.path().join(".ssh")];
    let script = format!(
        "cat {}/notes; cat {} 2>&1; ls {}",
        home.path().display(),
        secret.display(),
        secret.parent().unwrap().display()
    );
    let (_, text) = sh(&script, Some(c.clone())).await;
    assert!(text.contains("open") && !text.contains("KEY"), "{text}");
    assert!(text.contains("Permission denied"), "{text}");
    // Names can be listed; contents cannot be read.
    assert!(text.contains("id"), "{text}");
    c.read.push(home.path().join(".ssh"));
    let (_, text) = sh(&script, Some(c)).await;
    assert!(text.contains("KEY"), "{text}");
}

#[tokio::test]
async fn tcp_ports_are_reached_only_when_granted() {
    if !landlock_here() || !Path::new("/bin/bash").exists() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script =
        format!("exec /bin/bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>&1 && echo connected");
    let scratch = tempfile::tempdir().unwrap();
    let mut c = granted(scratch.path());
    c.connect = Some(vec![443]);
    let (code, text) = sh(&script, Some(c.clone())).await;
    assert_ne!(code, Some(0), "{text}");
    assert!(!text.contains("connected"), "{text}");
    c.connect = Some(vec![443, port]);
    let (code, text) = sh(&script, Some(c)).await;
    assert_eq!(code, Some(0), "{text}");
    drop(listener);
}

#[test]
fn the_platform_says_what_it_confines() {
    let e = enforcement();
    let said = e.describe();
    if cfg!(target_os = "linux") {
        assert!(said.contains("Landlock"), "{said}");
    } else {
        assert!(said.starts_with("NOT confined"), "{said}");
    }
}

/// A pseudo-terminal's program (started from a thread that confines
/// itself, portable-pty having no hook before exec) is confined the same.
#[tokio::test]
async fn a_confined_terminal_writes_only_where_it_is_granted() {
    if !landlock_here() {
        return;
    }
    let ours = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (inside, outside) = (ours.path().join("in"), other.path().join("out"));
    let script = format!(
        "echo in > {}; echo rc-in=$?; echo out > {}; echo rc-out=$?; echo done",
        inside.display(),
        outside.display()
    );
    let args = ["-c".to_string(), script];
    let env = [(
        "PATH".to_string(),
        std::env::var("PATH").unwrap_or_default(),
    )];
    let confinement = granted(ours.path());
    let mut session = timebox::pty::Session::start(timebox::pty::Program {
        program: Path::new("/bin/sh"),
        args: &args,
        cwd: Path::new("/"),
        env: &env,
        rows: 24,
        cols: 80,
        confine: Some(&confinement),
    })
    .unwrap();
    let done = regex::Regex::new("done").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let text = match session
        .read_until(Some(&done), deadline, &CancellationToken::new())
        .await
    {
        timebox::pty::Read::Matched(text) | timebox::pty::Read::Ended { text, .. } => text,
        timebox::pty::Read::Cancelled => unreachable!(),
    };
    session.end();
    assert!(
        text.contains("rc-in=0") && !text.contains("rc-out=0"),
        "{text}"
    );
    assert!(text.contains("Permission denied"), "{text}");
    assert!(inside.exists() && !outside.exists());
}
