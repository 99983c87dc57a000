//! Godot docs benchmarks on the full 4.x reference (classes + modules),
//! alone and with the manual ($GODOT_DOCS/manual, the godot-docs rst):
//! `cargo bench -p host --bench godot` (after scripts/build-plugins; the
//! docs come from $GODOT_DOCS, default ../shared/data/godot-docs).
//!
//! - cold start: no saved index; host start to the first search answered
//!   (parse + index inside);
//! - warm start: the same with the saved index;
//! - search latency, client to client over MCP stdio, for a few thousand
//!   1-2 word and 3+ word queries made from the reference's own names and
//!   words;
//! - resident memory of the host with the index loaded, against the same
//!   host without the Godot plugin;
//! - with no doc dir, from a real engine ($GODOT_ENGINE, default Debian's
//!   `godot3-server`): cold start with the reference read out of the
//!   engine binary first, against a cold start from what was read already
//!   there (`cargo bench -p host --bench godot -- engine` runs only this);
//! - questions in sentences with the sentence model ($MCP_TEST_EMBEDDING_MODEL
//!   or the default folder, its shipped vectors beside it) against words
//!   alone, both with the manual: time until the vectors are ready, search
//!   latency over the question sets of tests/fixtures/godot-questions, and
//!   resident memory (`-- meaning` runs only this).

mod common;
#[path = "../../tests/e2e/harness.rs"]
#[allow(dead_code)]
mod harness;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{ms, percentile};
use harness::{Env, godot_config, godot_config_with_manual, godot_docs, rss_kib};
use serde_json::json;

async fn start_to_first_search(env: &Env) -> (Duration, harness::Client) {
    let started = Instant::now();
    let client = env.start().await;
    let result = client
        .call("godot.search", json!({ "query": "Node2D" }))
        .await;
    let elapsed = started.elapsed();
    assert!(!harness::is_error(&result), "{result:?}");
    (elapsed, client)
}

/// Attribute values `name="..."` of the given element in a class file.
fn names_of<'a>(xml: &'a str, element: &str) -> Vec<&'a str> {
    let open = format!("<{element} name=\"");
    xml.match_indices(&open)
        .filter_map(|(i, _)| xml[i + open.len()..].split('"').next())
        .collect()
}

/// Queries from the corpus: (1-2 words, 3+ words), deterministic.
fn corpus_queries(dir: &Path, n: usize) -> (Vec<String>, Vec<String>) {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.path().is_dir() {
                dirs.push(e.path());
            } else if e.path().extension().is_some_and(|x| x == "xml") {
                files.push(e.path());
            }
        }
    }
    files.sort();
    let (mut classes, mut members, mut sentences) = (Vec::new(), Vec::new(), Vec::new());
    for file in &files {
        let xml = std::fs::read_to_string(file).unwrap();
        let class = names_of(&xml, "class")
            .first()
            .map(|s| s.to_string())
            .unwrap_or_default();
        for kind in ["method", "member", "signal", "constant"] {
            members.extend(
                names_of(&xml, kind)
                    .into_iter()
                    .map(|m| (class.clone(), m.to_string())),
            );
        }
        if let Some(brief) = xml
            .split("<brief_description>")
            .nth(1)
            .and_then(|b| b.split("</brief_description>").next())
        {
            let words: Vec<String> = brief
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.len() > 2)
                .map(str::to_lowercase)
                .collect();
            if words.len() >= 3 {
                sentences.push(words);
            }
        }
        classes.push(class);
    }
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |bound: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % bound as u64) as usize
    };
    let mut short = Vec::with_capacity(n);
    for i in 0..n {
        let (class, member) = &members[next(members.len())];
        short.push(match i % 4 {
            0 => member.clone(),
            1 => format!("{class} {member}"),
            2 => classes[next(classes.len())].clone(),
            _ => {
                let words = &sentences[next(sentences.len())];
                format!("{} {}", words[next(words.len())], words[next(words.len())])
            }
        });
    }
    let mut long = Vec::with_capacity(n);
    for _ in 0..n {
        let words = &sentences[next(sentences.len())];
        let len = 3 + next(3).min(words.len() - 3);
        let start = next(words.len() - len + 1);
        long.push(words[start..start + len].join(" "));
    }
    (short, long)
}

/// Cold and warm starts, peak memory while building, and search latency
/// with `config`; the resident memory with the index loaded (KiB).
async fn measure(doc_dir: &Path, config: &str) -> u64 {
    let env = Env::new(&["godot"], config);
    let index = env.cache.join("plugins/godot/index");

    // Compile the plugin once so cold start measures parse + index only.
    drop(start_to_first_search(&env).await);
    let mut cold = Vec::new();
    let mut peak_kib = 0;
    // Five: the median of three moved by 30 ms from run to run.
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(&index);
        let (t, client) = start_to_first_search(&env).await;
        peak_kib = peak_kib.max(rss_kib(client.pid).1);
        cold.push(t);
        drop(client);
    }
    let mut warm = Vec::new();
    for _ in 0..10 {
        let (t, client) = start_to_first_search(&env).await;
        warm.push(t);
        drop(client);
    }
    let (cold_median, warm_median) = (percentile(&mut cold, 0.5), percentile(&mut warm, 0.5));
    println!(
        "cold start to first search (parse + index): median {} (min {}), of which the build (less the warm start): {}",
        ms(cold_median),
        ms(percentile(&mut cold, 0.0)),
        ms(cold_median.saturating_sub(warm_median))
    );
    println!(
        "warm start to first search (saved index): median {}, max {}",
        ms(warm_median),
        ms(percentile(&mut warm, 1.0))
    );
    // A busy machine: a thread spinning on each core while the index builds
    // (the build's threads then share the cores with it).
    let stop = Arc::new(AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spinners: Vec<_> = (0..cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut busy = Vec::new();
    for _ in 0..3 {
        let _ = std::fs::remove_dir_all(&index);
        let (t, client) = start_to_first_search(&env).await;
        busy.push(t);
        drop(client);
    }
    stop.store(true, Ordering::Relaxed);
    spinners
        .into_iter()
        .for_each(|s| s.join().expect("spinner"));
    let busy_median = percentile(&mut busy, 0.5);
    println!(
        "cold start with a spinning thread on each of the {cores} cores: median of 3 {} ({:.2}x the quiet one)",
        ms(busy_median),
        busy_median.as_secs_f64() / cold_median.as_secs_f64()
    );
    println!(
        "peak resident memory during a cold build: {:.1} MiB",
        peak_kib as f64 / 1024.0
    );

    let (short, long) = corpus_queries(doc_dir, 2000);
    let client = env.start().await;
    for q in short.iter().take(200) {
        client.call("godot.search", json!({ "query": q })).await;
    }
    for (label, queries) in [("1-2 words", &short), ("3+ words", &long)] {
        let mut samples = Vec::with_capacity(queries.len());
        for q in queries.iter() {
            let started = Instant::now();
            let result = client.call("godot.search", json!({ "query": q })).await;
            samples.push(started.elapsed());
            assert!(!harness::is_error(&result), "{q}: {result:?}");
        }
        println!(
            "search, {label} ({} queries): p50 {}, p95 {}, p99 {}",
            samples.len(),
            ms(percentile(&mut samples, 0.5)),
            ms(percentile(&mut samples, 0.95)),
            ms(percentile(&mut samples, 0.99))
        );
    }
    let loaded_kib = rss_kib(client.pid).0;
    drop(client);
    loaded_kib
}

#[tokio::main]
async fn main() {
    if std::env::args().any(|a| a == "engine") {
        from_an_engine().await;
        return;
    }
    if std::env::args().any(|a| a == "meaning") {
        by_meaning().await;
        return;
    }
    if std::env::args().any(|a| a == "unshared") {
        unshared().await;
        return;
    }
    let Some(docs) = godot_docs() else { return };
    let doc_dir = docs.join("4.x");
    let mut loaded = Vec::new();
    for (label, config) in [
        ("the reference", godot_config(&doc_dir)),
        (
            "the reference and the manual",
            godot_config_with_manual(&doc_dir, &docs.join("manual")),
        ),
    ] {
        println!("--- {label}");
        loaded.push((label, measure(&doc_dir, &config).await));
    }

    let bare = Env::new(&["run_test"], "");
    drop(bare.start().await); // compile once: measure a warm start
    // Idle once start-up is over (its pages let go), as the loaded host
    // has long been after its searches.
    let settled = bare.logged("start-up over");
    let idle = bare.start().await;
    idle.tools().await;
    bare.wait_for_log("start-up over", settled + 1).await;
    let idle_kib = rss_kib(idle.pid).0;
    for (label, loaded_kib) in loaded {
        println!(
            "resident memory with {label} loaded: {:.1} MiB; host without the Godot plugin: {:.1} MiB; extra: {:.1} MiB",
            loaded_kib as f64 / 1024.0,
            idle_kib as f64 / 1024.0,
            (loaded_kib as f64 - idle_kib as f64) / 1024.0
        );
    }
    from_an_engine().await;
    by_meaning().await;
}

/// Every question of tests/fixtures/godot-questions.
fn question_sets() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/godot-questions");
    let mut sets: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    sets.sort();
    sets.iter()
        .flat_map(|set| {
            let text = std::fs::read_to_string(set).unwrap();
            let questions: Vec<String> = text
                .lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| Some(l.split_once('\t')?.0.to_string()))
                .collect();
            questions
        })
        .collect()
}

/// Search latency and memory with words alone, then with the sentence
/// model, both with the manual served.
async fn by_meaning() {
    let (Some(docs), Some(model)) = (godot_docs(), harness::embedding_model()) else {
        return;
    };
    let config = godot_config_with_manual(&docs.join("4.x"), &docs.join("manual"));
    let questions = question_sets();
    let mut resident = Vec::new();
    for with_model in [false, true] {
        let mut env = Env::new(&["godot"], &config);
        if with_model {
            env.with_model(&model);
        }
        drop(start_to_first_search(&env).await); // compile and index once
        let (_, client) = start_to_first_search(&env).await;
        let started = Instant::now();
        if with_model {
            loop {
                let versions = client.call("godot.versions", json!({})).await;
                let state =
                    harness::structured(&versions)["versions"][0]["meaning"]["state"].clone();
                if state == "ready" {
                    break;
                }
                assert!(state == "building", "{state}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            println!(
                "sentence vectors ready {} after the first search (shipped vectors read, the rest embedded)",
                ms(started.elapsed())
            );
        }
        let mut samples = Vec::new();
        for _ in 0..3 {
            for q in &questions {
                let started = Instant::now();
                let result = client
                    .call("godot.search", json!({ "query": q, "limit": 3 }))
                    .await;
                samples.push(started.elapsed());
                assert!(!harness::is_error(&result), "{q}: {result:?}");
            }
        }
        let kib = rss_kib(client.pid).0;
        println!(
            "questions in sentences {} ({} searches): p50 {}, p95 {}, p99 {}; resident {:.1} MiB",
            if with_model {
                "with the sentence model"
            } else {
                "by words alone"
            },
            samples.len(),
            ms(percentile(&mut samples, 0.5)),
            ms(percentile(&mut samples, 0.95)),
            ms(percentile(&mut samples, 0.99)),
            kib as f64 / 1024.0
        );
        resident.push(kib);
    }
    println!(
        "extra resident memory serving with the model: {:.1} MiB",
        (resident[1] as f64 - resident[0] as f64) / 1024.0
    );
}

/// A reference that shares nothing with the shipped vectors (Godot 3.6's
/// class reference): how long after the first search its vectors are
/// ready, every text embedded by the host in the background, lexical
/// answers meanwhile.
async fn unshared() {
    let (Some(docs), Some(model)) = (godot_docs(), harness::embedding_model()) else {
        return;
    };
    let mut env = Env::new(&["godot"], &godot_config(&docs.join("3.x")));
    env.with_model(&model);
    let (first, client) = start_to_first_search(&env).await;
    let started = Instant::now();
    let mut total = 0;
    loop {
        let versions = client.call("godot.versions", json!({})).await;
        let meaning = harness::structured(&versions)["versions"][0]["meaning"].clone();
        total = meaning["total"].as_u64().unwrap_or(total);
        if meaning["state"] == "ready" {
            break;
        }
        assert!(meaning["state"] == "building", "{meaning}");
        let result = client
            .call(
                "godot.search",
                json!({ "query": "make the player jump", "limit": 3 }),
            )
            .await;
        assert!(
            !harness::is_error(&result),
            "lexical answers meanwhile: {result:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "3.6 reference (nothing shared with the shipped vectors): first search {}, its {total} texts' vectors ready {} after it",
        ms(first),
        ms(started.elapsed())
    );
}

async fn from_an_engine() {
    let engine = std::env::var("GODOT_ENGINE").unwrap_or_else(|_| "godot3-server".into());
    if !harness::require_program(&engine, "install godot3-server or set GODOT_ENGINE") {
        return;
    }
    let mut env = Env::new(&["godot"], "");
    env.host_vars.push(("GODOT_BIN".into(), engine.clone()));
    env.host_vars.push(("GODOT_DOC_DIR".into(), String::new()));
    let (dumps, index) = (
        env.cache.join("plugins/godot/engine-docs"),
        env.workspace.join(".cache/godot-index"),
    );
    drop(start_to_first_search(&env).await); // compile the plugin once
    let (mut with_dump, mut from_dump) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(&dumps);
        let _ = std::fs::remove_dir_all(&index);
        with_dump.push(start_to_first_search(&env).await.0);
        let _ = std::fs::remove_dir_all(&index);
        from_dump.push(start_to_first_search(&env).await.0);
    }
    let (a, b) = (
        percentile(&mut with_dump, 0.5),
        percentile(&mut from_dump, 0.5),
    );
    println!(
        "from the engine `{engine}`: cold start reading its binary's reference + index: median {}; cold start from what was read before: median {} ({:.2}x)",
        ms(a),
        ms(b),
        a.as_secs_f64() / b.as_secs_f64()
    );
}
