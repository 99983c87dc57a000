//! `godot.search`: a name or a question over a version's index — exact
//! names first, a question in plain words ranked again
//! ([`crate::ranking`]), the manual's sections beside the reference's
//! entries.

use plugin_sdk::ToolError;
use plugin_sdk::index::{self, Coverage, FieldBoost, Filter, SearchRequest, TermBoost};
use serde::Serialize;

use crate::api::{MANUAL, from_index, invalid, manual_not_served};
use crate::corpus::ensure;
use crate::{meaning, ranking, renames, thesaurus, uri};

#[derive(Serialize)]
pub struct SearchHit {
    pub uri: String,
    /// `Class` or `Class.member`.
    pub name: String,
    pub kind: String,
    pub class: String,
    pub score: f32,
    pub snippet: String,
}

/// Words that name a kind; a query that contains one prefers that kind.
const KIND_WORDS: [(&str, &str); 5] = [
    ("class", "class"),
    ("method", "method"),
    ("function", "method"),
    ("property", "property"),
    ("signal", "signal"),
];

/// Words that say nothing of the subject of a question in plain words
/// ("how do I", "a", "the"): names that hold them (`write_to_file`) must
/// not win on them.
const FILLER: &[&str] = &[
    "a", "an", "the", "how", "do", "does", "i", "can", "to", "of", "in", "on", "at", "by", "for",
    "from", "with", "is", "are", "be", "when", "what", "which", "that", "this", "it", "its", "my",
    "me", "into", "some", "few", "way", "want", "should", "there",
];

/// A question in plain words, not a name: three words or more, none of
/// them written as code (`move_and_slide`, `Node.x`, `CharacterBody2D`).
fn plain_words(query: &str, words: &[&str]) -> bool {
    words.len() >= 3
        && !query.contains(['_', '.', '@', '('])
        && !query.split_whitespace().any(|w| {
            w.chars()
                .skip(1)
                .any(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        })
}

/// A question is a name or a few words; anything longer is not one, and
/// would only cost the host memory (every word becomes query clauses).
pub const MAX_QUERY_CHARS: usize = 256;

pub const MAX_QUERY_WORDS: usize = 32;

pub fn search(
    version: Option<&str>,
    query: &str,
    kind: Option<&str>,
    limit: u32,
) -> Result<Vec<SearchHit>, ToolError> {
    let query = query.trim();
    if query.is_empty() {
        return Err(invalid(
            "`query` is empty: give one or more words, e.g. {\"query\": \"move_and_slide\"}",
        ));
    }
    let lower = query.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    if query.chars().count() > MAX_QUERY_CHARS || words.len() > MAX_QUERY_WORDS {
        return Err(invalid(format!(
            "`query` has {} characters in {} words; at most {MAX_QUERY_CHARS} characters and \
             {MAX_QUERY_WORDS} words are searched: keep the words that matter",
            query.chars().count(),
            words.len()
        )));
    }
    let (docs, served, has_manual) = ensure(version)?;
    // The version's senses are embedded in the background from its first
    // search on (nothing when done or under way).
    let vectors = meaning::embed(&docs.index());
    let plain = plain_words(query, &words);
    // A question in plain words is ranked with what the vectors say: the
    // host embeds it now, beside the lexical searches below.
    if plain && matches!(vectors, Some(plugin_sdk::vectors::State::Ready(_))) {
        plugin_sdk::vectors::prepare(query);
    }
    let exact = |term: String, boost: f32| TermBoost {
        field: "name_lc".into(),
        term,
        boost,
    };
    // An exact name, written as is, without spaces, or snake_cased, wins.
    let mut terms = vec![exact(lower.clone(), 8.0)];
    if words.len() > 1 {
        terms.push(exact(words.concat(), 8.0));
        terms.push(exact(words.join("_"), 8.0));
    }
    // A name from the other side of the 3→4 renames finds this side's
    // (names only: a question in plain words holds none).
    let names = query.split(|c: char| c.is_whitespace() || c == '.');
    for word in names.filter(|_| !plain) {
        for other in renames::others(word) {
            terms.push(exact(other.to_lowercase(), 8.0));
        }
    }
    if lower.contains('.') {
        terms.push(TermBoost {
            field: "qname_lc".into(),
            term: lower.clone(),
            boost: 16.0,
        });
    }
    if kind.is_none() {
        for (word, kind) in KIND_WORDS {
            if words.contains(&word) {
                terms.push(TermBoost {
                    field: "kind".into(),
                    term: kind.into(),
                    boost: 2.0,
                });
            }
        }
    }
    let boost = |field: &str, boost: f32| FieldBoost {
        field: field.into(),
        boost,
    };
    // A question in plain words is searched without its filler, each word
    // or a related one.
    let text = if plain {
        let meaningful: Vec<String> = words
            .iter()
            .copied()
            .filter(|w| !FILLER.contains(w))
            .map(thesaurus::with_related)
            .collect();
        meaningful.join(" ")
    } else {
        query.to_string()
    };
    // The manual's sections, when it is indexed and asked for: found by
    // their prose, they also say which classes and members the question
    // is about (the ones they link to), which raises those below.
    let manual = match kind {
        None | Some(MANUAL) if has_manual => search_manual(&docs.index(), &text, limit)?,
        Some(MANUAL) => return Err(manual_not_served(&docs.version)),
        _ => Vec::new(),
    };
    if kind == Some(MANUAL) {
        // More sections are asked for than shown (they feed the ranking
        // of plain questions); only `limit` are the answer.
        return Ok(manual
            .into_iter()
            .take(limit as usize)
            .map(|(hit, _)| hit)
            .collect());
    }
    if plain {
        let sections: Vec<(f32, &[String])> = manual
            .iter()
            .map(|(h, l)| (h.score, l.as_slice()))
            .collect();
        terms.extend(ranking::linked_from(&sections));
    }
    let fields = vec![
        boost("name_text", 3.0),
        boost("class_text", 1.5),
        boost("summary", 1.0),
        boost("body", 0.3),
        boost("mentions", ranking::MENTIONS),
    ];
    let filter = match kind {
        Some(k) => Filter {
            field: "kind".into(),
            any_of: vec![k.to_string()],
        },
        None => Filter {
            field: "corpus".into(),
            any_of: vec!["reference".into()],
        },
    };
    let request = SearchRequest {
        query: text,
        fields,
        terms,
        filters: vec![filter],
        // A name or summary that holds every word of the query beats one
        // that repeats a few of them.
        coverage: Some(Coverage {
            fields: vec!["name_text".into(), "class_text".into(), "summary".into()],
            bonus: 25.0,
        }),
        limit,
        snippet_field: Some("body".into()),
        snippet_chars: 160,
        return_: vec!["uri".into(), "kind".into(), "class".into(), "name".into()],
    };
    let hits = if plain {
        ranking::plain(&docs.index(), query, request)?
    } else {
        index::search(&docs.index(), &request).map_err(from_index)?
    };
    let api = hits
        .into_iter()
        .map(|hit| search_hit(hit, served, &docs.version));
    Ok(merge(api.collect(), manual, limit as usize))
}

/// What `kind` may name: a class, a kind of member
/// ([`SYMBOL_KINDS`]), or the manual's sections (last).
pub const SEARCH_KINDS: [&str; 10] = [
    "class",
    "method",
    "property",
    "signal",
    "constant",
    "theme_item",
    "annotation",
    "operator",
    "constructor",
    MANUAL,
];

/// The manual's sections for `text`, best first, each with what it links
/// to; none when the manual is not indexed.
fn search_manual(
    index_name: &str,
    text: &str,
    limit: u32,
) -> Result<Vec<(SearchHit, Vec<String>)>, ToolError> {
    let request = SearchRequest {
        query: text.to_string(),
        fields: vec![
            FieldBoost {
                field: "summary".into(),
                boost: 2.0,
            },
            FieldBoost {
                field: "class_text".into(),
                boost: 0.5,
            },
            FieldBoost {
                field: "body".into(),
                boost: 1.0,
            },
        ],
        terms: Vec::new(),
        filters: vec![Filter {
            field: "kind".into(),
            any_of: vec![MANUAL.into()],
        }],
        coverage: Some(Coverage {
            fields: vec!["summary".into(), "body".into()],
            bonus: 10.0,
        }),
        limit: limit.max(ranking::FEEDBACK_SECTIONS as u32),
        snippet_field: Some("body".into()),
        snippet_chars: 160,
        return_: vec![
            "uri".into(),
            "kind".into(),
            "class".into(),
            "name".into(),
            "links".into(),
        ],
    };
    Ok(index::search(index_name, &request)
        .map_err(from_index)?
        .into_iter()
        .map(|hit| {
            let links = hit
                .fields
                .iter()
                .filter(|(k, _)| k == "links")
                .map(|(_, v)| v.clone())
                .collect();
            (search_hit(hit, 1, ""), links)
        })
        .collect())
}

/// The reference's entries first: the three best lead (a question about
/// a name must get the name), then the rest and the manual's sections by
/// score.
fn merge(
    api: Vec<SearchHit>,
    manual: Vec<(SearchHit, Vec<String>)>,
    limit: usize,
) -> Vec<SearchHit> {
    let mut api = api.into_iter();
    let mut out: Vec<SearchHit> = api.by_ref().take(3).collect();
    let mut rest: Vec<SearchHit> = api.chain(manual.into_iter().map(|(h, _)| h)).collect();
    rest.sort_by(|a, b| b.score.total_cmp(&a.score));
    out.extend(rest);
    out.truncate(limit);
    out
}

fn search_hit(hit: index::Hit, served: usize, version: &str) -> SearchHit {
    let field = |name: &str| {
        hit.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let (kind, class, name) = (field("kind"), field("class"), field("name"));
    SearchHit {
        // With several versions served, say which one.
        uri: if served > 1 {
            uri::versioned(&field("uri"), version)
        } else {
            field("uri")
        },
        name: if kind == "class" || kind == MANUAL {
            name
        } else {
            format!("{class}.{name}")
        },
        kind,
        class,
        score: hit.score,
        snippet: tidy_snippet(&hit.snippet.unwrap_or_default()),
    }
}

/// A snippet's highlights (`**word**`) as a reader can take them: two that
/// touch are one (`****` would read as an empty bold), and none inside a
/// `code span`, where the marks would be read as part of the code.
fn tidy_snippet(snippet: &str) -> String {
    let mut joined = snippet.replace("****", "");
    // A mark left without its pair (the text's own bold met a highlight)
    // would bold the rest: the last one goes.
    if joined.matches("**").count() % 2 == 1 {
        if let Some(at) = joined.rfind("**") {
            joined.replace_range(at..at + 2, "");
        }
    }
    joined
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                part.replace("**", "")
            } else {
                part.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_have_no_marks_in_code_and_no_empty_bold() {
        assert_eq!(
            tidy_snippet("call `**node**.get()` now"),
            "call `node.get()` now"
        );
        assert_eq!(tidy_snippet("**physics****process**"), "**physicsprocess**");
        assert_eq!(tidy_snippet("a **timer** b"), "a **timer** b");
        assert_eq!(tidy_snippet("****physics** engine"), "physics engine");
    }
}
