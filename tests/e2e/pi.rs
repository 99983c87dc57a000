//! pi.prompt through the host with the real pi CLI in RPC mode, against the
//! mock OpenAI-compatible server on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use crate::harness::*;
use crate::mock_llm::{MODEL, MockLlm, Script};

/// The real CLI (@mariozechner/pi-coding-agent).
pub(crate) fn pi_cli() -> Option<PathBuf> {
    npm_cli("PI_CLI", "pi", "@mariozechner/pi-coding-agent")
}

/// A host with the pi plugin, an empty HOME, `pi` found through PATH.
pub(crate) fn host_env(pi_dir: &Path, vars: &[(&str, String)]) -> Env {
    let mut env = Env::new(&["pi"], "");
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    env.host_vars.extend([
        (
            "PATH".to_string(),
            format!("{}:/usr/local/bin:/usr/bin:/bin", pi_dir.display()),
        ),
        ("HOME".to_string(), home.to_string_lossy().into_owned()),
        ("PI_MAX_RETRIES".to_string(), "1".into()),
        ("PI_RETRY_BASE_DELAY_MS".to_string(), "100".into()),
    ]);
    env.host_vars
        .extend(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
    env
}

pub(crate) fn custom(base_url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("PI_PROVIDER", "custom".into()),
        ("PI_BASE_URL", base_url.into()),
        ("PI_MODEL", MODEL.into()),
        ("PI_API_KEY", "test-key".into()),
    ]
}

/// The relayed events of a call in the order the host sent them: the
/// client may see notifications out of order, but their progress values
/// increase with every one.
fn events(notes: &[Note]) -> Vec<Value> {
    let mut relayed: Vec<(f64, Value)> = notes
        .iter()
        .filter_map(|n| match n {
            Note::Progress(p) => {
                let event = serde_json::from_str(p.message.as_deref()?).ok()?;
                Some((p.progress, event))
            }
            _ => None,
        })
        .collect();
    relayed.sort_by(|a, b| a.0.total_cmp(&b.0));
    relayed.into_iter().map(|(_, e)| e).collect()
}

fn names(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event"].as_str().unwrap_or("?"))
        .collect()
}

/// No process is left whose environment has this test's HOME (the host
/// itself aside), once the kill has had a moment to land.
async fn nothing_left(env: &Env, host_pid: u32) {
    let home = format!("HOME={}\0", env.dir.path().join("home").display());
    let survivors = || -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if pid == host_pid || pid == std::process::id() {
                continue;
            }
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            if String::from_utf8_lossy(&environ).contains(&home) && !process_gone(pid as i32) {
                let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
                found.push(format!(
                    "{pid} {}",
                    String::from_utf8_lossy(&cmdline).replace('\0', " ")
                ));
            }
        }
        found
    };
    for _ in 0..30 {
        if survivors().is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("left running after 3 s: {:?}", survivors());
}

pub(crate) async fn call_with_token(client: &Client, args: Value) -> (CallToolResult, Vec<Value>) {
    let handle = client.start_call("pi.prompt", args, "pi-1").await;
    let result = Client::finish(handle).await;
    // The client records notifications as they are handled, which can be
    // after the response and out of order: wait for the terminal one and
    // for every one before it (the host numbers them 1, 2, 3, ...).
    let mut notes = Vec::new();
    for _ in 0..250 {
        notes.extend(client.drain_notes().await);
        let mut numbers: Vec<f64> = notes
            .iter()
            .filter_map(|n| match n {
                Note::Progress(p) => Some(p.progress),
                _ => None,
            })
            .collect();
        numbers.sort_by(f64::total_cmp);
        let gapless = numbers
            .iter()
            .enumerate()
            .all(|(i, n)| *n == (i + 1) as f64);
        if gapless && events(&notes).iter().any(|e| e["event"] == "call_end") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (result, events(&notes))
}

#[tokio::test(flavor = "multi_thread")]
async fn relays_the_loop_and_returns_the_answer() {
    let Some(pi) = pi_cli() else { return };
    let mock = MockLlm::start(Script::Answer {
        text: "All done.".into(),
        tool_first: Some((
            "bash".into(),
            json!({"command": "echo hi-from-tool"}).to_string(),
        )),
    })
    .await;
    let env = host_env(pi.parent().unwrap(), &custom(&mock.base_url()));
    let client = env.start().await;
    let (r, events) = call_with_token(&client, json!({"prompt": "Run a tool, then answer"})).await;
    assert!(!is_error(&r), "{r:?}");
    let out = structured(&r);
    assert_eq!(out["text"], "All done.");
    assert_eq!(out["stop_reason"], "stop");
    assert_eq!(out["turns"], 2);
    assert_eq!(out["tool_calls"][0]["toolCallId"], "call_mock_1");
    assert_eq!(out["tool_calls"][0]["toolName"], "bash");
    // The arguments, as the book promises (docs/src/tools/pi.md) (they were always null).
    assert_eq!(
        out["tool_calls"][0]["args"]["command"], "echo hi-from-tool",
        "{out}"
    );
    // And what the tool gave back (issue 56: the run's timeline).
    assert!(
        out["tool_calls"][0]["result"]
            .as_str()
            .unwrap()
            .contains("hi-from-tool"),
        "{out}"
    );
    assert!(out["usage"]["totalTokens"].is_u64(), "{out}");

    let kinds = names(&events);
    let start = kinds
        .iter()
        .position(|k| *k == "tool_execution_start")
        .expect("tool_execution_start relayed");
    let end = kinds
        .iter()
        .position(|k| *k == "tool_execution_end")
        .expect("tool_execution_end relayed");
    assert!(start < end, "{kinds:?}");
    for i in [start, end] {
        assert_eq!(
            events[i]["data"]["toolCallId"], "call_mock_1",
            "{}",
            events[i]
        );
        assert_eq!(events[i]["data"]["toolName"], "bash");
    }
    for expected in [
        "run_start",
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ] {
        assert!(
            kinds.contains(&expected),
            "{expected} missing from {kinds:?}"
        );
    }
    assert_eq!(
        *kinds.last().unwrap(),
        "call_end",
        "terminal event last: {kinds:?}"
    );
    assert_eq!(events.last().unwrap()["data"]["outcome"], "ok");
    assert!(
        !kinds.contains(&"message_update"),
        "token deltas are not relayed"
    );
    // pi's config went to the plugin's own agent dir, not the user's.
    assert!(!env.dir.path().join("home/.pi").exists());
    assert!(env.cache.join("plugins/pi/agent/models.json").is_file());
    let models = std::fs::read_to_string(env.cache.join("plugins/pi/agent/models.json")).unwrap();
    assert!(
        !models.contains("test-key"),
        "the key is passed by environment, never written: {models}"
    );
    nothing_left(&env, client.pid).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_that_is_down_is_a_retryable_error_with_a_terminal_event() {
    let Some(pi) = pi_cli() else { return };
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/v1",
        closed.local_addr().unwrap().port()
    );
    drop(closed);
    let env = host_env(pi.parent().unwrap(), &custom(&url));
    let client = env.start().await;
    let (r, events) = call_with_token(&client, json!({"prompt": "hello"})).await;
    assert!(is_error(&r), "{r:?}");
    let e = structured(&r);
    assert_eq!(e["code"], "provider_error", "{e}");
    assert_eq!(e["retryable"], true);
    let kinds = names(&events);
    assert!(kinds.contains(&"auto_retry_start"), "pi retried: {kinds:?}");
    assert_eq!(*kinds.last().unwrap(), "call_end", "{kinds:?}");
    assert_eq!(events.last().unwrap()["data"]["outcome"], "provider_error");
    nothing_left(&env, client.pid).await;
}

/// Issue 42, item 7: a key the provider refuses is not worth retrying.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_key_is_a_non_retryable_auth_error() {
    let Some(pi) = pi_cli() else { return };
    let mock = MockLlm::start(Script::Unauthorized).await;
    let env = host_env(pi.parent().unwrap(), &custom(&mock.base_url()));
    let client = env.start().await;
    let (r, events) = call_with_token(&client, json!({"prompt": "hello"})).await;
    assert!(is_error(&r), "{r:?}");
    let e = structured(&r);
    assert_eq!(e["code"], "provider_auth_failed", "{e}");
    assert_eq!(e["retryable"], false, "{e}");
    assert_eq!(*names(&events).last().unwrap(), "call_end");
    nothing_left(&env, client.pid).await;
}

/// Issue 54, item 17: a provider that is rate limited (429) or failing
/// (500) is worth trying again later, whatever digits its message holds
/// ("Limit 40100", "in 403ms"); only a status that refuses the
/// credentials (401, 403) is an auth failure, and an unknown model (404)
/// is not worth retrying either.
#[tokio::test(flavor = "multi_thread")]
async fn provider_errors_are_classified_by_their_status() {
    let Some(pi) = pi_cli() else { return };
    let cases = [
        (
            "429 Too Many Requests",
            "Rate limit reached for requests. Limit 40100, Used 40100. Please try again in 403ms.",
            "provider_error",
            true,
        ),
        (
            "500 Internal Server Error",
            "The server had an error (Limit 40100); try again in 403ms",
            "provider_error",
            true,
        ),
        (
            "404 Not Found",
            "The model `nope` does not exist or you do not have access to it.",
            "provider_error",
            false,
        ),
        (
            "403 Forbidden",
            "Project does not have access to this API key.",
            "provider_auth_failed",
            false,
        ),
    ];
    for (status, message, code, retryable) in cases {
        let mock = MockLlm::start(Script::Fails {
            status,
            message: message.into(),
            retry_after: None,
        })
        .await;
        let env = host_env(pi.parent().unwrap(), &custom(&mock.base_url()));
        let client = env.start().await;
        let (r, events) = call_with_token(&client, json!({"prompt": "hello"})).await;
        assert!(is_error(&r), "{status}: {r:?}");
        let e = structured(&r);
        assert_eq!(e["code"], code, "{status}: {e}");
        assert_eq!(e["retryable"], retryable, "{status}: {e}");
        assert_eq!(*names(&events).last().unwrap(), "call_end");
        nothing_left(&env, client.pid).await;
    }
}

/// Issue 54, item 18: a call whose own limit (limits.timeout_ms) is
/// shorter than pi's timeout ends with the tool's `timeout`, saying which
/// limit, not with the host stopping the plugin.
#[tokio::test(flavor = "multi_thread")]
async fn the_calls_own_limit_ends_pi_as_the_tools_timeout() {
    let Some(pi) = pi_cli() else { return };
    let mock = MockLlm::start(Script::Hang).await;
    let mut env = host_env(pi.parent().unwrap(), &custom(&mock.base_url()));
    std::fs::write(&env.config, "[plugins.pi.limits]\ntimeout_ms = 8000\n").unwrap();
    env.host_vars.retain(|(k, _)| k != "PI_TIMEOUT_MS");
    let client = env.start().await;
    let (r, events) = call_with_token(&client, json!({"prompt": "hello"})).await;
    let e = structured(&r);
    assert_eq!(e["code"], "timeout", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("limits.timeout_ms"),
        "{e}"
    );
    assert_eq!(*names(&events).last().unwrap(), "call_end");
    nothing_left(&env, client.pid).await;
}

/// A stand-in `pi` that records being started in its working folder (the
/// workspace: the one folder pi may write besides its own): none of the
/// refusals may start it.
fn tripwire(dir: &Path) {
    let script = dir.join("pi");
    std::fs::write(
        &script,
        "#!/bin/sh\ntouch \"$PWD/pi-was-started\"\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// Whether the tripwire ran for `env`.
fn started(env: &Env) -> bool {
    env.workspace.join("pi-was-started").exists()
}

#[tokio::test(flavor = "multi_thread")]
async fn providers_that_are_not_ready_are_refused_before_pi_starts() {
    let bin = tempfile::tempdir().unwrap();
    tripwire(bin.path());

    let env = host_env(bin.path(), &[("PI_PROVIDER", "claude".into())]);
    let client = env.start().await;
    let (r, events) = call_with_token(&client, json!({"prompt": "hello"})).await;
    let e = structured(&r);
    assert_eq!(e["code"], "claude_auth_required", "{e}");
    assert_eq!(e["retryable"], false);
    assert_eq!(
        names(&events),
        ["run_start", "call_end"],
        "a terminal event even for a refusal"
    );
    drop(client);

    // Issue 54, item 18: an OAuth entry without a token is no login.
    let env = host_env(bin.path(), &[("PI_PROVIDER", "claude".into())]);
    let agent = env.cache.join("plugins/pi/agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("auth.json"),
        r#"{"anthropic": {"type": "oauth", "access": "", "refresh": ""}}"#,
    )
    .unwrap();
    let client = env.start().await;
    let (r, _) = call_with_token(&client, json!({"prompt": "hello"})).await;
    assert_eq!(structured(&r)["code"], "claude_auth_required", "{r:?}");
    assert!(!started(&env), "pi was started");
    drop(client);

    let env = host_env(
        bin.path(),
        &[
            ("PI_PROVIDER", "custom".into()),
            ("PI_BASE_URL", "http://127.0.0.1:9/v1".into()),
        ],
    );
    let client = env.start().await;
    let (r, _) = call_with_token(&client, json!({"prompt": "hello"})).await;
    let e = structured(&r);
    assert_eq!(e["code"], "custom_provider_incomplete", "{e}");
    assert_eq!(e["missing"], json!(["model", "apiKey"]));
    assert!(!started(&env), "pi was started");

    // Issue 54, item 17: a base URL that is no URL is refused, not retried.
    let mut vars = custom("api.example.test/v1");
    vars.retain(|(k, _)| *k != "PI_BASE_URL");
    vars.push(("PI_BASE_URL", "api.example.test/v1".into()));
    let env = host_env(bin.path(), &vars);
    let client = env.start().await;
    let (r, _) = call_with_token(&client, json!({"prompt": "hello"})).await;
    let e = structured(&r);
    assert_eq!(e["code"], "invalid_config", "{e}");
    assert_eq!(e["retryable"], false, "{e}");
    assert!(!started(&env), "pi was started");

    // With the tripwire as pi, a ready provider does start it: the check is real.
    let env = host_env(bin.path(), &custom("http://127.0.0.1:9/v1"));
    let client = env.start().await;
    let (r, _) = call_with_token(&client, json!({"prompt": "hello"})).await;
    assert_eq!(structured(&r)["code"], "pi_crashed", "{r:?}");
    assert!(started(&env));
}

#[tokio::test(flavor = "multi_thread")]
async fn pi_missing_is_a_typed_error() {
    let empty = tempfile::tempdir().unwrap();
    let env = host_env(empty.path(), &custom("http://127.0.0.1:9/v1"));
    let client = env.start().await;
    let (r, _) = call_with_token(&client, json!({"prompt": "hello"})).await;
    let e = structured(&r);
    assert_eq!(e["code"], "pi_not_installed", "{e}");
    assert!(
        e["message"].as_str().unwrap().contains("npm install"),
        "{e}"
    );
}

/// Issue 42, item 10: a client that asked for errors only, with no progress
/// token, still hears how a failed call's event stream ended; the `info`
/// events stay below its level.
#[tokio::test(flavor = "multi_thread")]
async fn at_level_error_a_failed_calls_stream_still_ends() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let empty = tempfile::tempdir().unwrap();
    let env = host_env(empty.path(), &custom("http://127.0.0.1:9/v1"));
    // A raw client: rmcp's own puts a progress token on every call.
    let mut child = serve_raw(&env, std::process::Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let level = json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
        "params": {"level": "error"}});
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "pi.prompt", "arguments": {"prompt": "hello"}}});
    stdin
        .write_all(format!("{}{level}\n", handshake()).as_bytes())
        .await
        .unwrap();
    // The level is set before the call starts.
    while let Some(line) = lines.next_line().await.unwrap() {
        if serde_json::from_str::<Value>(&line).unwrap()["id"] == 2 {
            break;
        }
    }
    stdin
        .write_all(format!("{call}\n").as_bytes())
        .await
        .unwrap();
    let mut logged = Vec::new();
    loop {
        let line = lines.next_line().await.unwrap().expect("the call's answer");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["method"] == "notifications/message" {
            logged.push(message["params"].clone());
        }
        if message["id"] == 3 {
            assert_eq!(message["result"]["isError"], true, "{message}");
            break;
        }
    }
    let event = |name: &str| logged.iter().filter(|l| l["data"]["event"] == name).count();
    assert_eq!(event("call_end"), 1, "{logged:?}");
    assert_eq!(event("run_start"), 0, "{logged:?}");
    assert!(logged.iter().all(|l| l["level"] == "error"), "{logged:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn cancellation_mid_run_aborts_pi_and_still_ends_the_stream() {
    let Some(pi) = pi_cli() else { return };
    let mock = MockLlm::start(Script::Hang).await;
    let env = host_env(pi.parent().unwrap(), &custom(&mock.base_url()));
    let client = env.start().await;
    let handle = client
        .start_call("pi.prompt", json!({"prompt": "hello"}), "pi-2")
        .await;
    // Wait until pi is asking the model, then cancel.
    let asked = client
        .wait_note(Duration::from_secs(30), |n| matches!(n, Note::Progress(p) if p.message.as_deref().is_some_and(|m| m.contains("\"turn_start\""))))
        .await;
    assert!(asked.is_some(), "pi never started its turn");
    handle.cancel(Some("test cancels".into())).await.unwrap();
    let end = client
        .wait_note(Duration::from_secs(15), |n| matches!(n, Note::Progress(p) if p.message.as_deref().is_some_and(|m| m.contains("\"call_end\""))))
        .await;
    let Some(Note::Progress(end)) = end else {
        panic!("no terminal event after cancellation")
    };
    let end: Value = serde_json::from_str(end.message.as_deref().unwrap()).unwrap();
    assert_eq!(end["data"]["outcome"], "cancelled", "{end}");
    nothing_left(&env, client.pid).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pi_ends_with_the_host() {
    let Some(pi) = pi_cli() else { return };
    let mock = MockLlm::start(Script::Hang).await;
    let env = host_env(pi.parent().unwrap(), &custom(&mock.base_url()));
    for signal in [
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGKILL,
    ] {
        let client = env.start().await;
        let _call = client
            .start_call("pi.prompt", json!({"prompt": "hello"}), "pi-3")
            .await;
        let asked = client
            .wait_note(Duration::from_secs(30), |n| matches!(n, Note::Progress(p) if p.message.as_deref().is_some_and(|m| m.contains("\"turn_start\""))))
            .await;
        assert!(asked.is_some(), "pi never started its turn");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(client.pid as i32), signal).unwrap();
        if signal == nix::sys::signal::Signal::SIGTERM {
            // The transport is still open: the stream gets its last event.
            let end = client
                .wait_note(Duration::from_secs(5), |n| matches!(n, Note::Progress(p) if p.message.as_deref().is_some_and(|m| m.contains("\"call_end\""))))
                .await;
            assert!(end.is_some(), "no call_end before the host exited");
        }
        nothing_left(&env, client.pid).await;
    }
}
