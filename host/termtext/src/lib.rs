//! Text someone else wrote (an agent's commit message, a title, a file a
//! container changed), shown on a person's terminal. A terminal obeys
//! what it is sent: ESC and C1 controls (U+0080–U+009F, CSI among them)
//! move the cursor, retitle the window or rewrite what was shown; bidi
//! overrides and isolates (U+202A–U+202E, U+2066–U+2069) make text read in
//! an order other than the bytes' (Trojan Source). None of them gets
//! through: each is replaced by U+FFFD, or escaped as `\uXXXX` inside JSON.

/// Whether `c` must not reach a terminal as it is: every control
/// character (C0, DEL, C1), and the invisible format characters that
/// reorder or hide text (bidi marks, embeddings, overrides and isolates,
/// zero-width characters, the byte-order mark, interlinear annotations).
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
        )
}

/// One line (a cell, a title) for the terminal: every [`hidden`]
/// character, line ends included, replaced by U+FFFD.
pub fn line(text: &str) -> String {
    text.chars()
        .map(|c| if hidden(c) { '\u{FFFD}' } else { c })
        .collect()
}

/// Several lines (a log, a diff): as [`line`], with tabs and line ends
/// kept.
pub fn lines(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c,
            c if hidden(c) => '\u{FFFD}',
            c => c,
        })
        .collect()
}

/// JSON text (as serde_json writes it) with every [`hidden`] character
/// that it leaves as it is (C1, DEL, bidi and the rest: JSON escapes only
/// C0) written as a `\uXXXX` escape: the same value to a JSON reader,
/// nothing a terminal acts on. Such characters occur only inside strings,
/// where the escape is valid.
pub fn json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) && !matches!(c, '\n' | '\t' | '\r') {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_a_terminal_acts_on_gets_through() {
        let hostile = "a\u{1b}[2Jb\u{9b}31mc\u{202e}d\u{2066}e\u{85}f\u{7f}g";
        let shown = line(hostile);
        assert_eq!(
            shown,
            "a\u{FFFD}[2Jb\u{FFFD}31mc\u{FFFD}d\u{FFFD}e\u{FFFD}f\u{FFFD}g"
        );
        assert_eq!(lines("x\ty\nz\u{1b}"), "x\ty\nz\u{FFFD}");
        assert_eq!(line("é 中 ok"), "é 中 ok");
    }

    #[test]
    fn json_keeps_its_value_without_raw_controls() {
        let value = serde_json::Value::String("t\u{9b}i\u{202e}t\u{1b}le".into());
        let text = json(&serde_json::to_string(&value).unwrap());
        assert!(text.chars().all(|c| !hidden(c)), "{text:?}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).unwrap(),
            value
        );
    }
}
