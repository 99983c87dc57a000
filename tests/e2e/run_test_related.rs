//! `scope: related` (issue 58, item 6): the tests that exercise a source
//! file, and how they were found — pytest by the test files that import
//! it, go by its package, cargo by its crate, jest by its own
//! `--findRelatedTests`, vitest by the test files that import it — each on a real project where another test must
//! stay out.

use serde_json::{Value, json};

use crate::harness::*;
use crate::run_test::{env, js_runner_env, run, write};

fn related(out: &Value) -> (&str, Vec<&str>) {
    let how = out["related"]["how"]
        .as_str()
        .unwrap_or_else(|| panic!("{out:#}"));
    let ran = out["related"]["run"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    (how, ran)
}

#[tokio::test]
async fn the_tests_a_source_file_touches_run_and_no_others() {
    if require_program("pytest", "pip install pytest (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                ("pytest.ini", "[pytest]\npythonpath = src\n"),
                ("src/shop/__init__.py", ""),
                ("src/shop/cart.py", "def total(xs):\n    return sum(xs)\n"),
                ("src/shop/stock.py", "def left():\n    return 3\n"),
                (
                    "tests/test_cart.py",
                    "from shop.cart import total\n\ndef test_total():\n    assert total([1, 2]) == 3\n",
                ),
                (
                    "tests/test_stock.py",
                    "from shop import stock\n\ndef test_left():\n    assert stock.left() == 3\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(
            &host,
            "pytest",
            json!({"scope": "related", "target": "src/shop/cart.py"}),
        )
        .await;
        assert_eq!(out["status"], "pass", "{out:#}");
        assert_eq!(out["tests"]["total"], 1, "{out:#}");
        let (how, ran) = related(&out);
        assert_eq!(ran, ["tests/test_cart.py"], "{out:#}");
        assert!(
            how.contains("import shop.cart") || how.contains("shop.cart"),
            "{how}"
        );
        // `from shop import stock` counts as importing shop.stock.
        let out = run(
            &host,
            "pytest",
            json!({"scope": "related", "target": "src/shop/stock.py"}),
        )
        .await;
        assert_eq!(related(&out).1, ["tests/test_stock.py"], "{out:#}");
        // A file nothing imports says so.
        write(&env.workspace, &[("src/shop/unused.py", "X = 1\n")]);
        let refused = host
            .call(
                "run_test",
                run_test_args(
                    "pytest",
                    json!({"scope": "related", "target": "src/shop/unused.py"}),
                ),
            )
            .await;
        assert!(
            format!("{refused:?}").contains("no test file imports"),
            "{refused:?}"
        );
    }
    if require_program("go", "apt-get install golang-go (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                ("go.mod", "module example.com/two\n\ngo 1.19\n"),
                ("a/a.go", "package a\n\nfunc A() int { return 1 }\n"),
                (
                    "a/a_test.go",
                    "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\n",
                ),
                (
                    "b/b_test.go",
                    "package b\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) { t.Fatal(\"b must not run\") }\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "go", json!({"scope": "related", "target": "a/a.go"})).await;
        assert_eq!(out["status"], "pass", "{out:#}");
        assert_eq!(related(&out).1, ["./a"], "{out:#}");
    }
    if require_program("cargo", "install Rust (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                (
                    "Cargo.toml",
                    "[workspace]\nmembers = [\"one\", \"two\"]\nresolver = \"2\"\n",
                ),
                (
                    "one/Cargo.toml",
                    "[package]\nname = \"one\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
                ),
                (
                    "one/src/lib.rs",
                    "pub fn one() -> u8 { 1 }\n#[test]\nfn is_one() { assert_eq!(one(), 1); }\n",
                ),
                (
                    "two/Cargo.toml",
                    "[package]\nname = \"two\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
                ),
                (
                    "two/src/lib.rs",
                    "#[test]\nfn never() { panic!(\"two must not run\") }\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(
            &host,
            "cargo",
            json!({"scope": "related", "target": "one/src/lib.rs"}),
        )
        .await;
        assert_eq!(out["status"], "pass", "{out:#}");
        assert_eq!(related(&out).1, ["one/Cargo.toml"], "{out:#}");
    }
    if let Some(env) = js_runner_env("jest", "commonjs") {
        write(
            &env.workspace,
            &[
                ("math.js", "module.exports = { add: (a, b) => a + b };\n"),
                (
                    "test/math.test.js",
                    "const { add } = require('../math');\ntest('adds', () => expect(add(1, 1)).toBe(2));\n",
                ),
                (
                    "test/other.test.js",
                    "test('other', () => { throw new Error('other must not run'); });\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(
            &host,
            "npm",
            json!({"scope": "related", "target": "math.js"}),
        )
        .await;
        assert_eq!(out["status"], "pass", "{out:#}");
        assert_eq!(out["tests"]["total"], 1, "{out:#}");
        assert!(related(&out).0.contains("findRelatedTests"), "{out:#}");
        // Issue 72, item 14: what ran is the test file, not the source.
        assert_eq!(related(&out).1, ["test/math.test.js"], "{out:#}");
    }
    if let Some(env) = js_runner_env("vitest run", "module") {
        write(
            &env.workspace,
            &[
                ("src/math.js", "export const add = (a, b) => a + b;\n"),
                (
                    "test/math.test.js",
                    "import { test, expect } from 'vitest';\nimport { add } from '../src/math';\ntest('adds', () => expect(add(1, 1)).toBe(2));\n",
                ),
                (
                    "test/other.test.js",
                    "import { test } from 'vitest';\ntest('other', () => { throw new Error('other must not run'); });\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(
            &host,
            "npm",
            json!({"scope": "related", "target": "src/math.js"}),
        )
        .await;
        assert_eq!(out["status"], "pass", "{out:#}");
        assert_eq!(out["tests"]["total"], 1, "{out:#}");
        assert_eq!(related(&out).1, ["test/math.test.js"], "{out:#}");
    }
}
