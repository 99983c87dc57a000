//! The forms a secret value takes in what programs write: the value
//! itself, as a JSON string holds it, as a shell quotes it, as a URL
//! carries it, in base64 wherever it falls in the encoded stream, and the
//! lines and words of a value that has several (a PEM key comes back line
//! by line in a diff; a value used unquoted comes back in pieces).
//!
//! Pure text in, texts out: [`super`] decides what to do with them.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// A derived form shorter than this is not looked for: it would mask
/// ordinary text (a whole value of [`super::MIN_LEN`] is).
pub const MIN_FORM: usize = 6;
/// A line of a multi-line value, or a word of a value with spaces, is
/// masked on its own from this length: long enough to be telling.
pub const MIN_PIECE: usize = 6;

/// Every form of `value` worth looking for, the value first.
pub fn of(value: &str) -> Vec<String> {
    let mut forms = vec![value.to_string()];
    let mut derived = Vec::new();
    derived.extend(json_forms(value));
    derived.extend(shell_forms(value));
    derived.extend(url_forms(value));
    for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
        derived.push(engine.encode(value));
        derived.extend(base64_cores(value.as_bytes(), engine));
    }
    derived.extend(pieces(value));
    for form in derived {
        if form.len() >= MIN_FORM && !forms.contains(&form) {
            forms.push(form);
        }
    }
    forms
}

/// Inside a JSON string: as serde and most writers escape it, and with
/// every non-ASCII character as `\uXXXX` (Python's `json.dumps`).
fn json_forms(value: &str) -> Vec<String> {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    let plain = quoted[1..quoted.len() - 1].to_string();
    let mut ascii = String::with_capacity(plain.len());
    for c in plain.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                ascii.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    vec![plain, ascii]
}

/// As a shell quotes it: inside single quotes (`'` as `'\''`), and with
/// a backslash before each character the shell treats specially (bash's
/// `printf %q`).
fn shell_forms(value: &str) -> Vec<String> {
    let single = value.replace('\'', r"'\''");
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        if " \t!\"#$&'()*,;<>?[\\]^`{|}~".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    vec![single, escaped]
}

/// In a URL or a form: percent-encoded with upper and lower hex, and a
/// form's `+` for a space.
fn url_forms(value: &str) -> Vec<String> {
    let upper = percent_encoded(value, false);
    let lower = percent_encoded(value, true);
    let form = upper.replace("%20", "+");
    vec![upper, lower, form]
}

fn percent_encoded(value: &str, lower: bool) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ if lower => format!("%{b:02x}"),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value's base64 wherever it starts in the encoded stream: for each
/// of the three offsets, only the characters its own bytes decide (the
/// ones shared with bytes before or after it differ with those).
fn base64_cores(value: &[u8], engine: &base64::engine::GeneralPurpose) -> Vec<String> {
    (0..3)
        .map(|offset| {
            let mut bytes = vec![0u8; offset];
            bytes.extend_from_slice(value);
            let encoded = engine.encode(&bytes);
            // The first characters take bits of the bytes before.
            let skip = [0, 2, 3][offset];
            // Whole groups of three bytes, then the characters of a last
            // partial group whose six bits are all the value's.
            let total = bytes.len();
            let keep = (total / 3) * 4 + total % 3;
            encoded
                .get(skip..keep.min(encoded.len()))
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// The lines of a multi-line value and the words of one with spaces, each
/// long enough to be telling.
fn pieces(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.contains('\n') {
        out.extend(
            value
                .lines()
                .map(str::trim)
                .filter(|line| line.len() >= MIN_PIECE)
                .map(str::to_string),
        );
    }
    if value.split_whitespace().nth(1).is_some() {
        out.extend(
            value
                .split_whitespace()
                .filter(|word| word.len() >= MIN_PIECE)
                .map(str::to_string),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each offset's core is found in the base64 of the value with any
    /// bytes around it.
    #[test]
    fn base64_cores_are_found_at_every_alignment() {
        let value = b"s3cret-Value/with+bits";
        for before in 0..6 {
            for after in 0..4 {
                let mut stream = b"prefix!".to_vec();
                stream.truncate(before);
                stream.extend_from_slice(value);
                stream.extend(std::iter::repeat_n(b'z', after));
                let encoded = STANDARD_NO_PAD.encode(&stream);
                let cores = base64_cores(value, &STANDARD_NO_PAD);
                assert!(
                    cores.iter().any(|c| encoded.contains(c.as_str())),
                    "{before}/{after}: {encoded} {cores:?}"
                );
                assert!(cores.iter().all(|c| c.len() >= 26), "{cores:?}");
            }
        }
    }

    #[test]
    fn escaped_forms_are_those_programs_write() {
        let forms = of("pa\"ss\\w0rd é 'q'");
        for expected in [
            r#"pa\"ss\\w0rd é 'q'"#,
            r#"pa\"ss\\w0rd \u00e9 'q'"#,
            r#"pa\"ss\\w0rd\ é\ \'q\'"#,
            r"pa%22ss%5Cw0rd%20%C3%A9%20%27q%27",
            r"pa%22ss%5Cw0rd+%C3%A9+%27q%27",
            "pa\"ss\\w0rd",
        ] {
            assert!(forms.iter().any(|f| f == expected), "{expected}: {forms:?}");
        }
        let pem = "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----\n";
        assert!(of(pem).iter().any(|f| f == "MIIBOgIBAAJBAKj34GkxFhD9"));
        // A short word of a value with spaces is not a form of its own.
        assert!(!of("ab longword").iter().any(|f| f == "ab"));
    }
}
