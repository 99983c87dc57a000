//! Cofer benchmarks on real Podman and git: `cargo bench -p host --bench
//! cofer` (after scripts/build-plugins and scripts/test-image; as root for
//! the second engine).
//!
//! On this machine's Podman, then on a second engine that does not share
//! its files (the tests' [`IsolatedEngine`]: another mount and network
//! namespace, reached over TCP, so /workdir is a volume there and files
//! travel as tar streams), each in the same run:
//! - environment_create end to end (MCP call to answer) on a repository of
//!   10,000 committed files, and environment_destroy of the same;
//! - environment_run_cmd of `true` against a plain `podman exec` of the
//!   same command in the same container (the overhead: MCP, wasm, finding
//!   the container, the timebox, the commit check; on the second engine
//!   also bringing /workdir back), and of a command that changes a file
//!   (adds the commit and the push);
//! - the copy's share of a far create, as the host logs it (`took_ms`);
//! - the disks' own share: GNU tar writing the same 10,000 files into a
//!   new folder on each engine's disk, which a create there writes once
//!   more than a local one does (the worktree here, then its copy there).
//!
//! Each engine's files (this machine's workspace and worktrees, the second
//! engine's storage) sit on a disk of their own made for the run, as two
//! machines' would: on this machine's `/` the same tar varies 0.2-9 s with
//! what was deleted before (also printed; see
//! `IsolatedEngine::start_on_own_disk`).

mod common;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;
#[path = "../../tests/e2e/isolated_engine.rs"]
#[allow(dead_code)]
mod isolated_engine;
#[path = "../../tests/e2e/ssh_engine.rs"]
#[allow(dead_code)]
mod ssh_engine;

use std::time::{Duration, Instant};

use common::{ms, percentile};
use harness::{Client, Env, cofer, cofer_image, containers_conf, git, is_error, podman_ready};
use isolated_engine::{IsolatedEngine, OwnDisk};
use serde_json::json;

const FILES: usize = 10_000;
const ROUNDS: usize = 5;
const RUNS: usize = 20;

/// Medians of one engine.
struct Figures {
    create: Duration,
    destroy: Duration,
    plain: Duration,
    tool: Duration,
    changing: Duration,
}

#[tokio::main]
async fn main() {
    if !podman_ready() {
        return;
    }
    // Each engine's files on a disk of its own, made for this run: this
    // machine's `/` carries what earlier tests and benches deleted, which
    // slows creating files 20-40x (see `IsolatedEngine::start_on_own_disk`).
    let Some(here) = OwnDisk::new() else {
        return;
    };
    let far = IsolatedEngine::start_on_own_disk(&cofer_image());
    let ssh = ssh_engine::SshEngine::start_on_own_disk(&cofer_image());
    let mut env = Env::new_in(&here.path, &["cofer"], "");
    env.host_vars
        .push(("CONTAINERS_CONF".into(), containers_conf()));
    let mut config = "[plugins.cofer.containers.engines]\n".to_string();
    if let Some(far) = &far {
        // A namespace of this run's only: the unauthenticated API is allowed.
        config.push_str(&format!(
            "far = {{ url = \"{}\", insecure = true }}\n",
            far.address
        ));
    }
    if let Some(ssh) = &ssh {
        config.push_str(&format!("lab = {}\n", ssh.table(&ssh.known_hosts)));
    }
    std::fs::write(&env.config, config).unwrap();
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
    let disks = [
        (
            "this machine's / (/var/tmp)",
            Some(std::path::PathBuf::from("/var/tmp")),
        ),
        ("this machine's own disk", Some(here.path.clone())),
        (
            "the second engine's own disk",
            far.as_ref()
                .and_then(|f| Some(f.disk.as_ref()?.path.clone())),
        ),
    ];
    for (disk, parent) in disks {
        if let Some(parent) = parent {
            println!(
                "[disk] tar -x of the {FILES} files into {disk} ({ROUNDS} runs): median {}",
                ms(disk_copy(&repo, &parent))
            );
        }
    }
    let client = env.start().await;

    let local = measure(&client, &source, "local", &[]).await;
    print("local", &local);
    if let Some(ssh) = &ssh {
        let remote = ["--remote", "--url", ssh.engine.address.as_str()];
        let lab = measure(&client, &source, "lab", &remote).await;
        print("lab (namespaced, over ssh)", &lab);
        compare("ssh / local", &lab, &local);
    }
    let Some(far) = far else {
        println!("second engine: skipped (it needs root, ip, unshare and nsenter)");
        return;
    };
    let remote = ["--remote", "--url", far.address.as_str()];
    let far_figures = measure(&client, &source, "far", &remote).await;
    print("far (namespaced, over TCP)", &far_figures);
    // A far create is a local one plus the copy into the volume, which
    // this disk decides: its share, from the host's log.
    let log = std::fs::read_to_string(env.stderr_log()).unwrap_or_default();
    let mut copies: Vec<Duration> = log
        .lines()
        .filter(|l| l.contains("copied in by the container's tar"))
        .filter_map(|l| l.split(" took_ms=").nth(1)?.split(' ').next()?.parse().ok())
        .map(Duration::from_millis)
        .collect();
    if !copies.is_empty() {
        let copy = percentile(&mut copies, 0.5);
        println!(
            "[far] the worktree's copy into the volume ({} copies): median {}; create without it {} ({:.2}x local)",
            copies.len(),
            ms(copy),
            ms(far_figures.create.saturating_sub(copy)),
            far_figures.create.saturating_sub(copy).as_secs_f64() / local.create.as_secs_f64()
        );
    }
    compare("far / local", &far_figures, &local);
}

/// Each of `a`'s figures as a multiple of `b`'s.
fn compare(label: &str, a: &Figures, b: &Figures) {
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!(
        "{label}: create {:.2}x, destroy {:.2}x, run_cmd `true` {:.2}x, changing a file {:.2}x",
        ratio(a.create, b.create),
        ratio(a.destroy, b.destroy),
        ratio(a.tool, b.tool),
        ratio(a.changing, b.changing),
    );
}

/// How long GNU tar takes to write `repo`'s files into a new folder in
/// `parent` (median).
fn disk_copy(repo: &std::path::Path, parent: &std::path::Path) -> Duration {
    let mut took = Vec::new();
    for _ in 0..ROUNDS {
        let into = tempfile::tempdir_in(parent).unwrap();
        let started = Instant::now();
        let copied = std::process::Command::new("sh")
            .arg("-c")
            .arg(r#"tar -c -f - -C "$1" --exclude=.git . | tar -x -f - -C "$2""#)
            .args([
                "sh",
                &repo.to_string_lossy(),
                &into.path().to_string_lossy(),
            ])
            .status()
            .unwrap();
        assert!(copied.success());
        took.push(started.elapsed());
    }
    percentile(&mut took, 0.5)
}

fn print(engine: &str, f: &Figures) {
    println!(
        "[{engine}] environment_create, {FILES}-file repository ({ROUNDS} runs): median {}",
        ms(f.create)
    );
    println!("[{engine}] environment_destroy: median {}", ms(f.destroy));
    println!(
        "[{engine}] plain `podman exec <ctr> sh -c true` ({RUNS} runs): median {}",
        ms(f.plain)
    );
    println!(
        "[{engine}] environment_run_cmd `true`, nothing to commit: median {}, overhead {}",
        ms(f.tool),
        ms(f.tool.saturating_sub(f.plain))
    );
    println!(
        "[{engine}] environment_run_cmd changing a file (commit + push): median {}, overhead {}",
        ms(f.changing),
        ms(f.changing.saturating_sub(f.plain))
    );
}

/// The figures of `engine`, whose containers `podman <podman_args>` reaches.
async fn measure(client: &Client, source: &str, engine: &str, podman_args: &[&str]) -> Figures {
    let scoped = |id: &str| json!({"environment_source": source, "environment_id": id});
    let run = |id: &str, command: &str| json!({"environment_source": source, "environment_id": id, "command": command});
    let create_args = |id: &str| json!({"environment_source": source, "title": "bench", "image": cofer_image(), "environment_id": id, "engine": engine});

    let (mut create, mut destroy) = (Vec::new(), Vec::new());
    for round in 0..=ROUNDS {
        let id = format!("bench-{engine}-{round}");
        let started = Instant::now();
        let r = client.call("environment_create", create_args(&id)).await;
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

    let id = format!("runs-{engine}");
    assert!(!is_error(
        &client.call("environment_create", create_args(&id)).await
    ));
    let podman = |args: &[&str]| {
        std::process::Command::new("podman")
            .args(podman_args)
            .args(args)
            .env("CONTAINERS_CONF", containers_conf())
            .output()
            .unwrap()
    };
    let filter = format!("label=cofer.env={id}");
    let container = String::from_utf8(podman(&["ps", "-q", "--filter", &filter]).stdout).unwrap();
    let container = container.trim();
    let time = |samples: &mut Vec<Duration>, started: Instant| samples.push(started.elapsed());
    let (mut plain, mut tool, mut changing) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..RUNS + 3 {
        let started = Instant::now();
        let out = podman(&[
            "exec",
            "--workdir",
            "/workdir",
            container,
            "sh",
            "-c",
            "true",
        ]);
        assert!(out.status.success(), "{out:?}");
        if i >= 3 {
            time(&mut plain, started);
        }
        let started = Instant::now();
        let r = client.call("environment_run_cmd", run(&id, "true")).await;
        assert!(!is_error(&r), "{r:?}");
        if i >= 3 {
            time(&mut tool, started);
        }
        let started = Instant::now();
        let r = client
            .call(
                "environment_run_cmd",
                run(&id, &format!("echo {i} > counter.txt")),
            )
            .await;
        assert!(!is_error(&r), "{r:?}");
        if i >= 3 {
            time(&mut changing, started);
        }
    }
    client.call("environment_destroy", scoped(&id)).await;
    Figures {
        create: percentile(&mut create, 0.5),
        destroy: percentile(&mut destroy, 0.5),
        plain: percentile(&mut plain, 0.5),
        tool: percentile(&mut tool, 0.5),
        changing: percentile(&mut changing, 0.5),
    }
}
