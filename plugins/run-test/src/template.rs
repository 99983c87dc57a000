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

/// The reporter options of node's test runner: the usual console output,
/// and a JUnit report in the report dir.
const NODE_REPORTERS: [&str; 4] = [
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=junit",
    "--test-reporter-destination={report}/junit.xml",
];

/// The template for `runner` and `scope`. `target` has been validated: a
/// file path inside the repository (relative to it) or a name pattern that
/// cannot be read as an option; `report` is the report dir, relative to
/// the repository.
pub fn command(
    runner: Runner,
    scope: Scope,
    project: Project,
    target: Option<&str>,
    report: &str,
) -> Command {
    let t = target.unwrap_or("");
    // pytest: each test's verdict on the console (counts even when the run
    // is cut off), and the JUnit report with files and lines (xunit1).
    let pytest = |rest: &[&'static str]| -> (&'static str, Vec<&'static str>) {
        let mut args = vec![
            "--color=no",
            "-v",
            "-o",
            "junit_family=xunit1",
            "--junitxml={report}/junit.xml",
        ];
        args.extend_from_slice(rest);
        ("pytest", args)
    };
    let node = |rest: &[&'static str]| -> (&'static str, Vec<&'static str>) {
        let mut args = vec!["test", "--"];
        args.extend_from_slice(&NODE_REPORTERS);
        args.extend_from_slice(rest);
        ("npm", args)
    };
    let (program, args): (&str, Vec<&str>) = match (runner, scope) {
        (Runner::Flutter, Scope::All) => ("flutter", vec!["test"]),
        (Runner::Flutter, Scope::File) => ("flutter", vec!["test", "{target}"]),
        (Runner::Flutter, Scope::Pattern) => ("flutter", vec!["test", "--name", "{target}"]),
        (Runner::Dart, Scope::All) => ("dart", vec!["test"]),
        (Runner::Dart, Scope::File) => ("dart", vec!["test", "{target}"]),
        (Runner::Dart, Scope::Pattern) => ("dart", vec!["test", "--name", "{target}"]),
        // Every test binary runs, so every failure is counted.
        (Runner::Cargo, Scope::All) => {
            ("cargo", vec!["test", "--no-fail-fast", "--color", "never"])
        }
        (Runner::Cargo, Scope::File) => (
            "cargo",
            vec![
                "test",
                "--no-fail-fast",
                "--color",
                "never",
                "--test",
                "{target}",
            ],
        ),
        (Runner::Cargo, Scope::Pattern) => (
            "cargo",
            vec![
                "test",
                "--no-fail-fast",
                "--color",
                "never",
                "--",
                "{target}",
            ],
        ),
        (Runner::Pytest, Scope::All) => pytest(&[]),
        (Runner::Pytest, Scope::File) => pytest(&["{target}"]),
        (Runner::Pytest, Scope::Pattern) => pytest(&["-k", "{target}"]),
        (Runner::Go, Scope::All) => ("go", vec!["test", "./..."]),
        (Runner::Go, Scope::File) => ("go", vec!["test", "{target}"]),
        (Runner::Go, Scope::Pattern) => ("go", vec!["test", "-run", "{target}", "./..."]),
        (Runner::Npm, Scope::All) if project == Project::NodeTestRunner => node(&[]),
        (Runner::Npm, Scope::File) if project == Project::NodeTestRunner => node(&["{target}"]),
        (Runner::Npm, Scope::Pattern) if project == Project::NodeTestRunner => {
            node(&["--test-name-pattern", "{target}"])
        }
        (Runner::Npm, Scope::All) => ("npm", vec!["test"]),
        (Runner::Npm, Scope::File) => ("npm", vec!["test", "--", "{target}"]),
        (Runner::Npm, Scope::Pattern) => ("npm", vec!["test", "--", "-t", "{target}"]),
    };
    Command {
        template: std::iter::once(program)
            .chain(args.iter().copied())
            .collect::<Vec<_>>()
            .join(" "),
        program: program.to_string(),
        args: args
            .iter()
            .map(|a| {
                if *a == "{target}" {
                    t.to_string()
                } else {
                    a.replace("{report}", report)
                }
            })
            .collect(),
    }
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
            Some("test_add or test_sub"),
            "r",
        );
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
            Some("adds"),
            "r",
        );
        assert_eq!(c.args[..2], ["test", "--"]);
        assert!(
            c.args
                .contains(&"--test-reporter-destination=r/junit.xml".to_string())
        );
        assert_eq!(c.args[c.args.len() - 2..], ["--test-name-pattern", "adds"]);
        assert_eq!(
            command(Runner::Npm, Scope::All, Project::Plain, None, "r").args,
            ["test"]
        );
        let c = command(
            Runner::Cargo,
            Scope::File,
            Project::Plain,
            Some("integration"),
            "r",
        );
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
            command(Runner::Flutter, Scope::All, Project::Plain, None, "r").display(),
            "flutter test"
        );
        assert_eq!(
            command(
                Runner::Go,
                Scope::File,
                Project::Plain,
                Some("./pkg/util"),
                "r"
            )
            .args,
            vec!["test", "./pkg/util"]
        );
    }
}
