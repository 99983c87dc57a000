//! Issue 71: the programs a plugin starts (a test suite, pi's `bash`) are
//! confined to its grants by the kernel: writing outside the workspace,
//! reading another plugin's secrets or reaching a port the policy does
//! not list fails, while the same programs' ordinary work goes on. Linux
//! with Landlock (CI's kernel); elsewhere `host check` says nothing is.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::harness::*;
use crate::mock_llm::{MockLlm, Script};
use crate::run_test::{run, write};

/// Whether this machine confines programs (under CI=true it must).
fn confining() -> bool {
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_host"))
        .args(["check", "--plugins", "/nonexistent"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout).into_owned();
    let confined = said.contains("plugins' programs: confined (Landlock");
    if !confined {
        skip(&format!(
            "this kernel does not confine programs fully: {said}"
        ));
    }
    confined
}

/// A folder beside the workspace that no grant names.
fn elsewhere(env: &Env) -> PathBuf {
    let dir = env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A run_test environment whose project holds the files `files` makes
/// from the path (beside the workspace, granted to no one) its escaping
/// test writes; that path.
fn project(files: impl FnOnce(&str) -> Vec<(&'static str, String)>) -> (Env, PathBuf) {
    let env = Env::new(&["run_test"], "");
    let outside = elsewhere(&env).join("escaped");
    let files = files(&outside.display().to_string());
    let files: Vec<(&str, &str)> = files.iter().map(|(p, t)| (*p, t.as_str())).collect();
    write(&env.workspace, &files);
    (env, outside)
}

/// The run's failure `name`, which must be there.
fn failure<'a>(out: &'a Value, name: &str) -> &'a Value {
    out["failures"]
        .as_array()
        .and_then(|f| {
            f.iter()
                .find(|f| f["name"].as_str().is_some_and(|n| n.contains(name)))
        })
        .unwrap_or_else(|| panic!("no failure named {name}: {out:#}"))
}

/// Run `runner` over the whole project; the one test writing `outside`
/// fails with the kernel's refusal, the one writing inside passes.
async fn escape_refused(env: &Env, runner: &str, outside: &Path, refusal: &str) {
    let host = env.start().await;
    let out = run(&host, runner, json!({"scope": "all"})).await;
    assert_eq!(out["tests"]["passed"], 1, "{out:#}");
    assert_eq!(out["tests"]["failed"], 1, "{out:#}");
    let message = failure(&out, "escape")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let excerpt = out["excerpt"].as_str().unwrap_or_default();
    assert!(
        message.contains(refusal) || excerpt.contains(refusal),
        "{refusal} in {out:#}"
    );
    assert!(!outside.exists(), "{} was written", outside.display());
    // The answer names the key that would grant it (and the file, where
    // the runtime's message does).
    let refused = out["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("`process.write`") && refused.contains("[plugins.run_test]"),
        "{out:#}"
    );
    if refusal != "PermissionDenied" {
        assert!(
            refused.contains(&outside.display().to_string()),
            "{refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pytest_suite_writes_its_workspace_and_temp_and_nothing_else() {
    if !confining() || !require_program("pytest", "pip install pytest (.ci/run does)") {
        return;
    }
    let (env, outside) = project(|out| {
        vec![
            ("test_escape.py", format!("def test_escape():\n    open({out:?}, 'w').write('x')\n")),
            (
                "test_inside.py",
                "def test_inside(tmp_path):\n    (tmp_path / 'x').write_text('x')\n    open('inside.txt', 'w').write('x')\n".into(),
            ),
        ]
    });
    escape_refused(&env, "pytest", &outside, "PermissionError").await;
    assert!(env.workspace.join("inside.txt").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_npm_suite_writes_its_workspace_and_nothing_else() {
    if !confining() || !require_program("npm", "install Node.js and npm (.ci/run does)") {
        return;
    }
    let (env, outside) = project(|out| {
        vec![
            (
                "package.json",
                json!({"name": "p", "version": "1.0.0", "scripts": {"test": "node --test"}})
                    .to_string(),
            ),
            (
                "test/files.test.js",
                format!(
                    "const test = require('node:test');\nconst fs = require('node:fs');\n\
                     test('escape', () => {{ fs.writeFileSync({out:?}, 'x'); }});\n\
                     test('inside', () => {{ fs.writeFileSync('inside.txt', 'x'); }});\n"
                ),
            ),
        ]
    });
    escape_refused(&env, "npm", &outside, "EACCES").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cargo_suite_builds_with_its_caches_and_writes_nothing_else() {
    if !confining() {
        return;
    }
    let (env, outside) = project(|out| {
        vec![
            (
                "Cargo.toml",
                "[package]\nname = \"sample\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n".into(),
            ),
            ("src/lib.rs", "pub fn add(a: i32, b: i32) -> i32 { a + b }\n".into()),
            (
                "tests/files.rs",
                format!(
                    "#[test]\nfn escape() {{ std::fs::write({out:?}, \"x\").unwrap(); }}\n\
                     #[test]\nfn inside() {{ std::fs::write(\"inside.txt\", \"x\").unwrap(); }}\n"
                ),
            ),
        ]
    });
    escape_refused(&env, "cargo", &outside, "PermissionDenied").await;
}

/// A folder the policy names in `process.write` is the programs' too; a
/// secret of another plugin is not, wherever the store is.
#[tokio::test(flavor = "multi_thread")]
async fn a_granted_folder_is_written_and_another_plugins_secret_is_not_read() {
    if !confining() || !require_program("pytest", "pip install pytest (.ci/run does)") {
        return;
    }
    let probe = Env::new(&[], "");
    let granted = elsewhere(&probe).join("granted");
    std::fs::create_dir_all(&granted).unwrap();
    let mut env = Env::new(
        &["run_test"],
        &format!(
            "[plugins.run_test]\nprocess.write = [{:?}]\n",
            granted.display().to_string()
        ),
    );
    let store = env.dir.path().join("secrets");
    env.host_vars
        .push(("MCP_HOST_SECRETS".into(), store.display().to_string()));
    const VALUE: &str = "other-plugins-token-7731";
    let mut set = env.host(&["secret", "set", "other", "TOKEN"]);
    set.stdin(std::process::Stdio::piped());
    let mut child = set.spawn().unwrap();
    use tokio::io::AsyncWriteExt;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(VALUE.as_bytes())
        .await
        .unwrap();
    assert!(child.wait().await.unwrap().success());
    let secret = store.join("other.toml");
    assert!(std::fs::read_to_string(&secret).unwrap().contains(VALUE));
    write(
        &env.workspace,
        &[
            (
                "test_granted.py",
                &format!(
                    "def test_granted():\n    open({:?}, 'w').write('x')\n",
                    granted.join("out").display().to_string()
                ),
            ),
            (
                "test_escape_secret.py",
                &format!(
                    "def test_escape_secret():\n    print(open({:?}).read())\n",
                    secret.display().to_string()
                ),
            ),
        ],
    );
    let host = env.start().await;
    let out = run(&host, "pytest", json!({"scope": "all"})).await;
    assert_eq!(out["tests"]["passed"], 1, "{out:#}");
    assert!(granted.join("out").exists());
    let refused = failure(&out, "escape_secret");
    assert!(refused.to_string().contains("PermissionError"), "{refused}");
    assert!(!out.to_string().contains(VALUE), "{out:#}");
}

/// pi's `bash` tool, asked by the model: writing outside the workspace and
/// reaching a port the policy does not list are refused, and the tool's
/// answer says so; writing inside works.
#[tokio::test(flavor = "multi_thread")]
async fn pis_bash_writes_the_workspace_and_reaches_only_granted_ports() {
    let Some(pi) = crate::pi::pi_cli() else {
        return;
    };
    if !confining() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = Env::new(&[], "");
    let outside = elsewhere(&probe).join("from-pi");
    let inside_name = "from-pi.txt";
    let command = format!(
        "touch {out}; echo outside=$?; touch {inside_name}; echo inside=$?; \
         bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'; echo port=$?",
        out = outside.display()
    );
    let mock = MockLlm::start(Script::Answer {
        text: "Tried.".into(),
        tool_first: Some(("bash".into(), json!({ "command": command }).to_string())),
    })
    .await;
    let env = crate::pi::host_env(pi.parent().unwrap(), &crate::pi::custom(&mock.base_url()));
    let client = env.start().await;
    let (r, _) = crate::pi::call_with_token(&client, json!({"prompt": "Try the files"})).await;
    assert!(!is_error(&r), "{r:?}");
    let out = structured(&r);
    let said = out["tool_calls"][0]["result"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(said.contains("Permission denied"), "{said}");
    assert!(
        said.contains("outside=1") && said.contains("inside=0"),
        "{said}"
    );
    assert!(said.contains("port=1"), "{said}");
    assert!(!outside.exists());
    assert!(env.workspace.join(inside_name).exists());
    let refused = out["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains(&outside.display().to_string()) && refused.contains("[plugins.pi]"),
        "{out:#}"
    );
    drop(listener);
}
