//! The same `hello` tool as a Rust, a Python and a JavaScript plugin, one
//! machine, one run: `COMPONENTIZE_PY=… COMPONENTIZE_JS=… cargo bench -p
//! host --bench languages` (after scripts/build-plugins; the Python and
//! JavaScript ones are built here from examples/hello-py and hello-js).
//!
//! - the component's size;
//! - start → the first `hello` answered with nothing compiled (the
//!   compile is most of it), and with the compiled artifact cached
//!   (median of 3);
//! - a `hello` call's round trip over MCP stdio, p50/p99 of 500 after 50.

#[allow(dead_code)]
mod common;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::percentile;
use harness::{Env, built_plugin};
use serde_json::json;

struct Figures {
    bytes: u64,
    cold: Duration,
    warm: Duration,
    p50: Duration,
    p99: Duration,
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// `example`'s files and the host's WIT in a folder of their own, built by
/// `program args`; the component.
fn build(dir: &Path, example: &str, program: &str, args: &[&str]) -> PathBuf {
    std::fs::create_dir_all(dir.join("wit")).unwrap();
    std::fs::copy(
        examples().join("../wit/plugin.wit"),
        dir.join("wit/plugin.wit"),
    )
    .unwrap();
    for file in std::fs::read_dir(examples().join(example))
        .unwrap()
        .flatten()
    {
        std::fs::copy(file.path(), dir.join(file.file_name())).unwrap();
    }
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("hello.wasm")
}

async fn first_answer(env: &Env) -> Duration {
    let started = Instant::now();
    let client = env.start().await;
    let r = client.call("hello", json!({"name": "bench"})).await;
    assert_ne!(r.is_error, Some(true), "{r:?}");
    started.elapsed()
}

async fn measure(component: &Path) -> Figures {
    let mut env = Env::new(&[], "");
    env.host_vars.push(("MCP_SERVER_LOG".into(), "info".into()));
    std::fs::copy(component, env.plugins.join("hello.wasm")).unwrap();
    let cold = first_answer(&env).await;
    let mut warm: Vec<Duration> = Vec::new();
    for _ in 0..3 {
        warm.push(first_answer(&env).await);
    }
    warm.sort();
    let client = env.start().await;
    for _ in 0..50 {
        client.call("hello", json!({"name": "bench"})).await;
    }
    let mut calls = Vec::with_capacity(500);
    for _ in 0..500 {
        let t = Instant::now();
        let r = client.call("hello", json!({"name": "bench"})).await;
        calls.push(t.elapsed());
        assert_ne!(r.is_error, Some(true));
    }
    Figures {
        bytes: std::fs::metadata(component).unwrap().len(),
        cold,
        warm: warm[1],
        p50: percentile(&mut calls, 0.50),
        p99: percentile(&mut calls, 0.99),
    }
}

/// Milliseconds, to divide one by another.
fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let (Ok(py), Ok(js)) = (
        std::env::var("COMPONENTIZE_PY"),
        std::env::var("COMPONENTIZE_JS"),
    ) else {
        panic!("set COMPONENTIZE_PY and COMPONENTIZE_JS (see .ci/run)");
    };
    let work = tempfile::tempdir().unwrap();
    let python = build(
        &work.path().join("py"),
        "hello-py",
        &py,
        &[
            "-d",
            "wit",
            "-w",
            "plugin",
            "componentize",
            "app",
            "-o",
            "hello.wasm",
        ],
    );
    let javascript = build(
        &work.path().join("js"),
        "hello-js",
        &js,
        &[
            "app.js",
            "--wit",
            "wit",
            "--world-name",
            "plugin",
            "-d",
            "http",
            "fetch-event",
            "-o",
            "hello.wasm",
        ],
    );
    let rust = measure(&built_plugin("hello")).await;
    for (name, component) in [
        ("Rust", None),
        ("Python", Some(python)),
        ("JavaScript", Some(javascript)),
    ] {
        let f = match component {
            None => &rust,
            Some(c) => &measure(&c).await,
        };
        println!(
            "[{name}] size {:.1} MB ({:.0}x Rust); first answer cold {:.0} ms ({:.1}x), cached {:.0} ms ({:.1}x); \
             call p50 {:.3} ms ({:.1}x), p99 {:.3} ms ({:.1}x)",
            f.bytes as f64 / 1e6,
            f.bytes as f64 / rust.bytes as f64,
            ms(f.cold),
            ms(f.cold) / ms(rust.cold),
            ms(f.warm),
            ms(f.warm) / ms(rust.warm),
            ms(f.p50),
            ms(f.p50) / ms(rust.p50),
            ms(f.p99),
            ms(f.p99) / ms(rust.p99),
        );
    }
}
