//! The real models (scripts/setup-model) embed sentences by meaning:
//! the host's (the Godot-adapted MiniLM), found by
//! $MCP_TEST_EMBEDDING_MODEL or $MCP_HOST_EMBEDDING_MODEL; the stock
//! all-MiniLM-L6-v2 it was trained from, by $MCP_TEST_STOCK_MODEL; and
//! all-mpnet-base-v2 (MPNet), by $MCP_TEST_MPNET_MODEL; else where
//! scripts/setup-model puts them. Under CI=true a missing model fails,
//! elsewhere the test says it skipped.

use std::path::PathBuf;

/// The model folder named by the first of `vars` set (not `none`), else
/// `folder` under the host's models.
fn model_dir(vars: &[&str], folder: &str) -> Option<PathBuf> {
    let dir = vars
        .iter()
        .filter_map(std::env::var_os)
        .find(|v| v != "none")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            Some(
                PathBuf::from(home)
                    .join(".local/share/mcp-host/models")
                    .join(folder),
            )
        })?;
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    let why = format!(
        "no model in {} (scripts/setup-model {folder} fetches it)",
        dir.display()
    );
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true, yet {why}"
    );
    eprintln!("SKIPPED: {why}");
    None
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

#[test]
fn minilm_puts_sentences_that_mean_the_same_nearest() {
    let vars = ["MCP_TEST_EMBEDDING_MODEL", "MCP_HOST_EMBEDDING_MODEL"];
    if let Some(dir) = model_dir(&vars, "godot-minilm-l6") {
        embeds_by_meaning(&embedder::Model::load(&dir).unwrap(), 384);
    }
}

#[test]
fn mpnet_puts_sentences_that_mean_the_same_nearest() {
    if let Some(dir) = model_dir(&["MCP_TEST_MPNET_MODEL"], "all-mpnet-base-v2") {
        embeds_by_meaning(&embedder::Model::load(&dir).unwrap(), 768);
    }
}

/// Our forward passes give what the reference implementation does: with
/// the weights in f32, PyTorch's values to five decimals; held compact
/// (matrices in half precision, tables a byte per value: what the host
/// runs), to about two, the similarities to 0.01. An ordering alone would
/// not tell: without MPNet's distance biases, or with positions off by
/// one, the nearest stay nearest.
fn gives_the_reference_values(dir: &std::path::Path, hello: [f32; 5], dog: [(&str, f32); 4]) {
    let full = embedder::Model::load_full_precision(dir).unwrap();
    let compact = embedder::Model::load(dir).unwrap();
    for (model, close, near) in [(&full, 1e-5, 1e-4), (&compact, 2e-3, 1e-2)] {
        let ours = &model.embed(&["Hello world"]).unwrap()[0];
        for (i, (ours, theirs)) in ours.iter().zip(hello).enumerate() {
            assert!(
                (ours - theirs).abs() < close,
                "dimension {i}: {ours} against {theirs}"
            );
        }
        for (other, theirs) in dog {
            let v = model.embed(&["dog", other]).unwrap();
            let ours = cosine(&v[0], &v[1]);
            assert!(
                (ours - theirs).abs() < near,
                "dog / {other}: {ours} against {theirs}"
            );
        }
    }
    // Whole vectors, compact against f32.
    let texts = ["Hello world", "make the game window fill the whole screen"];
    let (a, b) = (full.embed(&texts).unwrap(), compact.embed(&texts).unwrap());
    for (x, y) in a.iter().zip(&b) {
        assert!(cosine(x, y) > 0.998, "{}", cosine(x, y));
    }
}

/// PyTorch's values for all-mpnet-base-v2 (sentence-transformers), as
/// published with the Kjarni project's tests.
#[test]
fn mpnet_gives_the_reference_implementations_values() {
    let Some(dir) = model_dir(&["MCP_TEST_MPNET_MODEL"], "all-mpnet-base-v2") else {
        return;
    };
    let hello = [0.0262497, 0.0133956, -0.0045332, -0.0217914, 0.0545519];
    let dog = [
        ("puppy", 0.778325),
        ("cat", 0.608123),
        ("car", 0.390585),
        ("quantum physics", 0.250894),
    ];
    gives_the_reference_values(&dir, hello, dog);
}

/// PyTorch's values for all-MiniLM-L6-v2 (sentence-transformers 6.2.0,
/// torch 2.15.0 on the CPU, 2026-12-02).
#[test]
fn minilm_gives_the_reference_implementations_values() {
    // The stock model only: the host's is the Godot one trained from it.
    let Some(dir) = model_dir(&["MCP_TEST_STOCK_MODEL"], "all-minilm-l6-v2") else {
        return;
    };
    let hello = [-0.0344773, 0.0310232, 0.0067349, 0.026109, -0.0393621];
    let dog = [
        ("puppy", 0.804007),
        ("cat", 0.660637),
        ("car", 0.475647),
        ("quantum physics", 0.215717),
    ];
    gives_the_reference_values(&dir, hello, dog);
}

fn embeds_by_meaning(model: &embedder::Model, dim: usize) {
    assert_eq!(model.dim(), dim);
    let texts = [
        "make the game window fill the whole screen",
        "Window.mode: the window's mode, e.g. fullscreen or maximized",
        "AudioStreamPlayer.play: plays the audio from the given position",
        "start the background music",
        "a cloth that moves when something touches it",
        "SoftBody3D: A deformable 3D physics mesh. Used to create elastic or deformable objects such \
         as cloth, rubber, or other flexible materials.",
    ];
    let v = model.embed(&texts).unwrap();
    for row in &v {
        assert_eq!(row.len(), dim);
        let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "not unit length: {norm}");
    }
    // Each question is nearer the entries that answer it than the others.
    for (question, answer) in [(0, 1), (3, 2), (4, 5)] {
        for other in [1, 2, 5].into_iter().filter(|o| *o != answer) {
            assert!(
                cosine(&v[question], &v[answer]) > cosine(&v[question], &v[other]),
                "{:?} is nearer {:?} than {:?}",
                texts[question],
                texts[other],
                texts[answer]
            );
        }
    }
    // One text alone embeds as it does in a batch (padding is masked out,
    // positions count from the text's start).
    let alone = model.embed(&texts[1..2]).unwrap();
    assert!(cosine(&alone[0], &v[1]) > 0.999);
}

#[test]
fn a_folder_without_a_model_says_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let error = embedder::Model::load(dir.path()).err().unwrap().to_string();
    assert!(
        error.contains("config.json, tokenizer.json, model.safetensors"),
        "{error}"
    );
    assert!(error.contains("scripts/setup-model"), "{error}");
}
