//! `host serve --http`: sessions of MCP 2025-11-25 and stateless
//! 2026-07-28 clients, the bearer token, the DNS-rebinding checks,
//! `/health`, and shutdown.

// Reads MCP logging notifications, deprecated by SEP-2577 but still sent.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::ClientLifecycleMode;
use rmcp::model::{LoggingLevel, ProtocolVersion, RequestMetaObject, SubscriptionFilter};
use serde_json::json;

use crate::harness::*;

fn discover() -> ClientLifecycleMode {
    ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    }
}

fn progress_meta(token: &str) -> RequestMetaObject {
    RequestMetaObject::with_progress_token(rmcp::model::ProgressToken(
        rmcp::model::NumberOrString::String(token.to_string().into()),
    ))
}

fn logged(notes: &[Note], message: &str) -> bool {
    notes
        .iter()
        .any(|n| matches!(n, Note::Log(l) if l.data["message"] == message))
}

fn progressed(notes: &[Note]) -> bool {
    notes.iter().any(|n| matches!(n, Note::Progress(_)))
}

#[tokio::test]
async fn a_2025_11_25_session_gets_tool_changes_results_progress_and_logs() {
    let env = Env::new(&["faulty"], "");
    let host = env.start_http(&[]).await;
    let client = host.connect(ClientLifecycleMode::Initialize, None).await;
    let info = client.service.peer_info().expect("an initialize answer");
    assert!(info.protocol_version.has_initialize(), "{info:?}");

    // Unasked notifications come on the session's standalone (GET) stream.
    env.add_plugin("hello", "hello");
    let change = client
        .wait_note(Duration::from_secs(60), |n| {
            matches!(n, Note::ToolListChanged)
        })
        .await;
    assert!(change.is_some(), "no tools/list_changed over HTTP");
    assert!(client.tools().await.iter().any(|t| t.name == "hello"));

    let call = client.start_call("chatty", json!({}), "p1").await;
    let result = Client::finish(call).await;
    assert!(!is_error(&result), "{result:?}");
    // Progress rides the call's own stream; log records, which name no
    // request, the standalone stream (rmcp routes them so), so they may
    // come after the answer.
    let notes = client.drain_notes().await;
    assert!(progressed(&notes), "{notes:?}");
    let log = logged(&notes, "hello from chatty")
        || client
            .wait_note(Duration::from_secs(10), |n| {
                logged(std::slice::from_ref(n), "hello from chatty")
            })
            .await
            .is_some();
    assert!(log, "the log record arrives");
}

#[tokio::test]
async fn a_2026_07_28_client_is_served_statelessly_and_logs_only_when_it_asks() {
    let env = Env::new(&["faulty"], "");
    let host = env.start_http(&[]).await;
    let client = host.connect(discover(), None).await;
    assert!(client.tools().await.iter().any(|t| t.name == "chatty"));

    // No `logLevel` in the request: progress, but no log records.
    let quiet = client
        .start_call_with_meta("chatty", json!({}), progress_meta("p1"))
        .await;
    assert!(!is_error(&Client::finish(quiet).await));
    let notes = client.drain_notes().await;
    assert!(progressed(&notes), "{notes:?}");
    assert!(!logged(&notes, "hello from chatty"), "{notes:?}");

    // Asked for info: the plugin's info record, not its debug one.
    let mut meta = progress_meta("p2");
    meta.set_log_level(LoggingLevel::Info);
    let asked = client.start_call_with_meta("chatty", json!({}), meta).await;
    assert!(!is_error(&Client::finish(asked).await));
    let notes = client.drain_notes().await;
    assert!(logged(&notes, "hello from chatty"), "{notes:?}");
    assert!(
        !logged(&notes, "too quiet to reach the client"),
        "{notes:?}"
    );

    // Tool changes arrive on the client's subscription stream.
    let mut filter = SubscriptionFilter::new();
    filter.tools_list_changed = Some(true);
    let mut subscription = client
        .service
        .peer()
        .listen(filter)
        .await
        .expect("subscriptions/listen over HTTP");
    env.add_plugin("hello", "hello");
    let change = tokio::time::timeout(Duration::from_secs(60), subscription.next())
        .await
        .expect("a change within 60 s");
    assert!(change.is_ok_and(|c| c.is_some()), "the subscription ended");
    assert!(client.tools().await.iter().any(|t| t.name == "hello"));
}

/// An `initialize` request as a client would POST it.
fn initialize() -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post("http://placeholder")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        )
}

async fn post(host: &HttpHost, headers: &[(&str, &str)]) -> reqwest::StatusCode {
    let mut request = initialize().build().unwrap();
    *request.url_mut() = host.url.parse().unwrap();
    for (name, value) in headers {
        request.headers_mut().insert(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    reqwest::Client::new()
        .execute(request)
        .await
        .expect("the host answers")
        .status()
}

/// `serve --http` with a token file holding `token`.
async fn with_token(env: &Env, token: &str) -> HttpHost {
    let token_file = env.dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    env.start_http(&["--token-file", token_file.to_str().unwrap()])
        .await
}

#[tokio::test]
async fn with_a_token_file_every_request_needs_the_token() {
    let env = Env::new(&["hello"], "");
    let host = with_token(&env, "s3cret-token").await;

    assert_eq!(post(&host, &[]).await, 401, "no token");
    let wrong = [("authorization", "Bearer s3cret-tokem")];
    assert_eq!(post(&host, &wrong).await, 401, "a wrong token");
    let basic = [("authorization", "Basic s3cret-token")];
    assert_eq!(post(&host, &basic).await, 401, "not a bearer token");
    let right = [("authorization", "Bearer s3cret-token")];
    assert_eq!(post(&host, &right).await, 200, "the token");

    let client = host
        .connect(ClientLifecycleMode::Initialize, Some("s3cret-token"))
        .await;
    let r = client.call("hello", json!({"name": "Ada"})).await;
    assert!(!is_error(&r), "{r:?}");

    // Health needs no token and says what is served.
    let health: serde_json::Value = reqwest::get(format!("{}/health", host.base()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        health,
        json!({"status": "ok", "plugins": 1, "tools": 1, "problems": 0, "loading": 0})
    );
}

#[tokio::test]
async fn other_hosts_and_web_origins_are_refused() {
    let env = Env::new(&["hello"], "");
    let host = env.start_http(&["--allow-host", "mcp.internal"]).await;
    assert_eq!(post(&host, &[]).await, 200);
    // A name rebound to 127.0.0.1 by a web page's DNS.
    let rebound = [("host", "attacker.example")];
    assert_eq!(post(&host, &rebound).await, 403);
    let allowed = [("host", "mcp.internal")];
    assert_eq!(post(&host, &allowed).await, 200);
    // A page of another site, and a local one (the Inspector's).
    let foreign = [("origin", "http://attacker.example")];
    assert_eq!(post(&host, &foreign).await, 403);
    let local = [("origin", "http://localhost:6274")];
    assert_eq!(post(&host, &local).await, 200);
}

#[tokio::test]
async fn off_loopback_the_host_wants_a_token() {
    let env = Env::new(&["hello"], "");
    let out = env
        .host(&["serve", "--http", "0.0.0.0:0"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--token-file"), "{err}");

    let empty = env.dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let token_file = format!("--token-file={}", empty.display());
    let out = env
        .host(&["serve", "--http", "0.0.0.0:0", &token_file])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is empty"), "{err}");
}

#[tokio::test]
async fn sigterm_answers_the_calls_in_flight_and_ends_the_host() {
    let env = Env::new(
        &["faulty"],
        "[plugins.faulty.limits]\ntimeout_ms = 60000\nmemory_mb = 32\n",
    );
    let mut host = env.start_http(&[]).await;
    let client = host.connect(ClientLifecycleMode::Initialize, None).await;
    let call = client.start_call("fault_loop", json!({}), "p1").await;
    // The loop is running once the host has logged the call.
    env.wait_for_log("tool call started", 1).await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host.pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), call.await_response())
        .await
        .expect("an answer within 10 s");
    let answer = format!("{answer:?}");
    assert!(answer.contains("cancel"), "{answer}");
    let status = tokio::time::timeout(Duration::from_secs(10), host.child.wait())
        .await
        .expect("the host ends within 10 s")
        .unwrap();
    assert!(status.success(), "{status:?}");
}

/// The snippet `client-config --url` prints, read as Claude Code reads it
/// (`${VAR}` from its environment), reaches the host.
#[tokio::test]
async fn client_config_for_an_http_host_connects() {
    let env = Env::new(&["hello"], "");
    let token_file = env.dir.path().join("token");
    std::fs::write(&token_file, "t0ken-from-file").unwrap();
    let host = env
        .start_http(&["--token-file", token_file.to_str().unwrap()])
        .await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["client-config", "claude-code", "--url", &host.url])
        .args(["--token-env", "WASM_HOST_TOKEN"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let snippet: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let server = &snippet["mcpServers"]["wasm-host"];
    assert_eq!(server["type"], "http");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("--underscore-names"), "{said}");

    let header = server["headers"]["Authorization"].as_str().unwrap();
    let token = header
        .strip_prefix("Bearer ")
        .unwrap()
        .replace("${WASM_HOST_TOKEN}", "t0ken-from-file");
    let configured = HttpHost {
        url: server["url"].as_str().unwrap().to_string(),
        ..host
    };
    let client = configured
        .connect(ClientLifecycleMode::Initialize, Some(&token))
        .await;
    let r = client.call("hello", json!({"name": "Ada"})).await;
    assert!(!is_error(&r), "{r:?}");
}

/// A host with a token, ready for a flood: this process may hold
/// hundreds of sockets beside other tests' files. The host, and its
/// `host:port`.
async fn flooded_host(env: &Env) -> (HttpHost, String) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
    let host = with_token(env, "s3cret-token").await;
    let addr = host
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    (host, addr)
}

/// Issue 34, class 5: unauthenticated clients that send half a request
/// cannot hold the host. Each is dropped once the header timeout passes,
/// at most a fixed number are open at once (more are closed at once), and
/// a client with the token gets in meanwhile or right after.
#[tokio::test]
async fn half_sent_requests_are_dropped_and_cannot_lock_out_the_token_holder() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = Env::new(&["hello"], "");
    let (host, addr) = flooded_host(&env).await;
    let started = std::time::Instant::now();
    let mut flood = Vec::new();
    for _ in 0..600 {
        let Ok(mut stream) = tokio::net::TcpStream::connect(&addr).await else {
            break;
        };
        let _ = stream
            .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n")
            .await;
        flood.push(stream);
    }
    assert_eq!(
        flood.len(),
        600,
        "connections are accepted (and the extra ones closed)"
    );
    // Every half-sent request ends: closed at once past the cap, or when
    // its headers are overdue.
    for stream in &mut flood {
        let mut buf = [0u8; 256];
        let ended = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut buf)).await;
        assert!(
            matches!(ended, Ok(Ok(_)) | Ok(Err(_))),
            "a half-sent request was held for {:?}",
            started.elapsed()
        );
    }
    let right = [("authorization", "Bearer s3cret-token")];
    assert_eq!(post(&host, &right).await, 200, "the token holder gets in");
}

/// Issue 61, item 7: a client without the token that keeps reopening
/// connections (and sending half a request on each) never keeps a client
/// with the token out, and a request body that arrives too slowly is
/// answered `408` rather than holding its place.
#[tokio::test]
async fn a_flood_of_new_connections_never_locks_out_the_token_holder() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let env = Env::new(&["hello"], "");
    let (host, addr) = flooded_host(&env).await;
    // The flood: 700 connections kept open, the oldest 50 swapped for new
    // ones every 20 ms, for as long as the token holder tries (bounded).
    let stop = tokio_util::sync::CancellationToken::new();
    let flood = {
        let (addr, stop) = (addr.clone(), stop.clone());
        tokio::spawn(async move {
            let mut open = std::collections::VecDeque::new();
            let started = std::time::Instant::now();
            while !stop.is_cancelled() && started.elapsed() < Duration::from_secs(60) {
                for _ in 0..50 {
                    if let Ok(mut stream) = tokio::net::TcpStream::connect(&addr).await {
                        let _ = stream
                            .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                            .await;
                        open.push_back(stream);
                    }
                }
                while open.len() > 700 {
                    open.pop_front();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let right = [("authorization", "Bearer s3cret-token")];
    let mut got_in = 0;
    for _ in 0..20 {
        if let Ok(status) = tokio::time::timeout(Duration::from_secs(5), post(&host, &right)).await
            && status == 200
        {
            got_in += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop.cancel();
    flood.await.unwrap();
    assert_eq!(got_in, 20, "the token holder got in {got_in} times of 20");

    // A body sent one byte at a time, for ever: answered 408, not kept.
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    slow.write_all(
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s3cret-token\r\n\
          content-type: application/json\r\ncontent-length: 100000\r\n\r\n{",
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while started.elapsed() < Duration::from_secs(90) {
        let _ = slow.write_all(b" ").await;
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(1), slow.read(&mut buf)).await {
            if n == 0 {
                break;
            }
            answer.extend_from_slice(&buf[..n]);
            break;
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

/// A raw stateless `tools/call` of `fault_huge` for `bytes`, as a
/// 2026-07-28 client named `client` POSTs it.
fn huge_call(client: &str, id: u32, bytes: usize) -> String {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "fault_huge", "arguments": {"bytes": bytes}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\n\
         mcp-method: tools/call\r\nmcp-name: fault_huge\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Issue 34, class 5, and issue 61, item 8: HTTP clients that never read
/// their answers do not make the host hold them all, nor starve the
/// clients that do read. What waits unread is bounded per client and over
/// every connection: a new result past its client's share is a short
/// `clients_not_reading` error, another client's answers still come, and
/// once the silent connections end their share is free again.
#[tokio::test]
async fn clients_that_never_read_their_answers_do_not_fill_the_host() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = "[plugins.faulty.limits]\nmemory_mb = 128\nconcurrency = 4\n";
    let env = Env::new(&["faulty"], config);
    let host = env.start_http(&[]).await;
    let addr = host
        .url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    // 24 connections of one client that never read a 15 MiB answer:
    // 360 MiB unread, past its share and the host's whole budget.
    let mut silent = Vec::new();
    for id in 0..24 {
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        stream
            .write_all(huge_call("silent", id, 15 << 20).as_bytes())
            .await
            .unwrap();
        silent.push(stream);
    }
    // A call that reads the start of its answer.
    let reading = |client: &'static str, id, mib: usize| {
        let addr = addr.clone();
        async move {
            let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
            stream
                .write_all(huge_call(client, id, mib << 20).as_bytes())
                .await
                .unwrap();
            let mut head = vec![0u8; 4096];
            let mut got = Vec::new();
            while got.len() < 2048 {
                let n = stream.read(&mut head).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&head[..n]);
            }
            String::from_utf8_lossy(&got).into_owned()
        }
    };
    // The silent client's own answers are refused once its share is full
    // (they are answered one plugin slot at a time)...
    let started = std::time::Instant::now();
    let refused = loop {
        let answer = reading("silent", 100, 8).await;
        if answer.contains("clients_not_reading") {
            break answer;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no answer of the silent client was refused with 360 MiB unread: {}",
            &answer[..answer.len().min(300)]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        refused.contains("this client's earlier answers"),
        "{refused}"
    );
    // ... while another client's answers still come whole.
    let answer = reading("reader", 101, 8).await;
    assert!(
        answer.contains("xxxx"),
        "{}",
        &answer[..answer.len().min(300)]
    );
    let (rss, _) = crate::harness::rss_kib(host.pid);
    assert!(
        rss / 1024 < 700,
        "the host holds {} MiB with 360 MiB of answers unread",
        rss / 1024
    );
    // The silent connections go away: their answers are given back.
    drop(silent);
    let started = std::time::Instant::now();
    loop {
        let answer = reading("silent", 102, 8).await;
        if answer.contains("xxxx") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the budget was not given back: {}",
            &answer[..answer.len().min(300)]
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// SEP-2243: a 2026-07-28 client sends a tool's `x-mcp-header` argument as
/// an `Mcp-Param-*` header too; one that does not match the body (or is
/// missing, or is bad Base64) is refused with HTTP 400 before the plugin
/// runs, and a matching one (plain or `=?base64?…?=`) goes through.
#[tokio::test]
async fn a_param_header_must_match_its_argument() {
    let env = Env::new(&["conformance"], "");
    let host = env.start_http(&[]).await;
    let call = |header: Option<&'static str>| {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "test_header_param", "arguments": {"region": "Hello"}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        let mut request = reqwest::Client::new()
            .post(&host.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "test_header_param")
            .body(body.to_string());
        if let Some(value) = header {
            request = request.header("mcp-param-region", value);
        }
        async move {
            let response = request.send().await.unwrap();
            (response.status().as_u16(), response.text().await.unwrap())
        }
    };
    let (status, text) = call(Some("Hello")).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("region: Hello"), "{text}");
    let (status, text) = call(Some("=?base64?SGVsbG8=?=")).await;
    assert_eq!(status, 200, "{text}");
    for refused in [Some("Goodbye"), Some("=?base64?SGVs!!!bG8=?="), None] {
        let (status, text) = call(refused).await;
        assert_eq!(status, 400, "{refused:?}: {text}");
        assert!(text.contains("-32020"), "{refused:?}: {text}");
    }
}
