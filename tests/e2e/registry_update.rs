//! `host inspect` and `host update` (issue 59) against a real registry:
//! a plugin shown before it is installed, nothing written; each locked
//! plugin's tag resolved again, installed only when the new version loads.

use serde_json::Value;

use crate::harness::*;
use crate::registry::{Registry, foreign_component, host, lock, publish, refused, sha256};

/// `bytes` (a component) with one more custom section: another build of
/// the same plugin, as far as digests go.
fn rebuilt(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes.extend_from_slice(&[0, 3, 1, b'x', b'2']);
    bytes
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_is_inspected_before_install_and_updated_only_when_it_loads() {
    let Some(registry) = Registry::start() else {
        return;
    };
    let env = Env::new(&[], "[plugins.hello]\nfs.read = [\"${workspace}\"]\n");
    let tag = registry.url("tools/hello:1");
    let hello = built_plugin("hello");
    let first = std::fs::read(&hello).unwrap();
    let manifest = succeeded(&publish(&hello, &tag).await);

    // Inspect: its tools, imports, grants, digest and signature; nothing written.
    let shown: Value =
        serde_json::from_str(&succeeded(&host(&env, &["inspect", &tag]).await)).unwrap();
    assert_eq!(shown["name"], "hello");
    assert_eq!(shown["digest"], sha256(&first).as_str());
    assert_eq!(shown["manifest"], manifest.trim());
    let tools = shown["tools"].as_array().unwrap();
    assert!(
        tools
            .iter()
            .any(|t| t["name"] == "hello" && t["inputSchema"]["type"] == "object"),
        "{shown:#}"
    );
    let imports: Vec<&str> = shown["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert!(
        imports.iter().any(|i| i.starts_with("mcphost:plugin/")),
        "{imports:?}"
    );
    let grants = shown["grants"].to_string();
    assert!(grants.contains("fs.read"), "{grants}");
    assert!(
        shown["signature"].as_str().unwrap().contains("not checked"),
        "{shown:#}"
    );
    assert!(!env.plugins.join("hello.wasm").exists());
    assert!(!env.plugins.join("plugins.lock").exists());

    // A file, and an installed plugin by its name.
    let faulty: Value = serde_json::from_str(&succeeded(
        &host(
            &env,
            &["inspect", &built_plugin("faulty").display().to_string()],
        )
        .await,
    ))
    .unwrap();
    assert_eq!(faulty["name"], "faulty");
    succeeded(&host(&env, &["install", "--yes", &tag]).await);
    let by_name: Value =
        serde_json::from_str(&succeeded(&host(&env, &["inspect", "hello"]).await)).unwrap();
    assert_eq!(by_name["source"], tag.as_str());

    // Nothing new: unchanged.
    let out = succeeded(&host(&env, &["update"]).await);
    assert!(out.starts_with("hello\tunchanged\t"), "{out}");

    // A new build behind the tag: shown by --dry-run, taken by update.
    let dir = tempfile::tempdir().unwrap();
    let second = rebuilt(first.clone());
    let second_file = dir.path().join("hello.wasm");
    std::fs::write(&second_file, &second).unwrap();
    succeeded(&publish(&second_file, &tag).await);
    let out = succeeded(&host(&env, &["update", "--dry-run"]).await);
    let expected = format!("{} -> {}", sha256(&first), sha256(&second));
    assert!(
        out.contains("would update") && out.contains(&expected),
        "{out}"
    );
    assert_eq!(
        std::fs::read(env.plugins.join("hello.wasm")).unwrap(),
        first
    );
    let out = succeeded(&host(&env, &["update", "hello"]).await);
    assert!(
        out.contains("\tupdated\t") && out.contains(&expected),
        "{out}"
    );
    assert_eq!(
        std::fs::read(env.plugins.join("hello.wasm")).unwrap(),
        second
    );
    let locked = lock(&env);
    assert_eq!(
        locked["plugin"][0]["digest"].as_str(),
        Some(sha256(&second).as_str())
    );

    // A version that does not load is not taken: the installed one stays.
    let broken = dir.path().join("broken.wasm");
    std::fs::write(&broken, foreign_component()).unwrap();
    succeeded(&publish(&broken, &tag).await);
    let err = refused(&host(&env, &["update"]).await);
    assert!(
        err.contains("hello was left as it is") && err.contains("does not load"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(env.plugins.join("hello.wasm")).unwrap(),
        second
    );
    let err = refused(&host(&env, &["update", "nothere"]).await);
    assert!(err.contains("lists no plugin `nothere`"), "{err}");
}
