//! Cofer benchmarks on real Podman and git: `cargo bench -p host --bench
//! cofer` (after scripts/build-plugins and scripts/test-image).
//!
//! - environment_create end to end (MCP call to answer) on a repository of
//!   10,000 committed files, and environment_destroy of the same;
//! - environment_run_cmd of `true` against a plain `podman exec` of the
//!   same command in the same container (the overhead: MCP, wasm, finding
//!   the container, the timebox, the commit check), and of a command that
//!   changes a file (adds the commit and the push).

mod common;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::time::{Duration, Instant};

use common::{ms, percentile};
use harness::{Env, cofer, cofer_image, containers_conf, git, is_error, podman, podman_ready};
use serde_json::json;

const FILES: usize = 10_000;
const ROUNDS: usize = 5;
const RUNS: usize = 30;

#[tokio::main]
async fn main() {
    if !podman_ready() {
        return;
    }
    let mut env = Env::new(&["cofer"], "");
    env.host_vars
        .push(("CONTAINERS_CONF".into(), containers_conf()));
    let repo = env.workspace.join("repo");
    for i in 0..FILES {
        let dir = repo.join(format!("src/d{:03}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    git(&repo, &["init", "--quiet"]);
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "--quiet", "-m", "10k files"]);
    assert!(cofer(&repo, &["init"]).status.success());
    let source = repo.to_string_lossy().into_owned();
    let client = env.start().await;
    let scoped = |id: &str| json!({"environment_source": source, "environment_id": id});
    let run = |id: &str, command: &str| json!({"environment_source": source, "environment_id": id, "command": command});

    let (mut create, mut destroy) = (Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        let id = format!("bench-{round}");
        let args = json!({"environment_source": source, "title": "bench", "image": cofer_image(), "environment_id": id});
        let started = Instant::now();
        let r = client.call("environment_create", args).await;
        let t_create = started.elapsed();
        assert!(!is_error(&r), "{r:?}");
        let started = Instant::now();
        let r = client.call("environment_destroy", scoped(&id)).await;
        let t_destroy = started.elapsed();
        assert!(!is_error(&r), "{r:?}");
        if round > 0 {
            // Round 0 warms the plugin and Podman's caches.
            create.push(t_create);
            destroy.push(t_destroy);
        }
    }
    println!(
        "environment_create, {FILES}-file repository ({ROUNDS} runs): median {}, max {}",
        ms(percentile(&mut create, 0.5)),
        ms(percentile(&mut create, 1.0))
    );
    println!(
        "environment_destroy (stop + remove container, worktree, branch): median {}, max {}",
        ms(percentile(&mut destroy, 0.5)),
        ms(percentile(&mut destroy, 1.0))
    );

    let args = json!({"environment_source": source, "title": "bench", "image": cofer_image(), "environment_id": "runs"});
    assert!(!is_error(&client.call("environment_create", args).await));
    let container = podman(&["ps", "-q", "--filter", "label=cofer.env=runs"])
        .trim()
        .to_string();
    let time = |samples: &mut Vec<Duration>, started: Instant| samples.push(started.elapsed());
    let (mut plain, mut tool, mut changing) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..RUNS + 3 {
        let started = Instant::now();
        let out = std::process::Command::new("podman")
            .args([
                "exec",
                "--workdir",
                "/workdir",
                &container,
                "sh",
                "-c",
                "true",
            ])
            .env("CONTAINERS_CONF", containers_conf())
            .status()
            .unwrap();
        assert!(out.success());
        if i >= 3 {
            time(&mut plain, started);
        }
        let started = Instant::now();
        let r = client
            .call("environment_run_cmd", run("runs", "true"))
            .await;
        assert!(!is_error(&r), "{r:?}");
        if i >= 3 {
            time(&mut tool, started);
        }
        let started = Instant::now();
        let r = client
            .call(
                "environment_run_cmd",
                run("runs", &format!("echo {i} > counter.txt")),
            )
            .await;
        assert!(!is_error(&r), "{r:?}");
        if i >= 3 {
            time(&mut changing, started);
        }
    }
    let (p, t, c) = (
        percentile(&mut plain, 0.5),
        percentile(&mut tool, 0.5),
        percentile(&mut changing, 0.5),
    );
    println!(
        "plain `podman exec <ctr> sh -c true` ({RUNS} runs): median {}",
        ms(p)
    );
    println!(
        "environment_run_cmd `true`, nothing to commit: median {}, overhead {}",
        ms(t),
        ms(t.saturating_sub(p))
    );
    println!(
        "environment_run_cmd changing a file (commit + push): median {}, overhead {}",
        ms(c),
        ms(c.saturating_sub(p))
    );
    client.call("environment_destroy", scoped("runs")).await;
}
