//! Issue 72, item 7: a reader that stops early (`host list tools | head`,
//! `cofer list --json | head`) ends a one-shot command quietly, as a Unix
//! tool ends, never with a panic and a backtrace.

use std::process::Stdio;

use crate::harness::*;

#[tokio::test]
async fn a_reader_that_leaves_early_ends_host_list_quietly() {
    let env = Env::new(&["hello", "faulty"], "");
    let mut child = env
        .host(&["list", "tools"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader is gone before the host writes a line.
    drop(child.stdout.take());
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

#[test]
fn a_reader_that_leaves_early_ends_cofer_list_quietly() {
    let env = Env::new(&["cofer"], "");
    git(&env.workspace, &["init", "-q"]);
    let mut child = cofer_command(&env.workspace, &["list", "--json"])
        .env("COFER_HOST", env!("CARGO_BIN_EXE_host"))
        .env("MCP_HOST_PLUGINS", &env.plugins)
        .env("MCP_HOST_CONFIG", &env.config)
        .env("MCP_HOST_CACHE", &env.cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}
