//! Host benchmarks: `cargo bench -p host --bench host` (after
//! scripts/build-plugins). Prints the figures the README quotes.
//!
//! - cold start (no compiled cache) and warm start to the first tools/list
//!   answer, with the bundled plugins plus the test fixture;
//! - idle resident memory after start;
//! - per-call overhead of a no-op tool through MCP over stdio;
//! - time from a timeout to the whole process tree being dead.

mod common;
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
    // Every bundled plugin, plus the fixture whose `noop` the call figures use.
    let env = Env::new(&["run_test", "godot", "cofer", "copilot", "pi", "faulty"], "");

    let mut cold = Vec::new();
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(&env.cache);
        let (t, client) = start_to_list(&env).await;
        cold.push(t);
        drop(client);
    }
    let mut warm = Vec::new();
    for _ in 0..20 {
        let (t, client) = start_to_list(&env).await;
        warm.push(t);
        drop(client);
    }
    println!(
        "start to tools/list, cold (compiles 6 plugins): median {}",
        ms(percentile(&mut cold, 0.5))
    );
    println!(
        "start to tools/list, warm (compiled cache): median {}, p90 {}",
        ms(percentile(&mut warm, 0.5)),
        ms(percentile(&mut warm, 0.9))
    );

    let (_, client) = start_to_list(&env).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (rss, _) = rss_kib(client.pid);
    println!("idle RSS after start: {:.1} MiB", rss as f64 / 1024.0);

    // The floor: a ping through the same client, transport and rmcp server.
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
        "ping round trip over stdio (floor, 5000 pings): p50 {}, p99 {}",
        ms(percentile(&mut pings, 0.5)),
        ms(percentile(&mut pings, 0.99))
    );
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
    println!(
        "no-op tools/call round trip over stdio (5000 calls): p50 {}, p99 {}",
        ms(percentile(&mut calls, 0.5)),
        ms(percentile(&mut calls, 0.99))
    );
    let (rss, _) = rss_kib(client.pid);
    println!("RSS after 5300 calls: {:.1} MiB", rss as f64 / 1024.0);
    drop(client);

    // A tree with a plain child, a grandchild in its own session, and a
    // background job; killed at a 300 ms deadline.
    let timeout = Duration::from_millis(300);
    let mut kill = Vec::new();
    for _ in 0..10 {
        let spec = host::timebox::Spawn {
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
            log_path: None,
        };
        let outcome = host::timebox::run(&spec, &CancellationToken::new(), &NoProgress).await;
        assert_eq!(outcome.ending, host::timebox::Ending::Timeout);
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

struct NoProgress;
impl host::timebox::Progress for NoProgress {
    fn running(&self, _: Duration, _: u64) {}
}
