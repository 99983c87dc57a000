//! Per-test results: how many passed, failed and were skipped, and for the
//! failing ones their name, file, line and message. From the runner's own
//! report where it writes one into the report dir (pytest and node's test
//! runner: JUnit XML), else from the console (cargo: libtest's human
//! output, its JSON format being unstable). Nothing here runs anything: the
//! report is whatever the test project wrote, and is read as hostile input
//! (bounded sizes, no path taken from it but to show).

use regex_lite::Regex;
use serde::{Deserialize, Serialize};

/// At most this many failures are detailed; the rest are counted.
pub const MAX_FAILURES: usize = 20;
/// At most this many failing names are kept for `scope: failed`.
pub const MAX_FAILED_NAMES: usize = 1000;
const MAX_EXCERPT_CHARS: usize = 1500;
const MAX_MESSAGE_CHARS: usize = 500;
/// A report bigger than this is not read (the console summary still is).
pub const MAX_REPORT_BYTES: u64 = 32 * 1024 * 1024;

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub passed: u32,
    pub failed: u32,
    pub skipped: u32,
    pub total: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// As the runner names it to run it again (pytest's node id, cargo's
    /// test path, node's test name).
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub message: String,
    pub excerpt: String,
}

#[derive(Debug, Default, PartialEq)]
pub struct Results {
    pub counts: Counts,
    /// Every failing test, in the order reported.
    pub failures: Vec<Failure>,
}

impl Results {
    fn record(&mut self, outcome: Outcome) {
        self.counts.total += 1;
        match outcome {
            Outcome::Passed => self.counts.passed += 1,
            Outcome::Skipped => self.counts.skipped += 1,
            Outcome::Failed(f) => {
                self.counts.failed += 1;
                self.failures.push(f);
            }
        }
    }

    /// The failures the answer details.
    pub fn shown(&self) -> &[Failure] {
        &self.failures[..self.failures.len().min(MAX_FAILURES)]
    }

    /// The failing tests' names, for `scope: failed`.
    pub fn failed_names(&self) -> Vec<String> {
        self.failures
            .iter()
            .take(MAX_FAILED_NAMES)
            .map(|f| f.name.clone())
            .collect()
    }
}

enum Outcome {
    Passed,
    Skipped,
    Failed(Failure),
}

/// Which JUnit dialect: where a failure's file and line are found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Junit {
    /// pytest with `junit_family=xunit1`: `file` and `line` attributes.
    Pytest,
    /// node's test runner: the stack in the failure text.
    Node,
}

/// Read a JUnit XML report; `repo` turns absolute paths into relative ones.
pub fn junit(xml: &str, dialect: Junit, repo: &str) -> Result<Results, String> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: false,
        ..Default::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, options).map_err(|e| e.to_string())?;
    let mut results = Results::default();
    for case in doc.descendants().filter(|n| n.has_tag_name("testcase")) {
        let failed = case
            .children()
            .find(|c| c.has_tag_name("failure") || c.has_tag_name("error"));
        let outcome = match failed {
            Some(f) => {
                let text: String = f.descendants().filter_map(|t| t.text()).collect();
                Outcome::Failed(failure(
                    &case,
                    f.attribute("message").unwrap_or_default(),
                    &text,
                    dialect,
                    repo,
                ))
            }
            None if case.children().any(|c| c.has_tag_name("skipped")) => Outcome::Skipped,
            None => Outcome::Passed,
        };
        results.record(outcome);
    }
    Ok(results)
}

fn failure(
    case: &roxmltree::Node,
    message: &str,
    text: &str,
    dialect: Junit,
    repo: &str,
) -> Failure {
    let name = case.attribute("name").unwrap_or_default();
    let (name, file, line) = match dialect {
        Junit::Pytest => {
            let file = case.attribute("file").map(str::to_string);
            // The failing line is the last `file:line: Error` of the text;
            // else the test's own (0-based) line.
            let failing = file.as_deref().and_then(|f| {
                text.lines().rev().find_map(|l| {
                    l.strip_prefix(f)?
                        .strip_prefix(':')?
                        .split(':')
                        .next()?
                        .parse()
                        .ok()
                })
            });
            let line = failing.or_else(|| {
                case.attribute("line")
                    .and_then(|l| l.parse::<u32>().ok())
                    .map(|l| l + 1)
            });
            let id = match &file {
                Some(f) => pytest_node_id(f, case.attribute("classname").unwrap_or_default(), name),
                None => name.to_string(),
            };
            (id, file, line)
        }
        Junit::Node => {
            let (file, line) = stack_location(text, repo).unzip();
            (name.to_string(), file, line)
        }
    };
    Failure {
        name,
        file,
        line,
        message: clip(message.trim(), MAX_MESSAGE_CHARS),
        excerpt: clip(text.trim(), MAX_EXCERPT_CHARS),
    }
}

/// `file::Class::name` from pytest's xunit1 attributes (`classname` is the
/// module's dotted path, then the classes).
fn pytest_node_id(file: &str, classname: &str, name: &str) -> String {
    let module = file.trim_end_matches(".py").replace('/', ".");
    let classes = classname
        .strip_prefix(&module)
        .map(|rest| rest.trim_start_matches('.'))
        .unwrap_or("");
    if classes.is_empty() {
        format!("{file}::{name}")
    } else {
        format!("{file}::{}::{name}", classes.replace('.', "::"))
    }
}

/// The first frame of a JavaScript stack in the repository's own files:
/// `(/repo/a.test.js:4:34)` or `at /repo/a.test.js:4:34`.
fn stack_location(text: &str, repo: &str) -> Option<(String, u32)> {
    let frame =
        Regex::new(r"(?:\(|at )(?:file://)?(/[^():\s]+):(\d+):\d+\)?").expect("pattern compiles");
    let prefix = format!("{}/", repo.trim_end_matches('/'));
    frame.captures_iter(text).find_map(|c| {
        let path = c.get(1)?.as_str();
        let rel = path.strip_prefix(&prefix)?;
        if rel.starts_with("node_modules/") {
            return None;
        }
        Some((rel.to_string(), c.get(2)?.as_str().parse().ok()?))
    })
}

/// libtest's console output (`cargo test`): every `test … ok|FAILED|ignored`
/// line, and for each failure its `---- name stdout ----` block, whose
/// `panicked at file:line:col:` says where.
pub fn libtest(output: &str) -> Results {
    let verdict = Regex::new(r"^test (.+?) \.\.\. (ok|FAILED|ignored)").expect("pattern compiles");
    let block = Regex::new(r"^---- (.+?) stdout ----$").expect("pattern compiles");
    let panicked = Regex::new(r"^thread '[^']*'(?: \(\d+\))? panicked at (.+?):(\d+):\d+:$")
        .expect("pattern compiles");
    let lines: Vec<&str> = output.lines().collect();
    // Each failure's block: from its header to the next header or `failures:`.
    let mut blocks: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in &lines {
        if let Some(c) = block.captures(line) {
            blocks.push((c.get(1).map_or("", |m| m.as_str()), Vec::new()));
        } else if line.trim_end() == "failures:" || line.starts_with("test result:") {
            blocks.push(("", Vec::new()));
        } else if let Some((_, body)) = blocks.last_mut() {
            body.push(line);
        }
    }
    let mut results = Results::default();
    for line in &lines {
        let Some(c) = verdict.captures(line) else {
            continue;
        };
        let name = c.get(1).map_or("", |m| m.as_str());
        let outcome = match c.get(2).map_or("", |m| m.as_str()) {
            "ok" => Outcome::Passed,
            "ignored" => Outcome::Skipped,
            _ => {
                let body = blocks
                    .iter()
                    .rev()
                    .find(|(n, _)| *n == name)
                    .map(|(_, b)| b.as_slice())
                    .unwrap_or_default();
                let mut location = None;
                let mut message = Vec::new();
                for (i, l) in body.iter().enumerate() {
                    if let Some(p) = panicked.captures(l) {
                        location = Some((p[1].to_string(), p[2].parse().unwrap_or(0)));
                        message = body[i + 1..]
                            .iter()
                            .take_while(|m| {
                                !m.starts_with("note: ") && !m.starts_with("stack backtrace:")
                            })
                            .copied()
                            .collect();
                        break;
                    }
                }
                let (file, line) = location.unzip();
                Outcome::Failed(Failure {
                    name: name.to_string(),
                    file,
                    line,
                    message: clip(message.join("\n").trim(), MAX_MESSAGE_CHARS),
                    excerpt: clip(body.join("\n").trim(), MAX_EXCERPT_CHARS),
                })
            }
        };
        results.record(outcome);
    }
    results
}

/// pytest's console with `-v` (`file.py::test PASSED`): what a run cut off
/// before its JUnit report still says.
pub fn pytest_console(output: &str) -> Results {
    let verdict = Regex::new(r"^(\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
        .expect("pattern compiles");
    console(output, &verdict, |word| match word {
        "PASSED" | "XPASS" => Some(Verdict::Passed),
        "SKIPPED" | "XFAIL" => Some(Verdict::Skipped),
        "FAILED" | "ERROR" => Some(Verdict::Failed),
        _ => None,
    })
}

/// node's test runner's `spec` console (`✔ name (1ms)`, `✖ name`, `﹣ name
/// … # SKIP`): what a run cut off before its JUnit report still says.
pub fn node_console(output: &str) -> Results {
    let verdict = Regex::new(r"^\s*(✔|✖|﹣) (.+?) \(\d").expect("pattern compiles");
    let mut results = Results::default();
    let mut failed = std::collections::HashSet::new();
    for c in output.lines().filter_map(|l| verdict.captures(l)) {
        let name = c[2].to_string();
        // The spec reporter lists the failures again at the end.
        if c[1] == *"✖" && !failed.insert(name.clone()) {
            continue;
        }
        results.record(match &c[1] {
            "✔" => Outcome::Passed,
            "﹣" => Outcome::Skipped,
            _ => Outcome::Failed(named(name)),
        });
    }
    results
}

enum Verdict {
    Passed,
    Skipped,
    Failed,
}

fn console(output: &str, verdict: &Regex, read: impl Fn(&str) -> Option<Verdict>) -> Results {
    let mut results = Results::default();
    for c in output.lines().filter_map(|l| verdict.captures(l)) {
        let outcome = match read(&c[2]) {
            Some(Verdict::Passed) => Outcome::Passed,
            Some(Verdict::Skipped) => Outcome::Skipped,
            Some(Verdict::Failed) => {
                let mut f = named(c[1].to_string());
                f.file = c[1].split("::").next().map(str::to_string);
                Outcome::Failed(f)
            }
            None => continue,
        };
        results.record(outcome);
    }
    results
}

/// A failure known by its name only.
fn named(name: String) -> Failure {
    Failure {
        name,
        file: None,
        line: None,
        message: String::new(),
        excerpt: String::new(),
    }
}

fn clip(text: &str, max: usize) -> String {
    crate::excerpt::cut(text, max, "… [cut]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(passed: u32, failed: u32, skipped: u32) -> Counts {
        Counts {
            passed,
            failed,
            skipped,
            total: passed + failed + skipped,
        }
    }

    /// pytest 8, `-o junit_family=xunit1`.
    const PYTEST: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4"><testcase classname="test_calc" name="test_add" file="test_calc.py" line="0" time="0.001" /><testcase classname="test_calc" name="test_sub" file="test_calc.py" line="3" time="0.002"><failure message="AssertionError: subtraction is off&#10;assert (2 - 1) == 3">def test_sub():
&gt;       assert 2 - 1 == 3, "subtraction is off"
E       AssertionError: subtraction is off
E       assert (2 - 1) == 3

test_calc.py:5: AssertionError</failure></testcase><testcase classname="pkg.test_shapes.TestSquare" name="test_area" file="pkg/test_shapes.py" line="9" time="0.001"><error message="fixture 'db' not found">file pkg/test_shapes.py, line 10</error></testcase><testcase classname="test_calc" name="test_mul" file="test_calc.py" line="7" time="0.000"><skipped type="pytest.skip" message="later">/tmp/pt2/test_calc.py:8: later</skipped></testcase></testsuite></testsuites>"#;

    #[test]
    fn pytest_reports_name_file_line_and_message() {
        let r = junit(PYTEST, Junit::Pytest, "/tmp/pt2").unwrap();
        assert_eq!(r.counts, counts(1, 2, 1));
        let f = &r.failures[0];
        assert_eq!(f.name, "test_calc.py::test_sub");
        assert_eq!((f.file.as_deref(), f.line), (Some("test_calc.py"), Some(5)));
        assert!(
            f.message.starts_with("AssertionError: subtraction is off"),
            "{}",
            f.message
        );
        assert!(
            f.excerpt.contains("> ") && f.excerpt.contains("assert 2 - 1 == 3"),
            "{}",
            f.excerpt
        );
        let e = &r.failures[1];
        assert_eq!(e.name, "pkg/test_shapes.py::TestSquare::test_area");
        assert_eq!(e.line, Some(10), "the test's own line, 1-based");
    }

    /// node 20's `--test-reporter=junit`, cut down.
    const NODE: &str = r#"<?xml version="1.0" encoding="utf-8"?>
<testsuites>
	<testcase name="adds" time="0.002014" classname="test"/>
	<testcase name="subtracts" time="0.003625" classname="test" failure="Expected values to be strictly equal:1 !== 3">
		<failure type="testCodeFailure" message="Expected values to be strictly equal:1 !== 3">
[Error [ERR_TEST_FAILURE]: Expected values to be strictly equal:
  cause: AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:
      at TestContext.&lt;anonymous> (/work/proj/test/a.test.js:4:34)
      at Test.runInAsyncScope (node:async_hooks:206:9)
		</failure>
	</testcase>
	<testcase name="later" time="0.000312" classname="test">
		<skipped type="skipped" message="true"/>
	</testcase>
</testsuites>"#;

    #[test]
    fn node_failures_are_located_by_their_stack() {
        let r = junit(NODE, Junit::Node, "/work/proj/").unwrap();
        assert_eq!(r.counts, counts(1, 1, 1));
        let f = &r.failures[0];
        assert_eq!(f.name, "subtracts");
        assert_eq!(
            (f.file.as_deref(), f.line),
            (Some("test/a.test.js"), Some(4))
        );
        assert!(f.message.contains("1 !== 3"));
    }

    #[test]
    fn a_broken_report_is_an_error_not_a_panic() {
        assert!(junit("<testsuites><testcase", Junit::Node, "/").is_err());
        assert!(junit(r#"<!DOCTYPE x [<!ENTITY a "b">]><x/>"#, Junit::Node, "/").is_err());
    }

    #[test]
    fn consoles_count_what_finished() {
        let py = pytest_console(
            "test_calc.py::test_add PASSED                 [ 33%]\ntest_calc.py::test_sub FAILED   [ 66%]\n",
        );
        assert_eq!(py.counts, counts(1, 1, 0));
        assert_eq!(py.failures[0].file.as_deref(), Some("test_calc.py"));
        let node = node_console(
            "✔ adds (0.9ms)\n✖ subtracts (1.2ms)\n﹣ later (0.1ms) # SKIP\n✖ failing tests:\n\ntest at a.test.js:4:1\n✖ subtracts (1.2ms)\n",
        );
        assert_eq!(node.counts, counts(1, 1, 1));
    }

    const LIBTEST: &str = "
running 3 tests
test tests::adds ... ok
test tests::later ... ignored
test tests::subtracts ... FAILED

failures:

---- tests::subtracts stdout ----

thread 'tests::subtracts' (4242) panicked at src/lib.rs:12:9:
assertion `left == right` failed: subtraction is off
  left: 1
 right: 3
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::subtracts

test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.00s
";

    #[test]
    fn libtest_console_gives_names_places_and_messages() {
        let r = libtest(LIBTEST);
        assert_eq!(r.counts, counts(1, 1, 1));
        let f = &r.failures[0];
        assert_eq!(f.name, "tests::subtracts");
        assert_eq!((f.file.as_deref(), f.line), (Some("src/lib.rs"), Some(12)));
        assert_eq!(
            f.message,
            "assertion `left == right` failed: subtraction is off\n  left: 1\n right: 3"
        );
        assert_eq!(r.failed_names(), ["tests::subtracts"]);
    }
}
