//! Plugins in Python and JavaScript, as their authors make them: `host new
//! --lang`, the build command it prints (componentize-py from PyPI,
//! componentize-js from npm), `host install`, then served and called over
//! MCP like the Rust ones, a capability the policy does not grant refused
//! the same way.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::harness::*;

/// `$VAR`, else `program` on PATH; or a skip.
fn builder(var: &str, program: &str, how: &str) -> Option<PathBuf> {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None if require_program(program, how) => Some(PathBuf::from(program)),
        None => None,
    }
}

/// One more tool in the made plugin: it runs `ls`, which needs the
/// `process` capability this test's policy does not grant.
const PY_RUN_LS: &str = r#"

@tool(name="run_ls", description="Runs ls (needs the process capability).",
      input_schema={"type": "object", "properties": {}, "additionalProperties": False})
def run_ls(args):
    from wit_world.imports import process
    process.run(process.RunRequest(program="ls", args=[], cwd=".", env=[], stdin=None,
                                   timeout_ms=1000, no_output_timeout_ms=None, tail_bytes=1024,
                                   log_path=None))
    return "ran"
"#;

const JS_RUN_LS: &str = r#"
tool({ name: "run_ls", description: "Runs ls (needs the process capability).",
  inputSchema: { type: "object", properties: {}, additionalProperties: false } }, () => {
  run({ program: "ls", args: [], cwd: ".", env: [], timeoutMs: 1000n, tailBytes: 1024n });
  return "ran";
});
"#;

/// `host new name --lang lang`, then the build command it printed, run
/// with `program` (the builder found) in the plugin's folder; the
/// component. `edit` changes the made app's source first.
async fn made_and_built(
    env: &Env,
    name: &str,
    lang: &str,
    app: &str,
    program: &Path,
    edit: impl FnOnce(String) -> String,
) -> PathBuf {
    // `host new` reads no config or folder: the binary alone.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["new", name, "--lang", lang, "--dir"])
        .arg(env.dir.path())
        .output()
        .await
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    let dir = env.dir.path().join(name);
    let command = said
        .split_once(": ")
        .and_then(|(_, rest)| rest.split_once(" there writes"))
        .map(|(command, _)| command.to_string())
        .unwrap_or_else(|| panic!("no build command said: {said}"));
    let app = dir.join(app);
    let source = edit(std::fs::read_to_string(&app).unwrap());
    std::fs::write(&app, source).unwrap();
    let out = std::process::Command::new(program)
        .args(command.split_whitespace().skip(1))
        .current_dir(&dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    assert!(
        out.status.success(),
        "{command} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join(format!("{name}.wasm"))
}

/// Installed as users install, served, called: the greeting, a blank name
/// (the plugin's own typed error), a typo'd argument (refused by the host
/// before the plugin runs) and the refused capability.
async fn served_like_rust(env: &Env, name: &str, wasm: &Path) {
    let out = env
        .host(&["install", wasm.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let client = env.start().await;
    let tools = client.tools().await;
    let tool = tools.iter().find(|t| t.name == name).expect("listed");
    assert_eq!(
        tool.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true),
        "the declared hints reach the client"
    );
    let r = client
        .call(name, json!({"name": "CI", "shout": true}))
        .await;
    assert!(!is_error(&r), "{r:?}");
    assert_eq!(structured(&r), json!({"text": "HELLO, CI!", "chars": 10}));
    let r = client.call(name, json!({"name": "  "})).await;
    assert!(
        is_error(&r) && text(&r).starts_with("invalid_request: name is only spaces"),
        "{r:?}"
    );
    let r = client.call(name, json!({"nmae": "CI"})).await;
    assert!(is_error(&r), "{r:?}");
    let r = client.call("run_ls", json!({})).await;
    assert!(is_error(&r), "{r:?}");
    assert_eq!(structured(&r)["code"], "denied", "{r:?}");
    assert!(
        text(&r).contains(&format!("[plugins.{name}]")),
        "the denial names the key: {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_python_plugin_is_made_built_installed_and_served() {
    let Some(componentize) = builder(
        "COMPONENTIZE_PY",
        "componentize-py",
        "pip install componentize-py, or set COMPONENTIZE_PY",
    ) else {
        return;
    };
    let env = Env::new(&[], "");
    let wasm = made_and_built(&env, "pyhello", "python", "app.py", &componentize, |app| {
        app + PY_RUN_LS
    })
    .await;
    served_like_rust(&env, "pyhello", &wasm).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_javascript_plugin_is_made_built_installed_and_served() {
    let Some(componentize) = builder(
        "COMPONENTIZE_JS",
        "componentize-js",
        "npm install @bytecodealliance/componentize-js, or set COMPONENTIZE_JS",
    ) else {
        return;
    };
    let env = Env::new(&[], "");
    let wasm = made_and_built(&env, "jshello", "js", "app.js", &componentize, |app| {
        format!("import {{ run }} from \"mcphost:plugin/process@0.1.0\";\n{app}{JS_RUN_LS}")
    })
    .await;
    served_like_rust(&env, "jshello", &wasm).await;
}
