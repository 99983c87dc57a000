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

// Trained by scripts/train-godot-ranker on the eight sets of tests/fixtures/godot-questions, with
// the features of the Godot-adapted sentence model (issue 73, 2026-12-02).
pub const WEIGHTS: [f32; FEATURES] = [
    0.0349255,
    0.132634,
    -0.201508,
    0.550983,
    0.0781478,
    0.22869,
    0.602245,
    -0.110264,
    0.00337861,
    -0.0450479,
    0.035177,
    0.141816,
    0.153652,
    0.0427717,
    0.0836671,
    -0.00736776,
    0.0653463,
    0.299189,
    -0.159593,
    -0.0304005,
    0.000562702,
    0.0772444,
    -0.001761,
    0.0972112,
    0.0361904,
    -0.0832379,
    -0.138706,
    -0.0770514,
    0.135369,
    0.275614,
    0.206663,
    0.309687,
];
pub const MEAN: [f32; FEATURES] = [
    0.17503, 0.0433787, 0.556153, 0.143694, 0.0433787, 0.556153, 0.443874, 0.0271855, 0.0250231,
    0.131025, 0.0868171, 0.0973794, 0.0459099, 0.112306, 0.116975, 0.525599, 0.264276, 0.0317213,
    0.0497105, 0.269678, 0.147541, 0.492527, 0.168545, 0.139221, 0.0236099, 0.469109, 0.418101,
    0.0393651, 0.0332962, 0.0448129, 0.347495, 0.220427,
];
pub const SCALE: [f32; FEATURES] = [
    0.223681, 0.114946, 0.496838, 0.221699, 0.114946, 0.496838, 0.0766212, 0.156843, 0.138194,
    0.144929, 0.166143, 0.179599, 0.154754, 0.315744, 0.321392, 0.499345, 0.440948, 0.175258,
    0.217347, 0.354645, 0.27344, 0.499945, 0.40559, 0.308516, 0.140238, 0.671278, 0.589528,
    0.196167, 0.146536, 0.174626, 0.697599, 0.36221,
];
