//! run_test through the host: real cargo, pytest and npm projects.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::*;

pub(crate) fn env() -> Env {
    Env::new(&["run_test"], "")
}

pub(crate) fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// An npm project whose `npm test` runs `script` (through sh).
fn npm_project(root: &Path, script: &str) {
    write(
        root,
        &[(
            "package.json",
            &json!({"name": "p", "version": "1.0.0", "scripts": {"test": script}}).to_string(),
        )],
    );
}

/// A run_test environment holding an npm project, when npm is installed.
pub(crate) fn npm_env(script: &str) -> Option<Env> {
    if !require_program("npm", "install Node.js and npm (.ci/run does)") {
        return None;
    }
    let env = env();
    npm_project(&env.workspace, script);
    Some(env)
}

/// A run_test environment, when pytest is installed.
fn pytest_env() -> Option<Env> {
    require_program(
        "pytest",
        "install it with `pip install pytest` (.ci/run does)",
    )
    .then(env)
}

/// The summary.json a run wrote.
fn summary_json(env: &Env, out: &Value) -> Value {
    let dir = env.workspace.join(out["report_dir"].as_str().unwrap());
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// The response has the seed's six keys and the per-test results
/// (`tests`, `failures`), and the reports exist. (The full-disk test
/// checks the other case: what is missing is said.)
fn check_reports(env: &Env, out: &Value, status: &str) {
    let keys: Vec<&str> = out
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "artifacts",
            "duration_ms",
            "excerpt",
            "exit_code",
            "failures",
            "report_dir",
            "slowest",
            "status",
            "tests"
        ],
        "{out}"
    );
    assert_eq!(out["status"], status, "{out:#}");
    let dir = env.workspace.join(out["report_dir"].as_str().unwrap());
    for file in ["raw.log", "summary.md", "summary.json"] {
        assert!(
            dir.join(file).is_file(),
            "{file} missing in {}",
            dir.display()
        );
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], status);
    assert!(
        std::fs::read_to_string(dir.join("summary.md"))
            .unwrap()
            .contains(&format!("status: **{status}**"))
    );
}

/// The answer's counts (passed, failed, skipped), and its failure `name`:
/// file and line, and a part of the message. (Runners that run files or
/// packages in parallel report failures in the order they finish.)
fn failure_of(out: &Value, counts: [u32; 3], name: &str, place: (&str, u32), message: &str) {
    let [passed, failed, skipped] = counts;
    assert_eq!(
        out["tests"],
        json!({"passed": passed, "failed": failed, "skipped": skipped, "total": passed + failed + skipped}),
        "{out:#}"
    );
    let failure = named(out, name);
    assert_eq!(
        (&failure["file"], &failure["line"]),
        (&json!(place.0), &json!(place.1)),
        "{failure}"
    );
    assert!(
        failure["message"].as_str().unwrap().contains(message),
        "{failure}"
    );
}

/// The answer's failure `name`.
fn named<'a>(out: &'a Value, name: &str) -> &'a Value {
    out["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no failure named {name}: {out:#}"))
}

/// One run_test call: its structured answer.
pub(crate) async fn run(host: &Client, runner: &str, extra: Value) -> Value {
    structured(&host.call("run_test", run_test_args(runner, extra)).await)
}

/// A file of the run's report directory.
pub(crate) fn report(env: &Env, out: &Value, file: &str) -> String {
    std::fs::read_to_string(
        env.workspace
            .join(out["report_dir"].as_str().unwrap())
            .join(file),
    )
    .unwrap()
}

fn raw_log(env: &Env, out: &Value) -> String {
    report(env, out, "raw.log")
}

#[tokio::test]
async fn cargo_pass_and_fail() {
    let env = env();
    write(
        &env.workspace,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"sample\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
            ),
            (
                "src/lib.rs",
                "pub fn add(a: i32, b: i32) -> i32 { a + b }\n",
            ),
            (
                "tests/good.rs",
                "#[test]\nfn adds() { assert_eq!(sample::add(1, 2), 3); }\n",
            ),
            (
                "tests/bad.rs",
                "#[test]\nfn adds_wrong() { assert_eq!(sample::add(1, 2), 4, \"math broke\"); }\n",
            ),
        ],
    );
    let host = env.start().await;
    let pass = host
        .call(
            "run_test",
            run_test_args("cargo", json!({"scope": "file", "target": "tests/good.rs"})),
        )
        .await;
    assert!(!is_error(&pass), "{pass:?}");
    let out = &structured(&pass);
    check_reports(&env, out, "pass");
    assert_eq!(out["exit_code"], 0);
    assert!(raw_log(&env, out).contains("[stdout] test adds ... ok"));

    let out = &run(&host, "cargo", json!({"scope": "all"})).await;
    check_reports(&env, out, "fail");
    assert_eq!(out["exit_code"], 101);
    let excerpt = out["excerpt"].as_str().unwrap();
    // stdout and stderr come through two pipes: cargo's `error: test
    // failed` (stderr) can land between libtest's `test adds_wrong ... `
    // and its `FAILED` (stdout), as it did once in CI.
    assert!(excerpt.contains("test adds_wrong ... "), "{excerpt}");
    assert!(excerpt.contains("FAILED"), "{excerpt}");
    assert!(excerpt.contains("math broke"), "{excerpt}");
    // Which test failed, where and why (libtest's console).
    failure_of(
        out,
        [1, 1, 0],
        "adds_wrong",
        ("tests/bad.rs", 2),
        "math broke",
    );
    let md = std::fs::read_to_string(
        env.workspace
            .join(out["report_dir"].as_str().unwrap())
            .join("summary.md"),
    )
    .unwrap();
    assert!(
        md.contains("## Failed tests\n\n- `adds_wrong` (tests/bad.rs:2): "),
        "{md}"
    );
    // Only what failed last time runs again, named exactly.
    let out = &run(&host, "cargo", json!({"scope": "failed"})).await;
    assert_eq!(
        out["tests"],
        json!({"passed": 0, "failed": 1, "skipped": 0, "total": 1}),
        "{out:#}"
    );
    let summary = summary_json(&env, out);
    assert_eq!(
        summary["command"]["args"],
        json!([
            "test",
            "--no-fail-fast",
            "--color",
            "never",
            "--",
            "--exact",
            "adds_wrong"
        ])
    );
    // An npm project whose runner gives no per-test results has no
    // `failed` scope (this one has no package.json at all).
    let npm = host
        .call("run_test", run_test_args("npm", json!({"scope": "failed"})))
        .await;
    let err = structured(&npm);
    assert_eq!(err["code"], "invalid_request", "{err}");
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("use scope `pattern`"),
        "{err}"
    );

    let pattern = host
        .call(
            "run_test",
            run_test_args("cargo", json!({"scope": "pattern", "target": "adds_wrong"})),
        )
        .await;
    assert_eq!(structured(&pattern)["status"], "fail");
}

#[tokio::test]
async fn pytest_pass_and_fail() {
    let Some(env) = pytest_env() else {
        return;
    };
    write(
        &env.workspace,
        &[
            ("test_ok.py", "def test_ok():\n    assert 1 + 1 == 2\n"),
            (
                "test_bad.py",
                "def test_bad():\n    assert 1 + 1 == 3, 'arithmetic'\n",
            ),
        ],
    );
    let host = env.start().await;
    let pass = host
        .call(
            "run_test",
            run_test_args("pytest", json!({"scope": "file", "target": "test_ok.py"})),
        )
        .await;
    check_reports(&env, &structured(&pass), "pass");
    let out = &run(
        &host,
        "pytest",
        json!({"scope": "pattern", "target": "bad"}),
    )
    .await;
    check_reports(&env, out, "fail");
    assert_eq!(out["exit_code"], 1);
    let excerpt = out["excerpt"].as_str().unwrap();
    assert!(
        excerpt.contains("FAILED test_bad.py::test_bad"),
        "{excerpt}"
    );
    assert!(
        excerpt.contains("E       AssertionError: arithmetic"),
        "{excerpt}"
    );
    // From pytest's own JUnit report, with the failing line.
    failure_of(
        out,
        [0, 1, 0],
        "test_bad.py::test_bad",
        ("test_bad.py", 2),
        "AssertionError: arithmetic",
    );
    let dir = env.workspace.join(out["report_dir"].as_str().unwrap());
    assert!(dir.join("junit.xml").is_file(), "pytest's report is kept");
    // The failed test again, by its node id; a target makes no sense here.
    let out = &run(&host, "pytest", json!({"scope": "failed"})).await;
    assert_eq!(out["tests"]["total"], 1, "{out:#}");
    assert_eq!(out["failures"][0]["name"], "test_bad.py::test_bad");
    let with_target = host
        .call(
            "run_test",
            run_test_args("pytest", json!({"scope": "failed", "target": "x"})),
        )
        .await;
    assert_eq!(structured(&with_target)["code"], "invalid_request");

    // A file named like an option, reached through `./`, is no target:
    // pytest would only collect and report a pass.
    write(&env.workspace, &[("--collect-only", "")]);
    let injected = host
        .call(
            "run_test",
            run_test_args(
                "pytest",
                json!({"scope": "file", "target": "./--collect-only"}),
            ),
        )
        .await;
    let err = structured(&injected);
    assert_eq!(err["code"], "invalid_request", "{err}");
    assert!(err["message"].as_str().unwrap().contains("option"), "{err}");
}

/// Issue 54, item 20: with almost no output kept (max_output_bytes 1),
/// the excerpt says so and where the output is, not that the last lines
/// are in a block above that is not there.
#[tokio::test]
async fn an_excerpt_with_no_output_kept_says_where_it_is() {
    let Some(env) = pytest_env() else {
        return;
    };
    write(
        &env.workspace,
        &[("test_ok.py", "def test_ok():\n    assert True\n")],
    );
    let host = env.start().await;
    let out = &run(
        &host,
        "pytest",
        json!({"scope": "all", "max_output_bytes": 1}),
    )
    .await;
    let excerpt = out["excerpt"].as_str().unwrap();
    assert!(!excerpt.contains("block above"), "{out:#}");
    assert!(excerpt.contains("raw.log"), "{out:#}");
    // A report_dir under a plain file: said as it is, not as a link.
    write(&env.workspace, &[("reports", "a file\n")]);
    let r = host
        .call(
            "run_test",
            run_test_args(
                "pytest",
                json!({"scope": "all", "report_dir": "reports/mine"}),
            ),
        )
        .await;
    let said = format!("{r:?}");
    assert!(
        said.contains("is a file, not a folder") && !said.contains("symbolic link"),
        "{said}"
    );
}

/// node's own test runner behind `npm test`: its JUnit report gives names,
/// files and lines.
#[tokio::test]
async fn npm_with_nodes_test_runner_reports_each_test() {
    let Some(env) = npm_env("node --test") else {
        return;
    };
    write(
        &env.workspace,
        &[(
            "test/math.test.js",
            "const test = require('node:test');\nconst assert = require('node:assert');\n\
             test('adds', () => { assert.strictEqual(1 + 1, 2); });\n\
             test('subtracts', () => { assert.strictEqual(2 - 1, 3); });\n\
             test.skip('later', () => {});\n",
        )],
    );
    let host = env.start().await;
    let out = &run(&host, "npm", json!({"scope": "all"})).await;
    check_reports(&env, out, "fail");
    failure_of(
        out,
        [1, 1, 1],
        "subtracts",
        ("test/math.test.js", 4),
        "1 !== 3",
    );
    // Only the failed test runs again (node skips the others).
    let out = &run(&host, "npm", json!({"scope": "failed"})).await;
    assert_eq!(out["tests"]["failed"], 1, "{out:#}");
    assert_eq!(out["tests"]["passed"], 0, "{out:#}");
    // What node's filter left out is not counted (issue 42: total was 2).
    assert_eq!(out["tests"]["total"], 1, "{out:#}");
    assert_eq!(out["failures"][0]["name"], "subtracts");
    // A name pattern goes to node's own filter.
    let out = &run(&host, "npm", json!({"scope": "pattern", "target": "adds"})).await;
    assert_eq!(out["status"], "pass", "{out:#}");
    assert_eq!(out["tests"]["passed"], 1, "{out:#}");
    assert_eq!(out["tests"]["failed"], 0, "{out:#}");
}

/// Issue 54, item 14: a test script that names its folder (`node --test
/// test/`) makes node read every word after it as a file, so options
/// appended there broke every run (`Could not find …--test-reporter=spec`,
/// 0 tests): they go where node reads options.
#[tokio::test]
async fn npm_with_a_node_test_script_that_names_its_folder() {
    let Some(env) = npm_env("node --test test/") else {
        return;
    };
    write(
        &env.workspace,
        &[(
            "test/math.test.js",
            "const test = require('node:test');\nconst assert = require('node:assert');\n\
             test('adds', () => { assert.strictEqual(1 + 1, 2); });\n\
             test('subtracts', () => { assert.strictEqual(2 - 1, 3); });\n",
        )],
    );
    let host = env.start().await;
    let out = &run(&host, "npm", json!({"scope": "all"})).await;
    check_reports(&env, out, "fail");
    failure_of(
        out,
        [1, 1, 0],
        "subtracts",
        ("test/math.test.js", 4),
        "1 !== 3",
    );
    let out = &run(
        &host,
        "npm",
        json!({"scope": "file", "target": "test/math.test.js"}),
    )
    .await;
    assert_eq!(out["tests"]["failed"], 1, "{out:#}");
    // A name pattern reaches node too: Node 22 and later read it from
    // NODE_OPTIONS; Node 20 refuses it there, and the answer says so.
    let out = &run(&host, "npm", json!({"scope": "pattern", "target": "adds"})).await;
    if out["status"] == "error" {
        let said = out["excerpt"].as_str().unwrap();
        assert!(
            said.contains("Node 22") && said.contains("scope `file`"),
            "{out:#}"
        );
    } else {
        assert_eq!(out["status"], "pass", "{out:#}");
        assert_eq!(out["tests"]["passed"], 1, "{out:#}");
    }
}

/// The test runners from the npm registry (jest, vitest): a node_modules
/// folder holding both, `$JS_TEST_RUNNERS`, by default
/// `~/.cache/mcp-host-ci/js-runners/node_modules` (.ci/run installs them).
fn js_runners() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("JS_TEST_RUNNERS")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| Path::new(&home).join(".cache/mcp-host-ci/js-runners/node_modules"))
        })?;
    if ["jest", "vitest"]
        .iter()
        .all(|bin| dir.join(".bin").join(bin).is_file())
    {
        return Some(dir);
    }
    skip(&format!(
        "no jest and vitest in {}: `npm install --prefix DIR jest@30.5.2 vitest@4.1.12` and set JS_TEST_RUNNERS=DIR/node_modules (.ci/run does)",
        dir.display()
    ));
    None
}

/// An npm project whose `npm test` is `script`, with jest and vitest
/// linked into its node_modules (the tests stay offline). Each package is
/// linked, not the folder, so what the runners write there (vitest's
/// `.vite/` cache) stays in the project.
pub(crate) fn js_runner_env(script: &str, package_type: &str) -> Option<Env> {
    let runners = js_runners()?;
    let env = npm_env(script)?;
    let package =
        json!({"name": "p", "version": "1.0.0", "type": package_type, "scripts": {"test": script}});
    write(&env.workspace, &[("package.json", &package.to_string())]);
    let modules = env.workspace.join("node_modules");
    std::fs::create_dir(&modules).unwrap();
    for entry in std::fs::read_dir(&runners).unwrap().flatten() {
        if !entry.file_name().to_string_lossy().starts_with(".vite") {
            std::os::unix::fs::symlink(entry.path(), modules.join(entry.file_name())).unwrap();
        }
    }
    Some(env)
}

/// jest and vitest behind `npm test`, each with the line its `expect`
/// fails on and its message, and the import vitest's tests need.
pub(crate) const JS_RUNNERS: [(&str, &str, &str, u32, &str); 2] = [
    ("jest", "commonjs", "", 4, "Expected: 3"),
    (
        "vitest",
        "module",
        "import { describe, test, expect } from 'vitest';\n",
        5,
        "expected 1 to be 3",
    ),
];

/// A project of `script` (jest or vitest) whose test/math.test.js has a
/// passing, a failing and a skipped test.
pub(crate) fn js_math_env(script: &str, package_type: &str, import: &str) -> Option<Env> {
    let env = js_runner_env(script, package_type)?;
    let body = "describe('math', () => {\n  test('adds', () => { expect(1 + 1).toBe(2); });\n  test('subtracts', () => {\n    expect(2 - 1).toBe(3);\n  });\n});\ntest.skip('later', () => {});\n";
    write(
        &env.workspace,
        &[("test/math.test.js", &format!("{import}{body}"))],
    );
    Some(env)
}

/// jest and vitest, each behind `npm test`: their JSON report gives each
/// test's full name, where it failed and the assertion message; `failed`
/// runs only that test again and `pattern` goes to their `-t`.
#[tokio::test]
async fn npm_with_jest_or_vitest_reports_each_test() {
    for (script, package_type, import, line, message) in JS_RUNNERS {
        let Some(env) = js_math_env(script, package_type, import) else {
            return;
        };
        let host = env.start().await;
        let out = &run(&host, "npm", json!({"scope": "all"})).await;
        check_reports(&env, out, "fail");
        failure_of(
            out,
            [1, 1, 1],
            "math subtracts",
            ("test/math.test.js", line),
            message,
        );
        // Expected and actual apart (issue 58, item 4): jest's Expected /
        // Received lines, vitest's "expected 1 to be 3".
        let subtracts = named(out, "math subtracts");
        assert_eq!(
            (&subtracts["expected"], &subtracts["actual"]),
            (&json!("3"), &json!("1")),
            "{script}: {subtracts}"
        );
        // Each test's time from the JSON report (issue 58, item 2).
        let timed: Vec<&str> = out["slowest"]
            .as_array()
            .unwrap_or_else(|| panic!("{script}: no slowest: {out:#}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(timed.contains(&"math subtracts"), "{script}: {timed:?}");
        let out = &run(&host, "npm", json!({"scope": "failed"})).await;
        assert_eq!(out["tests"]["failed"], 1, "{script}: {out:#}");
        assert_eq!(out["tests"]["passed"], 0, "{script}: {out:#}");
        assert_eq!(out["failures"][0]["name"], "math subtracts", "{script}");
        let out = &run(&host, "npm", json!({"scope": "pattern", "target": "adds"})).await;
        assert_eq!(out["status"], "pass", "{script}: {out:#}");
        assert_eq!(out["tests"]["passed"], 1, "{script}: {out:#}");
    }
}

/// Cut off by the timeout, jest and vitest write no JSON report: their
/// consoles (a line per test) still count what finished and name the
/// failure in full.
#[tokio::test]
async fn a_cut_off_jest_or_vitest_run_counts_what_finished() {
    for (script, package_type, import, _, _) in JS_RUNNERS {
        let Some(env) = js_math_env(script, package_type, import) else {
            return;
        };
        let hang = "test('hangs', () => new Promise(() => {}), 3600000);\n";
        write(
            &env.workspace,
            &[("test/slow.test.js", &format!("{import}{hang}"))],
        );
        counts_what_finished(
            &env,
            "npm",
            json!({"scope": "all"}),
            [1, 1, 1],
            "math subtracts",
        )
        .await;
    }
}

/// A go module: a test that fails, one that passes, one skipped, a table
/// whose second case fails, and a panic in a second package.
fn go_env() -> Option<Env> {
    if !require_program(
        "go",
        "install Go (`apt-get install golang-go`; .ci/run does)",
    ) {
        return None;
    }
    let env = env();
    write(
        &env.workspace,
        &[
            ("go.mod", "module example.com/calc\n\ngo 1.19\n"),
            (
                "calc.go",
                "package calc\n\nfunc Add(a, b int) int { return a + b }\n",
            ),
            (
                "calc_test.go",
                "package calc\n\nimport \"testing\"\n\n\
                 func TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n\n\
                 func TestSub(t *testing.T) {\n\tif got := Add(2, -1); got != 3 {\n\t\tt.Errorf(\"Add(2, -1) = %d, want 3\", got)\n\t}\n}\n\n\
                 func TestLater(t *testing.T) { t.Skip(\"later\") }\n\n\
                 func TestTable(t *testing.T) {\n\tfor _, want := range []int{2, 3} {\n\t\tt.Run(\"sum\", func(t *testing.T) {\n\t\t\tif Add(1, 1) != want {\n\t\t\t\tt.Errorf(\"want %d\", want)\n\t\t\t}\n\t\t})\n\t}\n}\n",
            ),
            (
                "sub/sub_test.go",
                "package sub\n\nimport \"testing\"\n\nfunc TestPanics(t *testing.T) {\n\tvar m map[string]int\n\tm[\"x\"] = 1\n}\n",
            ),
        ],
    );
    Some(env)
}

/// `go test -json`: each test and subtest, where it failed and why;
/// `failed` runs only the failing top-level tests again.
#[tokio::test]
async fn go_reports_each_test() {
    let Some(env) = go_env() else {
        return;
    };
    let host = env.start().await;
    let out = &run(&host, "go", json!({"scope": "all"})).await;
    check_reports(&env, out, "fail");
    failure_of(
        out,
        [2, 3, 1],
        "TestSub",
        ("calc_test.go", 13),
        "Add(2, -1) = 1, want 3",
    );
    let mut names: Vec<&str> = out["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["TestPanics", "TestSub", "TestTable/sum#01"],
        "{out:#}"
    );
    let panic = named(out, "TestPanics");
    assert_eq!(
        (&panic["file"], &panic["line"]),
        (&json!("sub/sub_test.go"), &json!(7)),
        "{panic}"
    );
    assert!(
        panic["message"]
            .as_str()
            .unwrap()
            .starts_with("panic: assignment to entry in nil map"),
        "{panic}"
    );
    // The excerpt reads as go's console, not as JSON.
    let excerpt = out["excerpt"].as_str().unwrap();
    assert!(excerpt.contains("--- FAIL: TestSub"), "{excerpt}");
    assert!(!excerpt.contains("\"Action\""), "{excerpt}");

    let out = &run(&host, "go", json!({"scope": "failed"})).await;
    // TestAdd and TestLater stay out; TestTable runs whole (its first case
    // passes).
    assert_eq!(
        out["tests"],
        json!({"passed": 1, "failed": 3, "skipped": 0, "total": 4}),
        "{out:#}"
    );
    let out = &run(
        &host,
        "go",
        json!({"scope": "pattern", "target": "TestAdd"}),
    )
    .await;
    assert_eq!(out["status"], "pass", "{out:#}");
    assert_eq!(out["tests"]["passed"], 1, "{out:#}");
}

/// A go run cut off by the timeout: go's stream, logged as it came, still
/// counts the tests that finished.
#[tokio::test]
async fn a_go_timeout_still_counts_what_finished() {
    let Some(env) = go_env() else {
        return;
    };
    write(
        &env.workspace,
        &[(
            "sub/sub_test.go",
            "package sub\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\n\
             func TestA(t *testing.T) {}\n\nfunc TestB(t *testing.T) { t.Error(\"b\") }\n\n\
             func TestC(t *testing.T) { time.Sleep(10 * time.Minute) }\n",
        )],
    );
    let target = json!({"scope": "file", "target": "sub/sub_test.go"});
    counts_what_finished(&env, "go", target, [1, 1, 0], "TestB").await;
}

/// A run cut off by its timeout while a test hangs: the tests that
/// finished are counted (passed, failed, skipped) and the failure named.
async fn counts_what_finished(
    env: &Env,
    runner: &str,
    extra: Value,
    [passed, failed, skipped]: [u32; 3],
    failure: &str,
) {
    let host = env.start().await;
    let mut args = run_test_args(runner, extra);
    args["timeout_ms"] = json!(15_000);
    let out = &structured(&host.call("run_test", args).await);
    assert_eq!(out["status"], "timeout", "{out:#}");
    assert_eq!(
        out["tests"],
        json!({"passed": passed, "failed": failed, "skipped": skipped, "total": passed + failed + skipped}),
        "{out:#}"
    );
    assert_eq!(out["failures"][0]["name"], failure, "{out:#}");
}

/// A run cut off by its timeout writes no JUnit report: the tests that
/// finished are still counted, from the output.
#[tokio::test]
async fn a_timeout_still_counts_what_finished() {
    let Some(env) = pytest_env() else {
        return;
    };
    write(
        &env.workspace,
        &[(
            "test_slow.py",
            "import time\n\ndef test_a():\n    pass\n\ndef test_b():\n    assert False, 'b'\n\ndef test_c():\n    time.sleep(600)\n",
        )],
    );
    counts_what_finished(
        &env,
        "pytest",
        json!({"scope": "all"}),
        [1, 1, 0],
        "test_slow.py::test_b",
    )
    .await;
}

#[tokio::test]
async fn hang_with_output_times_out_with_progress() {
    let Some(env) = npm_env("node -e \"setInterval(() => console.log('tick'), 100)\"") else {
        return;
    };
    let host = env.start().await;
    let started = Instant::now();
    let handle = host
        .start_call(
            "run_test",
            run_test_args(
                "npm",
                json!({"timeout_ms": 2500, "no_output_timeout_ms": 60_000}),
            ),
            "t1",
        )
        .await;
    let result = crate::harness::Client::finish(handle).await;
    let elapsed = started.elapsed();
    let out = &structured(&result);
    check_reports(&env, out, "timeout");
    // Well before the 60 s no-output limit: the 2.5 s one ended it (the
    // slack is for a loaded 2-core machine, where killing and reporting
    // took 5.9 s once).
    assert!(
        elapsed < Duration::from_millis(2500 + 12_000),
        "returned after {elapsed:?}"
    );
    assert!(out["excerpt"].as_str().unwrap().contains("tick"));
    assert!(raw_log(&env, out).contains("[stdout] tick"));
    // summary.md says why the run was killed (issue 42).
    let md = report(&env, out, "summary.md");
    assert!(
        md.contains("- ended: killed: still running when timeout_ms (2500 ms) passed"),
        "{md}"
    );
    let progress = host
        .drain_notes()
        .await
        .into_iter()
        .filter(|n| matches!(n, Note::Progress(_)))
        .count();
    assert!(progress >= 1, "a 2.5 s run reports progress");
}

#[tokio::test]
async fn silent_hang_ends_as_no_output() {
    let Some(env) = npm_env("node -e \"setInterval(() => {}, 1000)\"") else {
        return;
    };
    let host = env.start().await;
    let started = Instant::now();
    let result = host
        .call(
            "run_test",
            run_test_args(
                "npm",
                json!({"timeout_ms": 60_000, "no_output_timeout_ms": 1500}),
            ),
        )
        .await;
    let out = &structured(&result);
    check_reports(&env, out, "no_output");
    let md = report(&env, out, "summary.md");
    assert!(
        md.contains("- ended: killed: no output for no_output_timeout_ms (1500 ms)"),
        "{md}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "returned after {:?}",
        started.elapsed()
    );
}

/// A run_test stopped by a 2 s timeout; the pid its tree wrote to gc.pid.
async fn time_out_and_read_pid(env: &Env, host: &Client) -> i32 {
    let result = host
        .call(
            "run_test",
            run_test_args(
                "npm",
                json!({"timeout_ms": 2000, "no_output_timeout_ms": 60_000}),
            ),
        )
        .await;
    assert_eq!(structured(&result)["status"], "timeout");
    read_pid(&env.workspace.join("gc.pid")).await
}

/// Wait (without blocking the test's runtime) for a pid file.
async fn read_pid(path: &Path) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn grandchild_in_its_own_session_does_not_survive() {
    if !require_program("setsid", "install util-linux") {
        return;
    }
    // On timeout: the escaped grandchild is killed with the rest.
    let Some(env) = npm_env("setsid sh -c 'echo $$ > gc.pid; exec sleep 300' & sleep 300") else {
        return;
    };
    let host = env.start().await;
    let gc = time_out_and_read_pid(&env, &host).await;
    assert!(process_gone(gc), "grandchild {gc} survived the timeout");

    // On a normal exit: a daemon left behind is killed too.
    std::fs::remove_file(env.workspace.join("gc.pid")).unwrap();
    npm_project(
        &env.workspace,
        "setsid sh -c 'echo $$ > gc.pid; exec sleep 300' </dev/null >/dev/null 2>&1 & sleep 0.5; echo done",
    );
    let result = host.call("run_test", run_test_args("npm", json!({}))).await;
    assert_eq!(structured(&result)["status"], "pass", "{result:?}");
    let gc = read_pid(&env.workspace.join("gc.pid")).await;
    assert!(
        process_gone(gc),
        "daemonised grandchild {gc} survived the run"
    );
}

#[tokio::test]
async fn a_grandchild_that_clears_its_environment_does_not_survive() {
    // setsid leaves the session, env -i drops the run's marker: only the
    // run's cgroup still holds it.
    let Some(env) = npm_env("setsid env -i sh -c 'echo $$ > gc.pid; exec sleep 4242' & sleep 300")
    else {
        return;
    };
    let host = env.start().await;
    host.tools().await;
    let log = std::fs::read_to_string(env.stderr_log()).unwrap();
    if !require_cgroups(&log) {
        return;
    }
    let gc = time_out_and_read_pid(&env, &host).await;
    assert!(
        process_gone(gc),
        "the grandchild {gc} without marker survived"
    );
}

/// Many failing tests with long diffs, and a flood of failure lines: the
/// answer stays within what clients show a model, says what it left out,
/// and summary.json keeps it all.
#[tokio::test]
async fn a_large_failing_run_answers_within_the_budget() {
    let Some(env) = pytest_env() else {
        return;
    };
    let tests: String = (0..60)
        .map(|i| {
            format!(
                "def test_{i}():\n    print('ERROR ' + 'x' * 300)\n    assert list(range(300)) == list(range(1, 301))\n"
            )
        })
        .collect();
    write(&env.workspace, &[("test_many.py", tests.as_str())]);
    let host = env.start().await;
    let result = host
        .call("run_test", run_test_args("pytest", json!({})))
        .await;
    let answer = text(&result);
    assert!(answer.len() <= 20_000, "{} bytes", answer.len());
    let out = structured(&result);
    assert_eq!(out["status"], "fail", "{out}");
    assert_eq!(out["tests"]["failed"], 60, "{out}");
    let shown = out["failures"].as_array().unwrap().len();
    assert!(shown >= 1, "{out}");
    assert_eq!(
        shown as u64 + out["failures_omitted"].as_u64().unwrap_or(0),
        20,
        "the answer details 20 failures or counts those it left out: {out}"
    );
    let summary = summary_json(&env, &out);
    assert_eq!(summary["failed_tests"].as_array().unwrap().len(), 60);
    assert!(summary["failures"][0]["excerpt"].as_str().unwrap().len() > 300);
}

#[tokio::test]
async fn output_flood_keeps_host_memory_bounded() {
    // 500 MB of 71-byte lines.
    let Some(env) = npm_env(
        "yes 0123456789012345678901234567890123456789012345678901234567890123456789 | head -c 500000000",
    ) else {
        return;
    };
    let host = env.start().await;
    host.tools().await;
    let (before, _) = rss_kib(host.pid);
    reset_peak_rss(host.pid);
    let result = host
        .call(
            "run_test",
            run_test_args(
                "npm",
                json!({"max_output_bytes": 1_048_576, "timeout_ms": 600_000}),
            ),
        )
        .await;
    let (_, peak) = rss_kib(host.pid);
    let out = &structured(&result);
    check_reports(&env, out, "pass");
    // raw.log stops at the 100 MiB cap, then the tail and a note follow.
    let path = env
        .workspace
        .join(out["report_dir"].as_str().unwrap())
        .join("raw.log");
    let log_len = std::fs::metadata(&path).unwrap().len();
    let cap = 100 << 20;
    assert!(
        (cap..cap + (2 << 20)).contains(&log_len),
        "raw.log is capped: {log_len} bytes"
    );
    let mut file = std::fs::File::open(&path).unwrap();
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(log_len - (2 << 20))).unwrap();
    let mut end = String::new();
    std::io::Read::read_to_string(&mut file, &mut end).unwrap();
    assert!(
        end.contains(&format!("[host] the log reached its cap of {cap} bytes")),
        "the cut is noted"
    );
    assert!(end.trim_end().ends_with("ms") && end.contains("[host] ended: Exited"));
    let growth_mib = peak.saturating_sub(before) / 1024;
    assert!(
        growth_mib < 64,
        "host memory grew by {growth_mib} MiB during a 500 MB flood"
    );
}

#[tokio::test]
async fn report_dir_escapes_are_refused() {
    let env = env();
    let host = env.start().await;
    for bad in ["../outside", "/tmp/outside", "reports/../../outside"] {
        let result = host
            .call(
                "run_test",
                run_test_args("cargo", json!({"report_dir": bad})),
            )
            .await;
        assert!(is_error(&result), "{bad}: {result:?}");
        let err = structured(&result);
        assert_eq!(err["code"], "invalid_request");
        assert!(
            err["message"].as_str().unwrap().contains("report_dir"),
            "{err}"
        );
    }
    assert!(!env.dir.path().join("outside").exists());
    // Issue 54, item 20: a report_dir that is a link out of the workspace
    // is refused naming the link, not by asking for a wider grant.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(env.workspace.join("reports")).unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), env.workspace.join("reports/link")).unwrap();
    let result = host
        .call(
            "run_test",
            run_test_args("cargo", json!({"report_dir": "reports/link"})),
        )
        .await;
    let said = format!("{:?}", structured(&result));
    assert!(said.contains("symbolic link"), "{said}");
    assert!(!said.contains("fs.write"), "{said}");
    // Nor with WASI's error numbers, which are not the host's.
    assert!(!said.contains("os error"), "{said}");
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    let injected = host
        .call(
            "run_test",
            run_test_args("pytest", json!({"scope": "pattern", "target": "--version"})),
        )
        .await;
    assert_eq!(structured(&injected)["code"], "invalid_request");
}

#[tokio::test]
async fn cancellation_kills_the_run() {
    let Some(env) = npm_env("echo $$ > leader.pid; sleep 300") else {
        return;
    };
    let host = env.start().await;
    let handle = host
        .start_call(
            "run_test",
            run_test_args("npm", json!({"timeout_ms": 300_000})),
            "c1",
        )
        .await;
    let pid = read_pid(&env.workspace.join("leader.pid")).await;
    handle.cancel(Some("test cancels".into())).await.unwrap();
    // Far below the run's 300 s: the cancellation ended it (the slack is for
    // a loaded 2-core machine).
    let deadline = Instant::now() + Duration::from_secs(15);
    while !process_gone(pid) {
        assert!(
            Instant::now() < deadline,
            "process {pid} still alive 15 s after cancellation"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The host goes on serving.
    assert_eq!(host.tools().await.len(), 1);
    // The reports say what happened.
    let reports = env.workspace.join(".cache/mcp-test-timebox/reports");
    let deadline = Instant::now() + Duration::from_secs(15);
    let summary = loop {
        let found = std::fs::read_dir(&reports)
            .into_iter()
            .flatten()
            .flatten()
            .map(|d| d.path().join("summary.json"))
            .find(|p| p.is_file());
        if let Some(found) = found {
            break found;
        }
        assert!(
            Instant::now() < deadline,
            "no summary.json after the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    assert_eq!(summary["status"], "error", "{summary}");
    assert!(
        summary["error"].as_str().unwrap().contains("cancelled"),
        "{summary}"
    );
}

/// A tmpfs of `kib` KiB mounted on `dir` for the test, unmounted on drop.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    /// `None` (a visible skip; a failure under CI=true) when mounting is
    /// not allowed here.
    fn mount(dir: &Path, kib: u32) -> Option<SmallDisk> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            skip("cannot mount a small tmpfs (needs root): the full-disk case is untested");
            return None;
        }
        Some(SmallDisk(dir.to_path_buf()))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[tokio::test]
async fn a_full_disk_gets_a_truthful_reply() {
    let Some(env) =
        npm_env("yes 0123456789012345678901234567890123456789 | head -c 400000; exit 1")
    else {
        return;
    };
    // The report directory lives on a 256 KiB disk that the output fills.
    let Some(_disk) = SmallDisk::mount(&env.workspace.join(".cache"), 256) else {
        return;
    };
    let host = env.start().await;
    let out = &run(&host, "npm", json!({})).await;
    assert_eq!(out["status"], "fail", "{out}");
    let artifacts = &out["artifacts"];
    let dir = env.workspace.join(out["report_dir"].as_str().unwrap());
    for (key, file) in [
        ("raw_log", "raw.log"),
        ("summary_json", "summary.json"),
        ("summary_md", "summary.md"),
    ] {
        let listed = artifacts.get(key).is_some();
        let on_disk = std::fs::metadata(dir.join(file)).is_ok_and(|m| m.len() > 0);
        assert_eq!(
            listed, on_disk,
            "{key} listed={listed} on disk={on_disk}: {out}"
        );
        assert!(
            listed
                || artifacts["not_written"][key]
                    .as_str()
                    .is_some_and(|why| why.contains("failed")),
            "{key} missing without a reason: {out}"
        );
    }
    assert!(
        artifacts["not_written"].is_object(),
        "the disk was full: {out}"
    );
    let excerpt = out["excerpt"].as_str().unwrap();
    assert!(
        excerpt.contains("incomplete") && excerpt.contains("[not written]"),
        "{excerpt}"
    );
}

/// Issue 42, item 1: runs started in the same second each get a report
/// directory of their own (they shared one: one raw.log survived, and a
/// passing run pointed at a failing run's summary).
#[tokio::test]
async fn parallel_runs_never_share_a_report_dir() {
    let Some(env) = npm_env("echo ran; sleep 1") else {
        return;
    };
    let host = env.start().await;
    let calls = (0..4).map(|_| run(&host, "npm", json!({})));
    let outs = futures_util::future::join_all(calls).await;
    let mut dirs: Vec<&str> = outs
        .iter()
        .map(|out| out["report_dir"].as_str().unwrap())
        .collect();
    dirs.sort();
    dirs.dedup();
    assert_eq!(dirs.len(), 4, "{outs:?}");
    for out in &outs {
        check_reports(&env, out, "pass");
        assert!(raw_log(&env, out).contains("ran"));
    }
}

/// Issue 42, item 2: a timeout_ms beyond the policy's deadline still ends
/// as run_test's own timeout, with every report written and the answer
/// saying why (it ended as plugin_timeout with raw.log only).
#[tokio::test]
async fn a_timeout_beyond_the_policys_deadline_still_writes_the_reports() {
    if !require_program("npm", "install Node.js and npm (.ci/run does)") {
        return;
    }
    let env = Env::new(
        &["run_test"],
        "[plugins.run_test.limits]\ntimeout_ms = 20000\n",
    );
    npm_project(
        &env.workspace,
        "node -e \"setInterval(() => console.log('tick'), 500)\"",
    );
    let host = env.start().await;
    let out = &run(
        &host,
        "npm",
        json!({"timeout_ms": 600_000, "no_output_timeout_ms": 60_000}),
    )
    .await;
    check_reports(&env, out, "timeout");
    let excerpt = out["excerpt"].as_str().unwrap();
    assert!(excerpt.starts_with("[killed at "), "{excerpt}");
    assert!(excerpt.contains("limits.timeout_ms"), "{excerpt}");
}
