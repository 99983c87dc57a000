//! The flaky check (issue 58, item 1): `repeat: N` runs a selection N
//! times in fresh processes and says per test whether it is flaky, on a
//! real pytest project whose coin test fails by a coin seeded with the
//! run's number (odd runs fail), beside a test that always fails and one
//! that always passes.

use serde_json::{Value, json};

use crate::harness::*;
use crate::run_test::{env, run, write};

fn test_named<'a>(out: &'a Value, name: &str) -> &'a Value {
    out["repeat"]["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no {name}: {out:#}"))
}

#[tokio::test]
async fn repeat_tells_a_flaky_test_from_a_broken_one() {
    if !require_program("pytest", "pip install pytest (.ci/run does)") {
        return;
    }
    let env = env();
    write(
        &env.workspace,
        &[(
            "test_coin.py",
            "import pathlib, random\n\n\
             def test_coin():\n    \
                 counter = pathlib.Path('.coin')\n    \
                 n = int(counter.read_text()) + 1 if counter.exists() else 1\n    \
                 counter.write_text(str(n))\n    \
                 coin = random.Random(n).random()  # the run's own coin\n    \
                 assert n % 2 == 0, f'coin {coin:.2f} came up tails on run {n}'\n\n\
             def test_broken():\n    assert 1 == 2, 'always'\n\n\
             def test_fine():\n    pass\n",
        )],
    );
    let host = env.start().await;
    let out = run(
        &host,
        "pytest",
        json!({"scope": "file", "target": "test_coin.py", "repeat": 4}),
    )
    .await;
    assert_eq!(out["status"], "fail", "{out:#}");
    let repeat = &out["repeat"];
    assert_eq!(
        (repeat["asked"].as_u64(), repeat["ran"].as_u64()),
        (Some(4), Some(4)),
        "{out:#}"
    );
    assert_eq!(repeat["verdict"], "flaky", "{out:#}");
    let coin = test_named(&out, "test_coin.py::test_coin");
    assert_eq!(coin["pattern"], "FPFP", "{coin}");
    assert_eq!(
        (coin["passed"].as_u64(), coin["failed"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(coin["failure_rate"], 0.5);
    assert_eq!(coin["verdict"], "flaky");
    let said = coin["messages"].to_string();
    assert!(
        said.contains("tails on run 1") && said.contains("tails on run 3"),
        "{said}"
    );
    let broken = test_named(&out, "test_coin.py::test_broken");
    assert_eq!(
        (&broken["pattern"], &broken["verdict"]),
        (&json!("FFFF"), &json!("stable_fail"))
    );
    // Flaky first; a test that passed every run is stable_pass (issue
    // 72: it was not listed, though the verdicts are three).
    assert_eq!(repeat["tests"][0]["verdict"], "flaky", "{out:#}");
    let fine = test_named(&out, "test_coin.py::test_fine");
    assert_eq!(
        (&fine["pattern"], &fine["verdict"]),
        (&json!("PPPP"), &json!("stable_pass"))
    );
    // The answer names a log that is there: the shown run's.
    let log = out["artifacts"]["raw_log"].as_str().unwrap();
    let dir = env.workspace.join(out["report_dir"].as_str().unwrap());
    assert!(dir.join(log).is_file(), "{out:#}");
    assert_eq!(out["artifacts"]["raw_logs"].as_array().unwrap().len(), 4);
    // Every run kept its reports; the check's own summary beside them.
    let dir = env.workspace.join(out["report_dir"].as_str().unwrap());
    for i in 1..=4 {
        for file in ["raw.log", "summary.json", "summary.md"] {
            assert!(
                dir.join(format!("run-{i:02}")).join(file).is_file(),
                "run {i} {file}"
            );
        }
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("# Flaky check: flaky") && md.contains("`FPFP`"),
        "{md}"
    );

    // Every run timing out is a timeout, not a failure (issue 72).
    write(
        &env.workspace,
        &[(
            "test_slow.py",
            "import time

def test_slow():
    time.sleep(30)
",
        )],
    );
    let out = run(
        &host,
        "pytest",
        json!({"scope": "file", "target": "test_slow.py", "repeat": 2, "timeout_ms": 3000}),
    )
    .await;
    assert_eq!(out["status"], "timeout", "{out:#}");
    assert_eq!(out["repeat"]["runs"], "TT", "{out:#}");
    assert_ne!(out["repeat"]["verdict"], "stable_pass", "{out:#}");

    // Issue 72, item 14: a file that does not load is in `errors`, as
    // `tests.errors` counts it (the flaky check's answer left it out).
    write(
        &env.workspace,
        &[("test_unloadable.py", "def test_x(:\n    pass\n")],
    );
    let out = run(
        &host,
        "pytest",
        json!({"scope": "file", "target": "test_unloadable.py", "repeat": 2}),
    )
    .await;
    assert_eq!(out["tests"]["errors"], 1, "{out:#}");
    assert_eq!(out["errors"][0]["name"], "test_unloadable.py", "{out:#}");

    // The whole suite again and again is not a flaky check.
    let refused = host
        .call(
            "run_test",
            run_test_args("pytest", json!({"scope": "all", "repeat": 3})),
        )
        .await;
    assert!(is_error(&refused), "{refused:?}");
    assert!(format!("{refused:?}").contains("scope `file`, `pattern` or `failed`"));
}
