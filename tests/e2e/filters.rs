//! Tool filters (issue 59, item 2): a plugin's `tools.allow`/`tools.deny`
//! and `host serve --tools` decide which tools exist for a host; a hidden
//! tool is absent from tools/list and its call is refused naming what
//! hides it; `host list tools` says so.

use crate::harness::*;
use serde_json::json;

/// The tools a client is shown, by name.
async fn shown(client: &Client) -> Vec<String> {
    client
        .tools()
        .await
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

/// The error a call of a hidden tool gets.
async fn refused(client: &Client, tool: &str) -> String {
    let err = client
        .service
        .call_tool(params(tool, json!({"name": "x"})))
        .await
        .expect_err("a hidden tool's call is refused");
    err.to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_policy_hides_tools_by_glob_and_says_which_key() {
    let env = Env::new(
        &["hello", "run_test"],
        "[plugins.run_test]\ntools.deny = [\"run_*\"]\n",
    );
    let client = env.start().await;
    let names = shown(&client).await;
    assert_eq!(names, ["hello"]);
    let said = refused(&client, "run_test").await;
    assert!(
        said.contains("hidden")
            && said.contains("tools.deny `run_*`")
            && said.contains("[plugins.run_test]"),
        "{said}"
    );
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["list", "tools", "--plugins"])
        .arg(&env.plugins)
        .arg("--config")
        .arg(&env.config)
        .arg("--cache-dir")
        .arg(&env.cache)
        .output()
        .unwrap();
    let listed = succeeded(&listed);
    assert!(
        listed.contains("run_test\tHIDDEN: it matches tools.deny"),
        "{listed}"
    );

    // tools.allow: only what it names.
    std::fs::write(
        &env.config,
        "[plugins.hello]\ntools.allow = [\"nothing*\"]\n",
    )
    .unwrap();
    let client = env.start().await;
    let names = shown(&client).await;
    assert_eq!(names, ["run_test"]);
    assert!(
        refused(&client, "hello")
            .await
            .contains("no pattern of tools.allow")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn serve_tools_narrows_what_one_client_sees() {
    let env = Env::new(&["hello", "run_test"], "");
    let client = env.start_with(&["--tools", "hell*"]).await;
    let names = shown(&client).await;
    assert_eq!(names, ["hello"]);
    let said = refused(&client, "run_test").await;
    assert!(said.contains("--tools hell*"), "{said}");
    // Another host on the same folder serves them all.
    let all = env.start().await;
    assert_eq!(all.tools().await.len(), 2);
}

/// The config file saved again while serving: its filters apply at once,
/// clients are told (`list_changed`), and a config that does not load
/// leaves the previous one in force.
#[tokio::test(flavor = "multi_thread")]
async fn a_changed_config_applies_its_filters_while_serving() {
    let env = Env::new(&["hello", "run_test"], "");
    let client = env.start().await;
    assert_eq!(shown(&client).await.len(), 2);

    deny_run_test(&client, &env.config).await;
    assert!(
        refused(&client, "run_test")
            .await
            .contains("tools.deny `run_*`")
    );

    // A config that does not load changes nothing, and the log says why.
    std::fs::write(&env.config, "[plugins.run_test\ntools.deny = ").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(env.stderr_log()).unwrap_or_default();
        if log.contains("the changed config was not applied") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{log}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(shown(&client).await, ["hello"]);

    // Taken back: served again.
    std::fs::write(&env.config, "").unwrap();
    assert!(
        client
            .tools_changed_within(std::time::Duration::from_secs(30))
            .await
    );
    assert_eq!(shown(&client).await.len(), 2);
}

/// With no `--config` and no config file yet, one written at the default
/// place while serving applies at once.
#[tokio::test(flavor = "multi_thread")]
async fn a_config_written_at_the_default_place_while_serving_applies() {
    let env = Env::new(&["hello", "run_test"], "");
    let home = env.dir.path().join("config-home");
    std::fs::create_dir_all(home.join("mcp-host")).unwrap();
    let client = env.start_with_default_config(&home).await;
    assert_eq!(shown(&client).await.len(), 2);

    deny_run_test(&client, &home.join("mcp-host/config.toml")).await;

    // Removed: the shipped defaults again.
    std::fs::remove_file(home.join("mcp-host/config.toml")).unwrap();
    assert!(
        client
            .tools_changed_within(std::time::Duration::from_secs(30))
            .await
    );
    assert_eq!(shown(&client).await.len(), 2);
}

/// Write a config denying `run_test` at `config` while serving: the
/// client is told and sees `hello` alone.
async fn deny_run_test(client: &Client, config: &std::path::Path) {
    std::fs::write(config, "[plugins.run_test]\ntools.deny = [\"run_*\"]\n").unwrap();
    assert!(
        client
            .tools_changed_within(std::time::Duration::from_secs(30))
            .await,
        "no list_changed after {} was written",
        config.display()
    );
    assert_eq!(shown(client).await, ["hello"]);
}
