//! `coverage: true` (issue 58, item 5): per file, the lines covered and the
//! uncovered ranges of the files the run touched, from each runner's own
//! coverage (pytest-cov's LCOV, go's cover profile, jest's and vitest's v8
//! LCOV) on real projects where one branch is never run; cargo says it has
//! none.

use serde_json::{Value, json};

use crate::harness::*;
use crate::run_test::{env, js_runner_env, run, write};

/// The answer's coverage of `file`.
fn file<'a>(out: &'a Value, name: &str) -> &'a Value {
    out["coverage"]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("no coverage: {out:#}"))
        .iter()
        .find(|f| f["file"] == name)
        .unwrap_or_else(|| panic!("no {name}: {out:#}"))
}

/// `name` is partly covered, and `line` (the branch no test takes) is
/// among its uncovered lines.
fn partly(out: &Value, name: &str, line: u32) {
    let f = file(out, name);
    let percent = f["percent"].as_f64().unwrap();
    assert!(percent > 0.0 && percent < 100.0, "{f}");
    let uncovered = f["uncovered"].as_str().unwrap();
    let holds = uncovered.split(", ").any(|r| match r.split_once('-') {
        Some((a, b)) => (a.parse::<u32>().unwrap()..=b.parse().unwrap()).contains(&line),
        None => r.parse::<u32>().unwrap() == line,
    });
    assert!(holds, "line {line} not in {uncovered}: {f}");
}

#[tokio::test]
async fn coverage_names_the_lines_no_test_ran() {
    if require_program("pytest", "pip install pytest pytest-cov (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                (
                    "shop.py",
                    "def price(n):\n    if n > 100:\n        return n * 0.9\n    return n\n",
                ),
                (
                    "test_shop.py",
                    "from shop import price\n\ndef test_small():\n    assert price(5) == 5\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "pytest", json!({"scope": "all", "coverage": true})).await;
        assert_eq!(out["status"], "pass", "{out:#}");
        partly(&out, "shop.py", 3);
        assert!(
            out["coverage"]["percent"].as_f64().unwrap() > 0.0,
            "{out:#}"
        );
        // Issue 72, item 12: a collection error is not blamed on pytest-cov,
        // which is installed.
        write(
            &env.workspace,
            &[(
                "test_broken.py",
                "def test_x(:
    pass
",
            )],
        );
        let out = run(&host, "pytest", json!({"scope": "all", "coverage": true})).await;
        if let Some(why) = out["coverage"]["unavailable"].as_str() {
            assert!(!why.contains("installed"), "{why}");
            assert!(why.ends_with(')') || why.ends_with("says"), "{why}");
        }
    }
    if require_program("go", "apt-get install golang-go (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                ("go.mod", "module example.com/shop\n\ngo 1.19\n"),
                (
                    "shop.go",
                    "package shop\n\nfunc Price(n int) int {\n\tif n > 100 {\n\t\treturn n - 10\n\t}\n\treturn n\n}\n",
                ),
                (
                    "shop_test.go",
                    "package shop\n\nimport \"testing\"\n\nfunc TestSmall(t *testing.T) {\n\tif Price(5) != 5 {\n\t\tt.Fatal(\"no\")\n\t}\n}\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "go", json!({"scope": "all", "coverage": true})).await;
        assert_eq!(out["status"], "pass", "{out:#}");
        partly(&out, "shop.go", 5);
    }
    for (script, package_type) in [("jest", "commonjs"), ("vitest run", "module")] {
        let Some(env) = js_runner_env(script, package_type) else {
            break;
        };
        let (module, import) = match package_type {
            "module" => (
                "export function price(n) {\n  if (n > 100) {\n    return n * 0.9;\n  }\n  return n;\n}\n",
                "import { test, expect } from 'vitest';\nimport { price } from '../shop.js';\n",
            ),
            _ => (
                "function price(n) {\n  if (n > 100) {\n    return n * 0.9;\n  }\n  return n;\n}\nmodule.exports = { price };\n",
                "const { price } = require('../shop.js');\n",
            ),
        };
        write(
            &env.workspace,
            &[
                ("shop.js", module),
                (
                    "test/shop.test.js",
                    &format!("{import}test('small', () => {{ expect(price(5)).toBe(5); }});\n"),
                ),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "npm", json!({"scope": "all", "coverage": true})).await;
        assert_eq!(out["status"], "pass", "{script}: {out:#}");
        partly(&out, "shop.js", 3);
        // Issue 72, item 12: a failing test still gives coverage (vitest
        // wrote none, and the answer blamed the installation).
        write(
            &env.workspace,
            &[(
                "test/fails.test.js",
                &format!(
                    "{import}test('fails', () => {{ expect(price(7)).toBe(8); }});
"
                ),
            )],
        );
        let out = run(&host, "npm", json!({"scope": "all", "coverage": true})).await;
        assert_eq!(out["status"], "fail", "{script}: {out:#}");
        partly(&out, "shop.js", 3);
    }
    if require_program("cargo", "install Rust (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                (
                    "Cargo.toml",
                    "[package]\nname = \"c\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
                ),
                ("src/lib.rs", "#[test]\nfn t() {}\n"),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "cargo", json!({"scope": "all", "coverage": true})).await;
        assert_eq!(out["status"], "pass", "{out:#}");
        let why = out["coverage"]["unavailable"]
            .as_str()
            .unwrap_or_else(|| panic!("{out:#}"));
        assert!(why.contains("cargo-llvm-cov"), "{why}");
    }
}
