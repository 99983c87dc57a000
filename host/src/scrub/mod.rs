//! Secret values kept out of everything the host gives back: every value a
//! secret reference resolved to ([`crate::secret_refs`]) is remembered here
//! for the host's life, and every tool reply and plugin log line is
//! scrubbed of it (and of the forms programs write it in: [`forms`]) on
//! the way out, whichever plugin or path it came by: a command's output, a
//! file a command wrote and a plugin read, a diff, an error.
//!
//! Process-wide on purpose: a value must not reach a client through any
//! plugin, and the replies of every plugin pass one place. Values are
//! known before the first answer of a process that could carry one: a
//! plugin's own secrets when it is given them, a repository's Cofer
//! secrets before a call of a plugin that may ask for them
//! ([`crate::secret_refs::know_all`]).

mod forms;

use std::borrow::Cow;
use std::sync::{LazyLock, RwLock};

use serde_json::Value;

/// Shorter values would scrub ordinary words out of every answer;
/// [`crate::secret_refs`] refuses them.
pub const MIN_LEN: usize = 4;

/// A form of a value to look for, and what replaces it.
struct Form {
    text: String,
    mask: String,
}

static KNOWN: LazyLock<RwLock<Vec<Form>>> = LazyLock::new(Default::default);

/// Remember `value` of secret `name` (and its encoded forms).
pub fn remember(name: &str, value: &str) {
    if value.len() < MIN_LEN {
        return;
    }
    let mask = format!("***{name}");
    let mut known = KNOWN.write().expect("scrub list");
    for text in forms::of(value) {
        if !known.iter().any(|f| f.text == text) {
            known.push(Form {
                text,
                mask: mask.clone(),
            });
        }
    }
    // Longest first: a value that contains another is masked whole.
    known.sort_by(|a, b| b.text.len().cmp(&a.text.len()));
}

/// Whether any value is known: until a secret is resolved, nothing is
/// scrubbed and replies pass untouched (no copy).
pub fn active() -> bool {
    !KNOWN.read().expect("scrub list").is_empty()
}

/// `text` with every known value masked. A text that begins with the end
/// of a value (output whose start was dropped mid-value) has that end
/// masked too, when it is long enough to be more than a common word.
pub fn scrub(text: &str) -> Cow<'_, str> {
    let known = KNOWN.read().expect("scrub list");
    if known.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = Cow::Borrowed(text);
    for form in known.iter() {
        if out.contains(&form.text) {
            out = Cow::Owned(out.replace(&form.text, &form.mask));
        }
        // The longest tail of the value the text opens with, if long
        // enough not to be an ordinary word (half the value, 8 bytes).
        let shortest = (form.text.len() / 2).max(2 * MIN_LEN);
        let cut = (1..(form.text.len() + 1).saturating_sub(shortest))
            .filter(|&i| form.text.is_char_boundary(i))
            .find(|&i| out.starts_with(&form.text[i..]));
        if let Some(i) = cut {
            out = Cow::Owned(format!("{}{}", form.mask, &out[form.text.len() - i..]));
        }
    }
    out
}

/// An owned text scrubbed, given back as it is (no copy) when nothing in
/// it is masked.
pub fn scrubbed(text: String) -> String {
    match scrub(&text) {
        Cow::Owned(masked) => masked,
        Cow::Borrowed(_) => text,
    }
}

/// Every string in `value` scrubbed, keys included.
pub fn scrub_json(value: &mut Value) {
    if !active() {
        return;
    }
    match value {
        Value::String(s) => *s = scrubbed(std::mem::take(s)),
        Value::Array(items) => items.iter_mut().for_each(scrub_json),
        Value::Object(map) => {
            let entries = std::mem::take(map);
            for (key, mut item) in entries {
                scrub_json(&mut item);
                map.insert(scrubbed(key), item);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    #[test]
    fn values_and_their_forms_are_masked_with_the_name() {
        remember("DB_PASSWORD", "hunter2-s3cret/value");
        let said = scrub("pw=hunter2-s3cret/value and again hunter2-s3cret/value");
        assert_eq!(said, "pw=***DB_PASSWORD and again ***DB_PASSWORD");
        let b64 = base64::engine::general_purpose::STANDARD.encode("hunter2-s3cret/value");
        assert!(!scrub(&b64).contains(b64.trim_end_matches('=')));
        assert!(!scrub("x=hunter2-s3cret%2Fvalue").contains("hunter2"));
        // Base64 of the value in the middle of a stream, at an offset.
        let mid = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            "ab:hunter2-s3cret/value:cd",
        );
        assert!(scrub(&mid).contains("***DB_PASSWORD"), "{mid}");
        // A multi-line value line by line, as a diff shows it.
        remember("KEY", "first-line-of-key\nsecond-line-of-key\n");
        assert_eq!(
            scrub("+first-line-of-key\n+second-line-of-key"),
            "+***KEY\n+***KEY"
        );
        // Output that starts in the middle of the value.
        assert_eq!(scrub("cret/value\nnext"), "***DB_PASSWORD\nnext");
        let mut json = serde_json::json!({"stdout": ["hunter2-s3cret/value"]});
        scrub_json(&mut json);
        assert_eq!(json["stdout"][0], "***DB_PASSWORD");
        // Ordinary text is left alone.
        assert_eq!(scrub("value"), "value");
    }
}
