//! Per-test results: how many passed, failed and were skipped, and for the
//! failing ones their name, file, line and message. From the runner's own
//! machine-readable report wherever it writes one into the report dir
//! ([`junit`]: pytest and node's test runner; [`jest`]: jest and vitest;
//! [`gotest`]: `go test -json`; [`dart`]: dart and flutter's JSON
//! reporter), else from the console ([`console`]: cargo's libtest, whose
//! JSON format is unstable, and what a run cut off before its report still
//! printed). Nothing here runs anything: a report is whatever the test
//! project wrote, and is read as hostile input (bounded sizes, no path
//! taken from it but to show).

pub mod console;
pub mod coverage;
pub mod dart;
mod expected;
pub mod gotest;
pub mod jest;
pub mod junit;

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
    /// Test files or packages that did not load or build (a syntax error,
    /// a missing import, a compile error): none of their tests ran, so
    /// they are not failed tests and not in `total`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errors: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// As the runner names it to run it again (pytest's node id, cargo's
    /// test path, jest's full name, go's `TestX/sub`).
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    pub message: String,
    pub excerpt: String,
    /// What the test wanted and what it got, where the runner says both
    /// ([`expected`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
}

/// How long one test took, as its runner reported it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timed {
    pub name: String,
    pub seconds: f64,
}

/// The slowest tests kept (the answer shows the first five).
pub const MAX_SLOWEST: usize = 10;
const MAX_TIMED_NAME_CHARS: usize = 300;

#[derive(Debug, Default, PartialEq)]
pub struct Results {
    pub counts: Counts,
    /// Every failing test, in the order reported.
    pub failures: Vec<Failure>,
    /// Every file or package that did not load or build.
    pub errors: Vec<Failure>,
    /// The slowest tests, slowest first, where the runner reports each
    /// test's time.
    pub slowest: Vec<Timed>,
    /// The tests that passed, by name (at most [`MAX_PASSED_NAMES`]): what
    /// a flaky check calls `stable_pass`.
    pub passed: Vec<String>,
    /// The test files that ran, where the report names them (jest's and
    /// vitest's): what a `related` run ran.
    pub files: Vec<String>,
}

/// The most passing tests named (a flaky check reruns a selection).
pub const MAX_PASSED_NAMES: usize = 2000;

impl Results {
    fn record(&mut self, outcome: Outcome) {
        self.counts.total += 1;
        match outcome {
            Outcome::Passed(name) => {
                self.counts.passed += 1;
                if self.passed.len() < MAX_PASSED_NAMES {
                    self.passed.push(name);
                }
            }
            Outcome::Skipped => self.counts.skipped += 1,
            Outcome::Failed(f) => {
                self.counts.failed += 1;
                self.failures.push(f);
            }
        }
    }

    /// A test file or package that did not load or build.
    fn errored(&mut self, error: Failure) {
        self.counts.errors += 1;
        self.errors.push(error);
    }

    /// Note that test `name` took `seconds` (a report's number: anything
    /// not a finite, non-negative figure is left out).
    fn timed(&mut self, name: &str, seconds: f64) {
        if !seconds.is_finite() || seconds < 0.0 || name.is_empty() {
            return;
        }
        if self.slowest.len() == MAX_SLOWEST
            && self.slowest.last().is_some_and(|t| t.seconds >= seconds)
        {
            return;
        }
        let name = plugin_sdk::text::cut(name, MAX_TIMED_NAME_CHARS, "…");
        let at = self.slowest.partition_point(|t| t.seconds >= seconds);
        self.slowest.insert(at, Timed { name, seconds });
        self.slowest.truncate(MAX_SLOWEST);
    }

    /// The failures the answer details.
    pub fn shown(&self) -> &[Failure] {
        &self.failures[..self.failures.len().min(MAX_FAILURES)]
    }

    /// The load and build errors the answer details.
    pub fn errors_shown(&self) -> &[Failure] {
        &self.errors[..self.errors.len().min(MAX_FAILURES)]
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
    /// Passed, by the name a rerun of it would give.
    Passed(String),
    Skipped,
    Failed(Failure),
}

/// A failure known by its name only.
fn named(name: String) -> Failure {
    Failure {
        name,
        file: None,
        line: None,
        message: String::new(),
        excerpt: String::new(),
        expected: None,
        actual: None,
    }
}

/// A failure's message and excerpt, each cut to its bound.
fn failure(name: String, place: Option<(String, u32)>, message: &str, excerpt: &str) -> Failure {
    let (file, line) = place.unzip();
    located(name, file, line, message, excerpt)
}

fn located(
    name: String,
    file: Option<String>,
    line: Option<u32>,
    message: &str,
    excerpt: &str,
) -> Failure {
    let (expected, actual) = expected::expected_actual(&[message, excerpt]).unzip();
    Failure {
        name,
        file,
        line,
        message: clip(message.trim(), MAX_MESSAGE_CHARS),
        excerpt: clip(excerpt.trim(), MAX_EXCERPT_CHARS),
        expected,
        actual,
    }
}

fn clip(text: &str, max: usize) -> String {
    plugin_sdk::text::cut(text, max, "… [cut]")
}

/// `path` relative to the repository, when it is inside it and not a
/// dependency's (`node_modules/`). Windows spellings count: `\` between
/// names, `file:///C:/...`, another case of the drive letter or names
/// (Windows names are case-insensitive). The answer uses `/`.
fn in_repo(path: &str, repo: &str) -> Option<String> {
    let path = slashed(path.strip_prefix("file://").unwrap_or(path));
    let repo = slashed(repo);
    let prefix = format!("{}/", repo.trim_end_matches('/'));
    let windows = repo.as_bytes().get(1) == Some(&b':');
    let head = path.get(..prefix.len())?;
    let inside = head == prefix || (windows && head.eq_ignore_ascii_case(&prefix));
    let rel = &path[prefix.len()..];
    (inside && !rel.starts_with("node_modules/")).then(|| rel.to_string())
}

/// A path with `/` between names, and a URL's `/C:/` as `C:/`.
fn slashed(path: &str) -> String {
    let path = path.replace('\\', "/");
    let b = path.as_bytes();
    if b.len() > 3 && b[0] == b'/' && b[1].is_ascii_alphabetic() && b[2] == b':' && b[3] == b'/' {
        path[1..].to_string()
    } else {
        path
    }
}

/// The first frame of a JavaScript stack in the repository's own files:
/// `(/repo/a.test.js:4:34)`, `at /repo/a.test.js:4:34`, or on Windows
/// `(C:\repo\a.test.js:4:34)`.
fn stack_location(text: &str, repo: &str) -> Option<(String, u32)> {
    let frame = Regex::new(r"(?:\(|at )(?:file://)?((?:/?[A-Za-z]:)?[/\\][^():\s]+):(\d+):\d+\)?")
        .expect("pattern compiles");
    frame.captures_iter(text).find_map(|c| {
        let rel = in_repo(c.get(1)?.as_str(), repo)?;
        Some((rel, c.get(2)?.as_str().parse().ok()?))
    })
}

#[cfg(test)]
fn counts(passed: u32, failed: u32, skipped: u32) -> Counts {
    Counts {
        passed,
        failed,
        skipped,
        total: passed + failed + skipped,
        errors: 0,
    }
}

#[cfg(test)]
mod windows_paths {
    use super::*;

    /// What node on Windows prints, against the guest form of the repo.
    #[test]
    fn windows_stacks_and_urls_point_into_the_repository() {
        let repo = "C:/Users/me/proj";
        let stack =
            "    at TestContext.<anonymous> (C:\\Users\\me\\proj\\test\\math.test.js:4:30)\n";
        assert_eq!(
            stack_location(stack, repo),
            Some(("test/math.test.js".into(), 4))
        );
        let bare = "    at c:\\users\\ME\\proj\\test\\a.test.js:9:1\n";
        assert_eq!(
            stack_location(bare, repo),
            Some(("test/a.test.js".into(), 9))
        );
        assert_eq!(
            in_repo("file:///C:/Users/me/proj/src/x.test.ts", repo).as_deref(),
            Some("src/x.test.ts")
        );
        // Dependencies and other folders are not the repository's.
        assert_eq!(
            in_repo("C:\\Users\\me\\proj\\node_modules\\a.js", repo),
            None
        );
        assert_eq!(in_repo("C:\\Users\\me\\proj2\\a.js", repo), None);
        // Unix repositories compare exactly, as before.
        assert_eq!(in_repo("/home/Me/proj/a.js", "/home/me/proj"), None);
        assert_eq!(
            in_repo("/home/me/proj/a.js", "/home/me/proj").as_deref(),
            Some("a.js")
        );
    }
}

#[cfg(test)]
mod slowest {
    use super::*;

    #[test]
    fn the_ten_slowest_are_kept_slowest_first() {
        let mut results = Results::default();
        for i in 0..30 {
            results.timed(&format!("t{i}"), f64::from(i % 17));
        }
        results.timed("broken", f64::NAN);
        results.timed("negative", -1.0);
        let kept: Vec<f64> = results.slowest.iter().map(|t| t.seconds).collect();
        assert_eq!(
            kept,
            [16.0, 15.0, 14.0, 13.0, 12.0, 12.0, 11.0, 11.0, 10.0, 10.0]
        );
        assert_eq!(results.slowest[0].name, "t16");
    }
}
