//! The `run_test` arguments: schema, validation of `target` and
//! `report_dir`, and the command they resolve to.

use std::path::{Component, Path, PathBuf};

use plugin_sdk::ToolError;
use plugin_sdk::codes;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::template::{self, Command, Project, Runner, Scope};

/// Upper bound for `max_output_bytes`: the summary buffer lives in memory.
pub const MAX_OUTPUT_BYTES: u64 = 16 * 1024 * 1024;
const DEFAULT_REPORTS: &str = ".cache/mcp-test-timebox/reports";

/// The arguments of `run_test`; the tool's input schema is derived from
/// this type.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "if" = {"properties": {"scope": {"enum": ["file", "pattern"]}}},
    "then" = {"required": ["target"]}
))]
pub struct Args {
    /// Which test runner's fixed command template to use.
    pub runner: Runner,
    /// all: the whole suite; file: one test file; pattern: tests whose name matches; failed: the tests that failed in the last run of this runner here (every runner; npm when its test script is jest, vitest or node --test); related: the tests that exercise the source file `target` (jest --findRelatedTests, vitest and pytest the test files that import it, go its package, cargo its crate).
    pub scope: Scope,
    /// Required when scope is file, pattern or related (related: a source file). scope=file: a test file path relative to the repository (cargo: tests/<name>.rs; go: a file of the package to test). scope=pattern: a test name pattern.
    #[schemars(length(min = 1, max = 512))]
    pub target: Option<String>,
    /// Hard timeout: the process tree is killed after this many milliseconds.
    #[schemars(range(min = 1))]
    pub timeout_ms: u64,
    /// Kill the process tree after this long without any output.
    #[schemars(range(min = 1))]
    pub no_output_timeout_ms: u64,
    /// How much of the end of the output the summary is built from.
    #[schemars(range(min = 1, max = MAX_OUTPUT_BYTES))]
    pub max_output_bytes: u64,
    /// Relative directory inside the repository for raw.log, summary.md and summary.json. Default .cache/mcp-test-timebox/reports/<timestamp>/.
    #[schemars(length(min = 1))]
    pub report_dir: Option<String>,
    /// Flaky check: run the selection this many times (2-50), each in fresh processes under the same timeouts, and answer per test its pattern (P/F per run), failure rate and verdict (stable_pass, stable_fail, flaky). Needs scope file, pattern or failed. Each run's reports stay in run-NN/ of report_dir.
    #[schemars(range(min = 2, max = 50))]
    pub repeat: Option<u32>,
    /// Line coverage: per file the lines covered and the uncovered ranges of the files the run touched (pytest with pytest-cov, go, jest and vitest with their v8 provider, flutter). A runner without it says so under `coverage.unavailable`.
    pub coverage: Option<bool>,
}

/// A request that passed every check.
pub struct Checked {
    pub repo: PathBuf,
    pub project: Project,
    pub command: Command,
    /// Absolute report directory.
    pub report_dir: PathBuf,
    /// The same, relative to the repository.
    pub report_rel: PathBuf,
    pub started_at: String,
    /// For `related`: how its tests were found, and what runs.
    pub related: Option<(String, Vec<String>)>,
}

fn invalid(message: String) -> ToolError {
    ToolError::new(codes::INVALID_REQUEST, message)
}

pub fn check(args: &Args, repo: &Path, timestamp: &str) -> Result<Checked, ToolError> {
    let selection = select(args, repo)?;
    let report_rel = report_rel(args, repo, timestamp)?;
    checked(args, repo, timestamp, &selection, report_rel)
}

/// What a run tests: the project's kind and the targets the scope
/// resolves to (for `failed`, read once from the last run's summary).
pub struct Selection {
    project: Project,
    targets: Vec<String>,
    /// For `related`: how its tests were found.
    related: Option<String>,
}

pub fn select(args: &Args, repo: &Path) -> Result<Selection, ToolError> {
    let project = project(args.runner, repo);
    let targets = match (args.scope, args.target.as_deref()) {
        (Scope::All, _) => Vec::new(),
        (Scope::Related, Some(t)) => {
            let file = source_file(t, repo)?;
            let found =
                crate::related::resolve(args.runner, project, repo, &file).map_err(invalid)?;
            return Ok(Selection {
                project,
                targets: found.targets,
                related: Some(found.how),
            });
        }
        (Scope::File, Some(t)) => vec![file_target(args.runner, t, repo)?],
        (Scope::Pattern, Some(t)) => vec![pattern_target(t)?],
        (Scope::Failed, None) => failed_targets(args.runner, project, repo)?,
        (Scope::Failed, Some(_)) => {
            return Err(invalid(
                "scope `failed` takes no `target`: it reruns the tests that failed in the last run of this runner"
                    .into(),
            ));
        }
        (_, None) => {
            return Err(invalid(format!(
                "scope `{}` needs a `target`",
                args.scope.name()
            )));
        }
    };
    Ok(Selection {
        project,
        targets,
        related: None,
    })
}

/// The report directory `args` asks for (checked), else a fresh one.
pub fn report_rel(args: &Args, repo: &Path, timestamp: &str) -> Result<PathBuf, ToolError> {
    match &args.report_dir {
        Some(dir) => inside_repo(dir).map_err(|why| {
            invalid(format!("report_dir `{dir}` {why}: give a relative path inside the repository, e.g. \"{DEFAULT_REPORTS}/mine\""))
        }),
        None => Ok(fresh_report_dir(repo, timestamp)),
    }
}

/// The command for `selection`, writing its reports into `report_rel`.
pub fn checked(
    args: &Args,
    repo: &Path,
    timestamp: &str,
    selection: &Selection,
    report_rel: PathBuf,
) -> Result<Checked, ToolError> {
    let report = report_rel.to_string_lossy().into_owned();
    let project = selection.project;
    let command = template::command(
        args.runner,
        args.scope,
        project,
        &selection.targets,
        &report,
        args.coverage == Some(true),
    )
    .ok_or_else(|| no_failed_scope(args.runner))?;
    Ok(Checked {
        repo: repo.to_path_buf(),
        project,
        command,
        report_dir: repo.join(&report_rel),
        report_rel,
        started_at: timestamp.to_string(),
        related: selection
            .related
            .clone()
            .map(|how| (how, selection.targets.clone())),
    })
}

/// A source file for `related`: relative, inside the repository, a file.
fn source_file(target: &str, repo: &Path) -> Result<PathBuf, ToolError> {
    no_option_or_control(target)?;
    let rel = inside_repo(target).map_err(|why| {
        invalid(format!(
            "target `{target}` {why}: give a source file path relative to the repository"
        ))
    })?;
    if !repo.join(&rel).is_file() {
        return Err(invalid(format!(
            "target `{target}` is not a file in the repository"
        )));
    }
    Ok(rel)
}

/// The tests that failed in the last run of `runner` here (its newest
/// `summary.json` under the default reports), as the runner's filter takes
/// them. The names come from what the test project's run reported: one
/// that could be read as an option is left out.
fn failed_targets(runner: Runner, project: Project, repo: &Path) -> Result<Vec<String>, ToolError> {
    if template::command(runner, Scope::Failed, project, &[], "", false).is_none() {
        return Err(no_failed_scope(runner));
    }
    let root = repo.join(DEFAULT_REPORTS);
    // The run of this runner that finished last: its summary.json, written
    // when a run ends, is the newest (runs in parallel end in any order).
    let last = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let dir = e.file_name().to_string_lossy().into_owned();
            let file = root.join(&dir).join("summary.json");
            let written = std::fs::metadata(&file).and_then(|m| m.modified()).ok()?;
            let summary: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&file).ok()?).ok()?;
            (summary["runner"] == runner.name()).then_some((written, dir, summary))
        })
        .max_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)))
        .map(|(_, dir, summary)| (dir, summary));
    let Some((dir, summary)) = last else {
        return Err(invalid(format!(
            "there is no earlier {} run in {DEFAULT_REPORTS}: run scope `all` first",
            runner.name()
        )));
    };
    let names: Vec<String> = summary["failed_tests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str())
        .filter(|n| !n.is_empty() && !n.starts_with('-') && !n.chars().any(char::is_control))
        .map(str::to_string)
        .collect();
    if names.is_empty() {
        return Err(invalid(format!(
            "the last {} run ({DEFAULT_REPORTS}/{dir}) had no failing test to run again",
            runner.name()
        )));
    }
    // pytest and cargo take the names themselves; the others one pattern
    // naming exactly those tests (go: the top-level tests, as -run matches
    // subtests level by level; a package that failed is not a test name).
    let names: Vec<String> = match runner {
        Runner::Pytest | Runner::Cargo => return Ok(names),
        Runner::Go => {
            let mut top: Vec<String> = names
                .iter()
                .map(|n| n.split('/').next().unwrap_or_default().to_string())
                .filter(|n| {
                    ["Test", "Example", "Fuzz"].iter().any(|p| n.starts_with(p))
                        && n.chars().all(|c| c.is_alphanumeric() || c == '_')
                })
                .collect();
            top.sort();
            top.dedup();
            top
        }
        _ => names,
    };
    if names.is_empty() {
        return Err(invalid(format!(
            "the last {} run ({DEFAULT_REPORTS}/{dir}) failed outside any test (a build failure, a file that did not load): run scope `all` after fixing it",
            runner.name()
        )));
    }
    let escaped: Vec<String> = names.iter().map(|n| regex_lite::escape(n)).collect();
    Ok(vec![format!("^(?:{})$", escaped.join("|"))])
}

fn no_failed_scope(runner: Runner) -> ToolError {
    invalid(format!(
        "scope `failed` needs per-test results, which {} gives only when its test script is jest, vitest or `node --test`: use scope `pattern`",
        runner.name()
    ))
}

/// How the project runs its tests: for npm, which runner the `test` script
/// starts (`jest …`, `vitest …`, `node --test …`).
fn project(runner: Runner, repo: &Path) -> Project {
    if runner != Runner::Npm {
        return Project::Plain;
    }
    let script = std::fs::read_to_string(repo.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|package| package["scripts"]["test"].as_str().map(str::to_string))
        .unwrap_or_default();
    let mut words = script.split_whitespace();
    match (words.next(), words.next()) {
        (Some("jest"), _) => Project::Jest,
        (Some("vitest"), _) => Project::Vitest,
        (Some("node"), Some("--test")) => Project::NodeTestRunner {
            // Any word after that is not an option names a file or folder
            // (or a separate option's value: then the options go where
            // node reads them either way).
            names_files: words.any(|w| !w.starts_with('-')),
        },
        _ => Project::Plain,
    }
}

/// A relative path that stays inside the repository, normalised.
fn inside_repo(path: &str) -> Result<PathBuf, &'static str> {
    let p = Path::new(path);
    if p.is_absolute() || path.starts_with('\\') {
        return Err("is absolute");
    }
    let mut out = PathBuf::new();
    for component in p.components() {
        match component {
            Component::Normal(part) if names_git_folder(part) => {
                return Err(
                    "is inside git's own folder (.git), which the host never lets a plugin write",
                );
            }
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("climbs with `..`"),
            Component::RootDir | Component::Prefix(_) => return Err("is absolute"),
        }
    }
    if out.as_os_str().is_empty() {
        return Err("is the repository itself");
    }
    Ok(out)
}

/// Whether `part` is `.git` as git reads it on some system (any case,
/// trailing dots and spaces, the 8.3 name): the host refuses writes there
/// anyway; this says so before the run instead of after it.
fn names_git_folder(part: &std::ffi::OsStr) -> bool {
    let text = part.to_string_lossy();
    let trimmed = text.trim_end_matches(['.', ' ']);
    trimmed.eq_ignore_ascii_case(".git") || text.eq_ignore_ascii_case("git~1")
}

fn no_option_or_control(target: &str) -> Result<(), ToolError> {
    if target.starts_with('-') {
        return Err(invalid(format!(
            "target `{target}` starts with `-` and would be read as an option: name a file or a test pattern"
        )));
    }
    if target.chars().any(char::is_control) {
        return Err(invalid(
            "target contains control characters (newlines, tabs, NUL): give it on one line".into(),
        ));
    }
    Ok(())
}

fn pattern_target(target: &str) -> Result<String, ToolError> {
    no_option_or_control(target)?;
    Ok(target.to_string())
}

/// Check a file target and turn it into what the runner's template takes.
fn file_target(runner: Runner, target: &str, repo: &Path) -> Result<String, ToolError> {
    no_option_or_control(target)?;
    let rel = inside_repo(target).map_err(|why| {
        invalid(format!(
            "target `{target}` {why}: give a test file path relative to the repository"
        ))
    })?;
    if !repo.join(&rel).is_file() {
        return Err(invalid(format!(
            "target `{target}` is not a file in the repository"
        )));
    }
    let rel_text = rel.to_string_lossy().replace('\\', "/");
    let argument: String = match runner {
        Runner::Cargo => {
            let name = rel_text
                .strip_prefix("tests/")
                .and_then(|n| n.strip_suffix(".rs"))
                .filter(|n| !n.contains('/'))
                .ok_or_else(|| invalid(format!("for cargo, a file target is an integration test `tests/<name>.rs`, not `{target}`")))?;
            name.to_string()
        }
        Runner::Go => {
            let dir = rel
                .parent()
                .map(|d| d.to_string_lossy().replace('\\', "/"))
                .unwrap_or_default();
            if dir.is_empty() {
                ".".into()
            } else {
                format!("./{dir}")
            }
        }
        _ => rel_text,
    };
    // `./--collect-only` normalises to `--collect-only`, a file a test
    // project can hold and every runner would read as an option.
    if argument.starts_with('-') {
        return Err(invalid(format!(
            "target `{target}` names a file whose name starts with `-`, which {} would read as an option: rename the file",
            runner.name()
        )));
    }
    Ok(argument)
}

/// `.cache/mcp-test-timebox/reports/<timestamp>`, suffixed if it exists;
/// made here, so that runs started in the same second (in parallel) never
/// share one: whoever makes a name first has it. One that cannot be made
/// is still the answer: writing the reports there fails, and the run says
/// why as it does for any report it cannot write.
fn fresh_report_dir(repo: &Path, timestamp: &str) -> PathBuf {
    let base = Path::new(DEFAULT_REPORTS);
    let _ = std::fs::create_dir_all(repo.join(base));
    (0..)
        .map(|n| match n {
            0 => base.join(timestamp),
            n => base.join(format!("{timestamp}_{n}")),
        })
        .find(|dir| match std::fs::create_dir(repo.join(dir)) {
            Err(e) => e.kind() != std::io::ErrorKind::AlreadyExists,
            Ok(()) => true,
        })
        .expect("an unused name exists")
}

/// Seconds since the epoch as `YYYYMMDD_HHMMSS` (UTC).
pub fn format_timestamp(secs: u64) -> String {
    let [year, month, day, hour, minute, second] = plugin_sdk::utc(secs);
    format!("{year:04}{month:02}{day:02}_{hour:02}{minute:02}{second:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(runner: Runner, scope: Scope, target: Option<&str>, report_dir: Option<&str>) -> Args {
        Args {
            runner,
            scope,
            target: target.map(String::from),
            timeout_ms: 1000,
            no_output_timeout_ms: 1000,
            max_output_bytes: 1000,
            report_dir: report_dir.map(String::from),
            repeat: None,
            coverage: None,
        }
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("tests")).unwrap();
        std::fs::write(dir.path().join("tests/api.rs"), "").unwrap();
        std::fs::write(dir.path().join("test_math.py"), "").unwrap();
        // Files a hostile test project can hold, named like options.
        std::fs::write(dir.path().join("--collect-only"), "").unwrap();
        std::fs::write(dir.path().join("tests/--nocapture.rs"), "").unwrap();
        dir
    }

    #[test]
    fn timestamps() {
        assert_eq!(format_timestamp(0), "19700101_000000");
        assert_eq!(format_timestamp(1_768_221_296), "20260112_123456");
        assert_eq!(format_timestamp(951_782_400), "20000229_000000");
    }

    #[test]
    fn report_dir_escapes_are_refused() {
        let r = repo();
        for bad in [
            "../out",
            "/tmp/out",
            "a/../../out",
            "..",
            ".git/hooks",
            "x/.GIT./y",
            "git~1",
        ] {
            let err = check(
                &args(Runner::Cargo, Scope::All, None, Some(bad)),
                r.path(),
                "t",
            )
            .err()
            .unwrap();
            assert_eq!(err.code, codes::INVALID_REQUEST, "{bad}");
            assert!(err.message.contains("report_dir"), "{}", err.message);
        }
        let ok = check(
            &args(Runner::Cargo, Scope::All, None, Some("./reports/x/")),
            r.path(),
            "t",
        )
        .ok()
        .unwrap();
        assert_eq!(ok.report_rel, PathBuf::from("reports/x"));
        assert_eq!(ok.report_dir, r.path().join("reports/x"));
    }

    #[test]
    fn default_report_dir_is_fresh() {
        let r = repo();
        let first = check(
            &args(Runner::Cargo, Scope::All, None, None),
            r.path(),
            "20260112_123456",
        )
        .ok()
        .unwrap();
        assert_eq!(
            first.report_rel,
            PathBuf::from(".cache/mcp-test-timebox/reports/20260112_123456")
        );
        std::fs::create_dir_all(&first.report_dir).unwrap();
        let second = check(
            &args(Runner::Cargo, Scope::All, None, None),
            r.path(),
            "20260112_123456",
        )
        .ok()
        .unwrap();
        assert_eq!(
            second.report_rel,
            PathBuf::from(".cache/mcp-test-timebox/reports/20260112_123456_1")
        );
    }

    /// `failed` names the last run's failing tests from its summary.json,
    /// which the test project could have written: names read as options
    /// are dropped, the rest escaped into one anchored pattern (go: the
    /// top-level test functions only).
    #[test]
    fn failed_tests_come_back_as_one_escaped_pattern() {
        let r = repo();
        let last = r.path().join(DEFAULT_REPORTS).join("20260101_000000");
        std::fs::create_dir_all(&last).unwrap();
        let summary = serde_json::json!({"runner": "go", "failed_tests":
            ["TestSub", "TestTable/two", "TestTable/one", "example.com/m/broken", "-test.v", "Test.*"]});
        std::fs::write(last.join("summary.json"), summary.to_string()).unwrap();
        let go = check(&args(Runner::Go, Scope::Failed, None, None), r.path(), "t").unwrap();
        assert_eq!(
            go.command.args[go.command.args.len() - 3..],
            ["-run", "^(?:TestSub|TestTable)$", "./..."]
        );
        let summary = serde_json::json!({"runner": "dart", "failed_tests": ["calc (a+b)", "-n"]});
        std::fs::write(last.join("summary.json"), summary.to_string()).unwrap();
        let dart = check(
            &args(Runner::Dart, Scope::Failed, None, None),
            r.path(),
            "t",
        )
        .unwrap();
        assert_eq!(
            dart.command.args[dart.command.args.len() - 2..],
            ["--name", r"^(?:calc \(a\+b\))$"]
        );
        let summary = serde_json::json!({"runner": "go", "failed_tests": ["example.com/m/broken"]});
        std::fs::write(last.join("summary.json"), summary.to_string()).unwrap();
        let err = check(&args(Runner::Go, Scope::Failed, None, None), r.path(), "t")
            .err()
            .unwrap();
        assert!(
            err.message.contains("failed outside any test"),
            "{}",
            err.message
        );
    }

    #[test]
    fn targets_cannot_inject_options_or_leave_the_repo() {
        let r = repo();
        let refuse = |runner, scope, target: &str| {
            check(&args(runner, scope, Some(target), None), r.path(), "t")
                .err()
                .unwrap()
                .message
        };
        assert!(refuse(Runner::Pytest, Scope::Pattern, "--collect-only").contains("option"));
        assert!(refuse(Runner::Pytest, Scope::Pattern, "a\n/exit").contains("control"));
        assert!(refuse(Runner::Pytest, Scope::File, "../etc/passwd").contains("climbs"));
        assert!(refuse(Runner::Pytest, Scope::File, "/etc/passwd").contains("absolute"));
        assert!(refuse(Runner::Pytest, Scope::File, "missing.py").contains("not a file"));
        assert!(refuse(Runner::Cargo, Scope::File, "test_math.py").contains("tests/<name>.rs"));
        for runner in [Runner::Pytest, Runner::Dart, Runner::Flutter, Runner::Npm] {
            let why = refuse(runner, Scope::File, "./--collect-only");
            assert!(why.contains("would read as an option"), "{why}");
        }
        assert!(refuse(Runner::Cargo, Scope::File, "tests/--nocapture.rs").contains("option"));
        let cargo = check(
            &args(Runner::Cargo, Scope::File, Some("tests/api.rs"), None),
            r.path(),
            "t",
        )
        .ok()
        .unwrap();
        assert_eq!(cargo.command.args.last().unwrap(), "api");
        let pytest = check(
            &args(Runner::Pytest, Scope::File, Some("./test_math.py"), None),
            r.path(),
            "t",
        )
        .ok()
        .unwrap();
        assert_eq!(pytest.command.args.last().unwrap(), "test_math.py");
        let missing = check(
            &args(Runner::Pytest, Scope::Pattern, None, None),
            r.path(),
            "t",
        )
        .err()
        .unwrap();
        assert!(missing.message.contains("needs a `target`"));
    }
}
