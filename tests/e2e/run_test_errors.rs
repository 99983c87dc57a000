//! Files that do not load or build are errors, not failed tests (issue 58,
//! item 3): a syntax error in one test file is not "1 failed test". Each
//! runner's own report says which: pytest's collection errors, jest's and
//! vitest's test files that failed before any test ran, go's packages that
//! do not build.

use serde_json::{Value, json};

use crate::harness::*;
use crate::run_test::{JS_RUNNERS, env, js_math_env, report, run, write};

/// `errors` names `name` (at `file`, its message holding `message`), the
/// count says so, and no failed test carries its name.
fn errored(env: &Env, out: &Value, name: &str, message: &str) {
    assert_eq!(out["tests"]["errors"], 1, "{out:#}");
    let errors = out["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:#}"));
    assert_eq!(errors.len(), 1, "{out:#}");
    assert_eq!(errors[0]["name"], name, "{out:#}");
    assert!(
        errors[0]["message"].as_str().unwrap().contains(message),
        "{out:#}"
    );
    let failed: Vec<&str> = out["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(!failed.contains(&name), "{failed:?}");
    let md = report(env, out, "summary.md");
    assert!(
        md.contains("## Did not load or build") && md.contains(name),
        "{md}"
    );
}

#[tokio::test]
async fn a_test_file_that_does_not_load_is_an_error_not_a_failed_test() {
    if require_program("pytest", "pip install pytest (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                ("test_ok.py", "def test_ok():\n    pass\n"),
                ("test_broken.py", "def test_x(:\n    pass\n"),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "pytest", json!({"scope": "all"})).await;
        errored(&env, &out, "test_broken.py", "SyntaxError");
        assert_eq!(out["tests"]["failed"], 0, "{out:#}");
    }
    if require_program("go", "apt-get install golang-go (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                ("go.mod", "module example.com/half\n\ngo 1.19\n"),
                (
                    "ok_test.go",
                    "package half\n\nimport \"testing\"\n\nfunc TestOk(t *testing.T) {}\n",
                ),
                (
                    "broken/broken_test.go",
                    "package broken\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { undefinedThing() }\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "go", json!({"scope": "all"})).await;
        errored(&env, &out, "example.com/half/broken", "undefined");
        assert_eq!(out["tests"]["passed"], 1, "{out:#}");
        assert_eq!(out["tests"]["failed"], 0, "{out:#}");
    }
    for (script, package_type, import, _, _) in JS_RUNNERS {
        let Some(env) = js_math_env(script, package_type, import) else {
            break;
        };
        write(
            &env.workspace,
            &[(
                "test/broken.test.js",
                &format!("{import}test('y', () => {{ let = ; }});\n"),
            )],
        );
        let host = env.start().await;
        let out = run(&host, "npm", json!({"scope": "all"})).await;
        errored(&env, &out, "test/broken.test.js", "");
        // Issue 72, item 15: vitest's parse error is placed at its line
        // (it was line 1).
        if script == "vitest" {
            assert_eq!(out["errors"][0]["line"], 2, "{out:#}");
        }
        assert_eq!(
            out["tests"]["failed"], 1,
            "{script}: math subtracts only: {out:#}"
        );
    }
}

/// A pytest project of one passing test, or a skip without pytest.
fn one_passing_pytest() -> Option<Env> {
    if !require_program("pytest", "pip install pytest (.ci/run does)") {
        return None;
    }
    let env = env();
    write(
        &env.workspace,
        &[("test_ok.py", "def test_ok():\n    pass\n")],
    );
    Some(env)
}

/// Issue 72, item 14: a named pipe standing where raw.log goes is not
/// named as the log: nothing was written there, and `not_written` says so.
#[tokio::test]
async fn a_named_pipe_where_the_log_goes_is_not_called_the_log() {
    let Some(env) = one_passing_pytest() else {
        return;
    };
    let dir = env.workspace.join("rep");
    std::fs::create_dir_all(&dir).unwrap();
    nix::unistd::mkfifo(&dir.join("raw.log"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let host = env.start().await;
    let out = run(
        &host,
        "pytest",
        json!({"scope": "all", "report_dir": "rep"}),
    )
    .await;
    // Nothing ran: the log could not be written, and the excerpt says why.
    assert_eq!(out["status"], "error", "{out:#}");
    assert!(
        out["excerpt"].as_str().unwrap().contains("remove it"),
        "{out:#}"
    );
    assert!(out["artifacts"]["raw_log"].is_null(), "{out:#}");
    assert!(
        out["artifacts"]["not_written"]["raw_log"]
            .as_str()
            .is_some_and(|why| why.contains("named pipe")),
        "{out:#}"
    );
}

/// Issue 72, item 15: a pattern pytest cannot parse is a usage error, not
/// a failing run with 0 tests.
#[tokio::test]
async fn a_pattern_pytest_cannot_read_is_an_error_saying_so() {
    let Some(env) = one_passing_pytest() else {
        return;
    };
    let host = env.start().await;
    let out = run(
        &host,
        "pytest",
        json!({"scope": "pattern", "target": "ok and ("}),
    )
    .await;
    assert_eq!(out["status"], "error", "{out:#}");
    let excerpt = out["excerpt"].as_str().unwrap();
    assert!(
        excerpt.contains("did not run any test") && excerpt.contains("-k"),
        "{excerpt}"
    );
}
