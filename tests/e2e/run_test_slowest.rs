//! The slowest tests (issue 58, item 2): per-test times from each
//! runner's own report, slowest first, five in the answer and ten in
//! summary.md and summary.json; a runner without per-test times (cargo)
//! gives none rather than a guess.

use serde_json::{Value, json};

use crate::harness::*;
use crate::run_test::{env, npm_env, report, run, write};

/// The answer's `slowest` names `slow` first, at `at_least` seconds or
/// more, and `fast` after it; summary.md lists them.
fn slow_first(env: &Env, out: &Value, slow: &str, fast: &str, at_least: f64) {
    let slowest = out["slowest"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:#}"));
    assert!(slowest.len() <= 5, "{out:#}");
    assert_eq!(slowest[0]["name"], slow, "{out:#}");
    assert!(
        slowest[0]["seconds"].as_f64().unwrap() >= at_least,
        "{out:#}"
    );
    let names: Vec<&str> = slowest
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&fast), "{names:?}");
    let md = report(env, out, "summary.md");
    assert!(
        md.contains("## Slowest tests") && md.contains(&format!("- `{slow}`: ")),
        "{md}"
    );
}

#[tokio::test]
async fn pytest_go_and_nodes_slowest_tests_are_named() {
    if require_program("pytest", "pip install pytest (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[(
                "test_timing.py",
                "import time\n\ndef test_fast():\n    pass\n\ndef test_slow():\n    time.sleep(0.4)\n",
            )],
        );
        let host = env.start().await;
        let out = run(&host, "pytest", json!({"scope": "all"})).await;
        slow_first(
            &env,
            &out,
            "test_timing.py::test_slow",
            "test_timing.py::test_fast",
            0.35,
        );
    }
    if require_program("go", "apt-get install golang-go (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                ("go.mod", "module example.com/timing\n\ngo 1.19\n"),
                (
                    "timing_test.go",
                    "package timing\n\nimport (\n\t\"testing\"\n\t\"time\"\n)\n\n\
                     func TestFast(t *testing.T) {}\n\n\
                     func TestSlow(t *testing.T) { time.Sleep(400 * time.Millisecond) }\n\n\
                     func TestGroup(t *testing.T) {\n\tt.Run(\"leaf\", func(t *testing.T) { time.Sleep(200 * time.Millisecond) })\n}\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "go", json!({"scope": "all"})).await;
        slow_first(&env, &out, "TestSlow", "TestFast", 0.35);
        // A test with subtests takes their time: the leaf is named, not it.
        let names = out["slowest"].to_string();
        assert!(
            names.contains("TestGroup/leaf") && !names.contains("\"TestGroup\""),
            "{names}"
        );
    }
    if let Some(env) = npm_env("node --test") {
        write(
            &env.workspace,
            &[(
                "test/timing.test.js",
                "const test = require('node:test');\n\
                 test('fast', () => {});\n\
                 test('slow', async () => { await new Promise((r) => setTimeout(r, 400)); });\n",
            )],
        );
        let host = env.start().await;
        let out = run(&host, "npm", json!({"scope": "all"})).await;
        slow_first(&env, &out, "slow", "fast", 0.35);
    }
}

/// cargo's console says no test's time: no `slowest` at all.
#[tokio::test]
async fn a_runner_without_per_test_times_names_none() {
    if !require_program("cargo", "install Rust (.ci/run does)") {
        return;
    }
    let env = env();
    write(
        &env.workspace,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"timing\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
            ),
            ("src/lib.rs", "#[test]\nfn quick() {}\n"),
        ],
    );
    let host = env.start().await;
    let out = run(&host, "cargo", json!({"scope": "all"})).await;
    assert_eq!(out["status"], "pass", "{out:#}");
    assert!(out["slowest"].is_null(), "{out:#}");
}
