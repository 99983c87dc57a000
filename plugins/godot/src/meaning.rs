//! Meaning beside words (issue 57): the host embeds each entry's sense
//! (a name and its first sentence, [`crate::documents::SENSE`]) with a
//! sentence model, and a question in plain words is ranked by its
//! lexical score ([`crate::ranking`]) plus how near the question each
//! entry is in meaning, plus a vote for the entries that the manual
//! sections nearest in meaning link to. A question says what the
//! user wants to happen ("make the game fill the screen"); the reference
//! names the mechanism (a window mode): only the vectors see both.
//!
//! Without a model, or while the vectors are being made, the lexical
//! ranking stands alone.

use std::collections::HashMap;

use plugin_sdk::ToolError;
use plugin_sdk::index::{self, Filter};
use plugin_sdk::vectors::{self, SimilarRequest, State};

use crate::documents::SENSE;

/// Ask the host to embed the index's senses (nothing when done or under
/// way); its state, or none when the host has no `vectors` to give.
pub fn embed(index_name: &str) -> Option<State> {
    vectors::embed(index_name, SENSE).ok()
}

/// What `godot.versions` says of a version's vectors: `ready`,
/// `building` (with how far), `unavailable` or `failed` (with why), or
/// `not indexed` before the version's first question.
pub fn describe(index_name: &str) -> serde_json::Value {
    use serde_json::json;
    if !matches!(index::open(index_name), Ok(Some(_))) {
        return json!({ "state": "not indexed" });
    }
    let progress = |state: &str, p: &vectors::Progress| json!({ "state": state, "done": p.done, "total": p.total, "model": p.model });
    match embed(index_name) {
        Some(State::Ready(p)) => progress("ready", &p),
        Some(State::Building(p)) => progress("building", &p),
        Some(State::Unavailable(why)) => json!({ "state": "unavailable", "why": why }),
        Some(State::Failed(why)) => json!({ "state": "failed", "why": why }),
        None => json!({ "state": "unavailable", "why": "this host offers no sentence vectors" }),
    }
}

/// Entries nearest in meaning taken into the ranking.
const NEAREST: u32 = 40;
/// Manual sections nearest in meaning whose links vote.
const SECTIONS: u32 = 5;
/// What meaning adds to an entry's lexical score (as a share of the
/// best): its similarity to the question, scaled from the 40th nearest
/// (0) to the nearest (1), times [`NEAR`]; and [`LINKED`] divided by the
/// rank of each of the nearest manual sections that links to it. Chosen
/// on plain-words.tsv and sentences.tsv (of 0.3-1 and 0-0.6, and
/// against reciprocal ranks), see the Godot chapter.
const NEAR: f32 = 0.5;
const LINKED: f32 = 0.3;

/// `hits` (the lexical ranking, best first) ordered again with the
/// vectors, entries found only by meaning added; unchanged when there are
/// no vectors. `returned` are the fields each hit must carry.
pub fn fuse(
    index_name: &str,
    question: &str,
    hits: &mut Vec<index::Hit>,
    returned: &[String],
) -> Result<(), ToolError> {
    let similar = |filter: (&str, &str), limit: u32, fields: Vec<String>| {
        vectors::similar(
            index_name,
            &SimilarRequest {
                text: question.to_string(),
                field: SENSE.into(),
                filters: vec![Filter {
                    field: filter.0.into(),
                    any_of: vec![filter.1.into()],
                }],
                limit,
                return_: fields,
            },
        )
        .map_err(crate::api::from_index)
    };
    let near = similar(("corpus", "reference"), NEAREST, returned.to_vec())?;
    if !matches!(near.state, State::Ready(_)) {
        return Ok(());
    }
    let sections = similar(("kind", "manual"), SECTIONS, vec!["links".into()])?;
    let top = hits.first().map_or(1.0, |h| h.score).max(f32::MIN_POSITIVE);
    let mut fused: HashMap<String, f32> = HashMap::new();
    for hit in hits.iter() {
        *fused.entry(uri(hit).to_string()).or_default() += hit.score / top;
    }
    let nearest = near.hits.first().map_or(1.0, |h| h.score);
    let last = near.hits.last().map_or(0.0, |h| h.score);
    for hit in &near.hits {
        let share = (hit.score - last) / (nearest - last).max(f32::EPSILON);
        *fused.entry(uri(hit).to_string()).or_default() += NEAR * share;
    }
    // A section's links name `Class` or `Class.member`; entries are found
    // by that name among those ranked.
    let named: HashMap<String, String> = hits
        .iter()
        .chain(&near.hits)
        .map(|h| (qualified(h), uri(h).to_string()))
        .collect();
    for (rank, section) in sections.hits.iter().enumerate() {
        for (_, link) in section.fields.iter().filter(|(k, _)| k == "links") {
            if let Some(uri) = named.get(&link.to_lowercase()) {
                *fused.entry(uri.clone()).or_default() += LINKED / (1.0 + rank as f32);
            }
        }
    }
    for hit in near.hits {
        if !hits.iter().any(|h| uri(h) == uri(&hit)) {
            hits.push(hit);
        }
    }
    // Equal scores keep the lexical order (a stable sort). Scores on the
    // lexical scale: the manual's sections are merged with them by score.
    hits.sort_by(|a, b| fused[uri(b)].total_cmp(&fused[uri(a)]));
    for hit in hits.iter_mut() {
        hit.score = top * fused[uri(hit)];
    }
    Ok(())
}

fn uri(hit: &index::Hit) -> &str {
    field(hit, "uri")
}

fn field<'a>(hit: &'a index::Hit, name: &str) -> &'a str {
    hit.fields
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

/// `class.member` or `class`, lowercase, as the manual's links name them.
fn qualified(hit: &index::Hit) -> String {
    match field(hit, "kind") {
        "class" => field(hit, "class").to_lowercase(),
        _ => format!("{}.{}", field(hit, "class"), field(hit, "name")).to_lowercase(),
    }
}
