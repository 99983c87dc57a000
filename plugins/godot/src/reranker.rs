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
    /// Its class page's rank among the class pages nearest in meaning and
    /// its cosine similarity.
    pub class_near: Option<(usize, f32)>,
    /// What the manual's sections nearest in meaning say of it.
    pub sections: Votes,
    /// What the manual's passages nearest in meaning say of it.
    pub passages: Votes,
}

/// What the manual's sections (or passages) nearest in meaning say of a
/// candidate.
#[derive(Default, Clone, Copy)]
pub struct Votes {
    /// Σ 1/(1 + rank) over those that link to it.
    pub linked: f32,
    /// The cosine of the nearest that links to it.
    pub nearest: Option<f32>,
    /// Σ 1/(1 + rank) over those that link to its class or a member of it.
    pub class: f32,
}

/// How many features a candidate has.
pub const FEATURES: usize = 32;

const KINDS: [&str; 5] = ["class", "method", "property", "signal", "constant"];

/// Words of a question that say nothing of its subject.
const STOP: &[&str] = &[
    "a", "an", "the", "how", "do", "i", "can", "to", "of", "in", "on", "at", "by", "for", "from",
    "with", "is", "are", "be", "when", "what", "which", "that", "this", "it", "its", "my", "me",
    "into", "some", "way", "want", "should", "there",
];

/// The cosines of the nearest and of the last one asked for of a list
/// nearest in meaning: a cosine counts by where it falls between them.
#[derive(Clone, Copy)]
pub struct Span {
    pub nearest: f32,
    pub last: f32,
}

impl Span {
    fn scaled(self, cosine: f32) -> f32 {
        (cosine - self.last) / (self.nearest - self.last).max(1e-6)
    }
}

/// The spans of the lists nearest in meaning a candidate may be found in.
pub struct Spans {
    pub entries: Span,
    pub classes: Span,
    pub sections: Span,
    pub passages: Span,
}

/// Whether `question` is a name in words rather than a sentence: at most
/// [`PHRASE_WORDS`] words that say something of its subject.
pub fn is_phrase(question: &str) -> bool {
    subject_words(question).count() <= PHRASE_WORDS
}

/// The words of `question` not in [`STOP`].
fn subject_words(question: &str) -> impl Iterator<Item = String> + '_ {
    words(question).filter(|w| !STOP.contains(&w.as_str()))
}

/// The most words of a question that [`is_phrase`].
const PHRASE_WORDS: usize = 3;

/// The features of each candidate.
pub fn features(question: &str, candidates: &[Candidate], spans: &Spans) -> Vec<[f32; FEATURES]> {
    let asked: Vec<String> = subject_words(question)
        .map(|w| stem(&w))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    // How many of the candidates `chosen` (a list, or its ten best) are
    // of the class, in tens.
    let among = |class: &str, chosen: &dyn Fn(&Candidate) -> bool| {
        candidates
            .iter()
            .filter(|c| chosen(c) && class_of(c.uri) == class)
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
            let (near_rank, cosine) = c.near.map_or((0.0, spans.entries.last), |(r, s)| {
                (1.0 / (1.0 + r as f32), s)
            });
            let scaled = if in_near {
                spans.entries.scaled(cosine)
            } else {
                0.0
            };
            let (class_rank, class_scaled) = c.class_near.map_or((0.0, 0.0), |(r, s)| {
                (1.0 / (1.0 + r as f32), spans.classes.scaled(s))
            });
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
                c.sections.linked,
                c.sections.linked.min(1.0),
                share,
                among(class, &|o| o.lexical.is_some_and(|(r, _)| r < 10)),
                among(class, &|o| o.near.is_some_and(|(r, _)| r < 10)),
                lex * flag(in_near),
                flag(in_lex && in_near),
            ]);
            for (i, kind) in KINDS.iter().enumerate() {
                f[14 + i] = flag(c.kind == *kind);
            }
            f[19..].copy_from_slice(&[
                class_scaled,
                class_rank,
                flag(c.class_near.is_some()),
                c.sections.class,
                c.sections.class.min(1.0),
                nearest(c.sections, spans.sections),
                among(class, &|o| o.near.is_some()),
                among(class, &|o| o.lexical.is_some()),
                c.passages.linked,
                c.passages.linked.min(1.0),
                nearest(c.passages, spans.passages),
                c.passages.class,
                c.passages.class.min(1.0),
            ]);
            f
        })
        .collect()
}

/// Where the nearest section (or passage) that links to a candidate falls
/// in its list; 0 when none does.
fn nearest(votes: Votes, span: Span) -> f32 {
    votes.nearest.map_or(0.0, |s| span.scaled(s).max(0.0))
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

// Trained by scripts/train-godot-ranker on the eight sets of tests/fixtures/godot-questions (2026-11-28).
pub const WEIGHTS: [f32; FEATURES] = [
    0.238794, 0.153165, -0.153098, 0.127866, 0.139086, 0.205849, 0.389375, -0.0300038, -0.0146959,
    0.0313293, 0.145333, 0.15335, 0.0482119, 0.0836907, 0.194652, 0.0310031, 0.0110962, 0.245647,
    -0.242001, -0.0295, -0.0698688, 0.194924, -0.0406538, 0.173888, -0.0026219, -0.0279654,
    -0.0951399, -0.0126435, 0.0289326, 0.299592, 0.0895234, 0.423185,
];
pub const MEAN: [f32; FEATURES] = [
    0.174441, 0.0432995, 0.555137, 0.143017, 0.0432995, 0.555137, 0.38992, 0.0236394, 0.021741,
    0.141347, 0.0875037, 0.0958787, 0.0456728, 0.110273, 0.0711854, 0.515409, 0.259041, 0.033491,
    0.105453, 0.223994, 0.121828, 0.415119, 0.135461, 0.115824, 0.0206335, 0.493594, 0.420563,
    0.0329333, 0.0281204, 0.0373684, 0.294062, 0.191316,
];
pub const SCALE: [f32; FEATURES] = [
    0.223326, 0.114856, 0.496952, 0.22031, 0.114856, 0.496952, 0.0816433, 0.145357, 0.128106,
    0.145983, 0.166182, 0.169477, 0.154107, 0.313231, 0.257135, 0.499764, 0.438109, 0.179916,
    0.307137, 0.338626, 0.252723, 0.492744, 0.356961, 0.284007, 0.130754, 0.696268, 0.586114,
    0.177738, 0.13492, 0.160332, 0.643739, 0.344831,
];
