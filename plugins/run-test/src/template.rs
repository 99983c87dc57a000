//! The fixed command templates: runner × scope → argv. Nothing the model
//! sends becomes a command except a validated target in a fixed position.

use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Runner {
    Flutter,
    Dart,
    Cargo,
    Pytest,
    Go,
    Npm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    All,
    File,
    Pattern,
    Failed,
    Related,
}

impl Runner {
    pub fn name(self) -> &'static str {
        match self {
            Runner::Flutter => "flutter",
            Runner::Dart => "dart",
            Runner::Cargo => "cargo",
            Runner::Pytest => "pytest",
            Runner::Go => "go",
            Runner::Npm => "npm",
        }
    }
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::All => "all",
            Scope::File => "file",
            Scope::Pattern => "pattern",
            Scope::Failed => "failed",
            Scope::Related => "related",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The template as written here, `{target}` where the target goes.
    pub template: String,
    pub program: String,
    pub args: Vec<String>,
    /// Variables the template sets for the run (node's options).
    pub env: Vec<(String, String)>,
}

impl Command {
    pub fn display(&self) -> String {
        let env = self.env.iter().map(|(k, v)| format!("{k}='{v}'"));
        env.chain(std::iter::once(self.program.clone()))
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How the test project runs its tests, where that changes the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Project {
    Plain,
    /// `npm test` is node's own test runner (`node --test …` in
    /// package.json), which writes a JUnit report when asked.
    /// `names_files`: the script names files or folders (`node --test
    /// test/`), after which node reads every word as one, options too.
    NodeTestRunner {
        names_files: bool,
    },
    /// `npm test` is jest, which writes its JSON report when asked.
    Jest,
    /// `npm test` is vitest, whose `json` reporter writes jest's format.
    Vitest,
}

/// pytest: each test's verdict on the console (counts even when the run is
/// cut off), and the JUnit report with files and lines (xunit1).
const PYTEST: [&str; 5] = [
    "--color=no",
    "-v",
    "-o",
    "junit_family=xunit1",
    "--junitxml={report}/junit.xml",
];
/// cargo: every test binary runs, so every failure is counted.
const CARGO: [&str; 4] = ["test", "--no-fail-fast", "--color", "never"];
/// `npm test` when it is node's test runner: the usual console output, and
/// a JUnit report in the report dir. Given in `NODE_OPTIONS`, not after
/// the script: a script that names files (`node --test test/`) makes node
/// read every word after it as a file, options too (issue 54, item 14).
/// Node passes them on to each test file's own process as a child's, which
/// reports to the parent instead.
const NODE_REPORTERS: [&str; 4] = [
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=junit",
    "--test-reporter-destination={report}/junit.xml",
];
/// `npm test` when it is jest: its console with a line per test (what a
/// run cut off still says), and its JSON report with each test's
/// declaration line.
const JEST: [&str; 7] = [
    "test",
    "--",
    "--ci",
    "--verbose",
    "--json",
    "--testLocationInResults",
    "--outputFile={report}/results.json",
];
/// `npm test` when it is vitest: its console with a line per test (what a
/// run cut off still says), and its JSON report (jest's format) with each
/// test's declaration line.
const VITEST: [&str; 6] = [
    "test",
    "--",
    "--reporter=verbose",
    "--reporter=json",
    "--outputFile.json={report}/results.json",
    "--includeTaskLocation",
];
/// go: test2json's event stream on stdout (the host logs it whole into
/// raw.log in the report dir).
const GO: [&str; 2] = ["test", "-json"];
/// dart and flutter: their usual console, and the JSON reporter's events
/// into the report dir.
const DART: [&str; 2] = ["test", "--file-reporter=json:{report}/results.jsonl"];

/// The options that make `runner` write line coverage into the report dir
/// ([`coverage_file`]), or why it cannot.
pub fn coverage_args(
    runner: Runner,
    project: Project,
) -> Result<&'static [&'static str], &'static str> {
    match (runner, project) {
        (Runner::Go, _) => Ok(&["-coverprofile={report}/cover.out"]),
        (Runner::Pytest, _) => Ok(&["--cov=.", "--cov-report=lcov:{report}/lcov.info"]),
        (Runner::Flutter, _) => Ok(&["--coverage", "--coverage-path={report}/lcov.info"]),
        (Runner::Npm, Project::Jest) => Ok(&[
            "--coverage",
            "--coverageProvider=v8",
            "--coverageReporters=lcov",
            "--coverageDirectory={report}/coverage",
        ]),
        (Runner::Npm, Project::Vitest) => Ok(&[
            "--coverage.enabled",
            // Written when a test fails too (vitest writes none then by
            // default, and the answer blamed the installation).
            "--coverage.reportOnFailure",
            "--coverage.provider=v8",
            "--coverage.reporter=lcov",
            "--coverage.reportsDirectory={report}/coverage",
        ]),
        (Runner::Dart, _) => Err(
            "dart test's --coverage writes its own JSON, which `format_coverage` (package coverage) turns into LCOV: not read here; run flutter, or that tool by hand",
        ),
        (Runner::Cargo, _) => Err(
            "cargo has no built-in coverage (cargo-llvm-cov and tarpaulin are separate tools): run one by hand",
        ),
        (Runner::Npm, _) => Err(
            "this npm project's runner is neither jest nor vitest, whose own coverage is read; node's runner prints coverage only on its console",
        ),
    }
}

/// Where the options of [`coverage_args`] make the runner write coverage,
/// relative to the report dir.
pub fn coverage_file(runner: Runner) -> &'static str {
    match runner {
        Runner::Go => "cover.out",
        Runner::Npm => "coverage/lcov.info",
        _ => "lcov.info",
    }
}

/// The file in the report dir that the runner's template asks it to write
/// its per-test report into; `None` where there is none (go's report is
/// its stdout, in raw.log; cargo and plain npm have none).
pub fn report_file(runner: Runner, project: Project) -> Option<&'static str> {
    match (runner, project) {
        (Runner::Pytest, _) | (Runner::Npm, Project::NodeTestRunner { .. }) => Some("junit.xml"),
        (Runner::Npm, Project::Jest | Project::Vitest) => Some("results.json"),
        (Runner::Dart | Runner::Flutter, _) => Some("results.jsonl"),
        _ => None,
    }
}

/// The template for `runner` and `scope`, `None` where there is none
/// (`failed` for an npm project whose runner gives no per-test results).
/// `{target}` takes `targets`, which have been validated: a file path
/// inside the repository (relative to it), a name pattern, or for `failed`
/// the failing tests' names from the last report, none of them readable as
/// an option; `report` is the report dir, relative to the repository.
pub fn command(
    runner: Runner,
    scope: Scope,
    project: Project,
    targets: &[String],
    report: &str,
    coverage: bool,
) -> Option<Command> {
    let measured: &[&'static str] = match coverage {
        true => coverage_args(runner, project).unwrap_or(&[]),
        false => &[],
    };
    // Coverage options go after the template's own, before any target
    // (pytest's targets follow `--`).
    let with = |program: &'static str, base: &[&'static str], rest: &[&'static str]| {
        (program, [base, measured, rest].concat())
    };
    let npm = |base: &[&'static str], rest: &[&'static str]| with("npm", base, rest);
    let mut node_options: Vec<String> = Vec::new();
    let (program, args): (&str, Vec<&str>) = match (runner, scope) {
        (Runner::Flutter | Runner::Dart, _) => {
            let program = runner.name();
            match scope {
                Scope::All => with(program, &DART, &[]),
                Scope::File => with(program, &DART, &["{target}"]),
                Scope::Pattern | Scope::Failed => with(program, &DART, &["--name", "{target}"]),
                Scope::Related => return None,
            }
        }
        (Runner::Cargo, Scope::All) => with("cargo", &CARGO, &[]),
        (Runner::Cargo, Scope::File) => with("cargo", &CARGO, &["--test", "{target}"]),
        (Runner::Cargo, Scope::Pattern) => with("cargo", &CARGO, &["--", "{target}"]),
        (Runner::Cargo, Scope::Failed) => with("cargo", &CARGO, &["--", "--exact", "{target}"]),
        (Runner::Cargo, Scope::Related) => with("cargo", &CARGO, &["--manifest-path", "{target}"]),
        (Runner::Pytest, Scope::All) => with("pytest", &PYTEST, &[]),
        (Runner::Pytest, Scope::File) => with("pytest", &PYTEST, &["{target}"]),
        (Runner::Pytest, Scope::Pattern) => with("pytest", &PYTEST, &["-k", "{target}"]),
        // Node ids after `--`: never options, whatever the test is called.
        (Runner::Pytest, Scope::Failed | Scope::Related) => {
            with("pytest", &PYTEST, &["--", "{target}"])
        }
        (Runner::Go, Scope::All) => with("go", &GO, &["./..."]),
        (Runner::Go, Scope::File | Scope::Related) => with("go", &GO, &["{target}"]),
        (Runner::Go, Scope::Pattern | Scope::Failed) => {
            with("go", &GO, &["-run", "{target}", "./..."])
        }
        (Runner::Npm, _) => {
            let base: &[&'static str] = match project {
                Project::Jest => &JEST,
                Project::Vitest => &VITEST,
                Project::Plain | Project::NodeTestRunner { .. } => &["test"],
            };
            if let Project::NodeTestRunner { .. } = project {
                node_options.extend(NODE_REPORTERS.iter().map(|o| o.replace("{report}", report)));
            }
            match (scope, project) {
                (Scope::All, _) => npm(base, &[]),
                (Scope::Related, Project::Jest) => npm(base, &["--findRelatedTests", "{target}"]),
                (Scope::Related, Project::Vitest) => npm(base, &["{target}"]),
                (Scope::Related, _) => return None,
                (Scope::File, Project::Plain | Project::NodeTestRunner { .. }) => {
                    npm(base, &["--", "{target}"])
                }
                (Scope::File, _) => npm(base, &["{target}"]),
                (Scope::Pattern, Project::Plain) => npm(base, &["--", "-t", "{target}"]),
                (Scope::Failed, Project::Plain) => return None,
                // After a script that names files, node would take the
                // option for one: it goes in NODE_OPTIONS (Node 22 and
                // later take it there).
                (Scope::Pattern | Scope::Failed, Project::NodeTestRunner { names_files: true }) => {
                    node_options.extend(targets.iter().map(|t| format!("--test-name-pattern={t}")));
                    npm(base, &[])
                }
                (Scope::Pattern | Scope::Failed, Project::NodeTestRunner { .. }) => {
                    npm(base, &["--", "--test-name-pattern", "{target}"])
                }
                (Scope::Pattern | Scope::Failed, _) => npm(base, &["-t", "{target}"]),
            }
        }
    };
    Some(Command {
        template: std::iter::once(program)
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" "),
        program: program.to_string(),
        args: args
            .iter()
            .flat_map(|a| {
                if *a == "{target}" {
                    targets.to_vec()
                } else {
                    vec![a.replace("{report}", report)]
                }
            })
            .collect(),
        env: if node_options.is_empty() {
            Vec::new()
        } else {
            let quoted: Vec<String> = node_options.iter().map(|o| quoted(o)).collect();
            vec![("NODE_OPTIONS".to_string(), quoted.join(" "))]
        },
    })
}

/// One option as `NODE_OPTIONS` reads it: in double quotes, `\` and `"`
/// escaped, so a path or a pattern with spaces stays one option.
fn quoted(option: &str) -> String {
    format!("\"{}\"", option.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Environment that turns colour and interactive prompts off.
pub fn quiet_env() -> Vec<(String, String)> {
    [
        ("NO_COLOR", "1"),
        ("CARGO_TERM_COLOR", "never"),
        ("CI", "true"),
        ("TERM", "dumb"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template without coverage, as most tests want it.
    fn command(
        runner: Runner,
        scope: Scope,
        project: Project,
        targets: &[String],
        report: &str,
    ) -> Option<Command> {
        super::command(runner, scope, project, targets, report, false)
    }

    #[test]
    fn coverage_options_go_before_the_targets() {
        let c = super::command(
            Runner::Pytest,
            Scope::Failed,
            Project::Plain,
            &["t.py::x".to_string()],
            "r",
            true,
        )
        .unwrap();
        let dashes = c.args.iter().position(|a| a == "--").unwrap();
        let cov = c
            .args
            .iter()
            .position(|a| a == "--cov-report=lcov:r/lcov.info")
            .unwrap();
        assert!(cov < dashes, "{:?}", c.args);
        assert!(coverage_args(Runner::Cargo, Project::Plain).is_err());
    }

    #[test]
    fn targets_land_in_their_slot_only() {
        let c = command(
            Runner::Pytest,
            Scope::Pattern,
            Project::Plain,
            &["test_add or test_sub".to_string()],
            "r",
        )
        .unwrap();
        assert_eq!(c.program, "pytest");
        assert_eq!(
            c.args,
            vec![
                "--color=no",
                "-v",
                "-o",
                "junit_family=xunit1",
                "--junitxml=r/junit.xml",
                "-k",
                "test_add or test_sub"
            ]
        );
        assert_eq!(
            c.template,
            "pytest --color=no -v -o junit_family=xunit1 --junitxml={report}/junit.xml -k {target}"
        );
        let c = command(
            Runner::Npm,
            Scope::Pattern,
            Project::NodeTestRunner { names_files: false },
            &["adds".to_string()],
            "r",
        )
        .unwrap();
        assert_eq!(c.args, ["test", "--", "--test-name-pattern", "adds"]);
        assert_eq!(c.env[0].0, "NODE_OPTIONS");
        assert!(
            c.env[0]
                .1
                .contains("\"--test-reporter-destination=r/junit.xml\"")
        );
        // After a script that names files, nothing follows it: the pattern
        // goes where node reads options, quoted as one.
        let c = command(
            Runner::Npm,
            Scope::Pattern,
            Project::NodeTestRunner { names_files: true },
            &["adds \"one\"".to_string()],
            "r dir",
        )
        .unwrap();
        assert_eq!(c.args, ["test"]);
        assert!(
            c.env[0]
                .1
                .ends_with("\"--test-reporter-destination=r dir/junit.xml\" \"--test-name-pattern=adds \\\"one\\\"\""),
            "{}",
            c.env[0].1
        );
        assert_eq!(
            command(Runner::Npm, Scope::All, Project::Plain, &[], "r")
                .unwrap()
                .args,
            ["test"]
        );
        let c = command(
            Runner::Cargo,
            Scope::File,
            Project::Plain,
            &["integration".to_string()],
            "r",
        )
        .unwrap();
        assert_eq!(
            c.args,
            vec![
                "test",
                "--no-fail-fast",
                "--color",
                "never",
                "--test",
                "integration"
            ]
        );
        assert_eq!(
            command(Runner::Flutter, Scope::All, Project::Plain, &[], "r")
                .unwrap()
                .display(),
            "flutter test --file-reporter=json:r/results.jsonl"
        );
        assert_eq!(
            command(
                Runner::Go,
                Scope::File,
                Project::Plain,
                &["./pkg/util".to_string()],
                "r",
            )
            .unwrap()
            .args,
            vec!["test", "-json", "./pkg/util"]
        );
    }

    #[test]
    fn failed_tests_are_named_where_no_option_is_read() {
        let names = [
            "test_a.py::test_b".to_string(),
            "test_a.py::T::test_c".to_string(),
        ];
        let c = command(Runner::Pytest, Scope::Failed, Project::Plain, &names, "r").unwrap();
        assert_eq!(
            c.args[c.args.len() - 3..],
            ["--", "test_a.py::test_b", "test_a.py::T::test_c"]
        );
        let c = command(
            Runner::Cargo,
            Scope::Failed,
            Project::Plain,
            &names[..1],
            "r",
        )
        .unwrap();
        assert_eq!(
            c.args[c.args.len() - 3..],
            ["--", "--exact", "test_a.py::test_b"]
        );
        assert!(command(Runner::Npm, Scope::Failed, Project::Plain, &names, "r").is_none());
    }

    /// Every template that names a report file asks for the one that is
    /// read afterwards.
    #[test]
    fn templates_write_the_report_that_is_read() {
        let runners = [
            Runner::Flutter,
            Runner::Dart,
            Runner::Cargo,
            Runner::Pytest,
            Runner::Go,
            Runner::Npm,
        ];
        let projects = [
            Project::Plain,
            Project::NodeTestRunner { names_files: false },
            Project::NodeTestRunner { names_files: true },
            Project::Jest,
            Project::Vitest,
        ];
        for runner in runners {
            for project in projects {
                let Some(c) = command(runner, Scope::All, project, &[], "r") else {
                    continue;
                };
                // In an argument, or in node's options.
                let words = c.env.iter().flat_map(|(_, v)| v.split(' '));
                let asked = c
                    .args
                    .iter()
                    .map(String::as_str)
                    .chain(words)
                    .find(|a| a.contains("r/"))
                    .map(|a| a.rsplit('/').next().unwrap().trim_end_matches('"'));
                assert_eq!(
                    asked,
                    report_file(runner, project),
                    "{runner:?} {project:?}: {}",
                    c.display()
                );
            }
        }
        let jest = command(
            Runner::Npm,
            Scope::Failed,
            Project::Jest,
            &["^(?:a b)$".into()],
            "r",
        )
        .unwrap();
        assert_eq!(jest.args[jest.args.len() - 2..], ["-t", "^(?:a b)$"]);
        let go = command(
            Runner::Go,
            Scope::Failed,
            Project::Plain,
            &["^(?:TestA)$".into()],
            "r",
        )
        .unwrap();
        assert_eq!(go.display(), "go test -json -run ^(?:TestA)$ ./...");
    }
}
