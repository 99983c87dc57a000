//! Views (MCP Apps, issue 56) in a real browser: tests/views/drive.mjs
//! connects the official MCP client to `host serve --http`, calls a tool,
//! and shows its view in a sandboxed iframe of headless Chromium through
//! the ext-apps SDK's AppBridge, under the extension's default CSP. The
//! DOM is checked against the tool's real result, and the view's actions
//! must reach the host as tools/call. Screenshots of each view go to
//! `$VIEWS_SCREENSHOTS` (default target/views-screenshots); the book's come
//! from `VIEWS_SCREENSHOTS=docs/src/images/views cargo test -p host --test
//! e2e -- views`.
//!
//! Needs Debian's `chromium` (`$CHROMIUM`, default /usr/bin/chromium) and
//! the npm packages `@modelcontextprotocol/ext-apps`,
//! `@modelcontextprotocol/client` and `puppeteer-core` in
//! `$VIEWS_NODE_PREFIX` (default ~/.cache/mcp-host-ci/views; .ci/run
//! installs both).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::*;

/// Chromium and the folder holding the npm packages, or a visible skip.
pub fn browser() -> Option<(PathBuf, PathBuf)> {
    let chromium = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if !chromium.is_file() {
        skip(&format!(
            "no Chromium at {}: `apt-get install chromium` (or set CHROMIUM); .ci/run does",
            chromium.display()
        ));
        return None;
    }
    let prefix = std::env::var_os("VIEWS_NODE_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| dirs_home().join(".cache/mcp-host-ci/views"));
    let needed = [
        "@modelcontextprotocol/ext-apps",
        "@modelcontextprotocol/client",
        "puppeteer-core",
    ];
    if let Some(missing) = needed
        .iter()
        .find(|p| !prefix.join("node_modules").join(p).is_dir())
    {
        skip(&format!(
            "{missing} is not in {}/node_modules: `npm install --prefix {} @modelcontextprotocol/ext-apps @modelcontextprotocol/client puppeteer-core` (or set VIEWS_NODE_PREFIX); .ci/run does",
            prefix.display(),
            prefix.display()
        ));
        return None;
    }
    Some((chromium, prefix))
}

fn dirs_home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// Where a view's screenshot goes.
fn screenshot(name: &str) -> String {
    let dir = std::env::var_os("VIEWS_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/views-screenshots")
        });
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{name}.png"))
        .to_string_lossy()
        .into_owned()
}

/// Run the driver with `spec` (plus the host's URL and Chromium); its report.
pub async fn drive(url: &str, mut spec: Value) -> Option<Value> {
    let (chromium, prefix) = browser()?;
    // Bare imports resolve from the script's folder: it runs beside the
    // packages.
    let script = prefix.join("drive.mjs");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/views/drive.mjs"),
        &script,
    )
    .unwrap();
    spec["url"] = json!(url);
    spec["chromium"] = json!(chromium);
    let mut child = tokio::process::Command::new("node")
        .arg(&script)
        .current_dir(&prefix)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    use tokio::io::AsyncWriteExt;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(spec.to_string().as_bytes()).await.unwrap();
    drop(stdin);
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        child.wait_with_output(),
    )
    .await
    .expect("the browser run ended within 5 minutes")
    .unwrap();
    assert!(
        out.status.success(),
        "drive.mjs failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    Some(serde_json::from_slice(&out.stdout).expect("drive.mjs reports JSON"))
}

/// run_test's view: the counts and one row per failure, each with its
/// file:line, equal to the result's; "Rerun failed" (by keyboard) reaches
/// the host as a run_test call with scope `failed`.
#[tokio::test(flavor = "multi_thread")]
async fn run_test_results_render_and_rerun_the_failed_tests() {
    if browser().is_none() || !require_program("npm", "install Node.js and npm (.ci/run does)") {
        return;
    }
    let env = Env::new(&["run_test"], "");
    std::fs::write(
        env.workspace.join("package.json"),
        json!({"name": "p", "version": "1.0.0", "scripts": {"test": "node --test"}}).to_string(),
    )
    .unwrap();
    std::fs::create_dir_all(env.workspace.join("test")).unwrap();
    std::fs::write(
        env.workspace.join("test/math.test.js"),
        "const test = require('node:test');\nconst assert = require('node:assert');\n\
         test('adds', () => assert.strictEqual(1 + 1, 2));\n\
         test('multiplies', () => assert.strictEqual(2 * 3, 6));\n\
         test('divides', () => assert.strictEqual(1 / 2, 2, 'half is not two'));\n",
    )
    .unwrap();
    let host = env.start_http(&[]).await;
    let args = json!({"runner": "npm", "scope": "all", "timeout_ms": 120000,
                      "no_output_timeout_ms": 60000, "max_output_bytes": 200000,
                      "coverage": true});
    let Some(report) = drive(
        &host.url,
        json!({
            "tool": "run_test",
            "arguments": args,
            "waitFor": ".failure",
            "collect": {"names": "#failures .failure .name", "places": "#failures .failure .where", "failed": "[data-count=failed]", "status": "#status",
                        "slow": "#slow li", "coverage": "#coverage-summary"},
            "click": "#rerun",
            "afterClick": {"waitFor": "#rerun:not([disabled])", "collect": {"status": "#status"}},
            "screenshot": screenshot("run_test"),
        }),
    )
    .await
    else {
        return;
    };
    assert_eq!(report["resourceUri"], "ui://run_test/results");
    assert_eq!(report["mimeType"], "text/html;profile=mcp-app");
    let result = &report["result"]["structuredContent"];
    let failures = result["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{result}");
    let names: Vec<&str> = failures
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(report["dom"]["names"], json!(names));
    let place = format!(
        "{}:{}",
        failures[0]["file"].as_str().unwrap(),
        failures[0]["line"]
    );
    assert_eq!(report["dom"]["places"], json!([place]));
    assert_eq!(
        report["dom"]["failed"],
        json!([format!("{} failed", result["tests"]["failed"])])
    );
    assert_eq!(report["dom"]["status"], json!(["fail"]));
    // Issue 72, item 11: each section says what the answer says. The
    // slowest tests by the answer's seconds (the view read a field the
    // answer does not have: `undefined ms`).
    let slow: Vec<String> = report["dom"]["slow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    let slowest = result["slowest"].as_array().unwrap();
    assert_eq!(slow.len(), slowest.len(), "{slow:?} {result}");
    for (shown, answered) in slow.iter().zip(slowest) {
        assert!(
            shown.starts_with(answered["name"].as_str().unwrap())
                && !shown.contains("undefined")
                && (shown.ends_with(" ms") || shown.ends_with(" s")),
            "{shown}"
        );
    }
    // Coverage (node's runner gives none: why is shown).
    let why = result["coverage"]["unavailable"].as_str().unwrap();
    assert_eq!(
        report["dom"]["coverage"],
        json!([format!("unavailable: {why}")])
    );
    // The rerun reached the host, as run_test with scope `failed`.
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{report}");
    assert_eq!(calls[0]["params"]["name"], "run_test");
    assert_eq!(calls[0]["params"]["arguments"]["scope"], "failed");
    assert_eq!(calls[0]["isError"], false);
    assert_eq!(report["afterClick"]["status"], json!(["fail"]));
}

/// Issue 72, item 11: run_test's view shows the files that did not load
/// (`errors`) and a flaky check (`repeat`), each as the answer has it.
#[tokio::test(flavor = "multi_thread")]
async fn run_test_results_show_load_errors_and_a_flaky_check() {
    if browser().is_none() || !require_program("pytest", "pip install pytest (.ci/run does)") {
        return;
    }
    let env = Env::new(&["run_test"], "");
    std::fs::write(
        env.workspace.join("test_ok.py"),
        "def test_ok():\n    pass\n",
    )
    .unwrap();
    std::fs::write(
        env.workspace.join("test_broken.py"),
        "def test_x(:\n    pass\n",
    )
    .unwrap();
    let host = env.start_http(&[]).await;
    let Some(report) = drive(
        &host.url,
        json!({
            "tool": "run_test",
            "arguments": {"runner": "pytest", "scope": "all", "timeout_ms": 120000,
                          "no_output_timeout_ms": 60000, "max_output_bytes": 200000},
            "waitFor": "#errors .failure",
            "collect": {"errors": "#errors .failure .name"},
        }),
    )
    .await
    else {
        return;
    };
    let result = &report["result"]["structuredContent"];
    let names: Vec<&str> = result["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{result}"))
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(!names.is_empty(), "{result}");
    assert_eq!(report["dom"]["errors"], json!(names));

    let Some(report) = drive(
        &host.url,
        json!({
            "tool": "run_test",
            "arguments": {"runner": "pytest", "scope": "file", "target": "test_ok.py", "repeat": 2,
                          "timeout_ms": 120000, "no_output_timeout_ms": 60000, "max_output_bytes": 200000},
            "waitFor": "#repeat-tests tr",
            "collect": {"summary": "#repeat-summary", "tests": "#repeat-tests .name", "verdicts": "#repeat-tests .verdict"},
        }),
    )
    .await
    else {
        return;
    };
    let repeat = &report["result"]["structuredContent"]["repeat"];
    assert_eq!(
        report["dom"]["tests"],
        json!(["test_ok.py::test_ok"]),
        "{repeat}"
    );
    assert_eq!(
        report["dom"]["verdicts"],
        json!(["stable_pass"]),
        "{repeat}"
    );
    let summary = report["dom"]["summary"][0].as_str().unwrap();
    assert!(
        summary.starts_with(repeat["verdict"].as_str().unwrap()) && summary.contains("(PP)"),
        "{summary}"
    );
}

/// A client that does not declare the extension sees what it saw before:
/// no `_meta.ui` on tools, no ui:// resources.
#[tokio::test(flavor = "multi_thread")]
async fn clients_without_the_extension_see_no_views() {
    let env = Env::new(&["run_test"], "");
    let client = env.start().await;
    let tools = client.tools().await;
    let listed = serde_json::to_string(&tools).unwrap();
    assert!(!listed.contains("ui://"), "{listed}");
    assert!(!listed.contains("x-view"), "{listed}");
    let resources = client.service.peer().list_all_resources().await.unwrap();
    assert!(!format!("{resources:?}").contains("ui://"), "{resources:?}");
}

/// Godot's docs view: a class page whose sections hold the result's
/// members; a link to the parent class opens it through the host.
#[tokio::test(flavor = "multi_thread")]
async fn godot_class_pages_render_and_their_links_open_classes() {
    let Some(docs) = godot_docs() else { return };
    if browser().is_none() {
        return;
    }
    let env = Env::new(&["godot"], &godot_config(&docs.join("4.x")));
    let host = env.start_http(&[]).await;
    let Some(report) = drive(
        &host.url,
        json!({
            "tool": "godot.get_class",
            "arguments": {"name": "Timer"},
            "theme": "dark",
            "waitFor": "h1",
            "collect": {"title": "h1", "methods": "[data-section=methods] .member", "signals": "[data-section=signals] .member"},
            "click": ".inherits button.link",
            "afterClick": {"waitFor": "#back:not([hidden])", "collect": {"title": "h1"}},
            "screenshot": screenshot("godot"),
        }),
    )
    .await
    else {
        return;
    };
    assert_eq!(report["resourceUri"], "ui://godot/docs");
    let class = &report["result"]["structuredContent"];
    assert_eq!(report["dom"]["title"], json!([class["name"]]));
    let count = |key: &str| report["dom"][key].as_array().unwrap().len();
    assert_eq!(count("methods"), class["methods"].as_array().unwrap().len());
    assert_eq!(count("signals"), class["signals"].as_array().unwrap().len());
    let calls = report["calls"].as_array().unwrap();
    assert_eq!(calls[0]["params"]["name"], "godot.get_class");
    assert_eq!(calls[0]["params"]["arguments"]["name"], class["inherits"]);
    assert_eq!(report["afterClick"]["title"], json!([class["inherits"]]));

    // Issue 72, item 17: the reference's italics are emphasis, not
    // asterisks, and `Tween.new()` (a constructor, not a member) opens its
    // class instead of a NOT_FOUND page.
    let Some(report) = drive(
        &host.url,
        json!({
            "tool": "godot.get_class",
            "arguments": {"name": "Tween"},
            "waitFor": "h1",
            "collect": {"em": ".doc em", "text": ".doc p"},
            "click": "button.link[title=\"open Tween.new()\"]",
            "afterClick": {"waitFor": "#back:not([hidden])", "collect": {"title": "h1", "where": "#where"}},
        }),
    )
    .await
    else {
        return;
    };
    let em = report["dom"]["em"].as_array().unwrap();
    assert!(em.iter().any(|e| e == "tween"), "{em:?}");
    let text = report["dom"]["text"].to_string();
    assert!(!text.contains("*tween*"), "{text}");
    assert_eq!(report["afterClick"]["title"], json!(["Tween"]), "{report}");
}

/// pi's view: the run's timeline, one entry per tool call of the result,
/// and its answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_pi_run_shows_its_tool_calls_and_answer() {
    let Some(pi) = crate::pi::pi_cli() else {
        return;
    };
    if browser().is_none() {
        return;
    }
    let mock = crate::mock_llm::MockLlm::start(crate::mock_llm::Script::Answer {
        text: "All done.".into(),
        tool_first: Some((
            "bash".into(),
            json!({"command": "echo hi-from-tool"}).to_string(),
        )),
    })
    .await;
    let env = crate::pi::host_env(pi.parent().unwrap(), &crate::pi::custom(&mock.base_url()));
    let host = env.start_http(&[]).await;
    let Some(report) = drive(
        &host.url,
        json!({
            "tool": "pi.prompt",
            "arguments": {"prompt": "Run a tool, then answer"},
            "waitFor": "li.call",
            "collect": {"tools": "li.call .tool", "answer": "#answer", "results": "li.call details:last-of-type pre"},
            "screenshot": screenshot("pi"),
        }),
    )
    .await
    else {
        return;
    };
    let out = &report["result"]["structuredContent"];
    let tools: Vec<&Value> = out["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["toolName"])
        .collect();
    assert_eq!(report["dom"]["tools"], json!(tools));
    assert_eq!(report["dom"]["answer"], json!([out["text"]]));
    assert!(
        report["dom"]["results"][0]
            .as_str()
            .unwrap()
            .contains("hi-from-tool"),
        "{report}"
    );
}

/// Cofer's environment view: the last command's exit code and output, the
/// files it changed (its diff since the environment was made); a command
/// typed in the view runs in the environment through the host.
#[tokio::test(flavor = "multi_thread")]
async fn an_environment_shows_its_command_and_changes_and_runs_more() {
    if browser().is_none() {
        return;
    }
    let Some(f) = crate::cofer::Fixture::with_podman(&[], true).await else {
        return;
    };
    let client = f.env.start().await;
    f.create(&client, "view").await;
    let host = f.env.start_http(&[]).await;
    let Some(report) = drive(
        &host.url,
        json!({
            "tool": "environment_run_cmd",
            "arguments": f.run_args("view", "echo hello > hello.txt; echo printed"),
            "waitFor": "#diff [data-file]",
            "collect": {"exit": "#exit", "stdout": "#stdout", "files": "#diff [data-file] summary"},
            "type": {"#command": "echo more > more.txt"},
            "click": "#command",
            "afterClick": {"waitFor": "#diff [data-file=\"more.txt\"]", "collect": {"exit": "#exit", "files": "#diff [data-file] summary"}},
            "screenshot": screenshot("cofer"),
        }),
    )
    .await
    else {
        return;
    };
    assert_eq!(report["resourceUri"], "ui://cofer/environment");
    let out = &report["result"]["structuredContent"];
    assert_eq!(out["exit_code"], 0);
    assert_eq!(report["dom"]["exit"], json!(["exit code 0"]));
    assert!(
        report["dom"]["stdout"][0]
            .as_str()
            .unwrap()
            .contains("printed"),
        "{report}"
    );
    let files = report["dom"]["files"].as_array().unwrap();
    assert!(
        files
            .iter()
            .any(|f| f.as_str().unwrap().starts_with("hello.txt")),
        "{report}"
    );
    let calls = report["calls"].as_array().unwrap();
    let ran: Vec<&Value> = calls
        .iter()
        .filter(|c| c["params"]["name"] == "environment_run_cmd")
        .collect();
    assert_eq!(ran.len(), 1, "{report}");
    assert_eq!(
        ran[0]["params"]["arguments"]["command"],
        "echo more > more.txt"
    );
    assert_eq!(ran[0]["isError"], false);
    assert!(f.worktree("view").join("more.txt").exists());
}

/// `host view add`: a view put into a component built without the Rust
/// SDK is served (with the SDK's head) to a client that declares the
/// extension; a page naming a remote origin is refused, the file untouched.
#[tokio::test(flavor = "multi_thread")]
async fn host_view_add_puts_a_checked_view_into_any_component() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let env = Env::new(&["hello"], "");
    let component = env.plugins.join("hello.wasm");
    let page = env.dir.path().join("page.html");
    std::fs::write(
        &page,
        "<title>Hi</title></head><body><p id=hi>hello</p></body></html>",
    )
    .unwrap();
    let add = |file: &Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_host"))
            .args(["view", "add"])
            .arg(&component)
            .arg("greeting")
            .arg(file)
            .args(["--title", "Greeting"])
            .output()
            .unwrap()
    };
    succeeded(&add(&page));
    let remote = env.dir.path().join("remote.html");
    std::fs::write(
        &remote,
        "<script src=\"https://cdn.example/x.js\"></script></body></html>",
    )
    .unwrap();
    let before = std::fs::read(&component).unwrap();
    let out = add(&remote);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("remote origin"),
        "{out:?}"
    );
    assert_eq!(std::fs::read(&component).unwrap(), before);

    let mut child = serve_raw(&env, std::process::Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "clientInfo": {"name": "raw", "version": "0"},
        "capabilities": {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html;profile=mcp-app"]}}}}});
    for message in [
        initialize,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "ui://hello/greeting"}}),
    ] {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 3 {
        let line = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let message: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = message["id"].as_u64() {
            answers.insert(id, message);
        }
    }
    let init = &answers[&1]["result"]["capabilities"]["extensions"];
    assert!(init.get("io.modelcontextprotocol/ui").is_some(), "{init}");
    let listed = answers[&2]["result"]["resources"].to_string();
    assert!(
        listed.contains("ui://hello/greeting") && listed.contains("Greeting"),
        "{listed}"
    );
    let contents = &answers[&3]["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "text/html;profile=mcp-app");
    let html = contents["text"].as_str().unwrap();
    assert!(
        html.starts_with("<!doctype html>")
            && html.contains("McpView")
            && html.contains("<p id=hi>"),
        "{html}"
    );
    let _ = child.kill().await;
}
