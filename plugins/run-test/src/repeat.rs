//! The flaky check (`repeat: N`): the same selection run N times, each in
//! fresh processes under the same timeouts, its reports in `run-NN/` of the
//! report dir; then, per test that failed at least once, its pattern (`P`
//! passed, `F` failed, or the run's own end where the run said nothing of
//! it: `T` timeout, `N` no output, `E` error), counts, failure rate and a
//! verdict. A test that failed in no run passed in every run that ended.

use std::collections::BTreeMap;
use std::path::Path;

use plugin_sdk::ToolError;
use serde_json::{Value, json};

use crate::request::{self, Args};
use crate::template::Scope;

/// The most tests the answer details (flaky first); summary.json has all.
const MAX_TESTS_SHOWN: usize = 20;
/// The most distinct failure messages kept per test, each at most this
/// long (20 tests of 3 stay within the answer's 16 KB).
const MAX_MESSAGES: usize = 3;
const MAX_MESSAGE_CHARS: usize = 200;

pub fn run(args: &Args, times: u32, repo: &Path, timestamp: &str) -> Result<Value, ToolError> {
    if args.scope == Scope::All {
        return Err(ToolError::new(
            plugin_sdk::codes::INVALID_REQUEST,
            "repeat runs a selection again and again: give scope `file`, `pattern` or `failed` with it, not `all`",
        ));
    }
    let selection = request::select(args, repo)?;
    let base = request::report_rel(args, repo, timestamp)?;
    let started = std::time::Instant::now();
    let call_budget = plugin_sdk::call_timeout_ms();
    let mut runs: Vec<(Value, Value)> = Vec::new();
    let mut stopped = None;
    for i in 1..=times {
        // A run may take its whole timeout: start one only if the call's
        // own deadline leaves it that much.
        if let Some(budget) = call_budget {
            let spent = started.elapsed().as_millis() as u64;
            if spent + args.timeout_ms > budget {
                stopped = Some(format!(
                    "ran {} of {times}: the call's own time limit ({budget} ms) leaves no room for another run of up to timeout_ms ({} ms)",
                    i - 1,
                    args.timeout_ms
                ));
                break;
            }
        }
        let rel = base.join(format!("run-{i:02}"));
        let checked = request::checked(args, repo, timestamp, &selection, rel)?;
        runs.push(crate::run(args, &checked));
    }
    let summary = aggregate(&runs, times, stopped);
    let report_dir = repo.join(&base);
    let written = std::fs::create_dir_all(&report_dir)
        .and_then(|()| {
            std::fs::write(
                report_dir.join("summary.json"),
                serde_json::to_string_pretty(&summary).unwrap(),
            )
        })
        .and_then(|()| std::fs::write(report_dir.join("summary.md"), markdown(&summary)));
    Ok(answer(&runs, summary, &base, written.err()))
}

/// One character for how a run ended.
fn run_char(status: &str) -> char {
    match status {
        "pass" => 'P',
        "fail" => 'F',
        "timeout" => 'T',
        "no_output" => 'N',
        _ => 'E',
    }
}

/// Per test that failed at least once: its pattern, counts, rate, verdict
/// and messages; the overall verdict.
fn aggregate(runs: &[(Value, Value)], asked: u32, stopped: Option<String>) -> Value {
    let ended: Vec<char> = runs
        .iter()
        .map(|(_, m)| run_char(m["status"].as_str().unwrap_or_default()))
        .collect();
    let mut messages: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, machine) in runs {
        let named = ["failed_tests", "passed_tests"]
            .into_iter()
            .flat_map(|key| machine[key].as_array().into_iter().flatten());
        for name in named {
            messages
                .entry(name.as_str().unwrap_or_default().to_string())
                .or_default();
        }
        for failure in machine["failures"].as_array().into_iter().flatten() {
            let name = failure["name"].as_str().unwrap_or_default();
            let first = failure["message"]
                .as_str()
                .unwrap_or_default()
                .lines()
                .next();
            let said = messages.entry(name.to_string()).or_default();
            if let Some(first) = first.filter(|m| !m.is_empty()) {
                let first = plugin_sdk::text::cut(first, MAX_MESSAGE_CHARS, "…");
                if said.len() < MAX_MESSAGES && !said.contains(&first) {
                    said.push(first);
                }
            }
        }
    }
    let mut tests: Vec<Value> = messages
        .into_iter()
        .map(|(name, said)| {
            let pattern: String = runs
                .iter()
                .zip(&ended)
                .map(|((_, machine), &end)| {
                    let failed = machine["failed_tests"]
                        .as_array()
                        .is_some_and(|names| names.iter().any(|n| n == name.as_str()));
                    match (failed, end) {
                        (true, _) => 'F',
                        (false, 'P' | 'F') => 'P',
                        (false, other) => other,
                    }
                })
                .collect();
            let passed = pattern.matches('P').count();
            let failed = pattern.matches('F').count();
            let verdict = match (passed, failed) {
                // No run that ended said anything of it.
                (0, 0) => "inconclusive",
                (_, 0) => "stable_pass",
                (0, _) => "stable_fail",
                _ => "flaky",
            };
            json!({
                "name": name,
                "pattern": pattern,
                "passed": passed,
                "failed": failed,
                "failure_rate": failed as f64 / (passed + failed).max(1) as f64,
                "verdict": verdict,
                "messages": said,
            })
        })
        .collect();
    // Flaky first, then the stable failures, the undecided, the stable
    // passes; by name within each.
    let rank = |t: &Value| match t["verdict"].as_str() {
        Some("flaky") => 0,
        Some("stable_fail") => 1,
        Some("inconclusive") => 2,
        _ => 3,
    };
    tests.sort_by_key(rank);
    let verdict = if tests.iter().any(|t| t["verdict"] == "flaky") {
        "flaky"
    } else if tests.iter().any(|t| t["verdict"] == "stable_fail") {
        "stable_fail"
    } else if ended.iter().all(|&c| c == 'P') && !ended.is_empty() {
        "stable_pass"
    } else {
        "inconclusive"
    };
    json!({
        "asked": asked,
        "ran": runs.len(),
        "runs": ended.iter().collect::<String>(),
        "verdict": verdict,
        "stopped": stopped,
        "tests": tests,
        "each_run": runs.iter().enumerate().map(|(i, (_, m))| json!({
            "run": i + 1,
            "status": m["status"],
            "duration_ms": m["duration_ms"],
            "tests": m["tests"],
            "report_dir": m["report_dir"],
        })).collect::<Vec<_>>(),
    })
}

fn markdown(summary: &Value) -> String {
    let mut md = format!(
        "# Flaky check: {}\n\n- runs: {} of {} asked (`{}`)\n",
        summary["verdict"].as_str().unwrap_or_default(),
        summary["ran"],
        summary["asked"],
        summary["runs"].as_str().unwrap_or_default()
    );
    if let Some(why) = summary["stopped"].as_str() {
        md.push_str(&format!("- stopped: {why}\n"));
    }
    md.push_str("\n| test | pattern | failed | verdict |\n|---|---|---|---|\n");
    for t in summary["tests"].as_array().into_iter().flatten() {
        md.push_str(&format!(
            "| `{}` | `{}` | {} of {} | {} |\n",
            t["name"].as_str().unwrap_or_default(),
            t["pattern"].as_str().unwrap_or_default(),
            t["failed"],
            t["pattern"].as_str().map_or(0, str::len),
            t["verdict"].as_str().unwrap_or_default()
        ));
    }
    md.push_str("\nEach run's raw.log, summary.md and summary.json are in run-NN/.\n");
    md
}

/// The seed's keys for the whole check (the first run that did not pass
/// gives the excerpt, failures and counts), and `repeat`.
fn answer(
    runs: &[(Value, Value)],
    mut summary: Value,
    base: &Path,
    not_written: Option<std::io::Error>,
) -> Value {
    let shown = runs
        .iter()
        .position(|(a, _)| a["status"] != "pass")
        .unwrap_or(runs.len().saturating_sub(1));
    let (first, _) = runs.get(shown).cloned().unwrap_or_default();
    // fail when a run failed; pass when every run passed; else how the
    // first run that did neither ended (every run timed out: timeout).
    let status = if runs.is_empty() {
        "error"
    } else if runs.iter().any(|(a, _)| a["status"] == "fail") {
        "fail"
    } else if runs.iter().all(|(a, _)| a["status"] == "pass") {
        "pass"
    } else {
        runs.iter()
            .map(|(a, _)| a["status"].as_str().unwrap_or("error"))
            .find(|s| *s != "pass")
            .unwrap_or("error")
    };
    let tests = summary["tests"]
        .as_array_mut()
        .map(std::mem::take)
        .unwrap_or_default();
    let omitted = tests.len().saturating_sub(MAX_TESTS_SHOWN);
    summary["tests"] = json!(tests.into_iter().take(MAX_TESTS_SHOWN).collect::<Vec<_>>());
    if omitted > 0 {
        summary["tests_omitted"] = json!(omitted);
    }
    if let Some(map) = summary.as_object_mut() {
        map.remove("each_run");
    }
    // Each run's log is in its own folder; raw_log names the one whose
    // excerpt is shown.
    let log_of = |(a, _): &(Value, Value)| -> Option<String> {
        a["artifacts"]["raw_log"].as_str()?;
        let dir = a["report_dir"].as_str()?;
        let run = Path::new(dir.trim_end_matches('/')).file_name()?;
        Some(format!("{}/raw.log", run.to_string_lossy()))
    };
    let logs: Vec<String> = runs.iter().filter_map(log_of).collect();
    let shown_log = runs.get(shown).and_then(log_of);
    let mut artifacts = json!({"summary_json": "summary.json", "summary_md": "summary.md",
                               "raw_log": shown_log, "raw_logs": logs});
    if let Some(e) = not_written {
        artifacts = json!({"not_written": plugin_sdk::io_text(&e)});
    }
    let excerpt = match runs.is_empty() {
        true => "no run started: see repeat.stopped".to_string(),
        false => format!(
            "[run {} of {}]\n{}",
            shown + 1,
            runs.len(),
            first["excerpt"].as_str().unwrap_or_default()
        ),
    };
    let duration: u64 = runs
        .iter()
        .filter_map(|(a, _)| a["duration_ms"].as_u64())
        .sum();
    let mut answer = json!({
        "status": status,
        "exit_code": first["exit_code"],
        "duration_ms": duration,
        "report_dir": format!("{}/", base.display()),
        "artifacts": artifacts,
        "excerpt": excerpt,
        "tests": first["tests"],
        "failures": first["failures"],
        "repeat": summary,
    });
    // The shown run's other keys, where it has them: its files that did
    // not load (`tests.errors` counted them, `errors` was missing), its
    // slowest tests, what the confinement refused.
    for key in ["errors", "slowest", "refused", "coverage"] {
        if !first[key].is_null() {
            answer[key] = first[key].clone();
        }
    }
    crate::answer::fit(answer)
}
