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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The template as written here, `{target}` where the target goes.
    pub template: String,
    pub program: String,
    pub args: Vec<String>,
}

impl Command {
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
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
    NodeTestRunner,
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
/// a JUnit report in the report dir.
const NODE: [&str; 6] = [
    "test",
    "--",
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=junit",
    "--test-reporter-destination={report}/junit.xml",
];

/// The template for `runner` and `scope`, `None` where the runner has none
/// (`failed` for the runners without per-test results). `{target}` takes
/// `targets`, which have been validated: a file path inside the repository
/// (relative to it), a name pattern, or for `failed` the failing tests'
/// names from the last report, none of them readable as an option;
/// `report` is the report dir, relative to the repository.
pub fn command(
    runner: Runner,
    scope: Scope,
    project: Project,
    targets: &[String],
    report: &str,
) -> Option<Command> {
    let with = |program: &'static str, base: &[&'static str], rest: &[&'static str]| {
        (program, [base, rest].concat())
    };
    let pytest = |rest: &[&'static str]| with("pytest", &PYTEST, rest);
    let cargo = |rest: &[&'static str]| with("cargo", &CARGO, rest);
    let node = |rest: &[&'static str]| with("npm", &NODE, rest);
    let (program, args): (&str, Vec<&str>) = match (runner, scope) {
        (Runner::Flutter, Scope::All) => ("flutter", vec!["test"]),
        (Runner::Flutter, Scope::File) => ("flutter", vec!["test", "{target}"]),
        (Runner::Flutter, Scope::Pattern) => ("flutter", vec!["test", "--name", "{target}"]),
        (Runner::Dart, Scope::All) => ("dart", vec!["test"]),
        (Runner::Dart, Scope::File) => ("dart", vec!["test", "{target}"]),
        (Runner::Dart, Scope::Pattern) => ("dart", vec!["test", "--name", "{target}"]),
        (Runner::Cargo, Scope::All) => cargo(&[]),
        (Runner::Cargo, Scope::File) => cargo(&["--test", "{target}"]),
        (Runner::Cargo, Scope::Pattern) => cargo(&["--", "{target}"]),
        (Runner::Pytest, Scope::All) => pytest(&[]),
        (Runner::Pytest, Scope::File) => pytest(&["{target}"]),
        (Runner::Pytest, Scope::Pattern) => pytest(&["-k", "{target}"]),
        // Node ids after `--`: never options, whatever the test is called.
        (Runner::Pytest, Scope::Failed) => pytest(&["--", "{target}"]),
        (Runner::Cargo, Scope::Failed) => cargo(&["--", "--exact", "{target}"]),
        (Runner::Go, Scope::All) => ("go", vec!["test", "./..."]),
        (Runner::Go, Scope::File) => ("go", vec!["test", "{target}"]),
        (Runner::Go, Scope::Pattern) => ("go", vec!["test", "-run", "{target}", "./..."]),
        (Runner::Npm, Scope::All) if project == Project::NodeTestRunner => node(&[]),
        (Runner::Npm, Scope::File) if project == Project::NodeTestRunner => node(&["{target}"]),
        (Runner::Npm, Scope::Pattern | Scope::Failed) if project == Project::NodeTestRunner => {
            node(&["--test-name-pattern", "{target}"])
        }
        (_, Scope::Failed) => return None,
        (Runner::Npm, Scope::All) => ("npm", vec!["test"]),
        (Runner::Npm, Scope::File) => ("npm", vec!["test", "--", "{target}"]),
        (Runner::Npm, Scope::Pattern) => ("npm", vec!["test", "--", "-t", "{target}"]),
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
    })
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
            Project::NodeTestRunner,
            &["adds".to_string()],
            "r",
        )
        .unwrap();
        assert_eq!(c.args[..2], ["test", "--"]);
        assert!(
            c.args
                .contains(&"--test-reporter-destination=r/junit.xml".to_string())
        );
        assert_eq!(c.args[c.args.len() - 2..], ["--test-name-pattern", "adds"]);
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
            "flutter test"
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
            vec!["test", "./pkg/util"]
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
        assert!(command(Runner::Go, Scope::Failed, Project::Plain, &names, "r").is_none());
        assert!(command(Runner::Npm, Scope::Failed, Project::Plain, &names, "r").is_none());
    }
}
