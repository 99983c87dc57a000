//! What goes into a version's index: its schema, and a document per
//! class, per symbol (each weighed by how central its class is and by its
//! kind, with what the manual says of it) and per manual section.

use std::collections::HashMap;

use plugin_sdk::ToolError;
use plugin_sdk::index::{self, Analyzer, Field, FieldType, Schema};

use crate::bbcode::{first_sentence, prose_only, without_inline_code};
use crate::links::{Passage, enums_of};
use crate::manual::Section;
use crate::model::ClassDoc;
use crate::parse::class_header;
use crate::uri;

/// Bump when the documents change shape or content (the saved index is
/// rebuilt; 21: summaries end where a sentence ends, issue 72).
pub(crate) const FORMAT: &str = "godot-docs/21";
/// Documents handed to the host's index at once.
const BATCH: usize = 2000;

/// Documents for the index, added a batch at a time.
pub(crate) struct Documents<'a> {
    builder: &'a index::Builder,
    batch: Vec<Vec<(String, String)>>,
}

impl<'a> Documents<'a> {
    pub(crate) fn new(builder: &'a index::Builder) -> Self {
        Documents {
            builder,
            batch: Vec::with_capacity(BATCH),
        }
    }

    fn push(&mut self, document: Vec<(String, String)>) -> Result<(), ToolError> {
        self.batch.push(document);
        if self.batch.len() >= BATCH {
            self.flush()?;
        }
        Ok(())
    }

    pub(crate) fn flush(&mut self) -> Result<(), ToolError> {
        self.builder.add(&std::mem::take(&mut self.batch))?;
        Ok(())
    }

    /// The class and its symbols, each with what the manual says of it.
    pub(crate) fn class(
        &mut self,
        class: &ClassDoc,
        prior: f64,
        mentions: &HashMap<String, String>,
    ) -> Result<(), ToolError> {
        let mentioned = |qname: String| mentions.get(&qname).map_or("", String::as_str);
        let own = mentioned(class.name.to_lowercase());
        self.push(class_document(class, prior, own))?;
        for symbol in class.symbols() {
            let qname = format!("{}.{}", class.name, symbol.name).to_lowercase();
            self.push(symbol_document(class, &symbol, prior, mentioned(qname)))?;
        }
        Ok(())
    }
}

/// How much each class's entries count before their words do: central
/// classes (many descendants, and the global scopes with the most
/// central) more, the editor's own less. Read from each file's `<class>`
/// tag, so that a class can be indexed before the rest are parsed.
pub(crate) struct Priors(HashMap<String, f64>);

impl Priors {
    pub(crate) fn new(files: &[(String, String)]) -> Priors {
        let heads: Vec<(String, Option<String>)> = files
            .iter()
            .filter_map(|(_, xml)| class_header(xml))
            .collect();
        let descendants = descendant_counts(&heads);
        let central = descendants.values().copied().max().unwrap_or(0);
        let priors = heads
            .iter()
            .map(|(name, _)| {
                let reach = if name.starts_with('@') {
                    central
                } else {
                    *descendants.get(name.as_str()).unwrap_or(&0)
                };
                // The editor's own API (plugins, settings) answers questions
                // about games only by accident: behind the rest on equal words.
                let audience = if name.starts_with("Editor") { 0.6 } else { 1.0 };
                let prior = audience * (1.0 + 0.08 * (1.0 + reach as f64).ln());
                (name.clone(), prior)
            })
            .collect();
        Priors(priors)
    }

    pub(crate) fn of(&self, class: &str) -> f64 {
        self.0.get(class).copied().unwrap_or(1.0)
    }
}

/// The manual's sections as documents.
pub(crate) fn add_manual(
    out: &mut Documents,
    sections: &[(Section, Vec<String>)],
) -> Result<(), ToolError> {
    // A name the manual links everywhere (Node, Vector2, `_ready`) says
    // nothing of what one section is about: only the rarer ones are kept.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (_, resolved) in sections {
        for link in resolved {
            *seen.entry(link.as_str()).or_default() += 1;
        }
    }
    let common = (sections.len() as f64 * COMMON_LINK_SHARE).ceil() as usize;
    for (section, resolved) in sections {
        let rare: Vec<String> = resolved
            .iter()
            .filter(|l| seen.get(l.as_str()).is_none_or(|n| *n <= common))
            .cloned()
            .collect();
        out.push(manual_document(section, &rare))?;
    }
    Ok(())
}

/// The manual's passages that refer to classes or members, as documents
/// only the sentence vectors read (no text field, a kind no search asks
/// for): the passage nearest a question in meaning names its answer
/// ([`crate::meaning`]).
pub(crate) fn add_passages(out: &mut Documents, passages: &[Passage]) -> Result<(), ToolError> {
    for passage in passages {
        let section = passage.section;
        let title = format!("{}: {}", section.page_title, section.heading);
        let mut doc = vec![
            (
                "uri".into(),
                format!(
                    "{}/{}",
                    uri::manual(&section.page, &section.anchor),
                    passage.number
                ),
            ),
            ("kind".into(), PASSAGE.into()),
            ("corpus".into(), PASSAGE.into()),
            (SENSE.into(), sense(&title, passage.text)),
        ];
        doc.extend(
            passage
                .links
                .iter()
                .map(|l| ("links".to_string(), l.clone())),
        );
        out.push(doc)?;
    }
    Ok(())
}

/// The kind (and corpus) of a manual passage's document.
pub(crate) const PASSAGE: &str = "passage";

/// The share of the manual's sections past which a link is too common to
/// say what a section is about (measured: 1% keeps too few, none too many).
const COMMON_LINK_SHARE: f64 = 0.02;

fn manual_document(section: &Section, links: &[String]) -> Vec<(String, String)> {
    let uri = uri::manual(&section.page, &section.anchor);
    let mut doc = vec![
        ("uri".into(), uri),
        ("kind".into(), "manual".into()),
        ("corpus".into(), "manual".into()),
        ("class".into(), section.page_title.clone()),
        ("name".into(), section.heading.clone()),
        ("name_lc".into(), section.heading.to_lowercase()),
        ("name_text".into(), section.heading.clone()),
        ("class_text".into(), section.page_title.clone()),
        (
            "summary".into(),
            format!(
                "{}. {}",
                section.heading,
                first_sentence(section.prose.trim())
            ),
        ),
        ("body".into(), section.prose.trim().to_string()),
        ("weight".into(), "1.0".into()),
        (
            SENSE.into(),
            sense(
                &format!("{}: {}", section.page_title, section.heading),
                section.prose.trim(),
            ),
        ),
    ];
    doc.extend(links.iter().map(|l| ("links".to_string(), l.clone())));
    doc
}

/// The field embedded by the host's sentence model.
pub(crate) const SENSE: &str = "sense";

/// Characters of an entry's description that go into its sense: its
/// first sentences (sentence models read the first hundred-odd words).
const SENSE_CHARS: usize = 300;

/// `title: the first sentences of prose`, cut at a word.
fn sense(title: &str, prose: &str) -> String {
    let prose = prose.lines().next().unwrap_or("").trim();
    let mut cut = prose;
    if let Some((at, _)) = prose.char_indices().nth(SENSE_CHARS) {
        cut = prose[..at]
            .rsplit_once(' ')
            .map_or(&prose[..at], |(head, _)| head);
    }
    if cut.is_empty() {
        title.to_string()
    } else {
        format!("{title}: {cut}")
    }
}

/// How many classes inherit from each class, directly or not: a measure of
/// how central it is (Node, Object), used as a ranking prior.
fn descendant_counts(classes: &[(String, Option<String>)]) -> HashMap<&str, usize> {
    let parent: HashMap<&str, &str> = classes
        .iter()
        .filter_map(|(name, inherits)| Some((name.as_str(), inherits.as_deref()?)))
        .collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for (name, _) in classes {
        let mut at = name.as_str();
        let mut hops = 0;
        while let Some(&up) = parent.get(at) {
            *counts.entry(up).or_default() += 1;
            at = up;
            hops += 1;
            if hops > 64 {
                break; // a cycle in broken docs
            }
        }
    }
    counts
}

pub(crate) fn schema() -> Schema {
    let field = |name: &str, type_: FieldType, stored: bool| Field {
        name: name.into(),
        type_,
        stored,
    };
    Schema {
        fields: vec![
            field("uri", FieldType::Keyword, true),
            field("kind", FieldType::Keyword, true),
            // `reference` or `manual`: one term to keep either.
            field("corpus", FieldType::Keyword, false),
            field("class", FieldType::Keyword, true),
            field("name", FieldType::Stored, true),
            field("name_lc", FieldType::Keyword, false),
            field("qname_lc", FieldType::Keyword, false),
            field("name_text", FieldType::Text(Analyzer::Identifier), false),
            field("class_text", FieldType::Text(Analyzer::Identifier), false),
            field("summary", FieldType::Text(Analyzer::Prose), false),
            field("body", FieldType::Text(Analyzer::Prose), true),
            field("inherits", FieldType::Stored, true),
            field("members", FieldType::Stored, true),
            field("json", FieldType::Stored, true),
            // What the manual says where it refers to a class or member.
            field("mentions", FieldType::Text(Analyzer::Prose), false),
            // A manual section's `Class` and `Class.member` names.
            field("links", FieldType::Stored, true),
            // A method's or signal's parameter names (its description
            // writes them as inline code).
            field("params", FieldType::Stored, true),
            // The enum a constant is of; the enums a member uses.
            field("enum", FieldType::Stored, true),
            field("enums", FieldType::Keyword, false),
            field("weight", FieldType::Weight, false),
            // What the entry is, in a sentence, for the host's sentence
            // vectors ([`crate::meaning`]).
            field(SENSE, FieldType::Stored, true),
        ],
        id_field: "uri".into(),
    }
}

fn class_document(class: &ClassDoc, prior: f64, mentions: &str) -> Vec<(String, String)> {
    let members: Vec<String> = class
        .symbols()
        .iter()
        .map(|s| format!("{}\t{}", s.kind, s.name))
        .collect();
    let body = format!(
        "{}\n{}",
        class.brief_description,
        prose_only(&class.description)
    );
    let weight = prior * if class.deprecated.is_some() { 0.7 } else { 1.0 };
    vec![
        ("uri".into(), uri::class(&class.name)),
        ("kind".into(), "class".into()),
        ("corpus".into(), "reference".into()),
        ("class".into(), class.name.clone()),
        ("name".into(), class.name.clone()),
        ("name_lc".into(), class.name.to_lowercase()),
        ("qname_lc".into(), class.name.to_lowercase()),
        ("name_text".into(), class.name.clone()),
        (
            "summary".into(),
            without_inline_code(&class.brief_description),
        ),
        ("body".into(), body.trim().to_string()),
        (
            "inherits".into(),
            class.inherits.clone().unwrap_or_default(),
        ),
        ("members".into(), members.join("\n")),
        (
            "json".into(),
            serde_json::to_string(class).expect("classes serialise"),
        ),
        ("mentions".into(), mentions.to_string()),
        ("weight".into(), weight.to_string()),
        (SENSE.into(), sense(&class.name, &class.brief_description)),
    ]
}

/// How much each kind of symbol counts, relative to a class.
fn kind_prior(kind: &str) -> f64 {
    match kind {
        "method" | "property" | "signal" => 1.0,
        "annotation" => 0.9,
        "constant" => 0.5,
        "constructor" => 0.5,
        "theme_item" => 0.5,
        _ => 0.3, // operators
    }
}

fn symbol_document(
    class: &ClassDoc,
    symbol: &crate::model::Symbol<'_>,
    prior: f64,
    mentions: &str,
) -> Vec<(String, String)> {
    let weight = prior * kind_prior(symbol.kind) * if symbol.deprecated { 0.7 } else { 1.0 };
    let prose = prose_only(symbol.description);
    // A setting's path (`application/config/auto_accept_quit`): its last
    // part names it, the rest is where it sits, like a class (else every
    // setting under `application/` would answer questions about the app).
    let (category, own_name) = symbol.name.rsplit_once('/').unwrap_or(("", symbol.name));
    let mut doc = vec![
        (
            "uri".into(),
            uri::symbol(&class.name, symbol.kind, &symbol.uri_name()),
        ),
        ("kind".into(), symbol.kind.into()),
        ("corpus".into(), "reference".into()),
        ("class".into(), class.name.clone()),
        ("name".into(), symbol.name.to_string()),
        ("name_lc".into(), symbol.name.to_lowercase()),
        (
            "qname_lc".into(),
            format!("{}.{}", class.name, symbol.name).to_lowercase(),
        ),
        ("name_text".into(), own_name.to_string()),
        (
            "class_text".into(),
            format!("{} {}", class.name, category.replace('/', " ")),
        ),
        (
            "summary".into(),
            without_inline_code(first_sentence(prose.trim())),
        ),
        ("body".into(), prose.trim().to_string()),
        ("mentions".into(), mentions.to_string()),
        ("weight".into(), weight.to_string()),
        (
            SENSE.into(),
            sense(
                &format!(
                    "{} ({} {})",
                    own_name.replace('_', " "),
                    class.name,
                    symbol.kind
                ),
                prose.trim(),
            ),
        ),
    ];
    doc.extend(
        symbol
            .params
            .iter()
            .map(|p| ("params".to_string(), p.name.clone())),
    );
    // The enum a constant is of, and those a member holds, takes or
    // returns (lowercase `class.enum`): a question that finds a constant is
    // about the members that take its enum.
    let field = match symbol.kind {
        "constant" => "enum",
        _ => "enums",
    };
    doc.extend(
        enums_of(class, symbol.kind, symbol.name)
            .into_iter()
            .map(|e| (field.to_string(), e.to_lowercase())),
    );
    doc
}

/// The first value of a search hit's field; empty when it has none.
pub fn field<'a>(hit: &'a index::Hit, name: &str) -> &'a str {
    hit.fields
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_count_every_generation() {
        let class = |n: &str, p: Option<&str>| (n.to_string(), p.map(str::to_string));
        let classes = [
            class("Object", None),
            class("Node", Some("Object")),
            class("Node2D", Some("Node")),
            class("Timer", Some("Node")),
        ];
        let counts = descendant_counts(&classes);
        assert_eq!(
            (counts["Object"], counts["Node"], counts.get("Timer")),
            (3, 2, None)
        );
    }
}
