//! Jest's `--json --outputFile` report, which vitest's `json` reporter
//! writes too: per test file its tests (`assertionResults`) with status,
//! full name, declaration line and failure messages (stack included).

use serde_json::Value;

use super::{Outcome, Results, failure, in_repo, stack_location};
use plugin_sdk::text::strip_ansi;

/// Read a jest-format JSON report; `repo` turns absolute paths into
/// relative ones.
pub fn read(json: &str, repo: &str) -> Result<Results, String> {
    let report: Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let files = report["testResults"]
        .as_array()
        .ok_or("no testResults in the report")?;
    let mut results = Results::default();
    for file in files {
        let path = file["name"].as_str().unwrap_or_default();
        let rel = in_repo(path, repo);
        if let Some(rel) = &rel {
            results.files.push(rel.clone());
        }
        let tests = file["assertionResults"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        for test in tests {
            if let Some(ms) = test["duration"].as_f64() {
                let name = test["fullName"].as_str().or(test["title"].as_str());
                results.timed(name.unwrap_or_default(), ms / 1000.0);
            }
            results.record(match test["status"].as_str().unwrap_or_default() {
                "passed" => Outcome::Passed(full_name(test)),
                "failed" => Outcome::Failed(test_failure(test, rel.as_deref(), repo)),
                // pending, skipped, todo, disabled
                _ => Outcome::Skipped,
            });
        }
        // A file that failed before any of its tests ran (a syntax error, a
        // missing import): one failure named by the file.
        let message = strip_ansi(file["message"].as_str().unwrap_or_default());
        if file["status"] == "failed" && !tests.iter().any(|t| t["status"] == "failed") {
            let name = rel.clone().unwrap_or_else(|| path.to_string());
            let place = parse_failure_at(&message, repo)
                .or_else(|| stack_location(&message, repo))
                .or_else(|| rel.clone().map(|file| (file, 1)));
            results.errored(failure(
                name,
                place,
                &leading_lines(&message),
                &own_lines(&message),
            ));
        }
    }
    Ok(results)
}

/// Where vitest says a file did not parse: `At file: /test/x.test.js:2:24`
/// (the path from the project's root, or absolute).
fn parse_failure_at(message: &str, repo: &str) -> Option<(String, u32)> {
    let at = message
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("At file: "))?;
    let mut parts = at.rsplitn(3, ':');
    let (_column, line, path) = (parts.next()?, parts.next()?, parts.next()?);
    let line = line.parse().ok()?;
    let file = in_repo(path, repo).unwrap_or_else(|| path.trim_start_matches('/').to_string());
    Some((file, line))
}

/// A test's name as jest reruns it: its full name, else its title.
fn full_name(test: &Value) -> String {
    match test["fullName"].as_str() {
        Some(full) if !full.is_empty() => full.to_string(),
        _ => test["title"].as_str().unwrap_or_default().to_string(),
    }
}

fn test_failure(test: &Value, file: Option<&str>, repo: &str) -> super::Failure {
    let name = full_name(test);
    let messages: Vec<String> = test["failureMessages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(strip_ansi)
        .collect();
    let text = messages.join("\n");
    // Where it failed (the stack's first frame in the repository), else
    // where the test is declared.
    let declared = test["location"]["line"]
        .as_u64()
        .and_then(|l| Some((file?.to_string(), u32::try_from(l).ok()?)));
    let place = stack_location(&text, repo).or(declared);
    let first = messages.first().map(String::as_str).unwrap_or_default();
    failure(name, place, &leading_lines(first), &own_lines(&text))
}

/// A message without its stack (`    at …` lines and what follows).
fn leading_lines(message: &str) -> String {
    message
        .lines()
        .take_while(|l| !l.trim_start().starts_with("at "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text without the test framework's and node's own frames.
fn own_lines(text: &str) -> String {
    text.lines()
        .filter(|l| {
            let frame = l.trim_start().starts_with("at ");
            !(frame
                && (l.contains("node_modules") || l.contains("node:") || l.contains("<anonymous>")))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::counts;

    /// jest 30 with `--json --testLocationInResults`, cut down.
    const JEST: &str = r#"{"numFailedTests":1,"testResults":[{"name":"/tmp/jp/test/math.test.js","status":"failed","message":"",
      "assertionResults":[
        {"ancestorTitles":["math"],"fullName":"math adds","status":"passed","title":"adds","failureMessages":[],"location":{"column":3,"line":2}},
        {"ancestorTitles":["math"],"fullName":"math subtracts","status":"failed","title":"subtracts","location":{"column":3,"line":3},
         "failureMessages":["Error: \u001b[2mexpect(\u001b[22mreceived).toBe(expected) // Object.is equality\n\nExpected: 3\nReceived: 1\n    at Object.toBe (/tmp/jp/test/math.test.js:4:19)\n    at Promise.finally.completed (/root/.cache/js/node_modules/jest-circus/build/jestAdapterInit.js:1834:28)\n    at new Promise (<anonymous>)"]},
        {"ancestorTitles":[],"fullName":"later","status":"pending","title":"later","failureMessages":[],"location":{"column":6,"line":7}}]},
      {"name":"/tmp/jp/test/broken.test.js","status":"failed","assertionResults":[],
       "message":"  \u001b[1m● Test suite failed to run\u001b[22m\n\n    SyntaxError: /tmp/jp/test/broken.test.js: Unexpected token (3:0)\n"}]}"#;

    #[test]
    fn jest_reports_names_places_and_messages() {
        let r = read(JEST, "/tmp/jp").unwrap();
        // The suite that failed to run is an error, not a failed test.
        assert_eq!(
            r.counts,
            super::super::Counts {
                errors: 1,
                ..counts(1, 1, 1)
            }
        );
        let f = &r.failures[0];
        assert_eq!(f.name, "math subtracts");
        assert_eq!(
            (f.file.as_deref(), f.line),
            (Some("test/math.test.js"), Some(4))
        );
        assert_eq!(
            f.message,
            "Error: expect(received).toBe(expected) // Object.is equality\n\nExpected: 3\nReceived: 1"
        );
        assert!(f.excerpt.contains("math.test.js:4:19"), "{}", f.excerpt);
        assert!(!f.excerpt.contains("jest-circus"), "{}", f.excerpt);
        let suite = &r.errors[0];
        assert_eq!(suite.name, "test/broken.test.js");
        assert_eq!(suite.file.as_deref(), Some("test/broken.test.js"));
        assert!(suite.message.contains("SyntaxError"), "{}", suite.message);
    }

    /// vitest 4's `json` reporter: the same shape, its frames without
    /// parentheses.
    #[test]
    fn a_file_vitest_could_not_parse_is_placed_at_its_line() {
        let message = "Parse failure: Parse failed with 1 error:\nUnexpected token\n2: test('x', () => { let = ; });\n                           ^\nAt file: /test/bad.test.js:2:24";
        assert_eq!(
            parse_failure_at(message, "/work/p/"),
            Some(("test/bad.test.js".to_string(), 2))
        );
        assert_eq!(
            parse_failure_at("At file: /work/p/test/a.test.js:7:1", "/work/p/"),
            Some(("test/a.test.js".to_string(), 7))
        );
    }

    #[test]
    fn vitest_frames_are_found_too() {
        let report = r#"{"testResults":[{"name":"/w/p/a.test.js","status":"failed","message":"","assertionResults":[
          {"ancestorTitles":[],"fullName":"subtracts","status":"failed","title":"subtracts","location":{"line":4,"column":3},
           "failureMessages":["AssertionError: expected 1 to be 3 // Object.is equality\n    at /w/p/a.test.js:5:19\n    at file:///w/p/node_modules/@vitest/runner/dist/index.js:1:1"]}]}]}"#;
        let r = read(report, "/w/p/").unwrap();
        assert_eq!(r.counts, counts(0, 1, 0));
        let f = &r.failures[0];
        assert_eq!((f.file.as_deref(), f.line), (Some("a.test.js"), Some(5)));
        assert_eq!(
            f.message,
            "AssertionError: expected 1 to be 3 // Object.is equality"
        );
    }

    #[test]
    fn a_report_that_is_not_jest_json_is_an_error() {
        assert!(read("{", "/").is_err());
        assert!(read(r#"{"testResults": 3}"#, "/").is_err());
    }
}
