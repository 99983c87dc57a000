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
    // Issue 72, item 19: a name not installed is said so (it was read as
    // a file); a file that is no component is said in a sentence (it was
    // a debug dump of the expected bytes).
    let err = refused(&host(&env, &["inspect", "nothere"]).await);
    assert!(err.contains("no plugin `nothere` is installed"), "{err}");
    let err = refused(&host(&env, &["inspect", "/etc/passwd"]).await);
    assert!(
        err.contains("is not a WebAssembly component")
            && !err.contains("0x61")
            && err.lines().count() <= 3,
        "{err}"
    );

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
    // (`--yes`: it imports what hello does not, which is asked first.)
    let err = refused(&host(&env, &["update", "--yes"]).await);
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

    // Issue 72, item 19: a dry run makes the update's name check (it
    // promised an update the real one refuses).
    succeeded(&publish(&built_plugin("faulty"), &tag).await);
    for args in [&["update", "--dry-run"][..], &["update"]] {
        let err = refused(&host(&env, args).await);
        assert!(
            err.contains("declares itself as plugin `faulty`"),
            "{args:?}: {err}"
        );
    }

    // Issue 70, item 6: a build that imports more of the host (run_test's
    // process and more, declared as `hello`) is not taken unasked.
    let wider = dir.path().join("wider.wasm");
    std::fs::write(
        &wider,
        named(std::fs::read(built_plugin("run_test")).unwrap(), "hello"),
    )
    .unwrap();
    succeeded(&publish(&wider, &tag).await);
    let out = host(&env, &["update"]).await;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        said.contains("not updated")
            && said.contains("imports more of the host")
            && said.contains("--yes"),
        "{said}"
    );
    assert_eq!(
        std::fs::read(env.plugins.join("hello.wasm")).unwrap(),
        second
    );
    let out = succeeded(&host(&env, &["update", "--yes"]).await);
    assert!(
        out.contains("\tupdated\t") && out.contains("now imports"),
        "{out}"
    );

    // The tag moved back to a build this name had: refused unless asked.
    succeeded(&publish(&second_file, &tag).await);
    let out = host(&env, &["update"]).await;
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        said.contains("moved back") && said.contains("--allow-downgrade"),
        "{said}"
    );
    assert_ne!(
        std::fs::read(env.plugins.join("hello.wasm")).unwrap(),
        second
    );
    succeeded(&host(&env, &["update", "--allow-downgrade"]).await);
    assert_eq!(
        std::fs::read(env.plugins.join("hello.wasm")).unwrap(),
        second
    );
}

/// `bytes` (a component) declaring itself as plugin `name`: a custom
/// section `mcphost:plugin-name` at its end, which is read last.
fn named(mut bytes: Vec<u8>, name: &str) -> Vec<u8> {
    let section = "mcphost:plugin-name";
    let mut body = vec![section.len() as u8];
    body.extend_from_slice(section.as_bytes());
    body.extend_from_slice(name.as_bytes());
    bytes.push(0);
    bytes.push(body.len() as u8);
    bytes.extend_from_slice(&body);
    bytes
}
