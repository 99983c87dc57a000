//! JUnit XML: pytest's `--junitxml` (xunit1, which has files and lines)
//! and node's test runner's `--test-reporter=junit`.

use super::{Failure, Outcome, Results, located, stack_location};

/// Which JUnit dialect: where a failure's file and line are found.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// pytest with `junit_family=xunit1`: `file` and `line` attributes.
    Pytest,
    /// node's test runner: the stack in the failure text.
    Node,
}

/// Read a JUnit XML report; `repo` turns absolute paths into relative ones.
pub fn read(xml: &str, dialect: Dialect, repo: &str) -> Result<Results, String> {
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
                // Text nodes only: an element's text() is its first child's,
                // which would count that text twice.
                let text: String = f
                    .descendants()
                    .filter(|t| t.is_text())
                    .filter_map(|t| t.text())
                    .collect();
                // pytest: a module that did not import is no failed test.
                if f.has_tag_name("error") && f.attribute("message") == Some("collection failure") {
                    results.errored(collection_error(&case, &text, repo));
                    continue;
                }
                Outcome::Failed(failure(
                    &case,
                    f.attribute("message").unwrap_or_default(),
                    &text,
                    dialect,
                    repo,
                ))
            }
            // node reports the tests its name filter left out as skipped;
            // they were not asked for, so they are not counted at all.
            None if case.children().any(|c| {
                c.has_tag_name("skipped")
                    && c.attribute("message") == Some("test name does not match pattern")
            }) =>
            {
                continue;
            }
            None if case.children().any(|c| c.has_tag_name("skipped")) => Outcome::Skipped,
            None => Outcome::Passed(case_name(&case, dialect)),
        };
        if let Some(seconds) = case.attribute("time").and_then(|t| t.parse::<f64>().ok()) {
            results.timed(&case_name(&case, dialect), seconds);
        }
        results.record(outcome);
    }
    Ok(results)
}

fn failure(
    case: &roxmltree::Node,
    message: &str,
    text: &str,
    dialect: Dialect,
    repo: &str,
) -> Failure {
    let name = case.attribute("name").unwrap_or_default();
    let (name, file, line) = match dialect {
        Dialect::Pytest => {
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
        Dialect::Node => {
            let (file, line) = stack_location(text, repo).unzip();
            (name.to_string(), file, line)
        }
    };
    // node writes the message attribute with its line breaks dropped
    // (`strictly equal:4 !== 2`); its text has them.
    let message = match dialect {
        Dialect::Node => node_message(text).unwrap_or_else(|| message.to_string()),
        Dialect::Pytest => message.to_string(),
    };
    located(name, file, line, &message, text)
}

/// The message of node's failure text: after `Error [ERR_TEST_FAILURE]: `,
/// up to the stack (`    at …`) or the end of the error (`] {`, ` {`).
fn node_message(text: &str) -> Option<String> {
    let start = text.find("Error [ERR_TEST_FAILURE]: ")? + "Error [ERR_TEST_FAILURE]: ".len();
    let mut lines = Vec::new();
    for line in text[start..].lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("at ") || line.starts_with(']') {
            break;
        }
        lines.push(line.trim_end());
    }
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let message = lines.join("\n");
    (!message.trim().is_empty()).then_some(message)
}

/// A pytest module that could not be collected: named by its file, its
/// message the error's last `E` line (`SyntaxError: invalid syntax`,
/// `ModuleNotFoundError: …`).
fn collection_error(case: &roxmltree::Node, text: &str, repo: &str) -> Failure {
    let file = case.attribute("file").map(str::to_string);
    let message = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("E "))
        .map_or("collection failure", str::trim);
    let line = file
        .as_deref()
        .and_then(|f| {
            text.lines().rev().find_map(|l| {
                let rest = l.trim_start().strip_prefix(f)?.strip_prefix(':')?;
                rest.split(':').next()?.parse().ok()
            })
        })
        .or_else(|| stack_location(text, repo).map(|(_, line)| line));
    let name = file
        .clone()
        .unwrap_or_else(|| case.attribute("name").unwrap_or_default().to_string());
    located(name, file, line, message, text)
}

/// A test case's name as its runner reruns it (pytest's node id).
fn case_name(case: &roxmltree::Node, dialect: Dialect) -> String {
    let name = case.attribute("name").unwrap_or_default();
    match (dialect, case.attribute("file")) {
        (Dialect::Pytest, Some(file)) => {
            pytest_node_id(file, case.attribute("classname").unwrap_or_default(), name)
        }
        _ => name.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::counts;

    /// pytest 8, `-o junit_family=xunit1`.
    const PYTEST: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="4"><testcase classname="test_calc" name="test_add" file="test_calc.py" line="0" time="0.001" /><testcase classname="test_calc" name="test_sub" file="test_calc.py" line="3" time="0.002"><failure message="AssertionError: subtraction is off&#10;assert (2 - 1) == 3">def test_sub():
&gt;       assert 2 - 1 == 3, "subtraction is off"
E       AssertionError: subtraction is off
E       assert (2 - 1) == 3

test_calc.py:5: AssertionError</failure></testcase><testcase classname="pkg.test_shapes.TestSquare" name="test_area" file="pkg/test_shapes.py" line="9" time="0.001"><error message="fixture 'db' not found">file pkg/test_shapes.py, line 10</error></testcase><testcase classname="test_calc" name="test_mul" file="test_calc.py" line="7" time="0.000"><skipped type="pytest.skip" message="later">/tmp/pt2/test_calc.py:8: later</skipped></testcase></testsuite></testsuites>"#;

    #[test]
    fn tests_left_out_by_a_name_filter_are_not_counted() {
        // node 20 --test-name-pattern, junit reporter.
        let xml = r#"<testsuites><testcase name="adds" classname="test"><skipped type="skipped" message="test name does not match pattern"/></testcase><testcase name="later" classname="test"><skipped type="skipped" message="SKIP"/></testcase><testcase name="subtracts" classname="test"><failure type="testCodeFailure" message="1 !== 3">x</failure></testcase></testsuites>"#;
        let r = read(xml, Dialect::Node, "/r").unwrap();
        assert_eq!(r.counts, crate::results::counts(0, 1, 1));
    }

    #[test]
    fn a_failures_text_is_read_once() {
        let r = read(PYTEST, Dialect::Pytest, "/tmp/pt2").unwrap();
        let f = &r.failures[0];
        assert_eq!(
            format!("{f:?}").matches("def test_sub():").count(),
            1,
            "{f:?}"
        );
    }

    #[test]
    fn pytest_reports_name_file_line_and_message() {
        let r = read(PYTEST, Dialect::Pytest, "/tmp/pt2").unwrap();
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

1 !== 3
] {
  code: 'ERR_TEST_FAILURE',
  failureType: 'testCodeFailure',
  cause: AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:
  
  1 !== 3
  
      at TestContext.&lt;anonymous> (/work/proj/test/a.test.js:4:34)
      at Test.runInAsyncScope (node:async_hooks:206:9) {
    generatedMessage: true,
    code: 'ERR_ASSERTION',
    actual: 1,
    expected: 3,
    operator: 'strictEqual'
  }
}
		</failure>
	</testcase>
	<testcase name="later" time="0.000312" classname="test">
		<skipped type="skipped" message="true"/>
	</testcase>
</testsuites>"#;

    #[test]
    fn node_failures_are_located_by_their_stack() {
        let r = read(NODE, Dialect::Node, "/work/proj/").unwrap();
        assert_eq!(r.counts, counts(1, 1, 1));
        let f = &r.failures[0];
        assert_eq!(f.name, "subtracts");
        assert_eq!(
            (f.file.as_deref(), f.line),
            (Some("test/a.test.js"), Some(4))
        );
        // Issue 72, item 15: the message keeps its line breaks (node's
        // attribute drops them) and the values lose inspect's commas.
        assert_eq!(
            f.message,
            "Expected values to be strictly equal:\n\n1 !== 3"
        );
        assert_eq!(
            (f.expected.as_deref(), f.actual.as_deref()),
            (Some("3"), Some("1"))
        );
    }

    #[test]
    fn a_broken_report_is_an_error_not_a_panic() {
        assert!(read("<testsuites><testcase", Dialect::Node, "/").is_err());
        assert!(read(r#"<!DOCTYPE x [<!ENTITY a "b">]><x/>"#, Dialect::Node, "/").is_err());
    }
}
