//! Per-test verdicts read from a runner's console: libtest's human output
//! (cargo), and what pytest and node's test runner printed before a run
//! was cut off (their reports are written only at the end).

use regex_lite::Regex;

use super::{Outcome, Results, failure, named};

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
            "ok" => Outcome::Passed(name.to_string()),
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
                Outcome::Failed(failure(
                    name.to_string(),
                    location,
                    &message.join("\n"),
                    &body.join("\n"),
                ))
            }
        };
        results.record(outcome);
    }
    results
}

/// pytest's console with `-v` (`file.py::test PASSED`): what a run cut off
/// before its JUnit report still says.
pub fn pytest(output: &str) -> Results {
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
pub fn node(output: &str) -> Results {
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
            "✔" => Outcome::Passed(name),
            "﹣" => Outcome::Skipped,
            _ => Outcome::Failed(named(name)),
        });
    }
    results
}

/// jest's `--verbose` console (on stderr), printed per test file as each
/// file ends: `✓ title`, `✕ title`, `○ skipped title` lines count, and
/// each `● describe › test` block names a failure in full, with its
/// message and the first frame in the test files (`at … (file:line:col)`).
pub fn jest(stderr: &str) -> Results {
    let verdict = Regex::new(r"^\s+(✓|✕|○)(?: skipped| todo)? (.+?)(?: \(\d+ ms\))?$")
        .expect("pattern compiles");
    let frame =
        Regex::new(r"^\s+at .*\((?:\./)?([^()\s]+):(\d+):\d+\)$").expect("pattern compiles");
    let lines: Vec<&str> = stderr.lines().collect();
    let mut results = Results::default();
    // Passed and skipped tests by their lines; failed ones are counted
    // here and detailed from their `●` blocks below.
    for c in lines.iter().filter_map(|l| verdict.captures(l)) {
        match &c[1] {
            "✓" => results.record(Outcome::Passed(c[2].to_string())),
            "○" => results.record(Outcome::Skipped),
            _ => {
                results.counts.failed += 1;
                results.counts.total += 1;
            }
        }
    }
    // The failures, named in full by their `●` blocks.
    for (at, header) in lines.iter().enumerate() {
        let Some(name) = header.trim_start().strip_prefix("● ") else {
            continue;
        };
        if name.starts_with("Test suite failed to run") {
            continue;
        }
        let body: Vec<&str> = lines[at + 1..]
            .iter()
            .take_while(|l| !l.trim_start().starts_with("● ") && !l.starts_with("Test"))
            .copied()
            .collect();
        let place = body.iter().find_map(|l| {
            let c = frame.captures(l)?;
            if c[1].contains("node_modules") {
                return None;
            }
            Some((c[1].to_string(), c[2].parse().ok()?))
        });
        // The message: what comes before the code frame (`> 4 | …`) or
        // the stack.
        let message: Vec<&str> = body
            .iter()
            .map(|l| l.trim())
            .take_while(|l| {
                !l.starts_with('>')
                    && !l.starts_with("at ")
                    && !l.chars().next().is_some_and(|c| c.is_ascii_digit())
            })
            .filter(|l| !l.is_empty())
            .collect();
        results.failures.push(failure(
            name.replace(" › ", " "),
            place,
            &message.join("\n"),
            &body.join("\n"),
        ));
    }
    results
}

/// vitest's `verbose` console, a line per test as it ends:
/// `✓ file:line:col > describe > test 1ms`, `×` when it failed (the next
/// line, `→ message`), `↓` skipped.
pub fn vitest(stdout: &str) -> Results {
    let verdict = Regex::new(r"^\s*(✓|×|↓) ([^\s:]+):(\d+):\d+ > (.+?)(?: \d+(?:\.\d+)?m?s)?$")
        .expect("pattern compiles");
    let lines: Vec<&str> = stdout.lines().collect();
    let mut results = Results::default();
    for (at, line) in lines.iter().enumerate() {
        let Some(c) = verdict.captures(line) else {
            continue;
        };
        let name = c[4].replace(" > ", " ");
        results.record(match &c[1] {
            "✓" => Outcome::Passed(name),
            "↓" => Outcome::Skipped,
            _ => {
                let message = lines
                    .get(at + 1)
                    .and_then(|l| l.trim().strip_prefix("→ "))
                    .unwrap_or_default();
                let place = c[3].parse().ok().map(|line| (c[2].to_string(), line));
                Outcome::Failed(failure(name, place, message, message))
            }
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
            Some(Verdict::Passed) => Outcome::Passed(c[1].to_string()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::counts;

    #[test]
    fn consoles_count_what_finished() {
        let py = pytest(
            "test_calc.py::test_add PASSED                 [ 33%]\ntest_calc.py::test_sub FAILED   [ 66%]\n",
        );
        assert_eq!(py.counts, counts(1, 1, 0));
        assert_eq!(py.failures[0].file.as_deref(), Some("test_calc.py"));
        let node = node(
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

    /// jest 30 `--verbose` (stderr), the hanging file never printed.
    const JEST: &str = "FAIL test/math.test.js
  ○ skipped later
  math
    ✓ adds (2 ms)
    ✕ subtracts (1 ms)

  ● math › subtracts

    expect(received).toBe(expected) // Object.is equality

    Expected: 3
    Received: 1

      3 |   test('subtracts', () => {
    > 4 |     expect(2 - 1).toBe(3);
        |                   ^

      at Object.toBe (test/math.test.js:4:19)
";

    #[test]
    fn a_cut_off_jest_run_counts_the_files_that_ended() {
        let r = jest(JEST);
        assert_eq!(r.counts, counts(1, 1, 1));
        let f = &r.failures[0];
        assert_eq!(f.name, "math subtracts");
        assert_eq!(
            (f.file.as_deref(), f.line),
            (Some("test/math.test.js"), Some(4))
        );
        assert_eq!(
            f.message,
            "expect(received).toBe(expected) // Object.is equality\nExpected: 3\nReceived: 1"
        );
    }

    #[test]
    fn a_cut_off_vitest_run_counts_the_tests_that_ended() {
        let r = vitest(
            " RUN  v4.1.12 /tmp/jp\n\n ✓ test/math.test.js:3:3 > math > adds 1ms\n × test/math.test.js:4:3 > math > subtracts 2ms\n   → expected 1 to be 3 // Object.is equality\n ↓ test/math.test.js:8:6 > later\n",
        );
        assert_eq!(r.counts, counts(1, 1, 1));
        let f = &r.failures[0];
        assert_eq!(f.name, "math subtracts");
        assert_eq!(
            (f.file.as_deref(), f.line),
            (Some("test/math.test.js"), Some(4))
        );
        assert_eq!(f.message, "expected 1 to be 3 // Object.is equality");
    }
}
