//! What the command line prints of text it did not write itself.

/// The most of an error printed: what a registry or a server says goes
/// into errors, and it may send gigabytes.
const MAX_ERROR_CHARS: usize = 8 * 1024;

/// `text` fit for a terminal: control characters (escape sequences a
/// registry or server sent) shown as `\u{..}`, at most
/// [`MAX_ERROR_CHARS`] (escapes counted), saying what was cut.
pub fn printable(text: &str) -> String {
    let mut out = String::new();
    let mut shown = 0;
    let mut chars = text.chars();
    for c in chars.by_ref() {
        let piece = match c {
            '\n' | '\t' => c.to_string(),
            c if termtext::hidden(c) => c.escape_unicode().to_string(),
            c => c.to_string(),
        };
        shown += piece.chars().count();
        out.push_str(&piece);
        if shown >= MAX_ERROR_CHARS {
            break;
        }
    }
    let rest = chars.count();
    if rest > 0 {
        out.push_str(&format!(" [… {rest} more characters not shown]"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_and_length_is_bounded() {
        assert_eq!(printable("a\x1b[2Jb\nc"), "a\\u{1b}[2Jb\nc");
        let long = "x".repeat(MAX_ERROR_CHARS + 5);
        let shown = printable(&long);
        assert!(
            shown.ends_with(" [… 5 more characters not shown]"),
            "{shown}"
        );
    }
}
