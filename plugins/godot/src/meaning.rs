//! Meaning beside words (issue 57): the host embeds each entry's sense
//! (a name and its first sentence, [`crate::documents::SENSE`]) with a
//! sentence model, and a question in plain words is ranked again by a
//! learned model ([`crate::reranker`]) over its lexical ranking
//! ([`crate::ranking`]), how near the question each entry is in meaning,
//! and the entries that the manual sections nearest in meaning link to. A question says what the
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
use crate::reranker;

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

/// Entries nearest in meaning taken into the ranking (the re-ranker was
/// trained with this many).
const NEAREST: u32 = 60;
/// Manual sections nearest in meaning whose links vote.
const SECTIONS: u32 = 5;

/// `hits` (the lexical ranking, best first) ordered again by the
/// [`reranker`] with what the vectors say, entries found only by meaning
/// added; unchanged when there are no vectors. `returned` are the fields
/// each hit must carry.
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
    // A section's links name `Class` or `Class.member`; entries are found
    // by that name among those ranked.
    let named: HashMap<String, String> = hits
        .iter()
        .chain(&near.hits)
        .map(|h| (qualified(h), uri(h).to_string()))
        .collect();
    let mut linked: HashMap<&str, f32> = HashMap::new();
    for (rank, section) in sections.hits.iter().enumerate() {
        for (_, link) in section.fields.iter().filter(|(k, _)| k == "links") {
            if let Some(uri) = named.get(&link.to_lowercase()) {
                *linked.entry(uri.as_str()).or_default() += 1.0 / (1.0 + rank as f32);
            }
        }
    }
    let top = hits.first().map_or(1.0, |h| h.score).max(f32::MIN_POSITIVE);
    let lexical: HashMap<&str, (usize, f32)> = hits
        .iter()
        .enumerate()
        .map(|(rank, h)| (uri(h), (rank, h.score / top)))
        .collect();
    let nearness: HashMap<&str, (usize, f32)> = near
        .hits
        .iter()
        .enumerate()
        .map(|(rank, h)| (uri(h), (rank, h.score)))
        .collect();
    let mut all: Vec<&index::Hit> = hits.iter().collect();
    all.extend(near.hits.iter().filter(|h| !lexical.contains_key(uri(h))));
    let candidates: Vec<reranker::Candidate> = all
        .iter()
        .map(|h| reranker::Candidate {
            uri: uri(h),
            kind: field(h, "kind"),
            lexical: lexical.get(uri(h)).copied(),
            near: nearness.get(uri(h)).copied(),
            linked: linked.get(uri(h)).copied().unwrap_or(0.0),
        })
        .collect();
    let nearest = near.hits.first().map_or(1.0, |h| h.score);
    let last = near.hits.last().map_or(0.0, |h| h.score);
    let features = reranker::features(question, &candidates, nearest, last);
    if std::env::var_os("GODOT_RANKER_FEATURES").is_some() {
        log_features(question, &candidates, &features);
    }
    let scored: HashMap<String, f32> = candidates
        .iter()
        .zip(&features)
        .map(|(c, f)| (c.uri.to_string(), reranker::score(f)))
        .collect();
    let added: Vec<index::Hit> = near
        .hits
        .into_iter()
        .filter(|h| !lexical.contains_key(uri(h)))
        .collect();
    drop(lexical);
    hits.extend(added);
    // Equal scores keep the lexical order (a stable sort). Scores on the
    // lexical scale, the best keeping the best's (the manual's sections
    // are merged with them by score).
    hits.sort_by(|a, b| scored[uri(b)].total_cmp(&scored[uri(a)]));
    let best = hits.first().map_or(0.0, |h| scored[uri(h)]);
    for hit in hits.iter_mut() {
        hit.score = top * (scored[uri(hit)] - best).exp();
    }
    Ok(())
}

/// Each candidate's features, one log record each, for
/// `scripts/train-godot-ranker` (the plugin variable
/// `GODOT_RANKER_FEATURES` turns them on).
fn log_features(
    question: &str,
    candidates: &[reranker::Candidate],
    features: &[[f32; reranker::FEATURES]],
) {
    for (c, f) in candidates.iter().zip(features) {
        let values: Vec<String> = f.iter().map(|v| v.to_string()).collect();
        plugin_sdk::log::log(
            plugin_sdk::log::Level::Info,
            &format!(
                "ranker features\t{question}\t{}\t{}",
                c.uri,
                values.join(",")
            ),
        );
    }
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
