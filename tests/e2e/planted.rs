//! Issue 61, items 4 and 5: what a plugin or a container can put in a
//! folder it writes never becomes a program the host runs or reads, and a
//! named pipe where the host opens a file for a plugin never holds the
//! host.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::harness::*;

/// An executable shell script at `path` that touches `marker`.
fn planted_program(path: &Path, marker: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn message(r: &rmcp::model::CallToolResult) -> String {
    structured(r)["message"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| format!("{r:?}"))
}

/// An absolute PATH entry inside the workspace (an activated `.venv/bin`)
/// holds a program a plugin planted: the host never looks there, so it
/// neither runs it nor reads it, and says where it found it. A link a
/// plugin made there to the host's own environment is not read either.
#[tokio::test(flavor = "multi_thread")]
async fn no_program_is_found_in_a_folder_a_plugin_writes() {
    let config = "[plugins.faulty]\ncapabilities = [\"process\", \"fs\"]\n\
        process.programs = [\"tool\", \"environ\", \"plain\"]\n\
        fs.read = [\"${workspace}\"]\nfs.write = [\"${workspace}\"]\n";
    let mut env = Env::new(&["faulty"], config);
    let venv = env.workspace.join(".venv/bin");
    // Where the plugin's programs may write, so that a run would show
    // even though they are confined (issue 71).
    let marker = env.workspace.join("planted-ran");
    planted_program(&venv.join("tool"), &marker);
    std::os::unix::fs::symlink("../../../../proc/self/environ", venv.join("environ")).unwrap();
    // A trusted folder, outside every root: a file there that is not a
    // program is not read as one.
    let bin = env.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("plain"), "not a program\n").unwrap();
    let path = format!(
        "{}:{}:{}",
        venv.display(),
        bin.display(),
        std::env::var("PATH").unwrap()
    );
    env.host_vars.push(("PATH".into(), path));
    env.host_vars
        .push(("MCP_HOST_TEST_SECRET".into(), "HOST-ENVIRON-VALUE".into()));
    let host = env.start().await;

    let r = host.call("spawn", json!({"program": "tool"})).await;
    assert!(!marker.exists(), "a program planted in the workspace ran");
    let why = message(&r);
    assert!(
        why.contains("found only as") && why.contains(".venv/bin/tool"),
        "{why}"
    );
    let r = host.call("read_program", json!({"program": "tool"})).await;
    assert!(is_error(&r) && !text(&r).contains("touch"), "{r:?}");

    let r = host
        .call("read_program", json!({"program": "environ"}))
        .await;
    assert!(is_error(&r), "{r:?}");
    assert!(!text(&r).contains("HOST-ENVIRON-VALUE"), "{}", text(&r));

    let r = host.call("read_program", json!({"program": "plain"})).await;
    assert!(is_error(&r), "{r:?}");
    assert!(
        message(&r).contains("not a program file"),
        "{}",
        message(&r)
    );
}

/// A named pipe where a run's log goes (a reused report folder) is
/// refused at once, and the host goes on answering meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_named_pipe_at_a_log_path_is_refused_at_once() {
    let config = "[plugins.faulty]\ncapabilities = [\"process\", \"fs\"]\n\
        process.programs = [\"true\"]\n\
        fs.read = [\"${workspace}\"]\nfs.write = [\"${workspace}\"]\n";
    let env = Env::new(&["faulty"], config);
    let pipe = env.workspace.join("raw.log");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let host = env.start().await;
    let call = host.call(
        "spawn",
        json!({"program": "true", "log_path": pipe.display().to_string()}),
    );
    let r = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the open of the log waited for a reader");
    assert!(message(&r).contains("named pipe"), "{}", message(&r));
    assert!(!host.tools().await.is_empty());
    // A plain file there is written as before.
    std::fs::remove_file(&pipe).unwrap();
    let r = host
        .call(
            "spawn",
            json!({"program": "true", "log_path": pipe.display().to_string()}),
        )
        .await;
    assert_eq!(structured(&r)["status"], "exited", "{r:?}");
    assert!(pipe.is_file());
}

/// Issue 61, item 13: a compiled plugin in the cache is used only while
/// its bytes match the digest stored beside it, and no cache is kept where
/// a plugin may write.
#[tokio::test(flavor = "multi_thread")]
async fn compiled_plugins_are_checked_and_never_kept_where_plugins_write() {
    let env = Env::new(&["hello"], "");
    let call = || {
        env.host(&["call", "hello", r#"{"name": "cache"}"#])
            .output()
    };
    let first = call().await.unwrap();
    assert!(first.status.success(), "{first:?}");
    let compiled = env.cache.join("compiled");
    let artifact = std::fs::read_dir(&compiled)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .expect("a compiled artifact");
    // Damaged (or swapped) since it was stored: compiled again, not run.
    let mut bytes = std::fs::read(&artifact).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&artifact, &bytes).unwrap();
    let again = call().await.unwrap();
    let log = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{log}");
    assert!(log.contains("does not match its digest"), "{log}");
    assert_ne!(std::fs::read(&artifact).unwrap(), bytes, "stored anew");

    // A policy that lets a plugin write the cache folder: nothing cached.
    std::fs::remove_dir_all(&compiled).unwrap();
    std::fs::write(
        &env.config,
        format!(
            "[plugins.other]\nfs.write = [{:?}]\n",
            env.cache.display().to_string()
        ),
    )
    .unwrap();
    let out = call().await.unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("compiled plugins are not cached"), "{log}");
    assert!(
        !compiled.exists(),
        "a cache was kept where a plugin may write"
    );
}
