//! Mechanical summaries (no LLM): failure lines found by each runner's
//! patterns, with context, at most [`MAX_BLOCKS`] blocks, plus the last
//! [`LAST_LINES`] lines. Works on the output tail only.

use plugin_sdk::text::{cut, strip_ansi};
use regex_lite::Regex;
use serde::Serialize;

use crate::template::Runner;

pub const CONTEXT: usize = 3;
pub const MAX_BLOCKS: usize = 5;
pub const LAST_LINES: usize = 30;
/// Most lines of one block: a flood of failure lines merges into one.
const MAX_BLOCK_LINES: usize = 20;
/// Lines longer than this are cut in summaries (a flood can be one line).
const MAX_LINE: usize = 400;

/// Generic failure words from the seed, for every runner.
const GENERIC: &str = r"FAIL|FAILED|ERROR|FATAL|Exception|Traceback|panic|AssertionError";

/// Runner-specific failure lines (see shared/notes/test-runners.md).
fn patterns(runner: Runner) -> &'static [&'static str] {
    match runner {
        Runner::Cargo => &[
            r"^(warning|error)(\[\S*\])?: ",
            r"^\s+--> (.*):(\d+):(\d+)",
            r"^thread '([^']+)'( \(\d+\))? panicked at (.+):(\d+):(\d+):$",
            r"^test (\S+) \.\.\. FAILED$",
            r"^---- (\S+) stdout ----$",
            r"^test result: FAILED",
        ],
        Runner::Go => &[
            r"^\s*--- FAIL: (\S+)",
            r"^\s+(\S+_test\.go):(\d+): (.*)",
            r"^FAIL\s+\S+",
            r"^panic: ",
        ],
        Runner::Pytest => &[
            r#"^\s*File "(.*)", line (\d+), in (.*)$"#,
            r"^(FAILED|ERROR) (\S+::\S+)( - (.*))?$",
            r"^E\s+",
        ],
        Runner::Flutter | Runner::Dart => &[
            r"^\d+:\d+ \+\d+( ~\d+)?( -\d+)?: (.*) \[E\]$",
            r"^(.+\.dart):(\d+):(\d+): Error: ",
            r"Expected: ",
            r"Actual: ",
        ],
        Runner::Npm => &[r"^\s*● ", r"^FAIL "],
    }
}

#[derive(Debug, Serialize)]
pub struct Block {
    /// 1-based line numbers within the summarised tail.
    pub first_line: usize,
    pub last_line: usize,
    pub text: String,
}

#[derive(Debug, Serialize)]
pub struct Summary {
    pub blocks: Vec<Block>,
    /// Matches beyond [`MAX_BLOCKS`] that were not shown.
    pub blocks_omitted: usize,
    pub last_lines: Vec<String>,
    /// The 1-based line number of the first of `last_lines`.
    #[serde(skip)]
    pub last_lines_from: usize,
}

pub struct Header<'a> {
    pub status: &'a str,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    pub command: &'a str,
    pub started_at: &'a str,
    pub error: Option<&'a str>,
    /// Why the run ended (`exited with code 1`, `killed: …`).
    pub ended: &'a str,
    pub tests: Option<&'a crate::results::Counts>,
    pub failures: &'a [crate::results::Failure],
    pub errors: &'a [crate::results::Failure],
    pub slowest: &'a [crate::results::Timed],
}

fn static_regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("built-in patterns compile")
}

fn clip(line: &str) -> String {
    cut(line, MAX_LINE, "… [line cut]")
}

pub fn summarize(tail: &str, truncated: bool, runner: Runner) -> Summary {
    let clean = strip_ansi(tail);
    let mut lines: Vec<&str> = clean.lines().collect();
    if truncated && !lines.is_empty() {
        lines.remove(0); // cut mid-line by the tail buffer
    }
    let matchers: Vec<Regex> = patterns(runner)
        .iter()
        .chain(std::iter::once(&GENERIC))
        .map(|p| static_regex(p))
        .collect();
    let hits: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| matchers.iter().any(|m| m.is_match(l)))
        .map(|(i, _)| i)
        .collect();

    // Merge hits whose context windows touch into one block.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for &hit in &hits {
        let (start, end) = (
            hit.saturating_sub(CONTEXT),
            (hit + CONTEXT).min(lines.len() - 1),
        );
        match ranges.last_mut() {
            Some((_, last_end)) if start <= *last_end + 1 => *last_end = end,
            _ => ranges.push((start, end)),
        }
    }
    let blocks_omitted = ranges.len().saturating_sub(MAX_BLOCKS);
    let blocks = ranges
        .into_iter()
        .take(MAX_BLOCKS)
        .map(|(s, e)| (s, e.min(s + MAX_BLOCK_LINES - 1)))
        .map(|(s, e)| Block {
            first_line: s + 1,
            last_line: e + 1,
            text: lines[s..=e]
                .iter()
                .map(|l| clip(l))
                .collect::<Vec<_>>()
                .join("\n"),
        })
        .collect();
    let from = lines.len().saturating_sub(LAST_LINES);
    let last_lines = lines[from..].iter().map(|l| clip(l)).collect();
    Summary {
        blocks,
        blocks_omitted,
        last_lines,
        last_lines_from: from + 1,
    }
}

impl Summary {
    /// The excerpt returned to the model: failure blocks, then the last
    /// lines, without those a block already showed (a short output was
    /// said twice).
    pub fn excerpt(&self) -> String {
        let mut out = String::new();
        for b in &self.blocks {
            out.push_str(&format!(
                "--- lines {}-{} ---\n{}\n",
                b.first_line, b.last_line, b.text
            ));
        }
        if self.blocks_omitted > 0 {
            out.push_str(&format!(
                "--- {} more failure blocks in summary.json / raw.log ---\n",
                self.blocks_omitted
            ));
        }
        let shown = self.blocks.last().map_or(0, |b| b.last_line);
        let skip = (shown + 1).saturating_sub(self.last_lines_from);
        let rest = self.last_lines.get(skip..).unwrap_or_default();
        if rest.is_empty() && !self.blocks.is_empty() {
            out.push_str("--- the last lines are in the block above ---");
        } else if rest.is_empty() {
            // Nothing was kept of the output (max_output_bytes too small
            // for a line, or none was written): say so, not a block that
            // is not there (issue 54, item 20).
            out.push_str("--- no output kept for this excerpt: raw.log holds all of it ---");
        } else {
            out.push_str(&format!(
                "--- last {} lines ---\n{}",
                rest.len(),
                rest.join("\n")
            ));
        }
        out
    }

    pub fn markdown(&self, h: &Header) -> String {
        let mut md = format!(
            "# Test run: {}\n\n- command: `{}`\n- status: **{}**\n- ended: {}\n- exit code: {}\n- duration: {} ms\n- started: {} (UTC)\n",
            h.status,
            h.command,
            h.status,
            h.ended,
            h.exit_code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "none".into()),
            h.duration_ms,
            h.started_at
        );
        if let Some(e) = h.error {
            md.push_str(&format!("- error: {e}\n"));
        }
        if let Some(t) = h.tests {
            md.push_str(&format!(
                "- tests: {} passed, {} failed, {} skipped ({} in all)\n",
                t.passed, t.failed, t.skipped, t.total
            ));
            if t.errors > 0 {
                md.push_str(&format!(
                    "- {} test files or packages did not load or build\n",
                    t.errors
                ));
            }
        }
        if !h.failures.is_empty() {
            md.push_str("\n## Failed tests\n\n");
        }
        for f in h.failures {
            let place = match (&f.file, f.line) {
                (Some(file), Some(line)) => format!(" ({file}:{line})"),
                (Some(file), None) => format!(" ({file})"),
                _ => String::new(),
            };
            md.push_str(&format!(
                "- `{}`{place}: {}\n",
                f.name,
                f.message.lines().next().unwrap_or("")
            ));
        }
        if !h.errors.is_empty() {
            md.push_str("\n## Did not load or build\n\n");
        }
        for e in h.errors {
            let place = match (&e.file, e.line) {
                (Some(file), Some(line)) => format!(" ({file}:{line})"),
                _ => String::new(),
            };
            md.push_str(&format!(
                "- `{}`{place}: {}\n",
                e.name,
                e.message.lines().next().unwrap_or("")
            ));
        }
        if !h.slowest.is_empty() {
            md.push_str("\n## Slowest tests\n\n");
        }
        for t in h.slowest {
            md.push_str(&format!("- `{}`: {:.3} s\n", t.name, t.seconds));
        }
        md.push_str(&format!(
            "\n## Failure excerpts ({} of at most {MAX_BLOCKS})\n\n",
            self.blocks.len()
        ));
        if self.blocks.is_empty() {
            md.push_str("No failure lines matched.\n");
        }
        for b in &self.blocks {
            md.push_str(&format!(
                "Lines {}-{}:\n\n```\n{}\n```\n\n",
                b.first_line, b.last_line, b.text
            ));
        }
        md.push_str(&format!(
            "## Last {} lines\n\n```\n{}\n```\n",
            self.last_lines.len(),
            self.last_lines.join("\n")
        ));
        md
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CARGO_FAIL: &str = "\x1b[1mrunning 2 tests\x1b[0m
test tests::adds ... ok
test tests::subtracts ... FAILED

failures:

---- tests::subtracts stdout ----

thread 'tests::subtracts' (1234) panicked at src/lib.rs:12:9:
assertion `left == right` failed
  left: 1
 right: 2
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::subtracts

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";

    #[test]
    fn cargo_failure_blocks_have_context() {
        let s = summarize(CARGO_FAIL, false, Runner::Cargo);
        assert!(!s.blocks.is_empty());
        let all: String = s
            .blocks
            .iter()
            .map(|b| b.text.clone())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(all.contains("test tests::subtracts ... FAILED"));
        assert!(all.contains("panicked at src/lib.rs:12:9:"));
        assert!(
            all.contains("left: 1"),
            "context lines after the panic line: {all}"
        );
        assert!(all.contains("test result: FAILED"));
        assert!(!all.contains("\x1b["), "ANSI stripped");
        // Issue 39, item 7: the short output's lines are said once.
        let excerpt = s.excerpt();
        assert_eq!(
            excerpt.matches("test result: FAILED").count(),
            1,
            "{excerpt}"
        );
    }

    #[test]
    fn pytest_failures() {
        let out = "test_math.py F.                                   [100%]
=================================== FAILURES ===================================
___________________________________ test_sub ___________________________________
    def test_sub():
>       assert 1 - 1 == 1
E       assert 0 == 1
test_math.py:5: AssertionError
=========================== short test summary info ============================
FAILED test_math.py::test_sub - assert 0 == 1
========================= 1 failed, 1 passed in 0.01s ==========================
";
        let s = summarize(out, false, Runner::Pytest);
        let all: String = s.blocks.iter().map(|b| b.text.clone()).collect();
        assert!(all.contains("E       assert 0 == 1"));
        assert!(all.contains("FAILED test_math.py::test_sub"));
    }

    #[test]
    fn at_most_k_blocks_and_n_last_lines() {
        let mut out = String::new();
        for i in 0..100 {
            out.push_str(&format!("line {i}\n"));
            if i % 10 == 0 {
                out.push_str("ERROR something\n");
            }
        }
        let s = summarize(&out, false, Runner::Go);
        assert_eq!(s.blocks.len(), MAX_BLOCKS);
        assert_eq!(s.blocks_omitted, 5);
        assert_eq!(s.last_lines.len(), LAST_LINES);
        assert_eq!(s.last_lines.last().unwrap(), "line 99");
    }

    #[test]
    fn a_passing_run_has_no_blocks_and_long_lines_are_cut() {
        let long = "x".repeat(10_000);
        let s = summarize(
            &format!("{long}\ntest result: ok. 3 passed; 0 failed\n"),
            false,
            Runner::Cargo,
        );
        assert!(s.blocks.is_empty());
        assert!(s.last_lines[0].len() < 1000);
        // A truncated tail drops its first, partial line.
        let s = summarize("artial\nwhole\n", true, Runner::Cargo);
        assert_eq!(s.last_lines, vec!["whole"]);
    }
}
