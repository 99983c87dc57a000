//! What each sentence model costs, side by side in one run: loading, the
//! memory it holds, one question at a time (what a search waits for), and
//! documents in the worker's batches of 16 (what a first start waits for).
//! all-MiniLM-L6-v2 with its weights in f32 (as trained) is the
//! baseline; the same held compact (the host's: matrices in half
//! precision, tables a byte per value), the Godot-adapted model the host
//! ships, and all-mpnet-base-v2 both ways are measured against it, with
//! how far each compact model's vectors stray from its f32 ones. The
//! texts are our Godot question sets.
//!
//! `cargo bench -p embedder --bench models` (models found as the tests
//! find them: $MCP_TEST_STOCK_MODEL, $MCP_TEST_MPNET_MODEL, else where
//! scripts/setup-model puts them; the adapted one in plugins/godot/model).
//! Each model is measured in a process of its own, so that one's memory
//! is not counted in the other's.

use std::path::{Path, PathBuf};
use std::time::Instant;

const ONE: &str = "EMBEDDER_BENCH_ONE";
const FULL: &str = "EMBEDDER_BENCH_FULL";
const BATCH: usize = 16;

fn main() {
    let questions = questions();
    if let Some(dir) = std::env::var_os(ONE) {
        measure(
            Path::new(&dir),
            std::env::var_os(FULL).is_some(),
            &questions,
        );
        return;
    }
    let installed = |var: &str, folder: &str| {
        std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".local/share/mcp-host/models")
                .join(folder)
        })
    };
    let minilm = installed("MCP_TEST_STOCK_MODEL", "all-minilm-l6-v2");
    let mpnet = installed("MCP_TEST_MPNET_MODEL", "all-mpnet-base-v2");
    let adapted = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plugins/godot/model");
    let models = [
        ("all-minilm-l6-v2 f32", &minilm, true),
        ("all-minilm-l6-v2 compact", &minilm, false),
        ("godot-minilm-l6 compact", &adapted, false),
        ("all-mpnet-base-v2 f32", &mpnet, true),
        ("all-mpnet-base-v2 compact", &mpnet, false),
    ];
    let mut rows = Vec::new();
    for (folder, dir, full) in models {
        if !dir.join("model.safetensors").is_file() {
            println!(
                "SKIPPED {folder}: no model in {} (scripts/setup-model {folder})",
                dir.display()
            );
            continue;
        }
        let me = std::env::current_exe().expect("the bench's own path");
        let mut child = std::process::Command::new(me);
        child.env(ONE, dir);
        if full {
            child.env(FULL, "1");
        }
        let out = child.output().expect("the bench runs itself");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = String::from_utf8(out.stdout).expect("UTF-8");
        let figures: Vec<f64> = line
            .split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect();
        rows.push((folder, figures));
    }
    println!(
        "{} questions, one at a time; the same as documents in batches of {BATCH}",
        questions.len()
    );
    let base = rows.first().map(|(_, f)| f.clone());
    for (folder, f) in &rows {
        let ratio = |i: usize| base.as_ref().map_or(1.0, |b| f[i] / b[i]);
        println!(
            "{folder}: load {:.2} s, +{:.0} MiB resident ({:.2}x); question p50 {:.2} ms ({:.2}x), \
             p95 {:.2} ms ({:.2}x); documents {:.1} texts/s ({:.2}x); vectors against f32: least \
             cosine {:.4}",
            f[0],
            f[1],
            ratio(1),
            f[2],
            ratio(2),
            f[3],
            ratio(3),
            f[4],
            ratio(4),
            f[5]
        );
    }
}

/// One model: load seconds, MiB resident after loading, question p50 and
/// p95 in ms, documents per second, and the least cosine between its
/// vectors and the same model's in f32 (1 when it is the f32 one); on one
/// line for the parent.
fn measure(dir: &Path, full: bool, questions: &[String]) {
    let before = resident_mib();
    let started = Instant::now();
    let model = if full {
        embedder::Model::load_full_precision(dir)
    } else {
        embedder::Model::load(dir)
    }
    .expect("the model loads");
    let load = started.elapsed().as_secs_f64();
    let held = resident_mib() - before;
    let mut times: Vec<f64> = Vec::new();
    for round in 0..2 {
        for q in questions {
            let started = Instant::now();
            model.embed(&[q.as_str()]).expect("embeds");
            // The first round warms caches and the allocator.
            if round == 1 {
                times.push(started.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let at = |p: usize| times[(times.len() * p / 100).min(times.len() - 1)];
    let texts: Vec<&str> = questions.iter().map(String::as_str).collect();
    let started = Instant::now();
    for batch in texts.chunks(BATCH) {
        model.embed(batch).expect("embeds");
    }
    let per_second = texts.len() as f64 / started.elapsed().as_secs_f64();
    let mut least = 1.0f32;
    if !full {
        // Measured after the figures above: the f32 model's memory is not
        // this one's.
        let reference = embedder::Model::load_full_precision(dir).expect("the model loads");
        for batch in texts.chunks(BATCH) {
            let (ours, theirs) = (model.embed(batch).unwrap(), reference.embed(batch).unwrap());
            for (a, b) in ours.iter().zip(&theirs) {
                least = least.min(a.iter().zip(b).map(|(x, y)| x * y).sum());
            }
        }
    }
    println!("{load} {held} {} {} {per_second} {least}", at(50), at(95));
}

/// Every question of tests/fixtures/godot-questions.
fn questions() -> Vec<String> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/godot-questions");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .expect("the question sets")
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).expect("a question set");
            text.lines()
                .filter(|l| !l.starts_with('#') && l.contains('\t'))
                .map(|l| l.split('\t').next().unwrap_or("").to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// This process's resident memory (Linux's /proc; 0 elsewhere).
fn resident_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}
