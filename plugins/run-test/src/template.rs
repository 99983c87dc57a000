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

/// The template for `runner` and `scope`. `target` has been validated: a
/// file path inside the repository (relative to it) or a name pattern that
/// cannot be read as an option.
pub fn command(runner: Runner, scope: Scope, target: Option<&str>) -> Command {
    let t = target.unwrap_or("");
    let (program, args): (&str, Vec<&str>) = match (runner, scope) {
        (Runner::Flutter, Scope::All) => ("flutter", vec!["test"]),
        (Runner::Flutter, Scope::File) => ("flutter", vec!["test", "{target}"]),
        (Runner::Flutter, Scope::Pattern) => ("flutter", vec!["test", "--name", "{target}"]),
        (Runner::Dart, Scope::All) => ("dart", vec!["test"]),
        (Runner::Dart, Scope::File) => ("dart", vec!["test", "{target}"]),
        (Runner::Dart, Scope::Pattern) => ("dart", vec!["test", "--name", "{target}"]),
        (Runner::Cargo, Scope::All) => ("cargo", vec!["test", "--color", "never"]),
        (Runner::Cargo, Scope::File) => (
            "cargo",
            vec!["test", "--color", "never", "--test", "{target}"],
        ),
        (Runner::Cargo, Scope::Pattern) => {
            ("cargo", vec!["test", "--color", "never", "--", "{target}"])
        }
        (Runner::Pytest, Scope::All) => ("pytest", vec!["--color=no"]),
        (Runner::Pytest, Scope::File) => ("pytest", vec!["--color=no", "{target}"]),
        (Runner::Pytest, Scope::Pattern) => ("pytest", vec!["--color=no", "-k", "{target}"]),
        (Runner::Go, Scope::All) => ("go", vec!["test", "./..."]),
        (Runner::Go, Scope::File) => ("go", vec!["test", "{target}"]),
        (Runner::Go, Scope::Pattern) => ("go", vec!["test", "-run", "{target}", "./..."]),
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
                    a.to_string()
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
        let c = command(Runner::Pytest, Scope::Pattern, Some("test_add or test_sub"));
        assert_eq!(c.program, "pytest");
        assert_eq!(c.args, vec!["--color=no", "-k", "test_add or test_sub"]);
        assert_eq!(c.template, "pytest --color=no -k {target}");
        let c = command(Runner::Cargo, Scope::File, Some("integration"));
        assert_eq!(
            c.args,
            vec!["test", "--color", "never", "--test", "integration"]
        );
        assert_eq!(
            command(Runner::Flutter, Scope::All, None).display(),
            "flutter test"
        );
        assert_eq!(
            command(Runner::Go, Scope::File, Some("./pkg/util")).args,
            vec!["test", "./pkg/util"]
        );
    }
}
