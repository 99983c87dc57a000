//! Real MCP clients driving the host as a user sets them up (issue 39):
//! Claude Code, Gemini CLI, Copilot CLI and Codex, offline against mocks
//! of their model APIs on 127.0.0.1, with the server config (and the
//! allow-list) `host client-config` prints, and no approval flag beyond
//! them.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::*;
use crate::mock_llm::{MockLlm, Script};

/// Godot's reference, and the conformance fixture (its `slow_compute`
/// reports progress each second).
fn config(docs: &Path) -> String {
    godot_config(&docs.join("4.x")) + "[plugins.conformance]\ncapabilities = [\"client\"]\n"
}

/// What a client's model was sent in the scenarios every client goes
/// through ([`drive`]): each run's requests as the mock saw them.
struct Runs {
    /// `godot.get_class Control` (19.8 KB compact): requests that must
    /// carry [`Runs::expected`] whole.
    found: Vec<Value>,
    /// The same for a class that does not exist: an error to reach the
    /// model as one, naming the class meant.
    wrong: Vec<Value>,
    /// A 3-second call reporting progress each second: requests that must
    /// carry [`LONG_ANSWER`].
    long: Vec<Value>,
    /// Control's answer, as the host gives it.
    expected: String,
}

const LONG_ANSWER: &str = "Computed long in 3 seconds";

/// Drive a client (`ask` runs it once with a script) through the
/// scenarios, naming our tools as it does (`name`); its final answer
/// reaches its stdout.
async fn drive<Fut>(env: &Env, name: fn(&str) -> String, ask: impl Fn(Script) -> Fut) -> Runs
where
    Fut: Future<Output = (String, Vec<Value>)>,
{
    let expected = {
        let client = env.start().await;
        let r = client
            .call("godot.get_class", json!({"name": "Control"}))
            .await;
        r.content[0].as_text().unwrap().text.clone()
    };
    let call = |tool: &str, arguments: Value, text: &str| Script::Answer {
        text: text.into(),
        tool_first: Some((name(tool), arguments.to_string())),
    };
    let (stdout, found) = ask(call(
        "godot.get_class",
        json!({"name": "Control"}),
        "Control is the base of every UI node.",
    ))
    .await;
    assert!(stdout.contains("base of every UI node"), "{stdout}");
    let (_, wrong) = ask(call(
        "godot.get_class",
        json!({"name": "Controll"}),
        "No such class.",
    ))
    .await;
    let (_, long) = ask(call(
        "slow_compute",
        json!({"seconds": 3, "label": "long"}),
        "It took a while.",
    ))
    .await;
    Runs {
        found,
        wrong,
        long,
        expected,
    }
}

/// Claude Code's name for a tool of ours (`mcp__<server>__<tool>`).
fn claude_name(tool: &str) -> String {
    format!("mcp__wasm-host__{}", tool.replace('.', "_"))
}

/// What `host client-config CLIENT` prints: the server config and, with
/// `--allow-read-only`, the allow-list.
async fn client_config(env: &Env, client: &str, extra: &[&str]) -> String {
    let out = env
        .host(&[&["client-config", client], extra].concat())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Run `claude -p` in the workspace with the mock model; its stdout, and
/// the conversation's requests the mock saw.
async fn ask_claude(claude: &Path, env: &Env, script: Script) -> (String, Vec<Value>) {
    let mock = MockLlm::start(script).await;
    let mcp = env.dir.path().join("mcp.json");
    std::fs::write(&mcp, client_config(env, "claude-code", &[]).await).unwrap();
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut run = tokio::process::Command::new(claude);
    run.args(["-p", "Tell me about the Control class."])
        .arg("--mcp-config")
        .arg(&mcp)
        .current_dir(&env.workspace)
        .env("HOME", &home)
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", mock.port),
        )
        .env("ANTHROPIC_API_KEY", "sk-ant-mock")
        .env("DISABLE_TELEMETRY", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    finish(&mut run, &mock).await
}

/// Run a client's `-p` to its end (at most 3 minutes): its stdout, and the
/// conversation's requests `mock` saw.
async fn finish(run: &mut tokio::process::Command, mock: &MockLlm) -> (String, Vec<Value>) {
    let out = tokio::time::timeout(Duration::from_secs(180), run.kill_on_drop(true).output())
        .await
        .expect("the client ended within 3 minutes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = mock.requests.lock().unwrap().clone();
    (stdout, seen)
}

/// The `tool_result` blocks Claude Code sent the model.
fn tool_results(requests: &[Value]) -> Vec<Value> {
    requests
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .collect()
}

fn result_text(block: &Value) -> String {
    match &block["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        other => panic!("tool_result content: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_calls_read_only_tools_as_configured_and_gets_whole_answers() {
    let Some(claude) = npm_cli("CLAUDE_CODE_CLI", "claude", "@anthropic-ai/claude-code") else {
        return;
    };
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot", "conformance"], &config(&docs));
    // The user's settings: the allow-list `host client-config` prints
    // (headless Claude Code ignores an untrusted project's).
    let settings = env.dir.path().join("home/.claude");
    std::fs::create_dir_all(&settings).unwrap();
    let allow = client_config(&env, "claude-code", &["--allow-read-only"]).await;
    std::fs::write(settings.join("settings.json"), &allow).unwrap();
    let runs = drive(&env, claude_name, |script| {
        ask_claude(&claude, &env, script)
    })
    .await;
    // Our tools are offered to the model (Claude Code lists MCP tools by
    // name and loads their schemas on demand, its tool search).
    let offered = runs.found[0].to_string();
    assert!(
        offered.contains(&claude_name("godot.search")),
        "{offered:.2000}"
    );
    let only = |requests: &[Value]| {
        let results = tool_results(requests);
        assert_eq!(results.len(), 1, "{results:#?}");
        results[0].clone()
    };
    let found = only(&runs.found);
    assert_ne!(found["is_error"], true, "{found:#}");
    assert_eq!(result_text(&found), runs.expected);
    let wrong = only(&runs.wrong);
    assert_eq!(wrong["is_error"], true, "{wrong:#}");
    assert!(result_text(&wrong).contains("Control"), "{wrong:#}");
    assert_eq!(result_text(&only(&runs.long)), LONG_ANSWER);
}

/// Gemini CLI's name for a tool of ours (`mcp_<server>_<tool>`).
fn gemini_name(tool: &str) -> String {
    format!("mcp_wasm-host_{tool}")
}

/// Run `gemini -p` in the workspace with the mock model, its settings the
/// server config and allow-list `host client-config gemini` prints (and
/// the API key as its auth); its stdout, and the conversation's requests.
async fn ask_gemini(gemini: &Path, env: &Env, script: Script) -> (String, Vec<Value>) {
    let mock = MockLlm::start(script).await;
    let mut settings: Value =
        serde_json::from_str(&client_config(env, "gemini", &[]).await).unwrap();
    let allow: Value =
        serde_json::from_str(&client_config(env, "gemini", &["--allow-read-only"]).await).unwrap();
    settings["tools"] = allow["tools"].clone();
    settings["security"] = json!({"auth": {"selectedType": "gemini-api-key"}});
    let home = env.dir.path().join("gemini-home");
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();
    let mut run = tokio::process::Command::new(gemini);
    run.args(["-p", "Tell me about the Control class."])
        // A model named: its router does not ask the mock to choose one.
        .args(["-m", "gemini-2.5-flash"])
        .current_dir(&env.workspace)
        .env("HOME", &home)
        .env("GEMINI_API_KEY", "mock-key")
        .env(
            "GOOGLE_GEMINI_BASE_URL",
            format!("http://127.0.0.1:{}", mock.port),
        )
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true");
    finish(&mut run, &mock).await
}

/// The `functionResponse` parts Gemini CLI sent the model.
fn function_responses(requests: &[Value]) -> Vec<Value> {
    let Some(last) = requests.last() else {
        return Vec::new();
    };
    last["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.get("functionResponse").cloned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_cli_calls_read_only_tools_as_configured_and_gets_whole_answers() {
    let Some(gemini) = npm_cli("GEMINI_CLI", "gemini", "@google/gemini-cli") else {
        return;
    };
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot", "conformance", "run_test"], &config(&docs));
    let runs = drive(&env, gemini_name, |script| {
        ask_gemini(&gemini, &env, script)
    })
    .await;
    // The read-only tools are offered, run_test (not read-only) is not.
    let offered = runs.found[0]["tools"].to_string();
    assert!(
        offered.contains(&gemini_name("godot.search")),
        "{offered:.2000}"
    );
    assert!(!offered.contains("run_test"), "{offered:.2000}");
    let only = |requests: &[Value]| {
        let responses = function_responses(requests);
        assert_eq!(responses.len(), 1, "{responses:#?}");
        responses[0]["response"].clone()
    };
    let output = |requests: &[Value]| {
        let response = only(requests);
        response["output"].as_str().unwrap_or_default().to_string()
    };
    assert!(output(&runs.found).contains(&runs.expected));
    let said = only(&runs.wrong).to_string();
    assert!(
        said.contains("NOT_FOUND") && said.contains("did you mean: Control"),
        "{said}"
    );
    assert!(output(&runs.long).contains(LONG_ANSWER));
}

/// Copilot CLI's name for a tool of ours (`<server>-<tool>`).
fn copilot_name(tool: &str) -> String {
    format!("wasm-host-{}", tool.replace('.', "_"))
}

/// Run `copilot -p` in the workspace against the mock in its
/// bring-your-own-model mode, its MCP config what `host client-config
/// copilot` prints; its stdout, and the requests the mock saw.
async fn ask_copilot(copilot: &Path, env: &Env, script: Script) -> (String, Vec<Value>) {
    let mock = MockLlm::start(script).await;
    let home = env.dir.path().join("copilot-home");
    std::fs::create_dir_all(home.join(".copilot")).unwrap();
    std::fs::write(
        home.join(".copilot/mcp-config.json"),
        client_config(env, "copilot", &[]).await,
    )
    .unwrap();
    // The CLI unpacks itself on first run: shared with the copilot tests.
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/copilot-cli-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut run = tokio::process::Command::new(copilot);
    run.args([
        "-p",
        "Tell me about the Control class.",
        "--model",
        crate::mock_llm::MODEL,
    ])
    .current_dir(&env.workspace)
    .env("HOME", &home)
    .env("XDG_CACHE_HOME", &cache)
    .env("COPILOT_OFFLINE", "true")
    .env("COPILOT_PROVIDER_BASE_URL", mock.base_url())
    .env("COPILOT_PROVIDER_API_KEY", "mock-key");
    finish(&mut run, &mock).await
}

/// What Copilot CLI sent the model as the tool's answer.
fn tool_message(requests: &[Value]) -> String {
    let last = requests.last().expect("a request");
    let tool: Vec<&Value> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool.len(), 1, "{last:#}");
    match &tool[0]["content"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn copilot_cli_calls_read_only_tools_unasked_and_gets_whole_answers() {
    let Some(copilot) = npm_cli("COPILOT_CLI", "copilot", "@github/copilot") else {
        return;
    };
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot", "conformance"], &config(&docs));
    let runs = drive(&env, copilot_name, |script| {
        ask_copilot(&copilot, &env, script)
    })
    .await;
    let offered = runs.found[0]["tools"].to_string();
    assert!(
        offered.contains(&copilot_name("godot.search")),
        "{offered:.2000}"
    );
    assert_eq!(tool_message(&runs.found), runs.expected);
    let said = tool_message(&runs.wrong);
    assert!(
        said.contains("NOT_FOUND") && said.contains("did you mean: Control"),
        "{said}"
    );
    assert!(tool_message(&runs.long).contains(LONG_ANSWER));
}

/// Codex's name for a tool of ours: the tool in the server's namespace.
fn codex_name(tool: &str) -> String {
    format!("mcp__wasm_host/{}", tool.replace('.', "_"))
}

/// Run `codex exec` in the workspace against the mock (a provider of its
/// own, speaking the Responses API), its MCP config what `host
/// client-config codex` prints; its stdout, and the requests the mock saw.
async fn ask_codex(codex: &Path, env: &Env, script: Script) -> (String, Vec<Value>) {
    let mock = MockLlm::start(script).await;
    let home = env.dir.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    // Its own keys first, then what client-config prints (a top-level key
    // and the server's table), then the provider's table.
    let config = format!(
        "model = \"{}\"\nmodel_provider = \"mock\"\n{}\n[model_providers.mock]\nname = \"mock\"\n\
         base_url = \"{}\"\nwire_api = \"responses\"\nenv_key = \"MOCK_API_KEY\"\n",
        crate::mock_llm::MODEL,
        client_config(env, "codex", &[]).await,
        mock.base_url()
    );
    std::fs::write(home.join("config.toml"), config).unwrap();
    let mut run = tokio::process::Command::new(codex);
    run.args([
        "exec",
        "--skip-git-repo-check",
        "Tell me about the Control class.",
    ])
    .current_dir(&env.workspace)
    .env("HOME", env.dir.path())
    .env("CODEX_HOME", &home)
    .env("MOCK_API_KEY", "mock-key");
    finish(&mut run, &mock).await
}

/// What Codex sent the model as the tool's output.
fn call_output(requests: &[Value]) -> String {
    let last = requests.last().expect("a request");
    let outputs: Vec<&Value> = last["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .collect();
    assert_eq!(outputs.len(), 1, "{last:#}");
    match &outputs[0]["output"] {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_calls_read_only_tools_unasked_and_gets_whole_answers() {
    let Some(codex) = npm_cli("CODEX_CLI", "codex", "@openai/codex") else {
        return;
    };
    let Some(docs) = godot_docs() else { return };
    let env = Env::new(&["godot", "conformance"], &config(&docs));
    let runs = drive(&env, codex_name, |script| ask_codex(&codex, &env, script)).await;
    let offered = runs.found[0]["tools"].to_string();
    assert!(offered.contains("\"godot_search\""), "{offered:.2000}");
    // Codex puts a few lines of its own before the tool's output; without
    // the limit client-config sets it cut this one to 12 KB.
    let output = call_output(&runs.found);
    assert!(
        output.ends_with(&runs.expected),
        "{} of {} bytes",
        output.len(),
        runs.expected.len()
    );
    let said = call_output(&runs.wrong);
    assert!(
        said.contains("NOT_FOUND") && said.contains("did you mean: Control"),
        "{said}"
    );
    assert!(call_output(&runs.long).contains(LONG_ANSWER));
}
