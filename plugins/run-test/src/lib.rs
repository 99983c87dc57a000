//! `run_test`: a test runner that always comes back (seed 002).
//!
//! The model picks a runner and a scope; the plugin builds the command from
//! a fixed template (never a command string), runs it through the host's
//! `process` capability under a hard and a no-output timeout, and writes
//! `raw.log`, `summary.md` and `summary.json` into the report directory on
//! every run. Summaries come from the last `max_output_bytes` of output
//! only; per-test results ([`results`]) from the runner's own report where
//! it writes one, else from that output.

mod answer;
mod excerpt;
mod related;
mod repeat;
mod request;
pub mod results;
mod template;

use plugin_sdk::process::{self, RunRequest, RunResult, Status, Stream};
use plugin_sdk::{Hints, McpTool, TaskSupport, ToolError, ToolOutput};
use serde_json::json;

use request::{Args, Checked};
use results::Results;
use results::junit::Dialect;
use template::{Project, Runner};

/// The `run_test` tool.
struct RunTest;

impl McpTool for RunTest {
    const NAME: &'static str = "run_test";
    // It can run for minutes: a client that takes tasks polls for it.
    const TASKS: TaskSupport = TaskSupport::Optional;
    const TITLE: Option<&'static str> = Some("Run tests");
    const VIEW: Option<&'static str> = Some("results");
    const DESCRIPTION: &'static str = "Run the repository's tests with a fixed command template and always come back: a hard timeout and a \
        no-output timeout kill the whole process tree. Writes raw.log, summary.md and summary.json to the report \
        directory and returns the status, exit code, duration, an excerpt of the failures, and how many tests passed and \
        failed with the failing tests' names, files, lines and messages.";
    const HINTS: Option<Hints> = Some(Hints {
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    });
    type Args = request::Args;

    fn output_schema() -> Option<serde_json::Value> {
        Some(output_schema())
    }

    fn call(args: request::Args) -> Result<ToolOutput, ToolError> {
        let workspace = plugin_sdk::workspace();
        let repo = std::path::Path::new(&workspace);
        if let Some(times) = args.repeat {
            return Ok(plugin_sdk::structured_output(&repeat::run(
                &args,
                times,
                repo,
                &timestamp_now(),
            )?));
        }
        let checked = request::check(&args, repo, &timestamp_now())?;
        Ok(plugin_sdk::structured_output(&run(&args, &checked).0))
    }
}

/// One run: its answer, and its whole summary (summary.json's).
fn run(args: &request::Args, checked: &Checked) -> (serde_json::Value, serde_json::Value) {
    let raw_log = checked.report_dir.join("raw.log");
    // A report left in a reused report dir must not pass for this run's.
    if let Some(file) = template::report_file(args.runner, checked.project) {
        let _ = std::fs::remove_file(checked.report_dir.join(file));
    }
    let measured = args.coverage == Some(true);
    if measured {
        let _ = std::fs::remove_file(
            checked
                .report_dir
                .join(template::coverage_file(args.runner)),
        );
    }
    let request = RunRequest::new(&checked.command.program, checked.repo.to_string_lossy())
        .args(&checked.command.args)
        .env(
            template::quiet_env()
                .into_iter()
                .chain(checked.command.env.iter().cloned())
                .collect::<Vec<_>>(),
        )
        .timeout_ms(args.timeout_ms)
        .no_output_timeout_ms(args.no_output_timeout_ms)
        .tail_bytes(args.max_output_bytes)
        .log_path(raw_log.to_string_lossy());
    let mut outcome = match process::run(&request) {
        Ok(result) => Outcome::from_run(result, args),
        Err(e) => {
            let why = ToolError::from(e).message;
            // The host wrote nothing: leave a raw.log that says why.
            let _ = std::fs::create_dir_all(&checked.report_dir);
            let _ = std::fs::write(&raw_log, format!("[host] not run: {why}\n"));
            Outcome {
                status: "error",
                exit_code: None,
                duration_ms: 0,
                text: String::new(),
                stdout: String::new(),
                stderr: String::new(),
                truncated: false,
                error: Some(why),
                ended: "not started".into(),
            }
        }
    };
    // pytest's usage error (exit 4: a bad `-k` expression, an unknown
    // option): no test ran, so it is no failing test. Its `ERROR:` line
    // says what to change.
    if args.runner == Runner::Pytest && outcome.status == "fail" && outcome.exit_code == Some(4) {
        let said = outcome
            .text
            .lines()
            .find_map(|l| l.trim().strip_prefix("ERROR: "))
            .unwrap_or("pytest refused its command line")
            .to_string();
        outcome.status = "error";
        outcome.error = Some(format!(
            "pytest did not run any test: {said} (a usage error; check `target` and the scope's pattern)"
        ));
    }
    if let Project::NodeTestRunner { names_files: true } = checked.project
        && outcome.error.is_none()
        && outcome.text.contains("is not allowed in NODE_OPTIONS")
    {
        outcome.status = "error";
        outcome.error = Some(
            "this project's test script names its files (`node --test <path>`), after which node reads \
             every word as a file: a name pattern reaches it only through NODE_OPTIONS, which Node 22 \
             and later take and this node does not. Use scope `file`, or let node find the tests itself \
             (`\"test\": \"node --test\"`), or run Node 22 or later"
                .into(),
        );
    }
    let console = match args.runner {
        Runner::Go => std::borrow::Cow::Owned(results::gotest::console(&outcome.text)),
        _ => std::borrow::Cow::Borrowed(outcome.text.as_str()),
    };
    let summary = excerpt::summarize(&console, outcome.truncated, args.runner);
    let results = results_of(args.runner, checked, &outcome);
    let coverage = measured.then(|| {
        results::coverage::read(
            args.runner,
            checked.project,
            &checked.report_dir,
            &checked.repo,
            &console,
        )
    });
    let tests = results.as_ref().map(|r| &r.counts);
    let failures = results.as_ref().map_or(&[][..], Results::shown);
    let errors = results.as_ref().map_or(&[][..], Results::errors_shown);
    // Where the runner reports each test's time; none else (cargo's console).
    let slowest = results.as_ref().map_or(&[][..], |r| r.slowest.as_slice());
    let slowest_shown = (!slowest.is_empty()).then(|| &slowest[..slowest.len().min(SLOWEST_SHOWN)]);
    let excerpt = match &outcome.error {
        Some(e) => format!("{e}\n{}", summary.excerpt()),
        None => summary.excerpt(),
    };
    let report_dir = format!("{}/", checked.report_rel.display());
    let machine = json!({
        "status": outcome.status,
        "exit_code": outcome.exit_code,
        "duration_ms": outcome.duration_ms,
        "runner": args.runner.name(),
        "scope": args.scope.name(),
        "target": args.target,
        "command": {"template": checked.command.template, "program": checked.command.program, "args": checked.command.args, "env": checked.command.env.iter().cloned().collect::<std::collections::BTreeMap<_, _>>()},
        "started_at": checked.started_at,
        "report_dir": report_dir,
        "limits": {"timeout_ms": args.timeout_ms, "no_output_timeout_ms": args.no_output_timeout_ms, "max_output_bytes": args.max_output_bytes},
        "ended": outcome.ended,
        "output_truncated_for_summary": outcome.truncated,
        "error": outcome.error,
        "tests": tests,
        "failures": failures,
        "errors": results.as_ref().map_or(&[][..], |r| r.errors.as_slice()),
        "coverage": coverage.as_ref().map(|c| coverage_json(c, usize::MAX)),
        "slowest": (!slowest.is_empty()).then_some(slowest),
        "failed_tests": results.as_ref().map(Results::failed_names).unwrap_or_default(),
        "passed_tests": results.as_ref().map_or(&[][..], |r| r.passed.as_slice()),
        "excerpt_blocks": summary.blocks,
        "last_lines": summary.last_lines,
    });
    let markdown = summary.markdown(&excerpt::Header {
        status: outcome.status,
        exit_code: outcome.exit_code,
        duration_ms: outcome.duration_ms,
        command: &checked.command.display(),
        started_at: &checked.started_at,
        error: outcome.error.as_deref(),
        ended: &outcome.ended,
        tests,
        failures,
        errors,
        slowest,
    });
    // Only what is really on disk is named; a partial file is removed.
    let mut artifacts = serde_json::Map::new();
    let mut not_written = serde_json::Map::new();
    match std::fs::symlink_metadata(&raw_log) {
        Ok(m) if m.is_file() => artifacts.insert("raw_log".into(), json!("raw.log")),
        // A named pipe (or anything else) stood there: nothing was written.
        Ok(_) => not_written.insert(
            "raw_log".into(),
            json!(
                "something other than a plain file (a named pipe?) is there: nothing was written"
            ),
        ),
        Err(e) => not_written.insert("raw_log".into(), json!(plugin_sdk::io_text(&e))),
    };
    let summaries = [
        (
            "summary_json",
            "summary.json",
            serde_json::to_string_pretty(&machine).unwrap(),
        ),
        ("summary_md", "summary.md", markdown),
    ];
    for (key, name, text) in summaries {
        let path = checked.report_dir.join(name);
        let written =
            std::fs::create_dir_all(&checked.report_dir).and_then(|_| std::fs::write(&path, text));
        match written {
            Ok(()) => artifacts.insert(key.into(), json!(name)),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                let e = plugin_sdk::io_text(&e);
                plugin_sdk::log::log(
                    plugin_sdk::log::Level::Error,
                    &format!("writing {name} failed: {e}"),
                );
                not_written.insert(key.into(), json!(format!("writing {name} failed: {e}")))
            }
        };
    }
    let mut excerpt = excerpt;
    if outcome.ended.contains("before timeout_ms") {
        excerpt = format!("[{}]\n{excerpt}", outcome.ended);
    }
    if !not_written.is_empty() {
        let missing: Vec<String> = not_written
            .iter()
            .map(|(k, why)| format!("{k}: {}", why.as_str().unwrap_or_default()))
            .collect();
        excerpt = format!("[not written] {}\n{excerpt}", missing.join("; "));
        artifacts.insert("not_written".into(), serde_json::Value::Object(not_written));
    }
    let mut answer = json!({
        "status": outcome.status,
        "exit_code": outcome.exit_code,
        "duration_ms": outcome.duration_ms,
        "report_dir": report_dir,
        "artifacts": artifacts,
        "excerpt": excerpt,
        "tests": tests,
        "failures": failures,
        "slowest": slowest_shown,
    });
    // A test the host's confinement refused says which key grants it.
    if let Some(hint) = plugin_sdk::refused::refusal_hint("run_test", &console) {
        answer["refused"] = json!(hint);
    }
    // Only when a file or package did not load or build.
    if !errors.is_empty() {
        answer["errors"] = json!(errors);
    }
    if let Some(coverage) = &coverage {
        answer["coverage"] = coverage_json(coverage, COVERAGE_FILES_SHOWN);
    }
    if let Some((how, tests)) = &checked.related {
        // What ran, where the report names the test files (jest is given
        // the source file and finds the tests itself).
        let ran = results.as_ref().map_or(&[][..], |r| r.files.as_slice());
        let run = if ran.is_empty() {
            tests.as_slice()
        } else {
            ran
        };
        answer["related"] = json!({"how": how, "run": run});
    }
    (answer::fit(answer), machine)
}

/// The files whose coverage the answer shows (the least covered).
const COVERAGE_FILES_SHOWN: usize = 20;

/// Coverage for the answer or summary.json: the files (least covered
/// first, at most `max`), the lines in all, or why there is none.
fn coverage_json(
    coverage: &Result<Vec<results::coverage::FileCoverage>, String>,
    max: usize,
) -> serde_json::Value {
    match coverage {
        Err(why) => json!({"unavailable": why}),
        Ok(files) => {
            let (covered, lines) = files.iter().fold((0u64, 0u64), |(c, l), f| {
                (c + u64::from(f.covered), l + u64::from(f.lines))
            });
            let mut value = json!({
                "percent": (covered as f64 * 1000.0 / lines.max(1) as f64).round() / 10.0,
                "lines": lines,
                "covered": covered,
                "files": files.iter().take(max).collect::<Vec<_>>(),
            });
            if files.len() > max {
                value["files_omitted"] = json!(files.len() - max);
            }
            value
        }
    }
}

/// The slowest tests the answer shows (summary.json and summary.md keep
/// ten).
const SLOWEST_SHOWN: usize = 5;

/// The per-test results: from the report the run wrote, else from its
/// output (a run cut off may write none); `None` where neither says (npm
/// other than jest, vitest or node's runner).
fn results_of(runner: Runner, checked: &Checked, outcome: &Outcome) -> Option<Results> {
    let (stdout, stderr) = (outcome.stdout.as_str(), outcome.stderr.as_str());
    let repo = checked.repo.to_string_lossy();
    let report = |file: &str| -> Option<String> {
        let path = checked.report_dir.join(file);
        let size = std::fs::metadata(&path).ok()?.len();
        if size > results::MAX_REPORT_BYTES {
            plugin_sdk::log::log(
                plugin_sdk::log::Level::Warn,
                &format!(
                    "{file} is {size} bytes, over {}: not read",
                    results::MAX_REPORT_BYTES
                ),
            );
            return None;
        }
        std::fs::read_to_string(&path).ok()
    };
    let parsed =
        |file: &str, read: &dyn Fn(&str) -> Result<Results, String>| match read(&report(file)?) {
            Ok(results) => Some(results),
            Err(e) => {
                plugin_sdk::log::log(
                    plugin_sdk::log::Level::Warn,
                    &format!("{file} cannot be read ({e}): the output is read instead"),
                );
                None
            }
        };
    let junit = |dialect| {
        parsed("junit.xml", &|xml| {
            results::junit::read(xml, dialect, &repo)
        })
    };
    match (runner, checked.project) {
        (Runner::Pytest, _) => {
            junit(Dialect::Pytest).or_else(|| Some(results::console::pytest(stdout)))
        }
        (Runner::Npm, Project::NodeTestRunner { .. }) => {
            junit(Dialect::Node).or_else(|| Some(results::console::node(stdout)))
        }
        (Runner::Npm, Project::Jest) => {
            parsed("results.json", &|json| results::jest::read(json, &repo))
                .or_else(|| Some(results::console::jest(stderr)))
        }
        (Runner::Npm, Project::Vitest) => {
            parsed("results.json", &|json| results::jest::read(json, &repo))
                .or_else(|| Some(results::console::vitest(stdout)))
        }
        (Runner::Npm, Project::Plain) => None,
        (Runner::Dart | Runner::Flutter, _) => {
            report("results.jsonl").map(|events| results::dart::read(&events, &repo))
        }
        (Runner::Go, _) => {
            let module = std::fs::read_to_string(checked.repo.join("go.mod"))
                .ok()
                .and_then(|text| results::gotest::module(&text));
            report("raw.log").map(|log| results::gotest::read(&log, module.as_deref(), &repo))
        }
        (Runner::Cargo, _) => Some(results::console::libtest(stdout)),
    }
}

struct Outcome {
    status: &'static str,
    exit_code: Option<i32>,
    duration_ms: u64,
    /// The tail of the output, both streams in arrival order.
    text: String,
    /// The same tail's stdout alone, where the runners write their verdicts:
    /// a line of stderr (cargo's `Doc-tests …`) can land in the middle of
    /// one of them in `text` (`test adds ...    Doc-tests sample` + `ok`).
    stdout: String,
    /// And its stderr alone, where jest writes its console.
    stderr: String,
    truncated: bool,
    error: Option<String>,
    /// Why it ended, in words (summary.md, summary.json).
    ended: String,
}

impl Outcome {
    fn from_run(r: RunResult, args: &Args) -> Outcome {
        let status = match r.status {
            Status::Exited if r.exit_code == Some(0) => "pass",
            Status::Exited => "fail",
            Status::Timeout => "timeout",
            Status::NoOutput => "no_output",
            Status::SpawnFailed | Status::Cancelled => "error",
        };
        let error = match r.status {
            Status::Cancelled => Some("the run was cancelled".to_string()),
            _ => r.error,
        };
        let only = |stream: Stream| -> String {
            r.tail
                .iter()
                .filter(|c| c.stream == stream)
                .map(|c| c.text.as_str())
                .collect()
        };
        let (stdout, stderr) = (only(Stream::Stdout), only(Stream::Stderr));
        let ended = match (r.status, r.exit_code, r.signal) {
            // The host ends a run before the call's own deadline, which
            // can come before timeout_ms (the policy's limits.timeout_ms).
            (Status::Timeout, ..) if r.duration_ms + 1000 < args.timeout_ms => format!(
                "killed at {} ms, before timeout_ms ({} ms): the call's deadline (limits.timeout_ms \
                 under [plugins.run_test]) is shorter; ask for less, or raise it",
                r.duration_ms, args.timeout_ms
            ),
            (Status::Timeout, ..) => format!(
                "killed: still running when timeout_ms ({} ms) passed",
                args.timeout_ms
            ),
            (Status::NoOutput, ..) => format!(
                "killed: no output for no_output_timeout_ms ({} ms)",
                args.no_output_timeout_ms
            ),
            (Status::Cancelled, ..) => "killed: the call was cancelled".to_string(),
            (Status::SpawnFailed, ..) => "not started".to_string(),
            (_, Some(code), _) => format!("exited with code {code}"),
            (_, None, Some(signal)) => format!("killed by {}", signal_name(signal)),
            (_, None, None) => "ended without an exit code".to_string(),
        };
        Outcome {
            status,
            exit_code: r.exit_code,
            duration_ms: r.duration_ms,
            text: r.tail.into_iter().map(|c| c.text).collect(),
            stdout,
            stderr,
            truncated: r.truncated,
            error,
            ended,
        }
    }
}

/// A signal's name and number: `SIGKILL (signal 9)`.
fn signal_name(signal: i32) -> String {
    match plugin_sdk::signal_name(signal) {
        Some(name) => format!("{name} (signal {signal})"),
        None => format!("signal {signal}"),
    }
}

fn output_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"enum": ["pass", "fail", "timeout", "no_output", "error"]},
            "exit_code": {"type": ["integer", "null"]},
            "duration_ms": {"type": "integer"},
            "report_dir": {"type": "string"},
            "artifacts": {
                "type": "object",
                "description": "The files written in report_dir; any that could not be written are in not_written with the reason.",
                "properties": {"raw_log": {"type": "string"}, "summary_md": {"type": "string"}, "summary_json": {"type": "string"},
                               "not_written": {"type": "object", "additionalProperties": {"type": "string"}}}
            },
            "excerpt": {"type": "string"},
            "tests": {
                "description": "How many tests passed, failed and were skipped; null for runners read only as text.",
                "type": ["object", "null"],
                "properties": {"passed": {"type": "integer"}, "failed": {"type": "integer"},
                               "skipped": {"type": "integer"}, "total": {"type": "integer"}}
            },
            "failures": {
                "description": "The failing tests (at most 20, fewer when the answer would pass 16 KB: see failures_omitted): name as the runner reruns it, file and line where the runner says, the message and an excerpt (shortened when the answer would pass 16 KB; whole in summary.json).",
                "type": "array",
                "items": {"type": "object", "properties": {
                    "name": {"type": "string"}, "file": {"type": "string"}, "line": {"type": "integer"},
                    "message": {"type": "string"}, "excerpt": {"type": "string"}},
                    "required": ["name", "message", "excerpt"]}
            },
            "errors": {
                "type": "array",
                "description": "Present when test files or packages did not load or build (a syntax error, a missing import, a compile error): each named by its file or package, with where and why. None of their tests ran, so they are not in `failures` or tests.total; tests.errors counts them.",
                "items": {"type": "object"}
            },
            "coverage": {
                "type": "object",
                "description": "With coverage: true. percent, lines and covered over the files the run touched, and per file (least covered first, at most 20; summary.json has all) its lines, covered, percent and the uncovered line ranges; or unavailable: why this runner gives none.",
            },
            "slowest": {
                "type": ["array", "null"],
                "description": "The five slowest tests, slowest first, with their seconds as the runner reported them (pytest, node, jest, vitest, go, dart, flutter); null where the runner reports no per-test time (cargo). summary.md and summary.json keep ten.",
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "seconds": {"type": "number"}}, "required": ["name", "seconds"]}
            },
            "refused": {"type": "string", "description": "Present when a test or tool was refused a file by the host's confinement of the plugin's programs (Permission denied): what, and the policy key that would grant it."},
            "failures_omitted": {"type": "integer", "description": "Failures left out of this answer to keep it within 16 KB; summary.json in report_dir details them."}
        },
        "required": ["status", "exit_code", "duration_ms", "report_dir", "artifacts", "excerpt"]
    })
}

/// `YYYYMMDD_HHMMSS` in UTC, for default report directories.
fn timestamp_now() -> String {
    request::format_timestamp(plugin_sdk::now_secs())
}

plugin_sdk::export! { tools: [RunTest] }
plugin_sdk::view!("results", "Test results", "views/results.html");
