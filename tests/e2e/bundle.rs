//! The MCP Bundle (issue 75): `scripts/bundle` makes a `.mcpb` checked and
//! packed by the official CLI (`mcpb validate`, `mcpb pack`); it is
//! unpacked by the same CLI into a fresh folder and started exactly as its
//! manifest says (`${__dirname}` and `user_config` substituted as a client
//! does), with nothing of this machine's config or caches, and answers
//! `tools/list` and a `godot.search`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::*;

/// The official CLI: `MCPB_CLI`, default where .ci/run installs it.
fn mcpb_cli() -> Option<PathBuf> {
    let cli = std::env::var_os("MCPB_CLI")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            dirs_home()
                .unwrap_or_default()
                .join(".cache/mcp-host-ci/mcpb/node_modules/.bin/mcpb")
        });
    if cli.is_file() {
        return Some(cli);
    }
    skip(&format!(
        "no MCPB CLI at {} (npm install @anthropic-ai/mcpb, or set MCPB_CLI)",
        cli.display()
    ));
    None
}

/// `text` with `${__dirname}` and `${user_config.KEY}` replaced, as a
/// client installing the bundle does (an unset setting is empty).
fn substituted(text: &str, dir: &Path, settings: &Value) -> String {
    let mut out = text.replace("${__dirname}", &dir.display().to_string());
    while let Some(at) = out.find("${user_config.") {
        let end = at + out[at..].find('}').expect("a closed placeholder");
        let key = &out[at + "${user_config.".len()..end];
        let value = settings[key].as_str().unwrap_or("").to_string();
        out.replace_range(at..=end, &value);
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn the_bundle_installs_and_answers_as_its_manifest_says() {
    let (Some(cli), Some(docs)) = (mcpb_cli(), godot_docs()) else {
        return;
    };
    let env = Env::new(&[], "");
    let bundle = env.dir.path().join("mcp-host.mcpb");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut script = Command::new(repo.join("scripts/bundle"));
    script
        .args(["--debug", "--out"])
        .arg(&bundle)
        .env("MCPB_CLI", &cli);
    if let Some(model) = embedding_model() {
        script.env("MCP_HOST_EMBEDDING_MODEL", model);
    }
    let made = script.output().unwrap();
    assert!(
        made.status.success() && bundle.is_file(),
        "scripts/bundle: {}",
        String::from_utf8_lossy(&made.stderr)
    );

    // Unpacked by the official CLI into a fresh folder.
    let installed = env.dir.path().join("installed");
    let unpacked = Command::new(&cli)
        .arg("unpack")
        .arg(&bundle)
        .arg(&installed)
        .output()
        .unwrap();
    assert!(
        unpacked.status.success(),
        "{}",
        String::from_utf8_lossy(&unpacked.stderr)
    );
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(installed.join("manifest.json")).unwrap())
            .unwrap();
    let settings = json!({
        "godot_doc_dir": docs.join("4.x").display().to_string(),
        "cofer_engine": "local",
    });
    // Every setting is declared, and each reaches the host as a variable.
    let config = &manifest["server"]["mcp_config"];
    for (name, value) in config["env"].as_object().unwrap() {
        let key = value
            .as_str()
            .unwrap()
            .trim_start_matches("${user_config.")
            .trim_end_matches('}');
        assert!(
            manifest["user_config"][key].is_object(),
            "{name}: {key} undeclared"
        );
    }
    let command = substituted(config["command"].as_str().unwrap(), &installed, &settings);
    let mut host = tokio::process::Command::new(&command);
    for arg in config["args"].as_array().unwrap() {
        host.arg(substituted(arg.as_str().unwrap(), &installed, &settings));
    }
    for (name, value) in config["env"].as_object().unwrap() {
        host.env(
            name,
            substituted(value.as_str().unwrap(), &installed, &settings),
        );
    }
    // A user's machine: none of this one's config, caches or models.
    let home = env.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    host.current_dir(&env.workspace)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env_remove("MCP_HOST_EMBEDDING_MODEL");
    let client = env.serve_command(host).await;

    let tools: Vec<String> = client
        .tools()
        .await
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    for name in [
        "run_test",
        "godot.search",
        "environment_create",
        "copilot.chat",
        "pi.prompt",
    ] {
        assert!(tools.iter().any(|t| t == name), "{name} missing: {tools:?}");
    }
    let r = client
        .call(
            "godot.search",
            json!({"query": "CharacterBody2D", "limit": 3}),
        )
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert!(text(&r).contains("CharacterBody2D"), "{}", text(&r));
    // The bundle's model is the one in use (a question in sentences).
    let versions = client.call("godot.versions", json!({})).await;
    let meaning = structured(&versions)["versions"][0]["meaning"].to_string();
    assert!(meaning.contains("godot-minilm-l6"), "{meaning}");
}
