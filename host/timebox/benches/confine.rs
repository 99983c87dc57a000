//! What confinement costs a program start (issue 71): a no-op program
//! (`/bin/true`) started through `timebox::run`, unconfined and confined by
//! a ruleset like a bundled plugin's (read everything but a home's
//! credential stores, write a workspace, caches, devices), interleaved in
//! one run. Prints each one's median and 95th percentile and the
//! difference. `cargo bench -p timebox --bench confine`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use timebox::confine::{Confinement, enforcement};
use timebox::{Progress, Spawn};
use tokio_util::sync::CancellationToken;

struct Quiet;
impl Progress for Quiet {
    fn running(&self, _: Duration, _: u64) {}
}

const RUNS: usize = 300;

fn main() {
    println!("{}", enforcement().describe());
    let home = dirs_home();
    let workspace = tempfile::tempdir().unwrap();
    let confinement = Confinement {
        write: [
            workspace.path().to_path_buf(),
            home.join(".cargo/registry"),
            home.join(".npm"),
            home.join(".cache/pip"),
            "/dev/null".into(),
            "/dev/pts".into(),
            std::env::temp_dir(),
        ]
        .to_vec(),
        read: vec!["/".into()],
        hidden: [
            ".ssh",
            ".gnupg",
            ".aws",
            ".docker",
            ".config/gh",
            ".cache/mcp-host",
            ".config/mcp-host/secrets",
        ]
        .iter()
        .map(|h| home.join(h))
        .collect(),
        connect: None,
        bind: None,
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (mut plain, mut confined) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        for i in 0..RUNS * 2 {
            let confine = (i % 2 == 1).then(|| confinement.clone());
            let spec = Spawn {
                program: "/bin/true".into(),
                args: Vec::new(),
                cwd: std::env::temp_dir(),
                env: Vec::new(),
                stdin: None,
                timeout: Duration::from_secs(10),
                no_output_timeout: None,
                tail_bytes: 1024,
                log: None,
                confine: confine.clone(),
            };
            let start = Instant::now();
            let outcome = timebox::run(&spec, &CancellationToken::new(), &Quiet).await;
            let took = start.elapsed();
            assert_eq!(outcome.exit_code, Some(0), "{:?}", outcome.error);
            if confine.is_some() {
                confined.push(took)
            } else {
                plain.push(took)
            }
        }
    });
    let (p50, p95) = (percentile(&mut plain, 0.5), percentile(&mut plain, 0.95));
    let (c50, c95) = (
        percentile(&mut confined, 0.5),
        percentile(&mut confined, 0.95),
    );
    println!(
        "no-op start and end, {RUNS} each: unconfined p50 {p50:.2?} p95 {p95:.2?}; confined p50 {c50:.2?} p95 {c95:.2?}"
    );
    println!(
        "confinement adds: p50 {:.3} ms ({:.2}x), p95 {:.3} ms",
        (c50.as_secs_f64() - p50.as_secs_f64()) * 1e3,
        c50.as_secs_f64() / p50.as_secs_f64(),
        (c95.as_secs_f64() - p95.as_secs_f64()) * 1e3
    );
}

fn dirs_home() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from)
}

fn percentile(samples: &mut [Duration], q: f64) -> Duration {
    samples.sort();
    samples[((samples.len() - 1) as f64 * q).round() as usize]
}
