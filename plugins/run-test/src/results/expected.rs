//! Expected and actual, kept apart where the runner's message says them:
//! jest's `Expected:` / `Received:` lines, vitest's (chai's) `expected X to
//! be Y`, pytest's rewritten `assert X == Y` (left is what the code gave),
//! and testify's `expected:` / `actual  :` lines in go's output. Read from
//! the message first, then the excerpt; each value cut to its bound.

use regex_lite::Regex;

/// The most kept of each value.
const MAX_VALUE_CHARS: usize = 300;

/// `(expected, actual)` when `texts` (the message, then the excerpt) say
/// both.
pub fn expected_actual(texts: &[&str]) -> Option<(String, String)> {
    // Compiled once: a run can hold thousands of failures.
    static PATTERNS: std::sync::LazyLock<Patterns> = std::sync::LazyLock::new(Patterns::new);
    texts.iter().find_map(|text| PATTERNS.find(text))
}

struct Patterns {
    /// Lines that say each side on their own (jest, testify).
    sides: [(Regex, Regex); 2],
    chai: Regex,
    pytest: Regex,
}

impl Patterns {
    fn new() -> Patterns {
        let re = |p: &str| Regex::new(p).expect("built-in patterns compile");
        Patterns {
            sides: [
                (
                    re(r"(?m)^\s*Expected(?: [a-z]+)?: (.+)$"),
                    re(r"(?m)^\s*Received(?: [a-z]+)?: (.+)$"),
                ),
                (
                    re(r"(?m)^\s*expected\s*: (.+)$"),
                    re(r"(?m)^\s*actual\s*: (.+)$"),
                ),
            ],
            chai: re(
                r"(?m)expected (.+?) to (?:be|equal|deeply equal|strictly equal|eql) (.+?)(?: // Object\.is equality)?$",
            ),
            pytest: re(r"(?m)^\s*(?:E\s+)?(?:AssertionError: )?assert (.+?) == (.+)$"),
        }
    }

    fn find(&self, text: &str) -> Option<(String, String)> {
        let cut = |s: &str| plugin_sdk::text::cut(s.trim(), MAX_VALUE_CHARS, "…");
        // node's AssertionError printed by inspect: `actual: 4,` — the
        // comma is the object's, not the value's.
        let inspected = text.contains("code: 'ERR_ASSERTION'");
        let value = |s: &str| match inspected {
            true => cut(s.trim_end().strip_suffix(',').unwrap_or(s)),
            false => cut(s),
        };
        for (expected, actual) in &self.sides {
            if let (Some(e), Some(a)) = (expected.captures(text), actual.captures(text)) {
                return Some((value(&e[1]), value(&a[1])));
            }
        }
        if let Some(c) = self.chai.captures(text) {
            return Some((cut(&c[2]), cut(&c[1])));
        }
        let c = self.pytest.captures(text)?;
        Some((cut(&c[2]), cut(&c[1])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(text: &str) -> Option<(String, String)> {
        expected_actual(&[text])
    }

    #[test]
    fn each_runners_words_for_the_two_sides() {
        let pair = |e: &str, a: &str| Some((e.to_string(), a.to_string()));
        assert_eq!(
            both(
                "expect(received).toBe(expected) // Object.is equality\n\nExpected: 3\nReceived: 1"
            ),
            pair("3", "1")
        );
        assert_eq!(
            both("AssertionError: expected 1 to be 3 // Object.is equality"),
            pair("3", "1")
        );
        assert_eq!(
            both("assert 2 == 3\n +  where 2 = add(1, 1)"),
            pair("3", "2")
        );
        assert_eq!(
            both("E       AssertionError: assert 'a' == 'b'"),
            pair("'b'", "'a'")
        );
        assert_eq!(
            both("Error:      Not equal: \n            expected: 3\n            actual  : 1"),
            pair("3", "1")
        );
        assert_eq!(both("thread panicked: boom"), None);
        assert_eq!(
            expected_actual(&["no", "Expected: x\nReceived: y"]),
            pair("x", "y")
        );
    }
}
