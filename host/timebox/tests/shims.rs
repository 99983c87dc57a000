//! Programs installed as shims (`npm.cmd`, `pi.cmd`, `copilot.cmd` on
//! Windows; a shell script elsewhere) get their arguments exactly as given:
//! none can end the command and start another (on Windows the BatBadBut
//! rules: std runs a `.cmd` through `cmd.exe` quoting every argument, and
//! what no quoting protects, `%` and line breaks, is refused). Checked
//! under Wine in CI.

use std::path::Path;
use std::time::Duration;

use timebox::{Ending, Progress, Spawn};
use tokio_util::sync::CancellationToken;

struct Quiet;
impl Progress for Quiet {
    fn running(&self, _: Duration, _: u64) {}
}

const LIBTEST: [&str; 4] = ["role", "--exact", "--nocapture", "--test-threads=1"];

/// Not a test of its own: with `SHIM_ROLE=args`, print each argument
/// after libtest's own.
#[test]
fn role() {
    if std::env::var("SHIM_ROLE").as_deref() == Ok("args") {
        for arg in std::env::args().skip(1 + LIBTEST.len()) {
            println!("ARG[{arg}]");
        }
    }
}

/// A shim in `dir` that runs this test binary with its arguments, as npm
/// writes them.
fn shim(dir: &Path) -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    if cfg!(windows) {
        let path = dir.join("tool.cmd");
        std::fs::write(&path, format!("@ECHO OFF\r\n\"{}\" %*\r\n", exe.display())).unwrap();
        path
    } else {
        let path = dir.join("tool");
        std::fs::write(
            &path,
            format!("#!/bin/sh\nexec '{}' \"$@\"\n", exe.display()),
        )
        .unwrap();
        make_executable(&path);
        path
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[cfg(not(unix))]
fn make_executable(_: &Path) {}

fn spawn(program: &Path, extra: &[&str]) -> Spawn {
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    env.push(("SHIM_ROLE".into(), "args".into()));
    Spawn {
        program: program.to_path_buf(),
        args: LIBTEST.iter().chain(extra).map(|s| s.to_string()).collect(),
        cwd: std::env::temp_dir(),
        env,
        stdin: None,
        timeout: Duration::from_secs(60),
        no_output_timeout: None,
        tail_bytes: 64 * 1024,
        log: None,
        confine: None,
    }
}

#[tokio::test]
async fn arguments_reach_a_shim_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let program = shim(dir.path());
    let marker = dir.path().join("injected");
    let hostile = [
        format!("a&echo x> \"{}\"", marker.display()),
        format!("b\" & echo x> \"{}", marker.display()),
        "c|more".to_string(),
        "!PATH!".to_string(),
        "d^e".to_string(),
        "with space".to_string(),
        "\"quoted\"".to_string(),
        "trailing\\".to_string(),
        "(paren)".to_string(),
    ];
    let args: Vec<&str> = hostile.iter().map(String::as_str).collect();
    let outcome = timebox::run(&spawn(&program, &args), &CancellationToken::new(), &Quiet).await;
    assert_eq!(outcome.ending, Ending::Exited, "{outcome:?}");
    let text: String = outcome.tail.chunks().into_iter().map(|(_, t)| t).collect();
    // libtest's "test role ... " may start the first line.
    let got: Vec<&str> = text
        .lines()
        .filter_map(|l| l[l.find("ARG[")? + 4..].strip_suffix(']'))
        .collect();
    assert_eq!(got, args, "{text}");
    assert!(!marker.exists(), "an argument ran a command");
}

/// What cannot be quoted for cmd.exe (a line break ends its command; a
/// `%NAME%` is expanded inside quotes, and a variable can hold `"&`) is
/// refused, not passed on; the same arguments reach a program that is not
/// a batch file as they are.
#[tokio::test]
async fn what_cmd_would_act_on_is_refused_for_a_batch_file() {
    let dir = tempfile::tempdir().unwrap();
    let program = shim(dir.path());
    for arg in ["one\r\necho injected", "%PATH%", "50%"] {
        let outcome =
            timebox::run(&spawn(&program, &[arg]), &CancellationToken::new(), &Quiet).await;
        if cfg!(windows) {
            assert_eq!(outcome.ending, Ending::SpawnFailed, "{arg:?}: {outcome:?}");
            let why = outcome.error.unwrap_or_default();
            assert!(
                why.contains("cmd.exe") && why.contains("argument 5"),
                "{why}"
            );
        } else {
            assert_eq!(outcome.ending, Ending::Exited, "{arg:?}: {outcome:?}");
        }
    }
    let direct = std::env::current_exe().unwrap();
    let outcome = timebox::run(
        &spawn(&direct, &["%PATH%"]),
        &CancellationToken::new(),
        &Quiet,
    )
    .await;
    let text: String = outcome.tail.chunks().into_iter().map(|(_, t)| t).collect();
    assert!(text.contains("ARG[%PATH%]"), "{text}");
}
