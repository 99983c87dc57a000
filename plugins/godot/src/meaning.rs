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

use std::collections::{HashMap, HashSet};

use plugin_sdk::ToolError;
use plugin_sdk::index::{self, Filter};
use plugin_sdk::vectors::{self, SimilarRequest, State};

use crate::documents::{PASSAGE, SENSE, field};
use crate::reranker::{self, Votes};

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
/// Manual passages nearest in meaning whose links vote.
const PASSAGES: u32 = 20;
/// Class pages nearest in meaning: whether an entry's class is among them.
const CLASSES: u32 = 40;

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
    let passages = similar(("kind", PASSAGE), PASSAGES, vec!["links".into()])?;
    let classes = similar(("kind", "class"), CLASSES, vec!["class".into()])?;
    let class_near: HashMap<&str, (usize, f32)> = classes
        .hits
        .iter()
        .enumerate()
        .map(|(rank, h)| (field(h, "class"), (rank, h.score)))
        .collect();
    // A section's links name `Class` or `Class.member`; entries are found
    // by that name among those ranked (fetching the entries they name that
    // neither list holds found few more answers and ranked worse).
    let named: HashMap<String, String> = hits
        .iter()
        .chain(&near.hits)
        .map(|h| (qualified(h), uri(h).to_string()))
        .collect();
    let by_sections = Ballot::count(&sections, &named);
    let by_passages = Ballot::count(&passages, &named);
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
            class_near: class_near.get(field(h, "class")).copied(),
            sections: by_sections.of(h),
            passages: by_passages.of(h),
        })
        .collect();
    let span = |answer: &vectors::SimilarAnswer| reranker::Span {
        nearest: answer.hits.first().map_or(1.0, |h| h.score),
        last: answer.hits.last().map_or(0.0, |h| h.score),
    };
    let spans = reranker::Spans {
        entries: span(&near),
        classes: span(&classes),
        sections: span(&sections),
        passages: span(&passages),
    };
    let features = reranker::features(question, &candidates, &spans);
    if std::env::var_os("GODOT_RANKER_FEATURES").is_some() {
        log_features(question, &candidates, &features);
    }
    let scored: HashMap<String, f32> = candidates
        .iter()
        .zip(&features)
        .map(|(c, f)| (c.uri.to_string(), reranker::score(f)))
        .collect();
    let added: Vec<index::Hit> = all[hits.len()..].iter().map(|h| (*h).clone()).collect();
    let lexical_first = hits.first().map(|h| uri(h).to_string());
    hits.extend(added);
    // Equal scores keep the lexical order (a stable sort). Scores on the
    // lexical scale, the best keeping the best's (the manual's sections
    // are merged with them by score).
    hits.sort_by(|a, b| scored[uri(b)].total_cmp(&scored[uri(a)]));
    let best = hits.first().map_or(0.0, |h| scored[uri(h)]);
    for hit in hits.iter_mut() {
        hit.score = top * (scored[uri(hit)] - best).exp();
    }
    // A name in a few words ("play sound at position") keeps the entry its
    // words rank first: the vectors know what it is about (playing
    // sound), the words which one it names (measured on our sets: the
    // first three unchanged, 4 of 257 first answers fewer, the names
    // asked in words all right instead of 3 of 4).
    if reranker::is_phrase(question)
        && let Some(at) = hits
            .iter()
            .position(|h| Some(uri(h)) == lexical_first.as_deref())
    {
        let mut first = hits.remove(at);
        first.score = top;
        hits.insert(0, first);
    }
    Ok(())
}

/// What the manual's sections (or passages) nearest in meaning say of the
/// entries they link to, by URI, and of the classes, by lowercase name.
struct Ballot {
    entries: HashMap<String, Votes>,
    classes: HashMap<String, f32>,
}

impl Ballot {
    /// The votes of `nearest` (best first) for the entries `named` by
    /// their lowercase `Class` or `Class.member` names.
    fn count(nearest: &vectors::SimilarAnswer, named: &HashMap<String, String>) -> Ballot {
        let mut ballot = Ballot {
            entries: HashMap::new(),
            classes: HashMap::new(),
        };
        for (rank, said) in nearest.hits.iter().enumerate() {
            let vote = 1.0 / (1.0 + rank as f32);
            let mut classes = HashSet::new();
            for (_, link) in said.fields.iter().filter(|(k, _)| k == "links") {
                let link = link.to_lowercase();
                classes.insert(link.split('.').next().unwrap_or("").to_string());
                if let Some(uri) = named.get(&link) {
                    let votes = ballot.entries.entry(uri.clone()).or_default();
                    votes.linked += vote;
                    votes.nearest.get_or_insert(said.score);
                }
            }
            for class in classes {
                *ballot.classes.entry(class).or_default() += vote;
            }
        }
        ballot
    }

    fn of(&self, hit: &index::Hit) -> Votes {
        Votes {
            class: self
                .classes
                .get(&field(hit, "class").to_lowercase())
                .copied()
                .unwrap_or(0.0),
            ..self.entries.get(uri(hit)).copied().unwrap_or_default()
        }
    }
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

/// `class.member` or `class`, lowercase, as the manual's links name them.
fn qualified(hit: &index::Hit) -> String {
    match field(hit, "kind") {
        "class" => field(hit, "class").to_lowercase(),
        _ => format!("{}.{}", field(hit, "class"), field(hit, "name")).to_lowercase(),
    }
}
