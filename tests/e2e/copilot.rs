//! copilot.chat through the host with the real Copilot CLI (offline:
//! bring-your-own-key mode against the mock server on 127.0.0.1), and the
//! terminal fallback against a small fake CLI that has no `-p`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::*;
use crate::mock_llm::{MODEL, MockLlm, Script};

/// The real CLI (@github/copilot).
fn copilot_cli() -> Option<PathBuf> {
    npm_cli("COPILOT_CLI", "copilot", "@github/copilot")
}

/// A PATH where `copilot` is `cli`, with the system's tools (node) after.
fn path_with(cli_dir: &Path) -> String {
    format!("{}:/usr/local/bin:/usr/bin:/bin", cli_dir.display())
}

/// The CLI unpacks ~235 MB on first run into $XDG_CACHE_HOME: share it.
fn shared_cache() -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/copilot-cli-cache");
    std::fs::create_dir_all(&dir).unwrap();
    dir.to_string_lossy().into_owned()
}

/// A host with the copilot plugin, an empty HOME and the given variables.
fn host_env(path: &str, vars: &[(&str, String)]) -> Env {
    let mut env = Env::new(&["copilot"], "");
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    env.host_vars.extend([
        ("PATH".to_string(), path.to_string()),
        ("HOME".to_string(), home.to_string_lossy().into_owned()),
        ("XDG_CACHE_HOME".to_string(), shared_cache()),
    ]);
    for (k, v) in vars {
        env.host_vars.push((k.to_string(), v.clone()));
    }
    env
}

fn byok(mock: &MockLlm) -> Vec<(&'static str, String)> {
    vec![
        ("COPILOT_OFFLINE", "true".into()),
        ("COPILOT_PROVIDER_BASE_URL", mock.base_url()),
        ("COPILOT_PROVIDER_API_KEY", "test-key".into()),
    ]
}

/// Allow the mock's model besides the shipped ones.
fn models_file(env: &mut Env) {
    let file = env.workspace.join("models.json");
    std::fs::write(
        &file,
        json!({"models": [MODEL, "gpt-5"], "default": MODEL}).to_string(),
    )
    .unwrap();
    env.host_vars.push((
        "COPILOT_MODELS_FILE".into(),
        file.to_string_lossy().into_owned(),
    ));
}

fn error(result: &rmcp::model::CallToolResult) -> Value {
    assert!(is_error(result), "expected an error: {result:?}");
    structured(result).clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_answer_from_the_cli_in_byok_mode() {
    let Some(cli) = copilot_cli() else { return };
    // The model asks for a tool first (the CLI runs it and sends the
    // result back), then answers.
    let mock = MockLlm::start(Script::Answer {
        text: "Hello from the mock model.".into(),
        tool_first: Some(("view".into(), json!({"path": "README.md"}).to_string())),
    })
    .await;
    let mut env = host_env(&path_with(cli.parent().unwrap()), &byok(&mock));
    models_file(&mut env);
    let client = env.start().await;
    let r = client
        .call(
            "copilot.chat",
            json!({"input": "Say hello", "model": MODEL}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let out = structured(&r);
    assert_eq!(out["exit_code"], 0);
    assert_eq!(out["mode"], "prompt");
    assert_eq!(out["model"], MODEL);
    assert!(
        out["stdout"]
            .as_str()
            .unwrap()
            .contains("Hello from the mock model."),
        "{out}"
    );
    let requests = mock.requests.lock().unwrap();
    assert!(!requests.is_empty());
    assert_eq!(
        requests[0]["model"], MODEL,
        "the model reached the provider"
    );
    let prompt = requests[0]["messages"].to_string();
    assert!(prompt.contains("Say hello"), "the input reached the model");
    drop(requests);

    // Issue 54, item 15: a Markdown list and a pasted stack trace are
    // prompts like any other, and reach the model as they are.
    let input =
        "- first item\n- second item\n/usr/lib/node/app.js:3\n    at main (/srv/app.js:1:2)";
    let r = client
        .call("copilot.chat", json!({"input": input, "model": MODEL}))
        .await;
    assert!(!is_error(&r), "{r:?}");
    let requests = mock.requests.lock().unwrap();
    let asked = requests.last().unwrap()["messages"].to_string();
    assert!(
        requests
            .iter()
            .any(|r| r["messages"].to_string().contains("- first item")),
        "the list reached the model: {asked}"
    );
    let last = requests.last().unwrap()["messages"].as_array().unwrap();
    assert!(
        last.iter().any(|m| m["role"] == "tool"),
        "the CLI ran the tool and sent its result: {last:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_answer_keeps_its_ends_within_the_budget() {
    let Some(cli) = copilot_cli() else { return };
    // 60 KB of answer: more than clients pass their model whole.
    let body: String = (0..2500)
        .map(|i| format!("line {i:05} of the answer\n"))
        .collect();
    let text = format!("FIRST WORDS\n{body}LAST WORDS");
    let mock = MockLlm::start(Script::Answer {
        text: text.clone(),
        tool_first: None,
    })
    .await;
    let mut env = host_env(&path_with(cli.parent().unwrap()), &byok(&mock));
    models_file(&mut env);
    let client = env.start().await;
    let r = client
        .call(
            "copilot.chat",
            json!({"input": "Say a lot", "model": MODEL}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let out = structured(&r);
    let stdout = out["stdout"].as_str().unwrap();
    assert!(
        stdout.len() + out["stderr"].as_str().unwrap().len() <= 17 * 1024,
        "{}",
        stdout.len()
    );
    assert!(
        stdout.contains("FIRST WORDS") && stdout.contains("LAST WORDS"),
        "{stdout}"
    );
    let left_out = out["omitted_bytes"]["stdout"].as_u64().unwrap();
    assert!(left_out > 40_000, "{out}");
    assert!(stdout.contains(&format!("{left_out} bytes of copilot's output left out")));
    assert_eq!(out["truncated"], true);
}

#[tokio::test(flavor = "multi_thread")]
async fn not_logged_in_without_a_token() {
    let Some(cli) = copilot_cli() else { return };
    let env = host_env(&path_with(cli.parent().unwrap()), &[]);
    let client = env.start().await;
    let r = client
        .call("copilot.chat", json!({"input": "hello", "model": "gpt-5"}))
        .await;
    let e = error(&r);
    assert_eq!(e["code"], "not_logged_in", "{e}");
    assert!(e["remediation"].as_str().unwrap().contains("/login"), "{e}");
    // Issue 72, item 20: the CLI ran, so its exit code is there.
    assert!(e["exit_code"].is_i64(), "{e}");
    assert!(
        e["stderr"]
            .as_str()
            .unwrap()
            .contains("No authentication information found")
    );
}

/// Issue 42, item 8: a classic token and a token GitHub cannot be reached
/// to check get their own codes and fixes, not "run /login". GitHub is
/// made unreachable by a proxy on a closed loopback port, so nothing
/// leaves the machine.
#[tokio::test(flavor = "multi_thread")]
async fn a_classic_token_and_no_network_are_told_apart_from_no_login() {
    let Some(cli) = copilot_cli() else { return };
    let path = path_with(cli.parent().unwrap());
    // token, the code, whether to retry, a word of the fix
    let cases = [
        (
            format!("ghp_{}", "a".repeat(36)),
            "unsupported_token",
            false,
            "fine-grained",
        ),
        (
            format!("github_pat_{}", "b".repeat(40)),
            "github_unreachable",
            true,
            "HTTPS_PROXY",
        ),
    ];
    for (token, code, retryable, fix) in cases {
        let env = host_env(
            &path,
            &[
                ("COPILOT_GITHUB_TOKEN", token),
                ("HTTPS_PROXY", "http://127.0.0.1:9".to_string()),
            ],
        );
        let client = env.start().await;
        let r = client
            .call("copilot.chat", json!({"input": "hello", "model": "gpt-5"}))
            .await;
        let e = error(&r);
        assert_eq!(e["code"], code, "{e}");
        assert_eq!(e["retryable"], retryable, "{e}");
        assert!(e["remediation"].as_str().unwrap().contains(fix), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_that_never_answers_times_out_and_nothing_is_left() {
    let Some(cli) = copilot_cli() else { return };
    let mock = MockLlm::start(Script::Hang).await;
    let mut env = host_env(&path_with(cli.parent().unwrap()), &byok(&mock));
    models_file(&mut env);
    let client = env.start().await;
    let started = Instant::now();
    let r = client
        .call("copilot.chat", json!({"input": "hello", "model": MODEL}))
        .await;
    let took = started.elapsed();
    let e = error(&r);
    assert_eq!(e["code"], "timeout", "{e}");
    // Issue 54, item 19: worth another try, and what came so far is kept.
    assert_eq!(e["retryable"], true, "{e}");
    assert!(
        e.get("stdout").is_some() && e.get("stderr").is_some(),
        "{e}"
    );
    assert!(
        took >= Duration::from_secs(29) && took < Duration::from_secs(40),
        "{took:?}"
    );
    let home = env.dir.path().join("home").to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let environ = String::from_utf8_lossy(&environ);
        // The host itself has this HOME too; anything else is the CLI's.
        let host = entry.file_name() == "self"
            || entry.file_name().to_string_lossy() == client.pid.to_string();
        assert!(
            host || !environ.contains(&format!("HOME={home}\0"))
                || process_gone_path(&entry.path()),
            "a process of the timed-out run is still alive: {:?}",
            entry.path()
        );
    }
}

fn process_gone_path(proc_dir: &Path) -> bool {
    proc_dir
        .file_name()
        .and_then(|n| n.to_str()?.parse().ok())
        .is_none_or(process_gone)
}

#[tokio::test(flavor = "multi_thread")]
async fn refusals_before_anything_runs() {
    // No copilot needed: none of these may start it.
    let empty = tempfile::tempdir().unwrap();
    let mut env = host_env(&path_with(empty.path()), &[]);
    let bad = env.workspace.join("bad-models.json");
    std::fs::write(&bad, r#"{"models": ["ok", "--help"]}"#).unwrap();
    env.host_vars.push((
        "COPILOT_MODELS_FILE".into(),
        bad.to_string_lossy().into_owned(),
    ));
    let client = env.start().await;
    let e = error(&client.call("copilot.chat", json!({"input": "hello"})).await);
    assert_eq!(e["code"], "invalid_config", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("--help"),
        "names the bad entry: {e}"
    );
    drop(client);

    let env = host_env(&path_with(empty.path()), &[]);
    let client = env.start().await;
    for (args, why) in [
        (json!({"input": "hi\u{1b}[2J"}), "escape sequence"),
        (
            json!({"input": "hi", "allow_all_tools": true}),
            "unknown option",
        ),
        (
            json!({"input": "hi", "model": "not-a-model"}),
            "unknown model",
        ),
        (
            json!({"input": "hi", "model": "--yolo"}),
            "option as a model",
        ),
    ] {
        let e = error(&client.call("copilot.chat", args).await);
        assert_eq!(e["code"], "invalid_request", "{why}: {e}");
    }
    let e = error(
        &client
            .call("copilot.chat", json!({"input": "hello", "model": "gpt-5"}))
            .await,
    );
    assert_eq!(e["code"], "not_installed", "{e}");
    assert!(
        e["remediation"].as_str().unwrap().contains("npm install"),
        "{e}"
    );
}

/// A CLI without `-p` that only talks on a terminal: a trust question,
/// a `> ` prompt, `/model`, then answers.
const FAKE_CLI: &str = r#"#!/bin/sh
case "$1" in -p|--prompt*|--model) echo "error: unknown option '$1'" >&2; exit 1;; esac
[ -t 0 ] || { echo "No prompt provided. Run in an interactive terminal." >&2; exit 1; }
printf 'Confirm folder trust\r\nDo you trust the files in this folder?\r\n> 1. Yes, proceed\r\n  2. No, exit\r\n'
read answer
model=default
printf '> '
while read line; do
  case "$line" in
    "/model "*) model="${line#/model }"; printf 'Model set to %s\r\n' "$model";;
    /exit) exit 0;;
    *) printf 'Answer from %s: you said "%s"\r\n' "$model" "$line";;
  esac
  printf '> '
done
"#;

#[tokio::test(flavor = "multi_thread")]
async fn falls_back_to_a_terminal_when_the_cli_has_no_prompt_flag() {
    let bin = tempfile::tempdir().unwrap();
    let fake = bin.path().join("copilot");
    std::fs::write(&fake, FAKE_CLI).unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let env = host_env(&path_with(bin.path()), &[]);
    let client = env.start().await;
    let r = client
        .call(
            "copilot.chat",
            json!({"input": "hello there", "model": "gpt-5"}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    let out = structured(&r);
    assert_eq!(out["mode"], "tty");
    assert_eq!(
        out["stdout"], "Answer from gpt-5: you said \"hello there\"\n",
        "{out}"
    );
    assert_eq!(out["exit_code"], 0, "{out}");

    // Issue 54, item 16: a prompt (echoed back) and an answer that talk
    // about logging in are not the CLI's own login state.
    let r = client
        .call(
            "copilot.chat",
            json!({"input": "why does my app say Please log in when not logged in?", "model": "gpt-5"}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(
        structured(&r)["stdout"]
            .as_str()
            .unwrap()
            .contains("you said \"why does my app say Please log in"),
        "{r:?}"
    );

    // A session would run `!cmd` in the shell, `/cmd` as a slash command
    // and read `@file`: refused.
    for input in [
        "please\n!touch pwned",
        "summarise @/etc/passwd",
        "explain\n/model claude-sonnet-4.5",
    ] {
        let r = client
            .call("copilot.chat", json!({"input": input, "model": "gpt-5"}))
            .await;
        assert!(is_error(&r), "{input:?}: {r:?}");
        assert_eq!(structured(&r)["code"], "invalid_request", "{r:?}");
        assert!(
            structured(&r)["message"]
                .as_str()
                .unwrap()
                .contains("terminal mode"),
            "{r:?}"
        );
    }
}

/// Issue 42, item 9: a model added to models.json while the host runs is
/// taken at once (the listed schema's enum refused it until a restart),
/// and `model: null` means the default. No copilot on PATH: passing the
/// checks ends at `not_installed`.
#[tokio::test(flavor = "multi_thread")]
async fn models_are_read_at_each_call_and_null_is_the_default() {
    let empty = tempfile::tempdir().unwrap();
    let mut env = host_env(&path_with(empty.path()), &[]);
    let file = env.workspace.join("my-models.json");
    std::fs::write(&file, r#"{"models": ["alpha"], "default": "alpha"}"#).unwrap();
    // Issue 54, item 19: a relative path is the workspace's.
    env.host_vars
        .push(("COPILOT_MODELS_FILE".into(), "my-models.json".into()));
    let client = env.start().await;
    client.tools().await;
    std::fs::write(
        &file,
        r#"{"models": ["alpha", "beta"], "default": "alpha"}"#,
    )
    .unwrap();
    for args in [
        json!({"input": "hello", "model": "beta"}),
        json!({"input": "hello", "model": null}),
    ] {
        let e = error(&client.call("copilot.chat", args.clone()).await);
        assert_eq!(e["code"], "not_installed", "{args}: {e}");
    }
    let e = error(
        &client
            .call("copilot.chat", json!({"input": "hello", "model": "gamma"}))
            .await,
    );
    assert_eq!(e["code"], "invalid_request", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("beta"),
        "names the models: {e}"
    );
}

/// Issue 72, item 20: a `copilot` on PATH that cannot be run (no execute
/// bit) is `not_runnable`, not `not_installed` "install it".
#[tokio::test(flavor = "multi_thread")]
async fn a_cli_without_its_execute_bit_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("copilot"), "#!/bin/sh\necho hi\n").unwrap();
    let env = host_env(&path_with(dir.path()), &[]);
    let client = env.start().await;
    let e = error(
        &client
            .call("copilot.chat", json!({"input": "hello", "model": "gpt-5"}))
            .await,
    );
    assert_eq!(e["code"], "not_runnable", "{e}");
    assert!(
        e["remediation"].as_str().unwrap().contains("chmod +x"),
        "{e}"
    );
}
