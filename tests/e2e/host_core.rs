//! The host itself: loading, schemas, isolation, policy, hot reload, and a
//! clean stdout.

// Reads MCP logging notifications, deprecated by SEP-2577 but still sent.
#![allow(deprecated)]

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::harness::Client;
use crate::harness::*;

const FAULTY_LIMITS: &str = "[plugins.faulty.limits]\ntimeout_ms = 1000\nmemory_mb = 32\n";

#[tokio::test]
async fn tools_list_shows_every_plugin_with_schemas() {
    let env = Env::new(&["run_test", "faulty"], "");
    let host = env.start().await;
    let tools = host.tools().await;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "chatty",
            "dotted.echo",
            "env_var",
            "fault_fs",
            "fault_huge",
            "fault_io",
            "fault_loop",
            "fault_oom",
            "fault_trap",
            "noop",
            "pty_script",
            "read_program",
            "run_test",
            "spawn"
        ]
    );
    let run_test = tools.iter().find(|t| t.name == "run_test").unwrap();
    let required = run_test.input_schema["required"].as_array().unwrap();
    assert!(
        required.contains(&json!("timeout_ms"))
            && required.contains(&json!("no_output_timeout_ms"))
    );
    assert!(run_test.output_schema.as_ref().unwrap()["properties"]["excerpt"].is_object());
}

#[tokio::test]
async fn plugin_logs_progress_and_events_reach_the_client() {
    let env = Env::new(&["faulty"], "");
    let host = env.start().await;
    // With a progress token (rmcp's client always sends one): progress and
    // the event come as progress notifications, before the response, in
    // increasing order; info logs as logging notifications, debug stays in
    // the host's own log. (Without a token: see stdout_carries_json_rpc_only.)
    let result = Client::finish(host.start_call("chatty", json!({}), "p1").await).await;
    assert!(!is_error(&result));
    let notes = host.drain_notes().await;
    let logs: Vec<Value> = notes
        .iter()
        .filter_map(|n| {
            if let Note::Log(l) = n {
                Some(l.data.clone())
            } else {
                None
            }
        })
        .collect();
    assert!(
        logs.iter().any(|d| d["message"] == "hello from chatty"),
        "{notes:?}"
    );
    assert!(
        !logs.iter().any(|d| d.to_string().contains("too quiet")),
        "{notes:?}"
    );
    let mut progress: Vec<_> = notes
        .into_iter()
        .filter_map(|n| {
            if let Note::Progress(p) = n {
                Some(p)
            } else {
                None
            }
        })
        .collect();
    // The client may record them out of order; the host's values increase.
    progress.sort_by(|a, b| a.progress.total_cmp(&b.progress));
    assert_eq!(progress.len(), 3, "{progress:?}");
    assert_eq!(progress[0].message.as_deref(), Some("half way"));
    let event: Value = serde_json::from_str(progress[1].message.as_deref().unwrap()).unwrap();
    assert_eq!(event["event"], "step");
    // A call that relayed events ends with the host's `call_end`.
    let end: Value = serde_json::from_str(progress[2].message.as_deref().unwrap()).unwrap();
    assert_eq!(end["event"], "call_end");
    assert_eq!(end["data"]["outcome"], "ok");
}

#[tokio::test]
async fn underscore_names_option_serves_dotted_tools_without_dots() {
    let env = Env::new(&["faulty", "godot"], "");
    let host = env.start_with(&["--underscore-names"]).await;
    let tools = host.tools().await;
    let names: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
    assert!(
        names.contains(&"dotted_echo".to_string()) && !names.iter().any(|n| n.contains('.')),
        "{names:?}"
    );
    // Descriptions that name other tools name them as served.
    let descriptions: String = tools
        .iter()
        .filter_map(|t| t.description.as_deref())
        .collect();
    assert!(!descriptions.contains("godot.get_"), "{descriptions}");
    assert!(descriptions.contains("godot_get_class"), "{descriptions}");
    let result = host.call("dotted_echo", json!({"x": 1})).await;
    assert!(!is_error(&result), "{result:?}");
}

#[tokio::test]
async fn arguments_are_validated_before_the_plugin_runs() {
    let env = Env::new(&["run_test"], "");
    let host = env.start().await;
    let missing = host.call("run_test", json!({"runner": "cargo", "scope": "all", "no_output_timeout_ms": 1, "max_output_bytes": 1})).await;
    assert!(is_error(&missing));
    let err = structured(&missing);
    assert_eq!(err["code"], "invalid_request");
    assert!(
        err["message"].as_str().unwrap().contains("timeout_ms"),
        "{err}"
    );
    let wrong = host
        .call("run_test", run_test_args("make", json!({})))
        .await;
    let err = structured(&wrong);
    assert_eq!(err["problems"][0]["path"], "/runner", "{err}");
    // A huge bad value is not echoed back (it came back three times).
    let huge = host
        .call("run_test", run_test_args(&"m".repeat(1 << 20), json!({})))
        .await;
    let answer = serde_json::to_string(&huge).unwrap();
    assert!(answer.len() < 8192, "{} bytes", answer.len());
    assert_eq!(structured(&huge)["problems"][0]["path"], "/runner");
    let extra = host
        .call(
            "run_test",
            run_test_args("cargo", json!({"command": "rm -rf /"})),
        )
        .await;
    assert!(
        structured(&extra)["message"]
            .as_str()
            .unwrap()
            .contains("command")
    );
    // A file scope without a target is caught by the schema too.
    let no_target = host
        .call("run_test", run_test_args("cargo", json!({"scope": "file"})))
        .await;
    assert!(
        structured(&no_target)["message"]
            .as_str()
            .unwrap()
            .contains("target")
    );
    // An unknown tool is a protocol error.
    let unknown = host
        .service
        .call_tool(rmcp::model::CallToolRequestParams::new("nope"))
        .await;
    assert!(unknown.is_err());
}

#[tokio::test]
async fn loop_trap_and_oom_fail_alone() {
    let env = Env::new(&["faulty"], FAULTY_LIMITS);
    let host = env.start().await;
    for (tool, code) in [
        ("fault_loop", "plugin_timeout"),
        ("fault_trap", "plugin_trapped"),
        ("fault_oom", "plugin_out_of_memory"),
    ] {
        let started = std::time::Instant::now();
        let result = host.call(tool, json!({})).await;
        assert!(is_error(&result), "{tool}: {result:?}");
        assert_eq!(structured(&result)["code"], code, "{tool}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{tool} took {:?}",
            started.elapsed()
        );
        let ok = host.call("noop", json!({"after": tool})).await;
        assert!(!is_error(&ok), "the host keeps serving after {tool}");
    }
}

/// Issue 34, class 5: a result is held in the host until the client reads
/// it, so its size is bounded.
#[tokio::test]
async fn a_result_over_the_cap_is_refused_and_the_host_keeps_serving() {
    let env = Env::new(&["faulty"], "[plugins.faulty.limits]\nmemory_mb = 128\n");
    let host = env.start().await;
    let fine = host.call("fault_huge", json!({"bytes": 1 << 20})).await;
    assert!(!is_error(&fine), "1 MiB is fine");
    let huge = host.call("fault_huge", json!({"bytes": 17 << 20})).await;
    assert!(is_error(&huge), "17 MiB is refused");
    assert_eq!(structured(&huge)["code"], "result_too_large");
    assert!(!is_error(&host.call("noop", json!({})).await));
}

#[tokio::test]
async fn a_busy_plugin_queues_then_refuses_and_the_others_keep_serving() {
    let config =
        "[plugins.faulty.limits]\ntimeout_ms = 3000\nmemory_mb = 32\nconcurrency = 2\nqueue = 1\n";
    let env = Env::new(&["faulty", "run_test"], config);
    let host = env.start().await;
    let mut slow = Vec::new();
    for i in 0..3 {
        slow.push(
            host.start_call("fault_loop", json!({}), &format!("slow-{i}"))
                .await,
        );
    }
    // Two run, one waits: the waiting one tells its client so.
    let queued = host
        .wait_note(Duration::from_secs(30), |n| {
            matches!(n, Note::Progress(p) if p.message.as_deref().is_some_and(|m| m.starts_with("queued:")))
        })
        .await;
    let Some(Note::Progress(queued)) = queued else {
        panic!("no call told its client it was queued")
    };
    assert!(
        queued
            .message
            .unwrap()
            .contains("running 2 calls; this call is number 1 in line")
    );
    let busy = host.call("noop", json!({})).await;
    let err = structured(&busy);
    assert_eq!(err["code"], "busy", "{err}");
    assert_eq!(err["retryable"], true);
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("limits.concurrency"),
        "{err}"
    );

    // Another plugin is not held up by this one.
    let other = host
        .call(
            "run_test",
            run_test_args("cargo", json!({"report_dir": "../outside"})),
        )
        .await;
    assert_eq!(structured(&other)["code"], "invalid_request", "{other:?}");

    // The queued call ran in its turn, with its whole deadline.
    for handle in slow {
        let r = Client::finish(handle).await;
        assert_eq!(structured(&r)["code"], "plugin_timeout", "{r:?}");
    }
    assert!(!is_error(&host.call("noop", json!({})).await));
}

#[tokio::test]
async fn more_calls_than_instance_slots_wait_instead_of_crashing() {
    // As many running as the engine has instance slots, the rest queued.
    let config = "[plugins.faulty.limits]\ntimeout_ms = 200\nmemory_mb = 32\nconcurrency = 128\n";
    let env = Env::new(&["faulty"], config);
    let host = env.start().await;
    let mut calls = Vec::new();
    for i in 0..200 {
        calls.push(
            host.start_call("fault_loop", json!({}), &format!("c{i}"))
                .await,
        );
    }
    for handle in calls {
        let r = Client::finish(handle).await;
        assert_eq!(structured(&r)["code"], "plugin_timeout", "{r:?}");
    }
}

#[tokio::test]
async fn capabilities_are_denied_by_default_with_the_key_to_grant_them() {
    let env = Env::new(&["faulty"], "");
    let host = env.start().await;
    let result = host.call("spawn", json!({"program": "ls"})).await;
    let err = structured(&result);
    assert_eq!(err["code"], "denied");
    let message = err["message"].as_str().unwrap();
    assert!(
        message.contains("plugin `faulty`") && message.contains("`process`"),
        "{message}"
    );
    assert!(
        message.contains("`capabilities`") && message.contains("[plugins.faulty]"),
        "{message}"
    );

    // Granted the capability, a program outside the allow-list is still refused.
    let env = Env::new(
        &["faulty"],
        "[plugins.faulty]\ncapabilities = [\"process\", \"fs\"]\nprocess.programs = [\"true\"]\nfs.read = [\"${workspace}\"]\n",
    );
    let host = env.start().await;
    let message = structured(&host.call("spawn", json!({"program": "ls"})).await)["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        message.contains("`process.programs`") && message.contains("\"ls\""),
        "{message}"
    );
    let allowed = structured(&host.call("spawn", json!({"program": "true"})).await);
    assert_eq!(
        (allowed["status"].as_str(), allowed["exit_code"].as_i64()),
        (Some("exited"), Some(0)),
        "{allowed}"
    );
}

#[tokio::test]
async fn dropped_in_plugin_appears_and_removed_one_goes() {
    let env = Env::new(&["run_test"], "");
    let host = env.start().await;
    assert_eq!(host.tools().await.len(), 1);
    env.add_plugin("faulty", "faulty");
    assert!(
        host.tools_changed_within(Duration::from_secs(10)).await,
        "no tools/list_changed after adding a plugin"
    );
    assert!(host.tools().await.iter().any(|t| t.name == "noop"));
    std::fs::remove_file(env.plugins.join("faulty.wasm")).unwrap();
    assert!(
        host.tools_changed_within(Duration::from_secs(10)).await,
        "no tools/list_changed after removing a plugin"
    );
    assert!(!host.tools().await.iter().any(|t| t.name == "noop"));
}

#[tokio::test]
async fn a_broken_plugin_is_skipped_and_a_tool_conflict_names_both() {
    let env = Env::new(&["faulty", "run_test"], "");
    // A copy that declares no name (its name section renamed) is named by
    // its file, `faulty_copy`, and offers faulty's tools again.
    let bytes = std::fs::read(built_plugin("faulty")).unwrap();
    let section = b"mcphost:plugin-name";
    let at = bytes
        .windows(section.len())
        .position(|w| w == section)
        .expect("faulty declares its name");
    let mut undeclared = bytes;
    undeclared[at..at + section.len()].copy_from_slice(b"mcphost:plugin-none");
    std::fs::write(env.plugins.join("faulty_copy.wasm"), undeclared).unwrap();
    std::fs::write(env.plugins.join("broken.wasm"), b"not wasm at all").unwrap();
    let out = env.host(&["check"]).output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("plugin broken: NOT LOADED"), "{text}");
    assert!(
        text.contains("plugin `faulty`") && text.contains("plugin `faulty_copy`"),
        "{text}"
    );
    assert!(text.contains("plugin run_test: ok"), "{text}");
    // Serving goes on with the good plugins.
    let host = env.start().await;
    assert!(host.tools().await.iter().any(|t| t.name == "run_test"));
}

#[tokio::test]
async fn host_check_says_what_a_policy_really_grants() {
    let env = Env::new(
        &["run_test"],
        "[plugins.run-test]\ncapabilities = [\"process\"]\n[plugins.run_test]\nfs.write = [\"/\"]\nprocess.programs = [\"cargo\", \"sh\"]\n",
    );
    let out = env.host(&["check"]).output().await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "warnings alone pass: {text}");
    for needle in [
        "[plugins.run-test] names no plugin",
        "fs.write grants /",
        "`sh`",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    let strict = env.host(&["check", "--strict"]).output().await.unwrap();
    assert_eq!(
        strict.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&strict.stdout)
    );

    for (config, needle) in [
        (
            "[plugins.run_test.limits]\ntimeout_ms = 0\n",
            "limits.timeout_ms = 0",
        ),
        (
            "[plugins.run_test]\nfs.write = [\"${env:MCP_HOST_TEST_NEVER_SET}/out\"]\n",
            "MCP_HOST_TEST_NEVER_SET",
        ),
        ("[defaults.fs]\nwrite = [\"/srv\"]\n", "[defaults] fs.write"),
    ] {
        std::fs::write(&env.config, config).unwrap();
        let out = env.host(&["check"]).output().await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{config}");
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }

    // An empty list takes the shipped grant away, seen through a call.
    std::fs::write(&env.config, "[plugins.run_test.fs]\nwrite = []\n").unwrap();
    let host = env.start().await;
    let r = host
        .call("run_test", run_test_args("cargo", json!({})))
        .await;
    let out = structured(&r);
    assert_eq!(out["status"], "error", "run_test without fs.write: {out}");
    assert!(
        out["excerpt"].as_str().unwrap().contains("not granted"),
        "{out}"
    );
}

#[tokio::test]
async fn warm_start_uses_the_compiled_cache() {
    let env = Env::new(&["run_test", "faulty"], "");
    let first = env.host(&["list", "plugins"]).output().await.unwrap();
    assert!(String::from_utf8_lossy(&first.stdout).contains("Compiled"));
    let second = env.host(&["list", "plugins"]).output().await.unwrap();
    let text = String::from_utf8_lossy(&second.stdout);
    assert!(text.lines().all(|l| l.ends_with("Cached")), "{text}");
    // A changed wasm never reuses a stale artifact: the key holds the wasm
    // hash. The same component with one more custom section is new bytes.
    let mut bytes = std::fs::read(built_plugin("faulty")).unwrap();
    let (name, data) = (b"test-nonce", b"1");
    bytes.extend([0, (1 + name.len() + data.len()) as u8, name.len() as u8]);
    bytes.extend(name.iter().chain(data));
    std::fs::write(env.plugins.join("faulty.wasm"), bytes).unwrap();
    let third = env.host(&["list", "plugins"]).output().await.unwrap();
    let text = String::from_utf8_lossy(&third.stdout);
    let origin = |plugin: &str| {
        let line = text.lines().find(|l| l.starts_with(&format!("{plugin}\t")));
        line.and_then(|l| l.rsplit('\t').next()).map(str::to_string)
    };
    assert_eq!(origin("faulty").as_deref(), Some("Compiled"), "{text}");
    assert_eq!(origin("run_test").as_deref(), Some("Cached"), "{text}");
}

#[tokio::test]
async fn a_plugin_is_named_by_its_component_not_its_file() {
    // Renamed, faulty keeps its own grants (keyed `faulty`, not `renamed`).
    let env = Env::new(
        &[],
        "[plugins.faulty]\ncapabilities = [\"process\", \"fs\"]\nprocess.programs = [\"true\"]\nfs.read = [\"${workspace}\"]\n",
    );
    env.add_plugin("faulty", "renamed");
    let host = env.start().await;
    let ran = structured(&host.call("spawn", json!({"program": "true"})).await);
    assert_eq!(ran["exit_code"], 0, "{ran}");

    // A second file claiming the same name is left out, and says why.
    env.add_plugin("faulty", "zz_copy");
    let listed = env.host(&["list", "plugins"]).output().await.unwrap();
    let text = String::from_utf8_lossy(&listed.stdout);
    let refused = text
        .lines()
        .find(|l| l.contains("zz_copy.wasm"))
        .unwrap_or_else(|| panic!("zz_copy not listed: {text}"));
    assert!(
        refused.starts_with("faulty\t")
            && refused.contains("NOT LOADED")
            && refused.contains("renamed.wasm")
            && refused.contains("not from its file name"),
        "{refused}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("faulty\t")
            && l.contains("renamed.wasm")
            && l.contains("tools")),
        "{text}"
    );
}

/// Read stdout of `host serve --stdio` raw: every line is JSON-RPC.
#[tokio::test]
async fn stdout_carries_json_rpc_only() {
    let env = Env::new(&["run_test", "faulty"], FAULTY_LIMITS);
    let mut child = serve_raw(&env, std::process::Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(handshake().as_bytes()).await.unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "fault_trap", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "run_test", "arguments": run_test_args("cargo", json!({}))}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "chatty", "arguments": {}}}),
    ];
    for r in &requests {
        stdin.write_all(format!("{r}\n").as_bytes()).await.unwrap();
    }
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut notifications = Vec::new();
    while seen.len() < 5 {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let message: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
        match message.get("id") {
            Some(id) => seen.push(id.clone()),
            None => notifications.push(message),
        }
    }
    // Without a progress token, a relayed event is a logging notification
    // and nothing is sent as progress.
    assert!(
        notifications
            .iter()
            .any(|n| n["method"] == "notifications/message"
                && n["params"]["data"]["event"] == "step"),
        "{notifications:?}"
    );
    assert!(
        !notifications
            .iter()
            .any(|n| n["method"] == "notifications/progress"),
        "{notifications:?}"
    );
    drop(stdin);
    child.wait().await.unwrap();
    let stderr = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(stderr.contains("tool call"), "the logs went to stderr");
}

#[tokio::test]
async fn requests_too_big_or_too_deep_are_answered_not_dropped() {
    let env = Env::new(&["faulty"], FAULTY_LIMITS);
    let mut child = serve_raw(&env, std::process::Stdio::piped());
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("an answer, not silence")
            .unwrap()
            .unwrap();
        serde_json::from_str(&line).unwrap()
    };
    stdin.write_all(handshake().as_bytes()).await.unwrap();
    assert_eq!(next().await["id"], 1);

    // 17 MiB of arguments: over the 16 MiB a request may have.
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"noop","arguments":{{"x":"{}"}}}}}}"#,
        "a".repeat(17 << 20)
    );
    stdin
        .write_all(format!("{big}\n").as_bytes())
        .await
        .unwrap();
    let answer = next().await;
    assert_eq!(answer["id"], 2, "{answer}");
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    let said = answer["error"]["message"].as_str().unwrap();
    assert!(said.contains("16777216"), "{answer}");
    // Issue 72: the size said is the request's own (it was off by 16 MiB).
    assert!(
        said.contains(&format!("the request is {} bytes", big.len())),
        "{said}"
    );

    // `arguments` that is no object: invalid params naming it (issue 72:
    // it was -32601, method not found).
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "noop", "arguments": "x=1"}});
    stdin
        .write_all(format!("{call}\n").as_bytes())
        .await
        .unwrap();
    let answer = next().await;
    assert_eq!(answer["id"], 5, "{answer}");
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`arguments` must be an object"),
        "{answer}"
    );

    // Arguments nested 200 deep: past serde_json's 128 levels.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"noop","arguments":{{"x":{}1{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    stdin
        .write_all(format!("{deep}\n").as_bytes())
        .await
        .unwrap();
    let answer = next().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("128 levels"),
        "{answer}"
    );

    // Not JSON at all: a parse error with a null id.
    stdin.write_all(b"this is not json\n").await.unwrap();
    let answer = next().await;
    assert_eq!(answer["error"]["code"], -32700, "{answer}");
    assert_eq!(answer["id"], Value::Null);

    // The session goes on.
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "noop", "arguments": {}}});
    stdin
        .write_all(format!("{call}\n").as_bytes())
        .await
        .unwrap();
    let answer = next().await;
    assert_eq!(answer["id"], 4, "{answer}");
    assert!(answer["result"].is_object(), "{answer}");
}

/// What a TypeScript client does with an error: validate any
/// `structuredContent` against the tool's output schema, then show the
/// text. Every error path of every bundled tool must survive it.
#[tokio::test]
async fn every_error_fits_its_tools_output_schema_or_is_said_in_text() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/godot/doc");
    let env = Env::new(
        &["run_test", "godot", "cofer", "copilot", "pi"],
        &godot_config(&docs),
    );
    let client = env.start().await;
    let schemas: std::collections::HashMap<String, Value> = client
        .tools()
        .await
        .into_iter()
        .filter_map(|t| {
            Some((
                t.name.to_string(),
                Value::Object((*t.output_schema?).clone()),
            ))
        })
        .collect();
    let outside = env.dir.path().join("not-a-repo");
    let source = outside.to_string_lossy();
    let errors = [
        ("godot.search", json!({"query": "x", "kind": "bogus"})),
        ("godot.search", json!({"query": "word ".repeat(100)})),
        ("godot.get_class", json!({"name": "NoSuchClass"})),
        ("godot.list_classes", json!({"inherits": "NoSuchClass"})),
        ("run_test", json!({"runner": "cargo", "scope": "file"})),
        (
            "run_test",
            run_test_args("cargo", json!({"report_dir": "../outside"})),
        ),
        ("copilot.chat", json!({"input": "--help"})),
        ("pi.prompt", json!({"prompt": ""})),
        (
            "environment_run_cmd",
            json!({"environment_source": source, "environment_id": "x", "command": "true"}),
        ),
        (
            "environment_destroy",
            json!({"environment_source": source, "environment_id": "x"}),
        ),
        (
            "environment_file_write",
            json!({"environment_source": source, "environment_id": "x", "target_file": "a", "contents": ""}),
        ),
        (
            "environment_log",
            json!({"environment_source": source, "environment_id": "x"}),
        ),
        (
            "environment_config",
            json!({"environment_source": source, "environment_id": "x", "config": {}}),
        ),
        (
            "environment_add_service",
            json!({"environment_source": source, "environment_id": "x", "name": "db", "image": "x"}),
        ),
        (
            "environment_checkpoint",
            json!({"environment_source": source, "environment_id": "x", "destination": "localhost/x"}),
        ),
    ];
    for (tool, args) in errors {
        let r = client.call(tool, args.clone()).await;
        assert!(is_error(&r), "{tool} {args}: {r:?}");
        if let (Some(content), Some(schema)) = (&r.structured_content, schemas.get(tool)) {
            let validator = jsonschema::validator_for(schema).unwrap();
            assert!(
                validator.is_valid(content),
                "{tool} {args}: structuredContent does not match the output schema: {content}"
            );
        }
        let error = structured(&r);
        let text: String = r
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.clone()))
            .collect();
        let code = error["code"]
            .as_str()
            .unwrap_or_else(|| panic!("{tool}: no code in {error}"));
        assert!(
            text.starts_with(code),
            "{tool}: the text says the error: {text}"
        );
        assert!(error["trace_id"].is_string(), "{tool}: {error}");
    }
}

/// Clients run read-only tools without asking and ask for the rest: every
/// bundled tool says honestly which it is, and has a title to be shown by.
#[tokio::test]
async fn every_bundled_tool_is_annotated_honestly() {
    let env = Env::new(&["run_test", "godot", "cofer", "copilot", "pi"], "");
    let client = env.start().await;
    let tools = client.tools().await;
    assert_eq!(
        tools.len(),
        25,
        "{:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    for tool in &tools {
        let hints = tool
            .annotations
            .as_ref()
            .unwrap_or_else(|| panic!("{} has no annotations", tool.name));
        let read_only = hints.read_only_hint == Some(true);
        let expected_read_only = tool.name.starts_with("godot.")
            || [
                "environment_list",
                "environment_file_read",
                "environment_file_list",
                "environment_log",
                "environment_diff",
                "environment_service_logs",
                "copilot.chat",
            ]
            .contains(&tool.name.as_ref());
        assert_eq!(read_only, expected_read_only, "{}: {hints:?}", tool.name);
        let destructive = hints.destructive_hint == Some(true);
        let expected_destructive = [
            "environment_destroy",
            "environment_run_cmd",
            "environment_config",
            "environment_file_write",
            "environment_file_edit",
            "environment_file_delete",
            "pi.prompt",
        ]
        .contains(&tool.name.as_ref());
        assert_eq!(
            destructive, expected_destructive,
            "{}: {hints:?}",
            tool.name
        );
        assert!(
            !tool.input_schema.contains_key("x-annotations"),
            "{}: the carrier key is not served",
            tool.name
        );
        // A name a client can show a person (issue 39, item 7).
        let title = tool.title.as_deref().unwrap_or_default();
        assert!(
            !title.is_empty() && title != tool.name.as_ref(),
            "{} has no title: {title:?}",
            tool.name
        );
    }
}

/// A client of MCP 2026-07-28 (no `initialize`: `server/discover`, then a
/// `subscriptions/listen` stream) hears of a plugin added while connected.
#[tokio::test]
async fn a_2026_07_28_client_hears_of_new_tools_through_its_subscription() {
    use rmcp::model::{ProtocolVersion, ServerNotification, SubscriptionFilter};
    use rmcp::{ClientLifecycleMode, ClientServiceExt};
    let env = Env::new(&["run_test"], "");
    let mut command = env.host(&["serve", "--stdio"]);
    command.stderr(std::fs::File::create(env.stderr_log()).unwrap());
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = ()
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("a 2026-07-28 session");
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    let mut subscription = client
        .peer()
        .listen(filter)
        .await
        .expect("subscriptions/listen");
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

    env.add_plugin("faulty", "faulty");
    let change = tokio::time::timeout(Duration::from_secs(20), subscription.next())
        .await
        .expect("a change within 20 s")
        .expect("the subscription stays open");
    assert!(
        matches!(
            change,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{change:?}"
    );
    let tools = client.peer().list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "noop"),
        "the new tools are served"
    );
}

#[tokio::test]
async fn the_example_plugin_serves_its_typed_tool() {
    let env = Env::new(&["hello"], "");
    let host = env.start().await;
    let tools = host.tools().await;
    let hello = tools
        .iter()
        .find(|t| t.name == "hello")
        .expect("hello listed");
    // The schema comes from the argument type: doc comments, bounds, required.
    let name = &hello.input_schema["properties"]["name"];
    assert_eq!(name["description"], "Whom to greet.", "{name}");
    assert_eq!(name["maxLength"], 100, "{name}");
    assert_eq!(hello.input_schema["required"], json!(["name"]));
    assert_eq!(
        hello.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );
    let r = host
        .call("hello", json!({"name": "Ada", "shout": true}))
        .await;
    assert_eq!(structured(&r), json!({"text": "HELLO, ADA!", "chars": 11}));
    let blank = host.call("hello", json!({"name": "  "})).await;
    assert_eq!(structured(&blank)["code"], "invalid_request", "{blank:?}");
    // It exports no `lifecycle`, so the host runs no background refresh for
    // it (an exported no-op one would have logged by now).
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(log.contains("plugin loaded"), "{log}");
    assert!(!log.contains("background refresh"), "{log}");
}

#[tokio::test]
async fn plugins_instructions_reach_the_client() {
    let env = Env::new(&["cofer", "run_test"], "");
    let host = env.start().await;
    let info = host.service.peer_info().expect("initialized");
    let instructions = info.instructions.clone().unwrap_or_default();
    // Cofer declares its own (as container-use sends its agent rules);
    // run_test declares none and gets no heading.
    assert!(
        instructions.contains("## cofer") && instructions.contains("cofer log <id>"),
        "{instructions}"
    );
    assert!(!instructions.contains("## run_test"), "{instructions}");
}

/// `host client-config` prints, for each client, a snippet in that client's
/// own format that starts this very host with the folders it was given and
/// the policy's host variables that are set.
#[tokio::test]
async fn client_config_speaks_each_clients_format() {
    let mut env = Env::new(&["godot"], "");
    env.host_vars
        .push(("GODOT_DOC_DIR".into(), "/docs/4.x:/docs/3.x".into()));
    let clients = [
        ("claude-code", "mcpServers", true),
        ("codex", "mcp_servers", true),
        ("copilot", "mcpServers", true),
        ("vscode", "servers", false),
        ("cursor", "mcpServers", true),
        ("gemini", "mcpServers", false),
    ];
    for (client, key, underscores) in clients {
        let out = env.host(&["client-config", client]).output().await.unwrap();
        assert!(out.status.success(), "{client}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        let root: Value = if client == "codex" {
            serde_json::to_value(toml::from_str::<toml::Table>(&text).unwrap()).unwrap()
        } else {
            serde_json::from_str(&text).unwrap()
        };
        // The formats themselves are client_config's unit test; here, that
        // the snippet starts this host as it was started.
        let server = &root[key]["wasm-host"];
        // The host names itself as the kernel knows it (links resolved).
        let host = std::fs::canonicalize(env!("CARGO_BIN_EXE_host")).unwrap();
        assert_eq!(
            server["command"],
            host.to_string_lossy().as_ref(),
            "{client}: {text}"
        );
        let args = server["args"].to_string();
        assert_eq!(
            args.contains("--underscore-names"),
            underscores,
            "{client}: {args}"
        );
        let plugins = format!("\"--plugins\",{:?}", env.plugins.to_string_lossy());
        assert!(args.contains(&plugins), "{client}: {args}");
        assert_eq!(
            server["env"]["GODOT_DOC_DIR"], "/docs/4.x:/docs/3.x",
            "{client}"
        );
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("merge it into") || said.contains("append it to"),
            "{said}"
        );
    }
}

/// Issue 34, class 5: a client that never reads its stdout does not make
/// the host hold every answer (3.2 GB was seen): past a bound, answers
/// are dropped and the host says so on stderr.
#[tokio::test]
async fn a_client_that_never_reads_does_not_fill_the_host() {
    let config = "[plugins.faulty.limits]\nmemory_mb = 128\nconcurrency = 2\n";
    let env = Env::new(&["faulty"], config);
    let mut child = serve_raw(&env, std::process::Stdio::piped());
    let _unread = child.stdout.take().unwrap();
    let pid = child.id().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(handshake().as_bytes()).await.unwrap();
    env.wait_for_log("plugin loaded", 1).await;
    let (before, _) = rss_kib(pid);
    for id in 10..70 {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "fault_huge", "arguments": {"bytes": 15 << 20}}});
        stdin
            .write_all(format!("{call}\n").as_bytes())
            .await
            .unwrap();
    }
    env.wait_for_log("this message is dropped", 20).await;
    let (_, peak) = rss_kib(pid);
    let growth_mib = peak.saturating_sub(before) / 1024;
    assert!(
        growth_mib < 700,
        "host memory grew by {growth_mib} MiB for 900 MB of unread answers"
    );
}

/// Issue 42, item 18: an I/O error a plugin reports names the error, not
/// WASI's number for it ("(os error 44)" is ENOENT there, not on the host).
#[tokio::test]
async fn a_plugins_io_errors_name_the_error_not_wasis_number() {
    let env = Env::new(&["faulty"], "");
    let host = env.start().await;
    let r = host
        .call("fault_io", json!({"path": "/no/such/file/anywhere"}))
        .await;
    assert!(is_error(&r));
    let message = structured(&r)["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("(ENOENT)") && !message.contains("os error"),
        "{message}"
    );
}

/// Issue 42, item 16: every string argument of every bundled tool has a
/// length bound in its schema, so the host refuses a 1 MB name before the
/// plugin spends its deadline on it.
#[tokio::test]
async fn every_string_argument_of_every_bundled_tool_is_bounded() {
    fn unbounded(schema: &Value, at: String, found: &mut Vec<String>) {
        match schema {
            Value::Object(map) => {
                let is_string = match map.get("type") {
                    Some(Value::String(t)) => t == "string",
                    Some(Value::Array(types)) => types.iter().any(|t| t == "string"),
                    _ => false,
                };
                let fixed = map.contains_key("enum") || map.contains_key("const");
                if is_string && !fixed && !map.contains_key("maxLength") {
                    found.push(at.clone());
                }
                for (key, value) in map {
                    unbounded(value, format!("{at}/{key}"), found);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    unbounded(item, format!("{at}/{i}"), found);
                }
            }
            _ => {}
        }
    }
    let env = Env::new(&["run_test", "godot", "cofer", "copilot", "pi"], "");
    let host = env.start().await;
    let tools = host.tools().await;
    assert!(tools.len() >= 20, "{} tools", tools.len());
    let mut found = Vec::new();
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        unbounded(&schema, tool.name.to_string(), &mut found);
    }
    assert!(found.is_empty(), "unbounded strings: {found:?}");
    // Issue 39: an optional enum takes null; no numeric `format` (Gemini
    // warns on those).
    fn unfit(schema: &Value, at: String, found: &mut Vec<String>) {
        match schema {
            Value::Object(map) => {
                let nullable = map
                    .get("type")
                    .and_then(Value::as_array)
                    .is_some_and(|t| t.iter().any(|t| t == "null"));
                if nullable
                    && map
                        .get("enum")
                        .and_then(Value::as_array)
                        .is_some_and(|e| !e.contains(&Value::Null))
                {
                    found.push(format!("{at}: enum without null"));
                }
                if let Some(format) = map.get("format").and_then(Value::as_str)
                    && (format.starts_with("uint") || format.starts_with("int"))
                {
                    found.push(format!("{at}: format {format}"));
                }
                for (key, value) in map {
                    unfit(value, format!("{at}/{key}"), found);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    unfit(item, format!("{at}/{i}"), found);
                }
            }
            _ => {}
        }
    }
    let mut found = Vec::new();
    for tool in &tools {
        let schema = Value::Object((*tool.input_schema).clone());
        unfit(&schema, tool.name.to_string(), &mut found);
    }
    assert!(found.is_empty(), "schemas clients stumble on: {found:?}");
    let huge = host
        .call("godot.get_class", json!({"name": "N".repeat(1 << 20)}))
        .await;
    assert!(is_error(&huge));
    assert_eq!(structured(&huge)["code"], "INVALID_ARGUMENT");
}

/// Issue 42, item 21: a newcomer's one-shot command prints what was asked
/// for; no INFO record per plugin, no warning on every run: at most one
/// line pointing to `host check`.
#[tokio::test]
async fn a_one_shot_command_prints_what_was_asked_for() {
    let env = Env::new(&["run_test", "godot"], "");
    let out = env
        .host(&["list", "tools"])
        .env_remove("MCP_SERVER_LOG")
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("godot.search") && stdout.contains("run_test"),
        "{stdout}"
    );
    assert!(
        !stderr.contains(" INFO ") && !stderr.contains(" WARN "),
        "{stderr}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(lines.len() <= 1, "{stderr}");
    if let Some(line) = lines.first() {
        assert!(line.contains("host check"), "{line}");
    }
}

/// Issue 39, items 1 and 2: Gemini CLI's `wait_for_previous`, which it adds
/// to every call, is dropped for it (another client's unknown argument is
/// still refused), and `null` is taken for optional fields, enums included.
#[tokio::test]
async fn arguments_clients_add_and_nulls_for_optional_fields_are_taken() {
    let Some(docs) = godot_docs() else { return };
    let config = format!(
        "[plugins.godot]\nfs.read = [{d:?}]\nvars.GODOT_DOC_DIR = {d:?}\n",
        d = docs.join("4.x").display().to_string()
    );
    let env = Env::new(&["godot"], &config);
    // Answers of `calls` made by a client named `client`, in order.
    let answers = |client: &'static str, calls: Vec<Value>| {
        let env = &env;
        async move {
            let mut child = serve_raw(env, std::process::Stdio::piped());
            let mut stdin = child.stdin.take().unwrap();
            let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
            let hello = handshake().replace("\"name\":\"raw\"", &format!("\"name\":\"{client}\""));
            stdin.write_all(hello.as_bytes()).await.unwrap();
            let mut got = Vec::new();
            for (id, arguments) in (10..).zip(calls) {
                let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "godot.search", "arguments": arguments}});
                stdin
                    .write_all(format!("{call}\n").as_bytes())
                    .await
                    .unwrap();
                loop {
                    let line = lines.next_line().await.unwrap().expect("an answer");
                    let message: Value = serde_json::from_str(&line).unwrap();
                    if message["id"] == id {
                        got.push(message["result"].clone());
                        break;
                    }
                }
            }
            got
        }
    };
    let injected = json!({"query": "Node2D", "wait_for_previous": true});
    let gemini = answers(
        "gemini-cli-mcp-client",
        vec![
            injected.clone(),
            json!({"query": "Node2D", "kind": null, "limit": null, "version": null}),
            json!({"query": "Node2D", "querry": "typo"}),
        ],
    )
    .await;
    assert_eq!(gemini[0]["isError"], false, "{}", gemini[0]);
    assert_eq!(gemini[1]["isError"], false, "nulls: {}", gemini[1]);
    assert_eq!(
        gemini[2]["isError"], true,
        "a typo is still refused: {}",
        gemini[2]
    );
    let other = answers("some-other-client", vec![injected]).await;
    assert_eq!(other[0]["isError"], true, "{}", other[0]);
}

/// Issue 39, item 2: models send `null` for optional fields they leave
/// out. Every optional field of every bundled tool takes it: a call with
/// nulls alone is refused only for its required fields (tools without any,
/// all read-only, run).
#[tokio::test]
async fn every_optional_field_of_every_bundled_tool_takes_null() {
    let env = Env::new(&["run_test", "godot", "cofer", "copilot", "pi"], "");
    let client = env.start().await;
    for tool in client.tools().await {
        let schema = &tool.input_schema;
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let nulls: serde_json::Map<String, Value> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.keys()
                    .filter(|k| !required.contains(&k.as_str()))
                    .map(|k| (k.clone(), Value::Null))
                    .collect()
            })
            .unwrap_or_default();
        if nulls.is_empty() {
            continue;
        }
        if required.is_empty() {
            let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint);
            assert_eq!(
                read_only,
                Some(true),
                "{} would run: not read-only",
                tool.name
            );
        }
        let result = client.call(&tool.name, Value::Object(nulls.clone())).await;
        let text = format!("{result:?}");
        assert!(
            !text.contains("null is not") && !text.contains("Null is not"),
            "{}: null refused for an optional field: {text}",
            tool.name
        );
        if !required.is_empty() {
            assert!(is_error(&result), "{}: {text}", tool.name);
            assert!(text.contains("required property"), "{}: {text}", tool.name);
        }
    }
}

/// A custom section `name` holding `data`, as it goes at the end of a
/// component (id 0, then the lengths as LEB128).
fn custom_section(name: &str, data: &[u8]) -> Vec<u8> {
    fn leb128(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            out.push(if n == 0 { byte } else { byte | 0x80 });
            if n == 0 {
                return;
            }
        }
    }
    let mut body = Vec::new();
    leb128(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(data);
    let mut section = vec![0];
    leb128(body.len(), &mut section);
    section.extend(body);
    section
}

/// The tools are listed as the components declare them while the plugins
/// compile (issue 41, item 2: a cold start answered tools/list only after
/// compiling every plugin); once loaded, what the plugin itself answers is
/// served, and clients are told when that differs. The hello plugin here
/// declares one tool more than it has: listed first, gone once loaded.
#[tokio::test]
async fn tools_are_listed_before_the_plugins_compile_and_corrected_once_loaded() {
    let env = Env::new(&[], "");
    let mut bytes = std::fs::read(built_plugin("hello")).unwrap();
    let declared = json!([
        {"name": "hello", "description": "Greets.", "inputSchema": {"type": "object"}},
        {"name": "hello_declared_only", "description": "Only declared.", "inputSchema": {"type": "object"}}
    ]);
    bytes.extend(custom_section(
        "mcphost:plugin-tools",
        declared.to_string().as_bytes(),
    ));
    std::fs::write(env.plugins.join("hello.wasm"), &bytes).unwrap();
    let host = env.start().await;
    // Logged before the load starts: what was served while compiling.
    env.wait_for_log("tools listed before loading", 1).await;
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    let listed = log
        .lines()
        .find(|l| l.contains("tools listed before loading"))
        .unwrap();
    assert!(
        listed.contains("plugins=1") && listed.contains("tools=2"),
        "{listed}"
    );
    env.wait_for_log("plugin loaded", 1).await;
    assert!(
        host.tools_changed_within(Duration::from_secs(60)).await,
        "no tools/list_changed once the listed tools were corrected"
    );
    assert_eq!(host.tool_names().await, ["hello"]);
    // Calls are served by the loaded plugin.
    let reply = host.call("hello", json!({"name": "Ada"})).await;
    assert!(!is_error(&reply), "{reply:?}");
}

/// Without declarations (a component not built with the SDK, or one
/// whose section is not a list of tools) nothing is listed ahead: the
/// host loads first, as before.
#[tokio::test]
async fn a_component_without_usable_declarations_is_loaded_before_listing() {
    let env = Env::new(&[], "");
    let mut bytes = std::fs::read(built_plugin("hello")).unwrap();
    bytes.extend(custom_section("mcphost:plugin-tools", b"{not a list"));
    std::fs::write(env.plugins.join("hello.wasm"), &bytes).unwrap();
    let host = env.start().await;
    let names = host.tool_names().await;
    assert!(
        names.is_empty(),
        "the plugin is refused for its bad section: {names:?}"
    );
    assert_eq!(env.logged("tools listed before loading"), 0);
    assert!(
        env.logged("mcphost:plugin-tools") >= 1,
        "the refusal names the section"
    );
}

/// `client-config claude-code|gemini --allow-read-only` lists the read-only
/// tools of the loaded plugins as each client names them (issue 39, item
/// 3: headless `claude -p` refuses a call not allowed, read-only or not;
/// headless `gemini -p` does not even offer it).
#[tokio::test]
async fn claude_code_gets_an_allow_list_of_the_read_only_tools() {
    let env = Env::new(&["godot", "run_test"], "");
    let out = env
        .host(&["client-config", "claude-code", "--allow-read-only"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let root: Value = serde_json::from_slice(&out.stdout).unwrap();
    let allow: Vec<&str> = root["permissions"]["allow"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(allow.contains(&"mcp__wasm-host__godot_search"), "{allow:?}");
    // Issue 61, item 13: the list rests on each plugin's own hint, and
    // says so, with what the plugin is granted.
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("does not check that claim")
            && said.contains("godot_search\t(plugin `godot`, granted: index, fs, process)"),
        "{said}"
    );
    assert!(
        !allow.iter().any(|t| t.contains("run_test")),
        "run_test runs programs: not read-only: {allow:?}"
    );
    // Gemini CLI's names: `mcp_<server>_<tool>`, dots kept.
    let out = env
        .host(&["client-config", "gemini", "--allow-read-only"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let root: Value = serde_json::from_slice(&out.stdout).unwrap();
    let allowed = root["tools"]["allowed"].to_string();
    assert!(
        allowed.contains("\"mcp_wasm-host_godot.search\""),
        "{allowed}"
    );
    assert!(!allowed.contains("run_test"), "{allowed}");
    let out = env
        .host(&["client-config", "codex", "--allow-read-only"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success(), "{out:?}");
}

/// Clients start servers on pipes, on a socket (Claude Code, Gemini CLI)
/// or on a terminal: the host answers a call on each, and a terminal it
/// shares stays blocking for the shell that shares it.
#[tokio::test]
async fn the_host_serves_over_a_socket_and_a_terminal() {
    use std::io::{BufRead, Write};
    use std::os::fd::OwnedFd;
    let env = Env::new(&["faulty"], "");
    for terminal in [false, true] {
        let (ours, theirs): (std::fs::File, OwnedFd) = if terminal {
            let pty = nix::pty::openpty(None, None).unwrap();
            let mut raw = nix::sys::termios::tcgetattr(&pty.slave).unwrap();
            nix::sys::termios::cfmakeraw(&mut raw);
            nix::sys::termios::tcsetattr(&pty.slave, nix::sys::termios::SetArg::TCSANOW, &raw)
                .unwrap();
            (pty.master.into(), pty.slave)
        } else {
            let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
            (OwnedFd::from(ours).into(), theirs.into())
        };
        let mut host = env
            .host(&["serve", "--stdio"])
            .stdin(std::process::Stdio::from(theirs.try_clone().unwrap()))
            .stdout(std::process::Stdio::from(theirs.try_clone().unwrap()))
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "noop", "arguments": {}}});
        let answer = tokio::task::spawn_blocking(move || {
            let mut write = ours.try_clone().unwrap();
            write
                .write_all(format!("{}{call}\n", handshake()).as_bytes())
                .unwrap();
            let mut lines = std::io::BufReader::new(ours).lines();
            loop {
                let line = lines.next().expect("the host answers").unwrap();
                let message: Value = serde_json::from_str(&line).unwrap();
                if message["id"] == 2 {
                    return message;
                }
            }
        });
        let answer = tokio::time::timeout(Duration::from_secs(60), answer)
            .await
            .expect("an answer within a minute")
            .unwrap();
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        if terminal {
            let flags = nix::fcntl::fcntl(&theirs, nix::fcntl::FcntlArg::F_GETFL).unwrap();
            assert_eq!(
                nix::fcntl::OFlag::from_bits_truncate(flags) & nix::fcntl::OFlag::O_NONBLOCK,
                nix::fcntl::OFlag::empty(),
                "the host made the terminal non-blocking for the shell too"
            );
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(host.id().unwrap() as i32),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        tokio::time::timeout(Duration::from_secs(10), host.wait())
            .await
            .expect("SIGINT ends the host")
            .unwrap();
    }
}

/// Once start-up is over the host lets go of the pages it mapped only to
/// read (its own start-up code above all), and goes on answering: what
/// runs maps its pages again.
#[tokio::test]
async fn after_start_up_the_host_releases_what_it_read_and_still_answers() {
    let env = Env::new(&["run_test", "faulty"], "");
    let host = env.start().await;
    env.wait_for_log("start-up over: read-only file pages released", 1)
        .await;
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    let released: u64 = log
        .lines()
        .find(|l| l.contains("start-up over"))
        .and_then(|l| l.split("mapped_bytes=").nth(1))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(released > 1 << 20, "{released} bytes released");
    for _ in 0..3 {
        let r = host.call("noop", json!({})).await;
        assert_ne!(r.is_error, Some(true), "{r:?}");
    }
    assert!(!host.tools().await.is_empty());
}

/// A named pipe where a plugin opens a file (a test project or a container
/// may leave one where a report or a `package.json` is read) is refused at
/// once: the open would wait for a writer on the thread that runs the
/// call, past its deadline, and the call would never come back.
#[tokio::test(flavor = "multi_thread")]
async fn a_named_pipe_a_plugin_opens_is_refused_not_waited_on() {
    let config = format!(
        "{FAULTY_LIMITS}[plugins.faulty]\ncapabilities = [\"fs\"]\nfs.read = [\"${{workspace}}\"]\n"
    );
    let env = Env::new(&["faulty"], &config);
    let pipe = env.workspace.join("package.json");
    nix::unistd::mkfifo(&pipe, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let host = env.start().await;
    let call = host.call("fault_io", json!({"path": pipe.display().to_string()}));
    let r = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the open waited for a writer");
    let message = structured(&r)["message"].as_str().unwrap().to_string();
    assert!(message.contains("(ENOTSUP)"), "{message}");
    // A file is opened as before.
    std::fs::remove_file(&pipe).unwrap();
    std::fs::write(&pipe, "{}").unwrap();
    let r = host
        .call("fault_io", json!({"path": pipe.display().to_string()}))
        .await;
    assert!(!is_error(&r), "{r:?}");
}

/// `host call … | head`: a reader that stops early is no error (it was a
/// panic, "failed printing to stdout").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_call_into_a_closed_pipe_ends_quietly() {
    let env = Env::new(&["faulty"], "");
    let mut child = env
        .host(&["call", "chatty", "{}"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}
