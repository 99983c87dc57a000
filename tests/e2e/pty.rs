//! The pty capability on its own, against real programs (sh, cat, stty,
//! sleep), driven by the fixture plugin's `pty_script` tool.

use serde_json::{Value, json};

use crate::harness::*;

const PTY_POLICY: &str = r#"
[plugins.faulty]
capabilities = ["pty", "fs"]
process.programs = ["sh", "cat"]
process.env = ["PATH"]
fs.read = ["${workspace}"]
"#;

async fn script(env: &Env, args: Value) -> Value {
    let client = env.start().await;
    let r = client.call("pty_script", args).await;
    assert!(!is_error(&r), "{r:?}");
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_terminal_with_echo_size_and_resize() {
    let env = Env::new(&["faulty"], PTY_POLICY);
    let out = script(
        &env,
        json!({
            "program": "sh",
            "args": ["-c", "test -t 0 && echo on-a-tty; stty size; read line; echo got:$line; stty size; read x"],
            "rows": 30, "cols": 100,
            "steps": [
                {"expect": "30 100", "timeout_ms": 5000},
                {"resize": [40, 120], "write": "hello\r", "expect": "40 120", "timeout_ms": 5000},
                {"write": "\r", "expect": null, "timeout_ms": 5000},
            ],
        }),
    )
    .await;
    let reads = out["reads"].as_array().unwrap();
    let first = reads[0]["text"].as_str().unwrap();
    assert!(
        first.contains("on-a-tty") && reads[0]["matched"] == true,
        "{out}"
    );
    let second = reads[1]["text"].as_str().unwrap();
    assert!(
        second.contains("hello"),
        "the terminal echoes input: {second:?}"
    );
    assert!(second.contains("got:hello"), "{second:?}");
    assert_eq!(
        reads[1]["matched"], true,
        "resize reached the program: {out}"
    );
    assert_eq!(reads[2]["matched"], false);
    assert_eq!(
        reads[2]["exit_code"], 0,
        "read without a pattern runs to the exit: {out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pattern_that_never_comes_times_out_and_close_kills_the_tree() {
    let env = Env::new(&["faulty"], PTY_POLICY);
    let out = script(
        &env,
        json!({
            "program": "sh",
            "args": ["-c", "echo ready; setsid sleep 4711 & sleep 4712"],
            "steps": [
                {"expect": "ready", "timeout_ms": 5000},
                {"expect": "never printed", "timeout_ms": 300},
            ],
            "close": true,
        }),
    )
    .await;
    assert_eq!(out["reads"][0]["matched"], true, "{out}");
    assert_eq!(out["reads"][1]["matched"], false, "{out}");
    // Closed while running: killed, so a signal or a failing exit code
    // (never nothing at all).
    let end = &out["end"];
    assert!(
        end["signal"].is_string() || end["exit_code"].as_i64().is_some_and(|c| c != 0),
        "{out}"
    );
    for pid in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(pid.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(!cmdline.contains("sleep 471"), "left running: {cmdline}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn programs_outside_the_policy_are_denied() {
    let env = Env::new(&["faulty"], PTY_POLICY);
    let client = env.start().await;
    let r = client
        .call(
            "pty_script",
            json!({"program": "sleep", "args": ["1"], "steps": []}),
        )
        .await;
    let e = structured(&r);
    assert_eq!(e["code"], "denied", "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains("process.programs") && message.contains("\"sleep\""),
        "{message}"
    );
}

/// Without a usable /dev/ptmx (a private mount namespace where it is
/// /dev/null), spawning gives `tty-unavailable`. Needs root and unshare.
#[tokio::test(flavor = "multi_thread")]
async fn no_pseudo_terminal_gives_tty_unavailable() {
    let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
    });
    if !root || !require_program("unshare", "install util-linux") {
        skip("hiding /dev/ptmx needs root and unshare");
        return;
    }
    let env = Env::new(&["faulty"], PTY_POLICY);
    let host = env.host(&["call", "pty_script", r#"{"program": "sh", "steps": []}"#]);
    let std = host.as_std();
    let mut wrapped = tokio::process::Command::new("unshare");
    wrapped
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            "mount --bind /dev/null /dev/ptmx && exec \"$@\"",
            "sh",
        ])
        .arg(std.get_program())
        .args(std.get_args())
        .envs(std.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let out = wrapped.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"unavailable\"") && stdout.contains("no pseudo-terminal could be opened"),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminal_session_ends_with_the_host() {
    let env = Env::new(&["faulty"], PTY_POLICY);
    for (signal, n) in [
        (nix::sys::signal::Signal::SIGTERM, 4721),
        (nix::sys::signal::Signal::SIGKILL, 4722),
    ] {
        let client = env.start().await;
        let _call = client
            .start_call(
                "pty_script",
                json!({
                    "program": "sh",
                    "args": ["-c", format!("echo ready; setsid sleep {n}1 & env -i sleep {n}2 & sleep {n}3")],
                    "steps": [{"expect": "never printed", "timeout_ms": 60_000}],
                    "close": true,
                }),
                "pty",
            )
            .await;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while processes_with(&format!("sleep {n}3")).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the session never started"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        end_host_and_check_gone(client.pid, signal, &format!("sleep {n}")).await;
    }
}
