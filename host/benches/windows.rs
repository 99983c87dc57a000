//! The Windows host under Wine beside the Linux host, one machine, one run:
//! `cargo bench -p host --bench windows` (after scripts/build-plugins and
//! scripts/windows-check; needs npm, and Windows node as tests/e2e/wine.rs
//! says).
//!
//! - start → the first `hello` call answered (tools/list may come before
//!   its plugin is compiled; a call waits for it): the first start
//!   (components compiled) and the median of 4 more (compiled artifacts
//!   from the cache);
//! - a `hello` call's round trip, p50/p99 of 200;
//! - run_test timing out after 5 s on a node test that started a detached
//!   grandchild: how long after the timeout the answer came, and after the
//!   answer the grandchild was gone (3 rounds, medians).
//!
//! Wine's figures are an emulation's (a real Windows is not measured here):
//! compare the ratio, not the milliseconds.

mod common;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../../tests/e2e/wine.rs"]
#[allow(dead_code)]
mod wine;

use std::time::{Duration, Instant};

use common::{ms, percentile};
use harness::{Client, Env, gone, run_test_args, structured};
use serde_json::json;
use wine::{Wine, node_project};

struct Figures {
    cold: Duration,
    warm: Duration,
    p50: Duration,
    p99: Duration,
    overshoot: Duration,
    tree_gone: Duration,
}

async fn measure<F, Fut>(marker: &str, start: F) -> Figures
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Client>,
{
    let mut starts = Vec::new();
    for _ in 0..5 {
        let began = Instant::now();
        let client = start().await;
        client.tools().await;
        client.call("hello", json!({"name": "first"})).await;
        starts.push(began.elapsed());
        client.service.cancel().await.ok();
    }
    let cold = starts[0];
    let warm = percentile(&mut starts[1..].to_vec(), 0.5);

    let client = start().await;
    let mut calls = Vec::new();
    for i in 0..200 {
        let began = Instant::now();
        client.call("hello", json!({"name": format!("n{i}")})).await;
        calls.push(began.elapsed());
    }
    let (p50, p99) = (percentile(&mut calls, 0.5), percentile(&mut calls, 0.99));

    let (mut overshoots, mut gones) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        let args = run_test_args(
            "npm",
            json!({"scope": "file", "target": "test/hang.test.js", "timeout_ms": 5_000}),
        );
        let began = Instant::now();
        let result = client.call("run_test", args).await;
        let answered = began.elapsed();
        assert_eq!(structured(&result)["status"], "timeout", "{result:?}");
        overshoots.push(answered.saturating_sub(Duration::from_secs(5)));
        let after = Instant::now();
        gone(marker, Duration::from_secs(30))
            .await
            .unwrap_or_else(|left| panic!("the grandchild outlived its run: {left:?}"));
        gones.push(after.elapsed());
    }
    client.service.cancel().await.ok();
    Figures {
        cold,
        warm,
        p50,
        p99,
        overshoot: percentile(&mut overshoots, 0.5),
        tree_gone: percentile(&mut gones, 0.5),
    }
}

#[tokio::main]
async fn main() {
    let Some(wine) = Wine::find() else {
        eprintln!("windows bench: nothing measured (see the skip above)");
        return;
    };
    let marker = format!("bench-grandchild-{}", uuid::Uuid::new_v4().simple());
    let linux_env = Env::new(&["hello", "run_test"], "");
    node_project(&linux_env.workspace, &marker);
    let windows_env = Env::new(&["hello", "run_test"], "");
    node_project(&windows_env.workspace, &marker);

    let linux = measure(&marker, || linux_env.start()).await;
    let windows = measure(&marker, || wine.start(&windows_env)).await;

    let ratio = |w: Duration, l: Duration| w.as_secs_f64() / l.as_secs_f64().max(1e-9);
    println!(
        "{:<44} {:>12} {:>16} {:>7}",
        "", "Linux", "Windows (Wine)", "ratio"
    );
    let rows = [
        (
            "start → first call answered, first (compiling)",
            linux.cold,
            windows.cold,
        ),
        (
            "start → first call answered, cached (median of 4)",
            linux.warm,
            windows.warm,
        ),
        ("hello round trip p50", linux.p50, windows.p50),
        ("hello round trip p99", linux.p99, windows.p99),
        (
            "run_test timeout: answer after the 5 s",
            linux.overshoot,
            windows.overshoot,
        ),
        (
            "run_test timeout: grandchild gone after",
            linux.tree_gone,
            windows.tree_gone,
        ),
    ];
    for (name, l, w) in rows {
        println!(
            "{name:<44} {:>12} {:>16} {:>6.1}x",
            ms(l),
            ms(w),
            ratio(w, l)
        );
    }
}
