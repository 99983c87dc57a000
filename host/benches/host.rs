//! Host benchmarks: `cargo bench -p host --bench host` (after
//! scripts/build-plugins). Prints the figures the README quotes.
//!
//! - cold start (no compiled cache) and warm start to the first tools/list
//!   answer, with the bundled plugins plus the test fixture (listed while
//!   they compile), and cold start to the first call's answer (which waits
//!   for its plugin to load);
//! - idle resident memory once the plugins are loaded and start-up is over;
//! - per-call overhead of a no-op tool through MCP over stdio, from rmcp's
//!   client and from a bare JSON-RPC client (write a line, read a line),
//!   and over Streamable HTTP (keep-alive) from rmcp's client, in a session
//!   (2025-11-25) and stateless (2026-07-28);
//! - time from a timeout to the whole process tree being dead.
//!
//! Call figures are also given as ratios to the floor: the smallest rmcp
//! stdio server, one no-op tool ([`floor`]), measured in the same run.

mod common;
#[path = "common/floor.rs"]
mod floor;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::time::{Duration, Instant};

use common::{ms, percentile};
use harness::{Env, rss_kib};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn start_to_list(env: &Env) -> (Duration, harness::Client) {
    let started = Instant::now();
    let client = env.start().await;
    let tools = client.tools().await;
    let elapsed = started.elapsed();
    assert!(!tools.is_empty());
    (elapsed, client)
}

#[tokio::main]
async fn main() {
    if floor::asked() {
        return floor::serve().await;
    }
    // Every bundled plugin, plus the fixture whose `noop` the call figures use.
    let bundled: Vec<String> = include_str!("../../plugins/bundled")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|package| package.replace('-', "_"))
        .collect();
    let plugins: Vec<&str> = bundled
        .iter()
        .map(String::as_str)
        .chain(["faulty"])
        .collect();
    let mut env = Env::new(&plugins, "");
    // The default log level (the harness raises it to debug for tests).
    env.host_vars.push(("MCP_SERVER_LOG".into(), "info".into()));

    let mut cold = Vec::new();
    let mut cold_call = Vec::new();
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(&env.cache);
        let started = Instant::now();
        let (t, client) = start_to_list(&env).await;
        cold.push(t);
        assert_ne!(client.call("noop", json!({})).await.is_error, Some(true));
        cold_call.push(started.elapsed());
        drop(client);
    }
    // One cold start to the end of start-up: every plugin in the compiled
    // cache (a cold round ends at its first call, before the others
    // compiled), and what a host that compiled them all idles at.
    let _ = std::fs::remove_dir_all(&env.cache);
    let settled = env.logged("start-up over");
    let (_, client) = start_to_list(&env).await;
    env.wait_for_log("start-up over", settled + 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cold_idle = rss_kib(client.pid).0 as f64 / 1024.0;
    drop(client);
    let mut warm = Vec::new();
    for _ in 0..20 {
        let (t, client) = start_to_list(&env).await;
        warm.push(t);
        drop(client);
    }
    println!(
        "start to tools/list, cold (6 plugins listed while they compile): median {}",
        ms(percentile(&mut cold, 0.5))
    );
    println!(
        "start to the first call's answer, cold (it waits for its plugin, the smallest, to compile and load): median {}",
        ms(percentile(&mut cold_call, 0.5))
    );
    println!(
        "idle RSS once a cold start is over (it compiled every plugin itself): {cold_idle:.1} MiB"
    );
    println!(
        "start to tools/list, warm (compiled cache): median {}, p90 {}",
        ms(percentile(&mut warm, 0.5)),
        ms(percentile(&mut warm, 0.9))
    );

    let settled = env.logged("start-up over");
    let (_, client) = start_to_list(&env).await;
    // Idle once loaded and settled (first refreshes ended, start-up's
    // pages let go): a call waits for the load.
    client.call("noop", json!({})).await;
    env.wait_for_log("start-up over", settled + 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss, _) = rss_kib(client.pid);
    let mib = |field: &str| harness::status_kib(client.pid, field) as f64 / 1024.0;
    println!(
        "idle RSS after start: {:.1} MiB ({:.1} MiB private: RssAnon; {:.1} MiB of files mapped from the page cache: RssFile)",
        rss as f64 / 1024.0,
        mib("RssAnon:"),
        mib("RssFile:")
    );
    // The watchdog is a process of its own (it outlives the host), forked
    // from it: what it maps beside the host's pages is its own cost.
    match env.watchdog_of(client.pid) {
        Some(pid) => {
            let own = private_kib(pid as u32) as f64 / 1024.0;
            println!(
                "its watchdog: {own:.2} MiB its own (Private_*: the rest of its {:.1} MiB RSS is pages it shares with the host); host and watchdog together {:.1} MiB",
                rss_kib(pid as u32).0 as f64 / 1024.0,
                rss as f64 / 1024.0 + own
            );
        }
        None => println!("its watchdog: not found in the host's log"),
    }

    // The transport alone: a ping through the same client, transport and rmcp server.
    let mut pings = Vec::with_capacity(5000);
    for _ in 0..5000 {
        let t = Instant::now();
        client
            .service
            .send_request(rmcp::model::ClientRequest::PingRequest(Default::default()))
            .await
            .expect("ping");
        pings.push(t.elapsed());
    }
    println!(
        "ping round trip over stdio (the transport alone, 5000 pings): p50 {}, p99 {}",
        ms(percentile(&mut pings, 0.5)),
        ms(percentile(&mut pings, 0.99))
    );
    let ours = p50_p99(noop_calls(&client).await);
    println!(
        "no-op tools/call round trip over stdio (5000 calls): p50 {}, p99 {}",
        ms(ours.0),
        ms(ours.1)
    );
    let (rss, _) = rss_kib(client.pid);
    println!("RSS after 5300 calls: {:.1} MiB", rss as f64 / 1024.0);
    drop(client);
    let floor = floor_client().await;
    let floor_calls = p50_p99(noop_calls(&floor).await);
    drop(floor);
    println!(
        "floor: no-op tools/call round trip to a bare rmcp stdio server (5000 calls): p50 {}, p99 {}; {}",
        ms(floor_calls.0),
        ms(floor_calls.1),
        against_floor(ours, floor_calls)
    );
    let ours = raw_round_trips(env.host(&["serve", "--stdio", "--no-watch"]), "ours").await;
    let floor = raw_round_trips(floor::command(), "floor").await;
    println!("bare client, {}", against_floor(ours, floor));
    http_round_trips(&env).await;

    // A tree with a plain child, a grandchild in its own session, and a
    // background job; killed at a 300 ms deadline.
    let timeout = Duration::from_millis(300);
    let mut kill = Vec::new();
    for _ in 0..10 {
        let spec = timebox::Spawn {
            program: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                "sleep 100 & setsid sleep 100 & sh -c 'sleep 100' & wait".into(),
            ],
            cwd: std::env::temp_dir(),
            env: vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())],
            stdin: None,
            timeout,
            no_output_timeout: None,
            tail_bytes: 4096,
            log: None,
            confine: None,
        };
        let outcome = timebox::run(&spec, &CancellationToken::new(), &NoProgress).await;
        assert_eq!(outcome.ending, timebox::Ending::Timeout);
        let report = outcome.kill.expect("the tree was killed");
        assert!(report.killed >= 4, "{report:?}");
        kill.push(outcome.duration - timeout);
    }
    println!(
        "timeout to whole tree dead (4 processes, one in its own session): median {}, max {}",
        ms(percentile(&mut kill, 0.5)),
        ms(percentile(&mut kill, 1.0))
    );
}

/// The p50 and p99 of `samples`.
fn p50_p99(mut samples: Vec<Duration>) -> (Duration, Duration) {
    (
        percentile(&mut samples, 0.5),
        percentile(&mut samples, 0.99),
    )
}

/// Our (p50, p99) as ratios to the floor's.
fn against_floor(ours: (Duration, Duration), floor: (Duration, Duration)) -> String {
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    format!(
        "ours / floor: p50 {:.2}x, p99 {:.2}x",
        ratio(ours.0, floor.0),
        ratio(ours.1, floor.1)
    )
}

/// An MCP client of the floor server.
async fn floor_client() -> harness::Client {
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(floor::command())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the floor server starts");
    let pid = transport.id().expect("its pid");
    harness::Client::answering(
        transport,
        rmcp::ClientLifecycleMode::Initialize,
        pid,
        Default::default(),
    )
    .await
}

/// 5000 timed no-op calls, after 300 to warm up.
async fn noop_calls(client: &harness::Client) -> Vec<Duration> {
    for _ in 0..300 {
        client.call("noop", json!({})).await;
    }
    let mut calls = Vec::with_capacity(5000);
    for _ in 0..5000 {
        let t = Instant::now();
        let r = client.call("noop", json!({})).await;
        calls.push(t.elapsed());
        assert_ne!(r.is_error, Some(true));
    }
    calls
}

/// No-op calls over HTTP, in both lifecycles, against one host.
async fn http_round_trips(env: &Env) {
    use rmcp::ClientLifecycleMode;
    let host = env.start_http(&["--no-watch"]).await;
    let lifecycles = [
        ("session, 2025-11-25", ClientLifecycleMode::Initialize),
        (
            "stateless, 2026-07-28",
            ClientLifecycleMode::Discover {
                preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
            },
        ),
    ];
    for (what, lifecycle) in lifecycles {
        let client = host.connect(lifecycle, None).await;
        let mut calls = noop_calls(&client).await;
        println!(
            "no-op tools/call round trip over HTTP, {what} (5000 calls): p50 {}, p99 {}",
            ms(percentile(&mut calls, 0.5)),
            ms(percentile(&mut calls, 0.99))
        );
    }
    let (rss, _) = rss_kib(host.pid);
    println!(
        "RSS after 10600 calls over HTTP: {:.1} MiB",
        rss as f64 / 1024.0
    );
}

struct NoProgress;
impl timebox::Progress for NoProgress {
    fn running(&self, _: Duration, _: u64) {}
}

/// The same two round trips with a bare JSON-RPC client (write a line, read
/// a line): the host without rmcp's client-side dispatch in the way.
/// Pings and no-op calls from a bare client (write a line, read a line)
/// to the server `command` starts; the calls' p50 and p99.
async fn raw_round_trips(mut command: tokio::process::Command, who: &str) -> (Duration, Duration) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut id = 0u64;
    let mut round_trip = async |method: &str, params: serde_json::Value| {
        id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let t = Instant::now();
        stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        let line = lines.next_line().await.unwrap().unwrap();
        let elapsed = t.elapsed();
        assert!(line.contains(&format!("\"id\":{id}")), "{line}");
        elapsed
    };
    round_trip(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
    )
    .await;
    // (The initialized notification needs no answer.)
    let mut pings = Vec::with_capacity(5000);
    let mut calls = Vec::with_capacity(5000);
    for i in 0..5300 {
        let p = round_trip("ping", json!({})).await;
        let c = round_trip("tools/call", json!({"name": "noop", "arguments": {}})).await;
        if i >= 300 {
            pings.push(p);
            calls.push(c);
        }
    }
    let (p50, p99) = p50_p99(calls);
    println!(
        "bare client, {who}: ping p50 {}, p99 {}; no-op tools/call p50 {}, p99 {} (5000 each)",
        ms(percentile(&mut pings, 0.5)),
        ms(percentile(&mut pings, 0.99)),
        ms(p50),
        ms(p99)
    );
    let _ = child.kill().await;
    (p50, p99)
}

/// The resident memory only `pid` maps (Private_Clean + Private_Dirty): a
/// page shared with another process (as a forked one shares its parent's)
/// is not counted.
pub fn private_kib(pid: u32) -> u64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap();
    rollup
        .lines()
        .filter(|l| l.starts_with("Private_Clean:") || l.starts_with("Private_Dirty:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}
