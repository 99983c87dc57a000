//! Expected and actual kept apart (issue 58, item 4) where the runner says
//! them: pytest's assertion rewriting and go's testify-style output (jest
//! and vitest are checked in run_test.rs).

use serde_json::{Value, json};

use crate::harness::*;
use crate::run_test::{env, run, write};

fn sides(out: &Value, name: &str) -> (Value, Value) {
    let failure = out["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no {name}: {out:#}"));
    (failure["expected"].clone(), failure["actual"].clone())
}

#[tokio::test]
async fn pytest_and_go_failures_say_what_was_expected_and_what_came() {
    if require_program("pytest", "pip install pytest (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[(
                "test_add.py",
                "def add(a, b):\n    return a + b\n\n\
                 def test_add():\n    assert add(1, 1) == 3\n\n\
                 def test_boom():\n    raise RuntimeError('no sides here')\n",
            )],
        );
        let host = env.start().await;
        let out = run(&host, "pytest", json!({"scope": "all"})).await;
        assert_eq!(
            sides(&out, "test_add.py::test_add"),
            (json!("3"), json!("2")),
            "{out:#}"
        );
        // A failure that names no two sides has neither.
        assert_eq!(
            sides(&out, "test_add.py::test_boom"),
            (Value::Null, Value::Null)
        );
    }
    if require_program("go", "apt-get install golang-go (.ci/run does)") {
        let env = env();
        write(
            &env.workspace,
            &[
                ("go.mod", "module example.com/eq\n\ngo 1.19\n"),
                (
                    "eq_test.go",
                    "package eq\n\nimport \"testing\"\n\n\
                     // As testify's assert.Equal prints it.\n\
                     func TestEqual(t *testing.T) {\n\
                     \tt.Errorf(\"\\n\\tError:      Not equal: \\n\\t            expected: %d\\n\\t            actual  : %d\", 3, 1)\n}\n",
                ),
            ],
        );
        let host = env.start().await;
        let out = run(&host, "go", json!({"scope": "all"})).await;
        assert_eq!(
            sides(&out, "TestEqual"),
            (json!("3"), json!("1")),
            "{out:#}"
        );
    }
}
