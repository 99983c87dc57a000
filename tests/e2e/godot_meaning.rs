//! Godot questions in sentences ranked by meaning too (issue 57): the
//! host's sentence vectors (the real model, scripts/setup-model) beside
//! the lexical ranking, on the real reference and manual; the vectors
//! made in the background, kept, and said in `godot.versions`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::godot::{
    MEANING_SETS, ask_set, at_least, copy_dir, fixture_docs, queries_first, results,
};
use crate::harness::*;

/// The `meaning` of the first version `godot.versions` lists.
async fn meaning(client: &Client) -> Value {
    let versions = client.call("godot.versions", json!({})).await;
    structured(&versions)["versions"][0]["meaning"].clone()
}

/// Wait until the vectors are ready (the first question starts them).
async fn until_ready(client: &Client, within: Duration) -> Value {
    let started = Instant::now();
    loop {
        let now = meaning(client).await;
        match now["state"].as_str() {
            Some("ready") => return now,
            Some("building" | "not indexed") if started.elapsed() < within => {
                tokio::time::sleep(Duration::from_millis(500)).await
            }
            _ => panic!("the vectors did not become ready within {within:?}: {now}"),
        }
    }
}

/// A question in plain words about the fixture's `Widget.spin`.
async fn spin_question(client: &Client) -> Vec<Value> {
    let question = json!({ "query": "how do I spin the widget around" });
    results(&client.call("godot.search", question).await)
}

/// The Godot plugin on a copy of the fixture's doc dir.
fn fixture_env() -> Env {
    let env = Env::new(&["godot"], "");
    let docs = env.dir.path().join("doc");
    copy_dir(&fixture_docs(), &docs);
    std::fs::write(&env.config, godot_config(&docs)).unwrap();
    env
}

/// A model folder of links to the real model's files and no shipped
/// vectors: everything is embedded here.
fn bare_model(env: &Env, model: &Path) -> PathBuf {
    let bare = env.dir.path().join("model");
    std::fs::create_dir_all(&bare).unwrap();
    for file in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::os::unix::fs::symlink(model.join(file), bare.join(file)).unwrap();
    }
    bare
}

/// The 4.6 reference and manual served with `model` (and `extra` config
/// lines for the plugin), its vectors ready.
async fn ready_with_manual(docs: &Path, model: &Path, extra: &str) -> (Env, Client, Value) {
    let config = godot_config_with_manual(&docs.join("4.x"), &docs.join("manual"));
    let mut env = Env::new(&["godot"], &format!("{config}{extra}"));
    env.with_model(model);
    let client = env.start().await;
    // The first question builds the index and starts the vectors.
    client
        .call("godot.search", json!({ "query": "Node" }))
        .await;
    let ready = until_ready(&client, Duration::from_secs(1800)).await;
    (env, client, ready)
}

/// The held-out measure of issue 57 on our own sets: with the manual and
/// the vectors (shipped with the model, so nothing is embedded here),
/// the first three results hold an answer more often than words alone
/// (godot::plain_word_questions_find_their_answer), and names stay exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentence_questions_are_ranked_by_meaning_too() {
    let Some(docs) = godot_docs() else { return };
    let Some(model) = embedding_model() else {
        return;
    };
    let (env, client, ready) = ready_with_manual(&docs, &model, "").await;
    assert!(ready["total"].as_u64().unwrap() > 20_000, "{ready}");
    let names = queries_first(&client, &docs).await;
    let mut figures = Vec::new();
    for (set, floor) in MEANING_SETS.iter().zip(FLOORS) {
        figures.push((ask_set(&client, set).await, floor, *set));
    }
    // Only the first two sets' misses are printed (the later ones were
    // written to measure, not to look at).
    eprintln!("not first: {:#?}", [&figures[0].0.3, &figures[1].0.3]);
    at_least(&figures);
    let (right, misses) = names;
    assert!(
        right == 30,
        "with vectors, only {right}/30 names rank first: {misses:#?}"
    );
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(log.contains("sentence vectors ready"), "{log}");
}

/// What each set of [`MEANING_SETS`] measured (top-1, top-3) with the
/// Godot-adapted model and the re-ranker, both trained on all eight
/// (2026-12-02; words
/// alone, the `plain_word` test: 32/38, 35/43, 13/24, 4/9, 16/25, 9/17,
/// 4/7, 7/16): the test fails below. In-sample figures, each one below
/// what was measured (three runs agree since equal similarities fall in
/// the documents' id order; equal lexical scores at the edge of the
/// candidates still fall in the order a fresh index gives them: 3 of 409
/// questions had other candidates in a second run, no figure moved); the
/// re-ranker's held-out ones come from `scripts/train-godot-ranker`
/// (each set left out in turn).
const FLOORS: [(usize, usize); 8] = [
    (31, 43),
    (46, 64),
    (30, 43),
    (16, 20),
    (34, 48),
    (23, 31),
    (12, 16),
    (22, 32),
];

/// Vectors are made in the background after the index, kept on disk by
/// each text's hash, and a restarted host embeds nothing again; a
/// question in plain words is answered meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vectors_are_made_in_the_background_and_kept() {
    let Some(model) = embedding_model() else {
        return;
    };
    let mut env = fixture_env();
    let bare = bare_model(&env, &model);
    env.with_model(&bare);
    let client = env.start().await;
    let found = spin_question(&client).await;
    assert!(
        !found.is_empty(),
        "a question is answered while vectors are made"
    );
    let ready = until_ready(&client, Duration::from_secs(300)).await;
    let total = ready["total"].as_u64().unwrap();
    assert!(total > 5 && ready["done"] == total, "{ready}");
    assert_eq!(ready["model"], "model");
    // The host's own store holds them, one record per distinct text.
    let stores: Vec<PathBuf> = std::fs::read_dir(env.cache.join("vectors"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(stores.len(), 1, "{stores:?}");
    let size = std::fs::metadata(&stores[0]).unwrap().len();
    assert!(size > 44 + 5 * (36 + 384), "{size} bytes");
    drop(client);
    let check = env.host(&["check"]).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(stdout.contains("sentence vectors: model at "), "{stdout}");
    assert!(stdout.contains("384 dimensions"), "{stdout}");
    // Restarted: ready from the store, nothing embedded again.
    let client = env.start().await;
    client
        .call("godot.search", json!({ "query": "Widget" }))
        .await;
    until_ready(&client, Duration::from_secs(120)).await;
    assert_eq!(std::fs::metadata(&stores[0]).unwrap().len(), size);
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    assert!(log.contains("embedded=0"), "{log}");
}

/// Without a model, questions are answered by their words and
/// `godot.versions` says why there is no meaning and how to get it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_words_alone_answer_and_versions_say_why() {
    let env = fixture_env();
    let client = env.start().await;
    let found = spin_question(&client).await;
    assert!(!found.is_empty());
    let now = meaning(&client).await;
    assert_eq!(now["state"], "unavailable", "{now}");
    assert!(
        now["why"]
            .as_str()
            .unwrap()
            .contains("--embedding-model none"),
        "{now}"
    );
    // host check says so, and refuses a folder that holds no model.
    let out = env.host(&["check"]).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("sentence vectors: off (the host was started with --embedding-model none)"),
        "{stdout}"
    );
    let mut env = env;
    let empty = env.dir.path().join("no-model");
    std::fs::create_dir_all(&empty).unwrap();
    env.with_model(&empty);
    let out = env.host(&["check"]).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stdout.contains("sentence vectors: NOT READY") && stdout.contains("scripts/setup-model"),
        "{stdout}"
    );
}

/// Not a test: builds the vectors shipped for the reference and manual
/// the tests use (plugins/godot/vectors/, copied beside the model by
/// scripts/setup-model), from scratch with the real model. Run it when
/// the data, the entries' sense or the model changes:
/// `cargo test -p host --test e2e ship_the_godot_vectors -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a command, not a check: it writes plugins/godot/vectors"]
async fn ship_the_godot_vectors() {
    let (Some(docs), Some(model)) = (godot_docs(), embedding_model()) else {
        panic!("needs the Godot docs and the model");
    };
    let config = godot_config_with_manual(&docs.join("4.x"), &docs.join("manual"));
    let mut env = Env::new(&["godot"], &config);
    let bare = bare_model(&env, &model);
    env.with_model(&bare);
    let client = env.start().await;
    client
        .call("godot.search", json!({ "query": "Node" }))
        .await;
    let ready = until_ready(&client, Duration::from_secs(4 * 3600)).await;
    let store = std::fs::read_dir(env.cache.join("vectors"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/godot/vectors");
    std::fs::create_dir_all(&shipped).unwrap();
    let target = shipped.join("godot-4.6-reference-and-manual.vec");
    std::fs::copy(&store, &target).unwrap();
    eprintln!("{ready}: {} written", target.display());
}

/// Not a test: every question of tests/fixtures/godot-questions asked
/// with the plugin writing each candidate's re-ranking features to the
/// log, which is copied to target/godot-ranker-features.log for
/// `scripts/train-godot-ranker`:
/// `cargo test -p host --test e2e dump_the_godot_ranker_features -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a command, not a check: it writes target/godot-ranker-features.log"]
async fn dump_the_godot_ranker_features() {
    let (Some(docs), Some(model)) = (godot_docs(), embedding_model()) else {
        panic!("needs the Godot docs and the model");
    };
    let extra = "vars.GODOT_RANKER_FEATURES = \"1\"\n";
    let (env, client, _) = ready_with_manual(&docs, &model, extra).await;
    // Names too: the ones in plain words are re-ranked, and must stay first.
    queries_first(&client, &docs).await;
    for set in MEANING_SETS {
        ask_set(&client, set).await;
    }
    drop(client);
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/godot-ranker-features.log");
    std::fs::copy(env.stderr_log(), &target).unwrap();
    eprintln!("{} written", target.display());
}

/// Not a test: every text the host embeds for the 4.6 reference and
/// manual (the Godot plugin's `sense` field), with its document's `uri`,
/// `kind` and the entries it `links` to (a manual section's or
/// passage's), one JSON object a line in target/godot-texts.jsonl: what
/// `scripts/train-godot-model` trains and measures the sentence model on
/// (the very texts the host embeds, not a second reading of the docs).
/// Words alone: no model is needed.
/// `cargo test -p host --test e2e dump_the_godot_texts -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a command, not a check: it writes target/godot-texts.jsonl"]
async fn dump_the_godot_texts() {
    let Some(docs) = godot_docs() else {
        panic!("needs the Godot docs");
    };
    let config = godot_config_with_manual(&docs.join("4.x"), &docs.join("manual"));
    let mut env = Env::new(&["godot"], &config);
    env.with_model(Path::new("none"));
    let client = env.start().await;
    client
        .call("godot.search", json!({ "query": "Node" }))
        .await;
    drop(client);
    // The index is the folder with a CURRENT generation under the host's
    // folders.
    let mut folders = vec![env.dir.path().to_path_buf()];
    let mut found = None;
    while let Some(dir) = folders.pop() {
        if dir.join("CURRENT").is_file() {
            found = Some(dir);
            break;
        }
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_dir() {
                folders.push(entry.path());
            }
        }
    }
    let dir = found.expect("the Godot index");
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let opened = textindex::open(&name, &dir).expect("the index opens");
    let wanted = ["uri", "kind", "links"].map(String::from);
    let mut out = String::new();
    for (address, text) in opened.texts("sense").unwrap() {
        let doc = opened.fetch(address, &wanted).unwrap();
        let value = |field: &str| {
            doc.iter()
                .find(|(name, _)| name == field)
                .map(|(_, value)| value.clone())
                .unwrap_or_default()
        };
        let links: Vec<&String> = doc
            .iter()
            .filter(|(k, _)| k == "links")
            .map(|(_, v)| v)
            .collect();
        let line = json!({
            "uri": value("uri"), "kind": value("kind"), "links": links, "text": text,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/godot-texts.jsonl");
    std::fs::write(&target, out).unwrap();
    eprintln!("{} written", target.display());
}
