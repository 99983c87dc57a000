//! Godot's documentation BBCode turned into readable Markdown-ish text:
//! code stays code (inline in backticks, blocks fenced with their
//! language), cross references become `name()` / `name`, bold and italics
//! stay visible, links keep their address, and `$DOCS_URL` is expanded.

/// Remove the XML indentation: the common leading whitespace of all
/// non-empty lines, and blank lines at both ends. Code blocks keep their
/// own indentation relative to the text.
pub fn dedent(raw: &str) -> String {
    let lines: Vec<&str> = raw.lines().map(str::trim_end).collect();
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let body: Vec<&str> = lines
        .iter()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim_start()
            }
        })
        .collect();
    let start = body
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(body.len());
    let end = body
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(start, |i| i + 1);
    body[start..end].join("\n")
}

/// Convert one description (already dedented) to text.
pub fn to_text(text: &str, docs_url: &str) -> String {
    let text = if text.contains("$DOCS_URL") {
        std::borrow::Cow::Owned(text.replace("$DOCS_URL", docs_url))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let mut out = String::with_capacity(text.len());
    let mut rest: &str = &text;
    while let Some(open) = rest.find('[') {
        out.push_str(&rest[..open]);
        let after = &rest[open..];
        let Some(close) = after.find(']') else {
            out.push_str(after);
            return out;
        };
        let tag = &after[1..close];
        let tail = &after[close + 1..];
        let (name, arg) = match tag.split_once([' ', '=']) {
            Some((n, a)) => (n, a.trim()),
            None => (tag, ""),
        };
        rest = match name {
            "codeblock" => fenced(
                &mut out,
                tail,
                "/codeblock",
                arg.strip_prefix("lang=").unwrap_or("gdscript"),
            ),
            "gdscript" | "csharp" => fenced(&mut out, tail, &format!("/{name}"), name),
            "codeblocks" | "/codeblocks" => tail.strip_prefix('\n').unwrap_or(tail),
            "code" | "kbd" => {
                let end = format!("[/{name}]");
                let (inner, after) = tail.split_once(end.as_str()).unwrap_or((tail, ""));
                out.push('`');
                out.push_str(&inner.replace("[lb]", "[").replace("[rb]", "]"));
                out.push('`');
                after
            }
            "method" | "constructor" => {
                out.extend(["`", arg, "()`"]);
                tail
            }
            "member" | "signal" | "constant" | "enum" | "param" | "theme_item" | "annotation"
            | "operator" => {
                out.extend(["`", arg, "`"]);
                tail
            }
            "url" => {
                let (label, after) = tail.split_once("[/url]").unwrap_or((tail, ""));
                if arg.is_empty() || arg == label {
                    out.push_str(label);
                } else {
                    out.extend([label, " (", arg, ")"]);
                }
                after
            }
            "b" | "/b" => {
                out.push_str("**");
                tail
            }
            "i" | "/i" => {
                out.push('*');
                tail
            }
            "br" => {
                out.push('\n');
                tail
            }
            "lb" => {
                out.push('[');
                tail
            }
            "rb" => {
                out.push(']');
                tail
            }
            "u" | "/u" | "s" | "/s" | "center" | "/center" | "color" | "/color" | "font"
            | "/font" | "/url" => tail,
            _ if arg.is_empty() && is_class_name(name) => {
                out.push_str(name);
                tail
            }
            _ => {
                out.push('[');
                &after[1..]
            }
        };
    }
    out.push_str(rest);
    out.truncate(out.trim_end().len());
    out
}

/// Write a fenced block of the code up to `[<end>]`; return what follows.
fn fenced<'a>(out: &mut String, tail: &'a str, end: &str, lang: &str) -> &'a str {
    let end = format!("[{end}]");
    let (code, after) = tail.split_once(end.as_str()).unwrap_or((tail, ""));
    let code = dedent(code);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.extend(["```", lang, "\n", &code, "\n```\n"]);
    after.strip_prefix('\n').unwrap_or(after)
}

fn is_class_name(name: &str) -> bool {
    let name = name.strip_prefix('@').unwrap_or(name);
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        || matches!(name, "int" | "float" | "bool")
}

/// The text without fenced code blocks: what the prose index sees.
pub fn prose_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The text without `inline code`: what a summary means in words, not the
/// parameter names it mentions (`from_position` is not about position).
pub fn without_inline_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split('`').step_by(2).flat_map(str::split_whitespace) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

/// The first sentence (or line) of a text, for a summary. A period ends
/// it only where a sentence ends: not after an abbreviation (`i.e.`,
/// `e.g.`, `etc.`, `vs.`), a single letter or a number, not inside an
/// inline code span, and not before a word in lower case.
pub fn first_sentence(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("");
    for (i, _) in line.match_indices(". ") {
        if ends_sentence(line, i) {
            return &line[..=i];
        }
    }
    line
}

/// Whether the period at `dot` of `line` (followed by a space) ends a
/// sentence.
fn ends_sentence(line: &str, dot: usize) -> bool {
    const ABBREVIATIONS: &[&str] = &["i.e", "e.g", "etc", "vs", "approx", "cf", "no", "fig"];
    // Inside `code`: an odd number of backticks before it.
    if line[..dot].matches('`').count() % 2 == 1 {
        return false;
    }
    let word = line[..dot]
        .rsplit(|c: char| c.is_whitespace() || c == '(')
        .next()
        .unwrap_or("");
    let bare = word
        .trim_start_matches(['(', '"', '\''])
        .to_ascii_lowercase();
    if ABBREVIATIONS.contains(&bare.as_str())
        || (bare.chars().count() == 1 && bare.chars().all(char::is_alphabetic))
        || bare.contains('.')
    {
        return false;
    }
    // A sentence goes on after a period when the next word is lower case.
    !line[dot + 2..]
        .chars()
        .next()
        .is_some_and(|c| c.is_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const URL: &str = "https://docs.godotengine.org/en/4.6";

    #[test]
    fn a_summary_ends_where_a_sentence_does() {
        assert_eq!(
            first_sentence("Moves it (i.e. the node) by an offset. Then more."),
            "Moves it (i.e. the node) by an offset."
        );
        assert_eq!(
            first_sentence("Use `a. b` or e.g. this one. Next."),
            "Use `a. b` or e.g. this one."
        );
        assert_eq!(first_sentence("Returns 0. More."), "Returns 0.");
        assert_eq!(first_sentence("One line only"), "One line only");
    }

    #[test]
    fn inline_markup_becomes_readable_text() {
        let text = to_text(
            "The [Timer] emits [signal timeout] after [member wait_time]; call [method start] with [param time_sec]. [b]Note:[/b] use [code]a[lb]0[rb][/code], [i]not[/i] [kbd]Ctrl + C[/kbd]. [int] [Array][lb]x[rb] [1, 2]",
            URL,
        );
        assert_eq!(
            text,
            "The Timer emits `timeout` after `wait_time`; call `start()` with `time_sec`. **Note:** use `a[0]`, *not* `Ctrl + C`. int Array[x] [1, 2]"
        );
    }

    #[test]
    fn code_blocks_are_fenced_with_their_language_and_indentation() {
        let raw = "\t\tText.\n\t\t[codeblock]\n\t\tfunc f():\n\t\t\tprint(\"hi\")\n\t\t[/codeblock]\n\t\t[codeblocks]\n\t\t[gdscript]\n\t\tvar a = 1\n\t\t[/gdscript]\n\t\t[csharp]\n\t\tint a = 1;\n\t\t[/csharp]\n\t\t[/codeblocks]\n\t\tEnd.";
        let text = to_text(&dedent(raw), URL);
        assert_eq!(
            text,
            "Text.\n```gdscript\nfunc f():\n\tprint(\"hi\")\n```\n```gdscript\nvar a = 1\n```\n```csharp\nint a = 1;\n```\nEnd."
        );
        assert_eq!(prose_only(&text), "Text.\nEnd.\n");
    }

    #[test]
    fn links_and_docs_url() {
        assert_eq!(
            to_text(
                "See [url=$DOCS_URL/tutorials/x.html]the tutorial[/url] and [url]https://a.b[/url].",
                URL
            ),
            "See the tutorial (https://docs.godotengine.org/en/4.6/tutorials/x.html) and https://a.b."
        );
    }

    #[test]
    fn inline_code_can_be_left_out() {
        assert_eq!(
            without_inline_code("Plays a sound from `from_position` in seconds."),
            "Plays a sound from in seconds."
        );
    }

    #[test]
    fn summaries_stop_at_the_first_sentence() {
        assert_eq!(first_sentence("Plays sound. In 2D.\nMore."), "Plays sound.");
        assert_eq!(first_sentence("Version 1.2 is out"), "Version 1.2 is out");
    }
}
