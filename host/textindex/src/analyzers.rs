//! The two text analyzers of the index capability: `identifier` for code
//! names and `prose` for English descriptions. A query is analysed with the
//! analyzer of each field it is matched against, so both sides agree.

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    Token, TokenStream, Tokenizer, TokenizerManager,
};

pub const IDENTIFIER: &str = "identifier";
pub const PROSE: &str = "prose";

/// Register our analyzers next to tantivy's built-in ones (`raw` serves
/// keyword fields).
pub fn register(manager: &TokenizerManager) {
    manager.register(
        IDENTIFIER,
        TextAnalyzer::builder(IdentifierTokenizer)
            .filter(RemoveLongFilter::limit(64))
            .build(),
    );
    let stop_words =
        StopWordFilter::new(Language::English).expect("tantivy ships English stop words");
    manager.register(
        PROSE,
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(40))
            .filter(LowerCaser)
            .filter(stop_words)
            .filter(Stemmer::new(Language::English))
            .build(),
    );
}

/// Splits text into words of letters, digits and `_`, and each word into
/// its parts at `_`, camelCase, acronym and digit boundaries. Emits the
/// whole word (lowercased) at the position of its first part when it has
/// more than one part, then each part: `HTTPRequest` -> httprequest, http,
/// request; `Node2D` -> node2d, node, 2d; `_ready` -> _ready, ready.
#[derive(Clone, Default)]
pub struct IdentifierTokenizer;

pub struct VecTokenStream {
    tokens: Vec<Token>,
    next: usize,
}

impl TokenStream for VecTokenStream {
    fn advance(&mut self) -> bool {
        self.next += 1;
        self.next <= self.tokens.len()
    }
    fn token(&self) -> &Token {
        &self.tokens[self.next - 1]
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.next - 1]
    }
}

impl Tokenizer for IdentifierTokenizer {
    type TokenStream<'a> = VecTokenStream;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> VecTokenStream {
        VecTokenStream {
            tokens: identifier_tokens(text),
            next: 0,
        }
    }
}

fn identifier_tokens(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut position = 0;
    for (start, word) in words(text) {
        let parts = parts(word);
        if parts.is_empty() {
            continue;
        }
        let token = |from: usize, to: usize, position: usize| Token {
            offset_from: start + from,
            offset_to: start + to,
            position,
            text: word[from..to].to_lowercase(),
            position_length: 1,
        };
        if parts.len() > 1 || parts[0] != (0, word.len()) {
            tokens.push(token(0, word.len(), position));
        }
        for (i, &(from, to)) in parts.iter().enumerate() {
            tokens.push(token(from, to, position + i));
        }
        position += parts.len();
    }
    tokens
}

/// `(byte offset, word)` of each run of alphanumerics and `_`.
fn words(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut rest = text.char_indices().peekable();
    std::iter::from_fn(move || {
        let (start, _) = rest.find(|&(_, c)| is_word(c))?;
        let mut end = text.len();
        while let Some(&(i, c)) = rest.peek() {
            if !is_word(c) {
                end = i;
                break;
            }
            rest.next();
        }
        Some((start, &text[start..end]))
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Upper,
    Lower,
    Digit,
}

fn class(c: char) -> Class {
    if c.is_numeric() {
        Class::Digit
    } else if c.is_uppercase() {
        Class::Upper
    } else {
        Class::Lower
    }
}

/// Byte ranges of the parts of one word.
fn parts(word: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut offset = 0;
    for segment in word.split('_') {
        split_case(segment, offset, &mut out);
        offset += segment.len() + 1;
    }
    out
}

/// Parts of a word without `_`: a capitalised word ("Node"), an acronym
/// ending before the capital that starts the next word ("HTTP|Request"), a
/// lowercase run ("node|Name"), or a digit run with the one letter that
/// closes it ("2D", "3D|Gizmo", "Vector|2i").
fn split_case(segment: &str, offset: usize, out: &mut Vec<(usize, usize)>) {
    let chars: Vec<(usize, Class)> = segment.char_indices().map(|(i, c)| (i, class(c))).collect();
    let n = chars.len();
    let is = |j: usize, c: Class| j < n && chars[j].1 == c;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        match chars[i].1 {
            Class::Upper => {
                while is(j, Class::Upper) {
                    j += 1;
                }
                if j - i > 1 && is(j, Class::Lower) {
                    j -= 1;
                }
                while is(j, Class::Lower) {
                    j += 1;
                }
            }
            Class::Lower => {
                while is(j, Class::Lower) {
                    j += 1;
                }
            }
            Class::Digit => {
                while is(j, Class::Digit) {
                    j += 1;
                }
                if (is(j, Class::Upper) && !is(j + 1, Class::Lower))
                    || (is(j, Class::Lower) && j + 1 == n)
                {
                    j += 1;
                }
            }
        }
        let end = if j < n { chars[j].0 } else { segment.len() };
        out.push((offset + chars[i].0, offset + end));
        i = j;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        identifier_tokens(text)
            .into_iter()
            .map(|t| t.text)
            .collect()
    }

    #[test]
    fn identifiers_split_at_case_acronyms_digits_and_underscores() {
        assert_eq!(terms("HTTPRequest"), ["httprequest", "http", "request"]);
        assert_eq!(terms("Node2D"), ["node2d", "node", "2d"]);
        assert_eq!(
            terms("CharacterBody3D"),
            ["characterbody3d", "character", "body", "3d"]
        );
        assert_eq!(
            terms("Texture2DArray"),
            ["texture2darray", "texture", "2d", "array"]
        );
        assert_eq!(terms("Node3DGizmo"), ["node3dgizmo", "node", "3d", "gizmo"]);
        assert_eq!(terms("AStar2D"), ["astar2d", "a", "star", "2d"]);
        assert_eq!(terms("Vector2i"), ["vector2i", "vector", "2i"]);
        assert_eq!(
            terms("X509Certificate"),
            ["x509certificate", "x", "509", "certificate"]
        );
        assert_eq!(
            terms("move_and_slide"),
            ["move_and_slide", "move", "and", "slide"]
        );
        assert_eq!(
            terms("NOTIFICATION_READY"),
            ["notification_ready", "notification", "ready"]
        );
        assert_eq!(terms("Node._ready"), ["node", "_ready", "ready"]);
        assert_eq!(terms("timer"), ["timer"]);
        assert_eq!(terms("@GlobalScope"), ["globalscope", "global", "scope"]);
    }

    #[test]
    fn positions_advance_per_part_and_offsets_point_into_the_text() {
        let tokens = identifier_tokens("getNode x");
        let view: Vec<(&str, usize, &str)> = tokens
            .iter()
            .map(|t| {
                (
                    t.text.as_str(),
                    t.position,
                    &"getNode x"[t.offset_from..t.offset_to],
                )
            })
            .collect();
        assert_eq!(
            view,
            [
                ("getnode", 0, "getNode"),
                ("get", 0, "get"),
                ("node", 1, "Node"),
                ("x", 2, "x")
            ]
        );
    }
}
