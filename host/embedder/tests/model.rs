//! The real model (scripts/setup-model) embeds sentences by meaning: found
//! by $MCP_TEST_EMBEDDING_MODEL or $MCP_HOST_EMBEDDING_MODEL, else the
//! host's default folder; under CI=true a missing model fails, elsewhere
//! the test says it skipped.

use std::path::PathBuf;

fn model_dir() -> Option<PathBuf> {
    let dir = ["MCP_TEST_EMBEDDING_MODEL", "MCP_HOST_EMBEDDING_MODEL"]
        .iter()
        .filter_map(std::env::var_os)
        .find(|v| v != "none")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            Some(PathBuf::from(home).join(".local/share/mcp-host/models/all-minilm-l6-v2"))
        })?;
    if dir.join("model.safetensors").is_file() {
        return Some(dir);
    }
    let why = format!(
        "no model in {} (scripts/setup-model fetches it)",
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
fn sentences_that_mean_the_same_are_nearest() {
    let Some(dir) = model_dir() else { return };
    let model = embedder::Model::load(&dir).unwrap();
    assert_eq!(model.dim(), 384);
    let texts = [
        "make the game window fill the whole screen",
        "Window.mode: the window's mode, e.g. fullscreen or maximized",
        "AudioStreamPlayer.play: plays the audio from the given position",
        "start the background music",
    ];
    let v = model.embed(&texts).unwrap();
    for row in &v {
        let norm: f32 = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-3, "not unit length: {norm}");
    }
    // Each question is nearer the entry that answers it than the other.
    assert!(
        cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]),
        "window question"
    );
    assert!(
        cosine(&v[3], &v[2]) > cosine(&v[3], &v[1]),
        "music question"
    );
    // One text alone embeds as it does in a batch (padding is masked out).
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
