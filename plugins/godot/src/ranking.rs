//! How a question in plain words is ranked beyond BM25 over the entries'
//! own words (issue 35): what the manual's best sections link to, what
//! the best entries name in their descriptions, and how many of the
//! question's words an entry holds.

use std::collections::{HashMap, HashSet};

use frostem::{Algorithm, Stemmer};
use plugin_sdk::ToolError;
use plugin_sdk::index::{self, Filter, SearchRequest, TermBoost};

use crate::documents::field;

/// How many of the best manual sections say what a question is about.
pub const FEEDBACK_SECTIONS: usize = 5;

/// How much what the manual says around a name counts (the `mentions`
/// field: measured 0.5-4, 2 best on the development sets).
pub const MENTIONS: f32 = 2.0;

/// The question's search, ranked again: asked once for the classes and
/// members its best entries name, then again with them, among more
/// entries than asked for, which [`by_words`] orders and
/// [`crate::meaning`] fuses with the entries nearest `question` in meaning.
pub fn plain(
    index_name: &str,
    question: &str,
    mut request: SearchRequest,
) -> Result<Vec<index::Hit>, ToolError> {
    let first = SearchRequest {
        limit: FEEDBACK_ENTRIES as u32,
        snippet_field: None,
        return_: vec!["class".into(), "body".into(), "enum".into()],
        ..request.clone()
    };
    request.terms.extend(cited_by(
        &index::search(index_name, &first).map_err(crate::api::from_index)?,
    ));
    let (limit, returned) = (request.limit as usize, request.return_.clone());
    // Snippets for the few that stay, not the many ranked.
    let mut wider = SearchRequest {
        limit: request.limit.max(RERANKED),
        snippet_field: None,
        ..request.clone()
    };
    for field in ["uri", "name", "class", "body", "params"] {
        if !wider.return_.iter().any(|f| f == field) {
            wider.return_.push(field.into());
        }
    }
    let mut hits = index::search(index_name, &wider).map_err(crate::api::from_index)?;
    by_words(&mut hits, &wider.query);
    crate::meaning::fuse(index_name, question, &mut hits, &wider.return_)?;
    hits.truncate(limit);
    if request.snippet_field.is_some() {
        add_snippets(index_name, request, &mut hits)?;
    }
    for hit in &mut hits {
        hit.fields.retain(|(k, _)| returned.contains(k));
    }
    Ok(hits)
}

/// The snippets `request` would give `hits`, asked for them alone.
fn add_snippets(
    index_name: &str,
    request: SearchRequest,
    hits: &mut [index::Hit],
) -> Result<(), ToolError> {
    let uris: Vec<String> = hits.iter().map(|h| field(h, "uri").to_string()).collect();
    let mut filters = request.filters;
    filters.push(Filter {
        field: "uri".into(),
        any_of: uris.clone(),
    });
    let these = SearchRequest {
        terms: Vec::new(),
        coverage: None,
        filters,
        limit: uris.len() as u32,
        return_: vec!["uri".into()],
        ..request
    };
    let found = index::search(index_name, &these).map_err(crate::api::from_index)?;
    for hit in hits.iter_mut() {
        hit.snippet = found
            .iter()
            .find(|f| field(f, "uri") == field(hit, "uri"))
            .and_then(|f| f.snippet.clone());
    }
    Ok(())
}

/// How many entries a question in plain words is ranked among again
/// (measured: 30 finds fewer answers, 120 no more than 60).
const RERANKED: u32 = 60;

/// Orders `hits` by their score times the share of the question's words
/// (any of `word|related|…`) each holds in its name, class or
/// description, compared as the index's stems: an entry that holds one
/// rare word of four in its name (`ground_bottom_color` for "standing on
/// the ground") falls behind one that says them all. Lucene's classic
/// coordination factor.
fn by_words(hits: &mut [index::Hit], query: &str) {
    let stemmer = Stemmer::new(Algorithm::English);
    let stem = |w: &str| stemmer.stem(&w.to_lowercase()).into_owned();
    let wanted: Vec<Vec<String>> = query
        .split_whitespace()
        .map(|w| w.split('|').map(stem).collect())
        .collect();
    if wanted.is_empty() {
        return;
    }
    // A word's stem begins as the word does (the stemmer trims its end):
    // only words that begin as a wanted stem are stemmed.
    let starts: Vec<String> = wanted
        .iter()
        .flatten()
        .map(|s| s.chars().take(3).collect())
        .collect();
    for hit in hits.iter_mut() {
        let params: Vec<&str> = hit
            .fields
            .iter()
            .filter(|(k, _)| k == "params")
            .map(|(_, v)| v.as_str())
            .collect();
        // Each word the entry holds as a stem, in the order it says them
        // (its name and class, then its description).
        let mut seen: HashSet<String> = HashSet::new();
        let mut said: Vec<String> = Vec::new();
        for (field, text) in &hit.fields {
            let text = match field.as_str() {
                "name" | "class" => text.clone(),
                "body" => own_words(text, &params),
                _ => continue,
            };
            for word in words(&text).map(str::to_lowercase) {
                if starts.iter().any(|s| word.starts_with(s.as_str())) && seen.insert(word.clone())
                {
                    said.push(stem(&word));
                }
            }
        }
        let first = |any: &Vec<String>| said.iter().position(|w| any.contains(w));
        let at: Vec<Option<usize>> = wanted.iter().map(first).collect();
        let found = at.iter().flatten().count();
        hit.score *= found as f32 / wanted.len() as f32 * in_order(&at);
    }
    // Equal scores in the order the index gave them (a stable sort).
    hits.sort_by(|a, b| b.score.total_cmp(&a.score));
}

/// How much more an entry counts that says the question's words in the
/// question's order ("degrees to radians": `deg_to_rad`, not
/// `rad_to_deg`, whose descriptions hold the same words): 1 plus
/// [`ORDER`] times the share of the question's neighbouring words it says
/// in that order, less the share it says the other way round.
fn in_order(at: &[Option<usize>]) -> f32 {
    let pairs: Vec<(usize, usize)> = at.windows(2).filter_map(|w| Some((w[0]?, w[1]?))).collect();
    if at.len() < 2 || pairs.is_empty() {
        return 1.0;
    }
    let ahead = pairs.iter().filter(|(a, b)| a < b).count() as f32;
    let behind = pairs.iter().filter(|(a, b)| a > b).count() as f32;
    1.0 + ORDER * (ahead - behind).max(0.0) / (at.len() - 1) as f32
}

/// How much the order of the question's words counts (see [`in_order`]).
const ORDER: f32 = 0.3;

/// What an entry says in its own words: where its description names
/// one of its own parameters as inline code, the parameter's words are
/// not what the entry is about (`play(from_position)` is not about where
/// a sound plays).
fn own_words(text: &str, params: &[&str]) -> String {
    if params.is_empty() {
        return text.to_string();
    }
    text.split('`')
        .enumerate()
        .filter(|(i, code)| i % 2 == 0 || !params.contains(code))
        .map(|(_, part)| part)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The words of a text, names split at `_` and camelCase
/// (`is_on_floor`, `CharacterBody2D`: character, body, 2d).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .flat_map(|word| {
            let bytes = word.as_bytes();
            let mut start = 0;
            let mut parts = Vec::new();
            for i in 1..bytes.len() {
                if bytes[i].is_ascii_uppercase() && bytes[i - 1].is_ascii_lowercase() {
                    parts.push(&word[start..i]);
                    start = i;
                }
            }
            parts.push(&word[start..]);
            parts
        })
        .filter(|w| !w.is_empty())
}

/// Boosts for the classes and members the best manual sections link to,
/// each in proportion to the sections' scores: what the manual's prose
/// about a question points at in the reference.
pub fn linked_from(manual: &[(f32, &[String])]) -> Vec<TermBoost> {
    let mut votes = Votes::default();
    let top = manual.first().map_or(0.0, |(score, _)| *score);
    for (score, links) in manual.iter().take(FEEDBACK_SECTIONS) {
        for link in links.iter() {
            let weight = if link.contains('.') {
                LINKED_MEMBER
            } else {
                LINKED_CLASS
            };
            votes.add("qname_lc", link.to_lowercase(), weight * score / top);
        }
    }
    votes.boosts()
}

/// How much a link from the manual counts, per unit of a section's share.
const LINKED_CLASS: f32 = 1.0;
const LINKED_MEMBER: f32 = 2.0;

/// How many of the best entries' cross references count.
const FEEDBACK_ENTRIES: usize = 10;
/// How much a cross reference counts, per unit of its entry's share.
const CITED: f32 = 1.0;
/// The most boosts feedback adds to a query.
const MAX_FEEDBACK_TERMS: usize = 64;

/// Boosts for the classes and members the best entries refer to in their
/// descriptions (`SceneTree.paused` written out, `mode` of their own
/// class) and, for a constant, the members that use its enum, each in
/// proportion to the entry's score: a question that finds the constant
/// `PROCESS_MODE_ALWAYS` is about the `paused` it names and the
/// `process_mode` it is a value of.
fn cited_by(hits: &[index::Hit]) -> Vec<TermBoost> {
    let mut votes = Votes::default();
    let top = hits.first().map_or(0.0, |h| h.score);
    for hit in hits {
        let field = |name: &str| field(hit, name);
        // Each named once per entry, however often its description does.
        let named = field("body").split('`').skip(1).step_by(2);
        let cited: HashSet<String> = named
            .filter_map(|code| reference(field("class"), code))
            .collect();
        let share = CITED * hit.score / top;
        for link in cited {
            votes.add("qname_lc", link, share);
        }
        // A constant: the members that take its enum.
        if !field("enum").is_empty() {
            votes.add("enums", field("enum").to_string(), share);
        }
    }
    votes.boosts()
}

/// The lowercase `class` or `class.member` a description's inline code
/// names, when it is a name: `SceneTree.paused`, `Node`, or `mode` and
/// `play()` of `class` itself.
fn reference(class: &str, code: &str) -> Option<String> {
    let name = code.strip_suffix("()").unwrap_or(code);
    let is_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'@'));
    let a_class = name.starts_with(|c: char| c.is_ascii_uppercase())
        && name.bytes().any(|b| b.is_ascii_lowercase());
    match is_name {
        false => None,
        true if name.contains('.') || a_class => Some(name.to_lowercase()),
        true => Some(format!("{class}.{name}").to_lowercase()),
    }
}

/// Weights summed by the keyword (field and term) they go to; the
/// heaviest become boosts.
#[derive(Default)]
struct Votes(HashMap<(&'static str, String), f32>);

impl Votes {
    fn add(&mut self, field: &'static str, term: String, weight: f32) {
        if weight.is_finite() && weight > 0.0 {
            *self.0.entry((field, term)).or_default() += weight;
        }
    }

    fn boosts(self) -> Vec<TermBoost> {
        let mut votes: Vec<_> = self.0.into_iter().collect();
        // Heaviest first; equal weights by keyword, so a query always asks the same.
        votes.sort_by(|(k1, w1), (k2, w2)| w2.total_cmp(w1).then_with(|| k1.cmp(k2)));
        votes.truncate(MAX_FEEDBACK_TERMS);
        votes
            .into_iter()
            .map(|((field, term), boost)| TermBoost {
                field: field.into(),
                term,
                boost,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptions_inline_code_names_classes_and_members() {
        assert_eq!(
            reference("Node", "SceneTree.paused").as_deref(),
            Some("scenetree.paused")
        );
        assert_eq!(reference("Node", "Timer").as_deref(), Some("timer"));
        assert_eq!(
            reference("Node", "queue_free()").as_deref(),
            Some("node.queue_free")
        );
        assert_eq!(reference("Node", "x + 1"), None);
        assert_eq!(reference("Node", ""), None);
    }

    fn hit(score: f32, name: &str, class: &str, body: &str) -> index::Hit {
        index::Hit {
            score,
            fields: vec![
                ("name".into(), name.into()),
                ("class".into(), class.into()),
                ("body".into(), body.into()),
            ],
            snippet: None,
        }
    }

    #[test]
    fn entries_holding_more_of_the_question_rank_first() {
        let mut hits = vec![
            hit(
                9.0,
                "ground_bottom_color",
                "ProceduralSkyMaterial",
                "Color of the ground.",
            ),
            hit(
                6.0,
                "is_on_floor",
                "CharacterBody2D",
                "Returns true if the body collided with the floor. Check it before a jump: \
                 is the player standing on the ground?",
            ),
        ];
        by_words(&mut hits, "check player|character standing ground");
        let names: Vec<&str> = hits.iter().map(|h| h.fields[0].1.as_str()).collect();
        assert_eq!(names, ["is_on_floor", "ground_bottom_color"]);
        // Stems and names split at camelCase count: 4 of 4 (and one more
        // pair of neighbouring words in the question's order than not),
        // then 1 of 4.
        assert_eq!(hits[0].score, 6.0 * (1.0 + ORDER / 3.0));
        assert_eq!(hits[1].score, 9.0 / 4.0);
    }

    #[test]
    fn the_questions_word_order_and_own_words_count() {
        let mut hits = vec![
            hit(
                8.0,
                "rad_to_deg",
                "@GlobalScope",
                "Converts radians to degrees.",
            ),
            hit(
                8.0,
                "deg_to_rad",
                "@GlobalScope",
                "Converts degrees to radians.",
            ),
        ];
        by_words(&mut hits, "convert degrees radians");
        assert_eq!(hits[0].fields[0].1, "deg_to_rad");
        assert_eq!(hits[0].score, 8.0 * (1.0 + ORDER));
        assert_eq!(hits[1].score, 8.0, "the other way round loses nothing");
        // A parameter written as code is not what the entry is about.
        let mut play = hit(
            8.0,
            "play",
            "AudioStreamPlayer",
            "Plays from `from_position`.",
        );
        play.fields.push(("params".into(), "from_position".into()));
        let mut hits = vec![play];
        by_words(&mut hits, "play position");
        assert_eq!(hits[0].score, 4.0);
        assert_eq!(own_words("a `b` c `d`", &["d"]), "a  b  c  ");
    }

    #[test]
    fn names_are_words_at_underscores_and_camel_case() {
        let split: Vec<&str> = words("CharacterBody2D.is_on_floor(), HTTPRequest").collect();
        assert_eq!(
            split,
            ["Character", "Body2D", "is", "on", "floor", "HTTPRequest"]
        );
    }
}
