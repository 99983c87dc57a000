//! The order of a question's candidates once meaning is known: a linear
//! model over what the lexical ranking, the vectors and the manual say of
//! each entry, trained on our question sets (`scripts/train-godot-ranker`,
//! listwise logistic regression; judged leave-one-set-out, see the Godot
//! chapter). [`WEIGHTS`], [`MEAN`] and [`SCALE`] are its output.

/// What is known of one candidate entry.
pub struct Candidate<'a> {
    pub uri: &'a str,
    pub kind: &'a str,
    /// Its rank in the lexical ranking and score as a share of the best.
    pub lexical: Option<(usize, f32)>,
    /// Its rank among the nearest in meaning and its cosine similarity.
    pub near: Option<(usize, f32)>,
    /// Σ 1/(1 + rank) over the nearest manual sections that link to it.
    pub linked: f32,
}

/// How many features a candidate has.
pub const FEATURES: usize = 19;

const KINDS: [&str; 5] = ["class", "method", "property", "signal", "constant"];

/// Words of a question that say nothing of its subject.
const STOP: &[&str] = &[
    "a", "an", "the", "how", "do", "i", "can", "to", "of", "in", "on", "at", "by", "for", "from",
    "with", "is", "are", "be", "when", "what", "which", "that", "this", "it", "its", "my", "me",
    "into", "some", "way", "want", "should", "there",
];

/// The features of each candidate; `nearest` and `last` are the cosine
/// of the nearest entry and of the last one asked for.
pub fn features(
    question: &str,
    candidates: &[Candidate],
    nearest: f32,
    last: f32,
) -> Vec<[f32; FEATURES]> {
    let asked: Vec<String> = words(question)
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // How many of the ten best of a list are of the same class.
    let among = |class: &str, best: &dyn Fn(&Candidate) -> bool| {
        candidates
            .iter()
            .filter(|c| best(c) && class_of(c.uri) == class)
            .count() as f32
            / 10.0
    };
    candidates
        .iter()
        .map(|c| {
            let class = class_of(c.uri);
            let mut said: std::collections::HashSet<String> =
                words(name_of(c.uri)).map(|w| stem(&w)).collect();
            said.extend(words(&split_camel(class)).map(|w| stem(&w)));
            let share = asked.iter().filter(|w| said.contains(*w)).count() as f32
                / asked.len().max(1) as f32;
            let (in_lex, in_near) = (c.lexical.is_some(), c.near.is_some());
            let (lex_rank, lex) = c
                .lexical
                .map_or((0.0, 0.0), |(r, s)| (1.0 / (1.0 + r as f32), s));
            let (near_rank, cosine) = c
                .near
                .map_or((0.0, last), |(r, s)| (1.0 / (1.0 + r as f32), s));
            let scaled = if in_near {
                (cosine - last) / (nearest - last).max(1e-6)
            } else {
                0.0
            };
            let flag = |b: bool| if b { 1.0 } else { 0.0 };
            let mut f = [0.0; FEATURES];
            f[..14].copy_from_slice(&[
                lex,
                lex_rank,
                flag(in_lex),
                scaled,
                near_rank,
                flag(in_near),
                cosine,
                c.linked,
                c.linked.min(1.0),
                share,
                among(class, &|o| o.lexical.is_some_and(|(r, _)| r < 10)),
                among(class, &|o| o.near.is_some_and(|(r, _)| r < 10)),
                lex * flag(in_near),
                flag(in_lex && in_near),
            ]);
            for (i, kind) in KINDS.iter().enumerate() {
                f[14 + i] = flag(c.kind == *kind);
            }
            f
        })
        .collect()
}

/// The model's score of one candidate's features.
pub fn score(f: &[f32; FEATURES]) -> f32 {
    (0..FEATURES)
        .map(|i| WEIGHTS[i] * (f[i] - MEAN[i]) / SCALE[i])
        .sum()
}

/// `godot://symbol/Class/kind/name` → `Class`; `godot://class/Class` → `Class`.
fn class_of(uri: &str) -> &str {
    let parts: Vec<&str> = uri.split('/').collect();
    if parts.get(2) == Some(&"symbol") {
        parts.get(3).copied().unwrap_or("")
    } else {
        parts.last().copied().unwrap_or("")
    }
}

fn name_of(uri: &str) -> &str {
    uri.rsplit('/').next().unwrap_or("")
}

/// Lowercase words split at anything not a letter or digit.
fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
}

/// `CharacterBody2D` → `Character Body2D`: a space where lowercase meets
/// uppercase.
fn split_camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut previous_lower = false;
    for c in name.chars() {
        if previous_lower && c.is_ascii_uppercase() {
            out.push(' ');
        }
        previous_lower = c.is_ascii_lowercase();
        out.push(c);
    }
    out
}

/// A word's first five letters: a stem good enough for names.
fn stem(word: &str) -> String {
    word.chars().take(5).collect()
}

// Trained by scripts/train-godot-ranker on the four sets of tests/fixtures/godot-questions (2026-11-28).
pub const WEIGHTS: [f32; FEATURES] = [
    0.190717,
    0.21909,
    -0.0968509,
    0.101069,
    0.0715891,
    0.182128,
    0.461099,
    0.014237,
    0.269845,
    -0.00303629,
    0.287234,
    0.30144,
    0.0965386,
    0.121532,
    0.235059,
    0.0646315,
    -0.0566686,
    0.268467,
    -0.255992,
];
pub const MEAN: [f32; FEATURES] = [
    0.169004, 0.0444731, 0.570184, 0.146589, 0.0444731, 0.570184, 0.409294, 0.0270516, 0.0249002,
    0.183139, 0.101188, 0.107746, 0.0573405, 0.140368, 0.066274, 0.536428, 0.244209, 0.0348941,
    0.103544,
];
pub const SCALE: [f32; FEATURES] = [
    0.219484, 0.116178, 0.495051, 0.22234, 0.116178, 0.495051, 0.0851507, 0.155119, 0.136719,
    0.172419, 0.185427, 0.179694, 0.171121, 0.34737, 0.248761, 0.498672, 0.429618, 0.183513,
    0.304669,
];
