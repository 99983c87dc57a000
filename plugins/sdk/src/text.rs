//! Answers within what clients show a model. Claude Code previews 2 KB of
//! a bigger tool answer, Codex keeps ~12 KB, Gemini CLI drops the middle
//! past 40,000 characters: a bundled tool keeps its default answer within
//! [`ANSWER_BYTES`] and says what it left out and how to get it.

/// Most bytes of a tool's default answer.
pub const ANSWER_BYTES: usize = 16 * 1024;

/// Cut `text` to about `keep` bytes: its first `head` bytes and its end,
/// with `mark(n)` between them naming the `n` bytes left out. Each cut
/// moves to a line start when one is near (within a quarter of its piece),
/// so no line is shown half. Returns `n`, 0 when `text` already fit.
pub fn keep_ends(
    text: &mut String,
    keep: usize,
    head: usize,
    mark: impl Fn(usize) -> String,
) -> usize {
    if text.len() <= keep {
        return 0;
    }
    let head = head.min(keep);
    let tail = keep - head;
    let mut head_end = text.floor_char_boundary(head);
    if let Some(at) = text[..head_end].rfind('\n')
        && head_end - at <= head / 4
    {
        head_end = at + 1;
    }
    let mut tail_start = text.ceil_char_boundary(text.len() - tail);
    if let Some(at) = text[tail_start..].find('\n')
        && at < tail / 4
    {
        tail_start += at + 1;
    }
    let left_out = tail_start - head_end;
    text.replace_range(head_end..tail_start, &mark(left_out));
    left_out
}

/// `whole`, a text inside an answer, cut in its middle (as by
/// [`keep_ends`], `head(keep)` bytes kept before the cut) until the answer
/// fits [`ANSWER_BYTES`]. `measure(text)` puts `text` in the answer and
/// returns the answer's size. JSON escaping can make a byte of text cost
/// more than a byte of answer: the cut is sized by what the text costs on
/// average, then measured and cut more where the cost is uneven. Returns
/// what to leave in the answer: `whole` when it fits, and the shortest cut
/// when nothing of `whole` would.
pub fn fit_text(
    whole: &str,
    head: impl Fn(usize) -> usize,
    mark: impl Fn(usize) -> String,
    mut measure: impl FnMut(&str) -> usize,
) -> String {
    let mut text = whole.to_string();
    let mut size = measure(&text);
    if size <= ANSWER_BYTES {
        return text;
    }
    // Answer bytes per byte of text.
    let cost = (size.saturating_sub(measure("")).max(1)) as f64 / whole.len().max(1) as f64;
    let mut drop = 0;
    while size > ANSWER_BYTES && drop < whole.len() {
        drop += ((size - ANSWER_BYTES) as f64 / cost).ceil() as usize;
        // A little more: the mark takes room too.
        let keep = whole.len().saturating_sub(drop + 100);
        text = whole.to_string();
        keep_ends(&mut text, keep, head(keep), &mark);
        size = measure(&text);
    }
    text
}

/// `text`'s first `max` characters, then `mark` when there were more.
pub fn cut(text: &str, max: usize, mark: &str) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}{mark}", &text[..at]),
        None => text.to_string(),
    }
}

/// `text` without ANSI escape sequences (colours, cursor moves, titles):
/// what a program wrote for a terminal, as text.
pub fn strip_ansi(text: &str) -> String {
    static ESCAPES: std::sync::LazyLock<regex_lite::Regex> = std::sync::LazyLock::new(|| {
        regex_lite::Regex::new(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[@-Z\\-_]")
            .expect("a valid pattern")
    });
    ESCAPES.replace_all(text, "").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(n: usize) -> String {
        format!("[{n} left out]\n")
    }

    #[test]
    fn what_fits_is_untouched() {
        let mut text = "short".to_string();
        assert_eq!(keep_ends(&mut text, 5, 2, mark), 0);
        assert_eq!(text, "short");
    }

    #[test]
    fn both_ends_stay_and_nothing_is_lost_unsaid() {
        // Multi-byte characters at every cut: the ends stay valid text.
        let long = format!("START{}END", "é".repeat(30_000));
        let mut text = long.clone();
        let left_out = keep_ends(&mut text, 1000, 750, mark);
        assert!(text.starts_with("START") && text.ends_with("END"));
        let marker = mark(left_out);
        assert!(text.contains(&marker));
        assert_eq!(text.len() - marker.len() + left_out, long.len());
        assert!(text.len() - marker.len() <= 1000);
    }

    #[test]
    fn a_text_is_cut_until_its_answer_fits() {
        // Quotes cost two bytes each once in JSON.
        let whole = format!("START\n{}END", "\"q\"\n".repeat(10_000));
        let mut turns = 0;
        let answer = |text: &str| serde_json::json!({ "text": text }).to_string();
        let fitted = fit_text(
            &whole,
            |keep| keep / 2,
            mark,
            |text| {
                turns += 1;
                answer(text).len()
            },
        );
        assert!(answer(&fitted).len() <= ANSWER_BYTES);
        assert!(
            answer(&fitted).len() > ANSWER_BYTES - 1000,
            "not cut far past the budget"
        );
        assert!(fitted.starts_with("START\n") && fitted.ends_with("END"));
        assert!(turns <= 4, "{turns} measures");
        let short = fit_text("short", |k| k, mark, |text| text.len());
        assert_eq!(short, "short");
    }

    #[test]
    fn cuts_fall_on_line_starts() {
        let long: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let mut text = long.clone();
        keep_ends(&mut text, 2000, 1000, mark);
        assert!(text.starts_with("line 0\n"));
        assert!(text.ends_with("line 999\n"));
        assert!(
            text.lines().any(|l| l.starts_with('[')),
            "the mark on its own line"
        );
        assert!(
            text.lines()
                .all(|l| l.starts_with("line ") || l.ends_with("left out]")),
            "{text}"
        );
    }
}
