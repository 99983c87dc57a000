//! The Windows build, end to end under Wine (issue 40), with the real wasm
//! plugins, Windows node and npm (`npm.cmd`), and Windows paths for
//! everything the host is given. Job Objects, PATHEXT, `.cmd` shims, `;`
//! lists and the guest path form are Windows' own here, not emulated.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{
    Env, godot_docs, gone, is_error, npm_cli, processes_with, run_test_args, structured,
};
use crate::mock_llm::{MODEL, MockLlm, Script};
use crate::wine::{Wine, node_project, windows};

fn scoped(file: &str, timeout_ms: u64) -> Value {
    run_test_args(
        "npm",
        json!({"scope": "file", "target": file, "timeout_ms": timeout_ms}),
    )
}

/// The bar's run under Wine: tools listed, godot answers from two doc dirs
/// named as a Windows list, and run_test on a Windows npm project passes,
/// fails with file and line, and times out with its detached grandchild
/// killed.
#[tokio::test]
async fn the_windows_host_serves_godot_and_runs_node_tests() {
    let Some(wine) = Wine::find() else { return };
    let Some(docs) = godot_docs() else { return };
    let (four, three) = (docs.join("4.x"), docs.join("3.x"));
    let list = format!("{};{}", windows(&four), windows(&three));
    let config = format!(
        "[plugins.godot]\nfs.read = [{l:?}]\nvars.GODOT_DOC_DIR = {l:?}\nindex.root = \"${{plugin_cache}}/index\"\n",
        l = list
    );
    let env = Env::new(&["godot", "run_test"], &config);
    let marker = format!("wine-grandchild-{}", uuid::Uuid::new_v4().simple());
    node_project(&env.workspace, &marker);
    let client = wine.start(&env).await;

    let names = client.tool_names().await;
    for tool in ["godot.search", "godot.get_class", "run_test"] {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} not listed: {names:?}"
        );
    }

    // Both doc dirs of the `;` list are served, and named in guest form.
    let versions = client.call("godot.versions", json!({})).await;
    let versions = structured(&versions)["versions"].clone();
    let paths: Vec<&str> = versions
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["path"].as_str())
        .collect();
    let guest = |dir: &Path| format!("Z:{}", dir.display());
    assert_eq!(paths, [guest(&four), guest(&three)], "{versions:#}");
    let found = client
        .call("godot.search", json!({"query": "CharacterBody2D"}))
        .await;
    assert!(!is_error(&found), "{found:?}");
    assert_eq!(
        structured(&found)["results"][0]["uri"],
        "godot://4/class/CharacterBody2D",
        "{found:?}"
    );
    let old = client
        .call(
            "godot.search",
            json!({"query": "KinematicBody2D", "version": "3.6"}),
        )
        .await;
    assert_eq!(
        structured(&old)["results"][0]["uri"],
        "godot://3.6/class/KinematicBody2D",
        "{old:?}"
    );

    let passed = client
        .call("run_test", scoped("test/ok.test.js", 120_000))
        .await;
    assert_eq!(structured(&passed)["status"], "pass", "{passed:?}");

    let failed = client
        .call("run_test", scoped("test/math.test.js", 120_000))
        .await;
    let failed = structured(&failed);
    assert_eq!(failed["status"], "fail", "{failed:#}");
    let failure = &failed["failures"][0];
    assert_eq!(failure["file"], "test/math.test.js", "{failed:#}");
    assert_eq!(failure["line"], 4, "{failed:#}");

    let hung = client
        .call("run_test", scoped("test/hang.test.js", 15_000))
        .await;
    let hung = structured(&hung);
    assert_eq!(hung["status"], "timeout", "{hung:#}");
    if let Err(left) = gone(&marker, Duration::from_secs(10)).await {
        panic!("the detached grandchild outlived its timed-out run: {left:?}\n{hung:#}");
    }
}

/// A Windows host killed mid-run leaves nothing: Windows closes its Job
/// Objects, and each kills its tree.
#[tokio::test]
async fn a_killed_windows_host_leaves_no_process() {
    let Some(wine) = Wine::find() else { return };
    let env = Env::new(&["run_test"], "");
    let marker = format!("wine-orphan-{}", uuid::Uuid::new_v4().simple());
    node_project(&env.workspace, &marker);
    let client = wine.start(&env).await;
    let call = client
        .start_call("run_test", scoped("test/hang.test.js", 600_000), "orphan")
        .await;
    let start = Instant::now();
    while processes_with(&marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the grandchild never started; host log:\n{}",
            std::fs::read_to_string(env.stderr_log()).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(client.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    drop(call);
    if let Err(left) = gone(&marker, Duration::from_secs(10)).await {
        panic!("processes outlived the killed Windows host: {left:?}");
    }
}

/// pi.prompt on Windows: `pi` found as `pi.cmd` through PATHEXT (a shim
/// as npm writes one, running Windows node on the real CLI), its agent
/// folder a guest path in the plugin's cache, its loop relayed up to the
/// model's turn (the mock model on 127.0.0.1 where node can connect).
#[tokio::test(flavor = "multi_thread")]
async fn pi_answers_through_its_cmd_shim() {
    let Some(wine) = Wine::find() else { return };
    let Some(pi) = npm_cli("PI_CLI", "pi", "@mariozechner/pi-coding-agent") else {
        return;
    };
    let cli = pi.canonicalize().expect("pi's script");
    let mock = MockLlm::start(Script::Answer {
        text: "Done on Windows.".into(),
        tool_first: None,
    })
    .await;
    let mut env = Env::new(&["pi"], "");
    let shims = env.dir.path().join("bin");
    std::fs::create_dir_all(&shims).unwrap();
    std::fs::write(
        shims.join("pi.cmd"),
        format!(
            "@ECHO OFF\r\n\"{}\\node.exe\" \"{}\" %*\r\n",
            windows(wine.node_dir()),
            windows(&cli)
        ),
    )
    .unwrap();
    env.host_vars.extend([
        (
            "WINEPATH".to_string(),
            format!("{};{}", windows(&shims), windows(wine.node_dir())),
        ),
        ("PI_PROVIDER".into(), "custom".into()),
        ("PI_BASE_URL".into(), mock.base_url()),
        ("PI_MODEL".into(), MODEL.into()),
        ("PI_API_KEY".into(), "test-key".into()),
        ("PI_MAX_RETRIES".into(), "1".into()),
    ]);
    let client = wine.start(&env).await;
    let answer = client
        .call("pi.prompt", json!({"prompt": "Say you are done"}))
        .await;
    let log = || std::fs::read_to_string(env.stderr_log()).unwrap_or_default();
    if is_error(&answer) {
        // Wine 8's node cannot open a TCP connection (libuv's connect
        // fails with UNKNOWN), so pi reaches the model's turn and reports
        // it could not connect: the shim, node, pi's RPC loop and its
        // agent folder all worked to get there.
        let text = format!("{answer:?}");
        assert!(
            text.contains("provider_error") && text.contains("Connection error"),
            "{text}\nhost log:\n{}",
            log()
        );
    } else {
        assert_eq!(
            structured(&answer)["text"],
            "Done on Windows.",
            "{answer:?}"
        );
        assert!(
            !mock.requests.lock().unwrap().is_empty(),
            "pi asked the model"
        );
    }
}

/// Issue 40, item 5: a second start under Wine loads the compiled plugin
/// from the cache (Wine refuses the mapping wasmtime asks for, so the
/// artifact is read instead of compiled again).
#[tokio::test]
async fn the_windows_host_reuses_compiled_plugins() {
    let Some(wine) = Wine::find() else { return };
    let env = Env::new(&["hello"], "");
    for _ in 0..2 {
        let client = wine.start(&env).await;
        assert_eq!(client.tools().await.len(), 1);
        // A call waits for its plugin (the list may come before it is
        // compiled).
        let reply = client.call("hello", json!({"name": "Ada"})).await;
        assert!(!is_error(&reply), "{reply:?}");
        drop(client);
    }
    let log = std::fs::read_to_string(env.stderr_log()).unwrap_or_default();
    assert_eq!(env.logged("tools=1 origin=Compiled"), 1, "{log}");
    assert_eq!(env.logged("tools=1 origin=Cached"), 1, "{log}");
    assert_eq!(
        env.logged("discarding unreadable compiled artifact"),
        0,
        "{log}"
    );
}
