//! One search: the query text analysed per field into BM25 term clauses,
//! a bonus for adjacent query words found next to each other in prose,
//! exact keyword terms, filters, the per-document weight, and snippets.

use std::collections::HashSet;

use tantivy::collector::TopDocs;
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query, TermQuery,
};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::snippet::{Snippet, SnippetGenerator};
use tantivy::{DocAddress, Score, SegmentReader, TantivyDocument, Term};

use super::{Filter, Hit, Kind, Opened, SearchRequest};

/// How much an adjacent pair of query words in a prose field adds,
/// relative to the field's boost.
const PHRASE_BONUS: f32 = 0.5;
const MAX_LIMIT: u32 = 1000;
/// Hits fetched beyond the limit, to order equal scores by id.
const TIE_MARGIN: usize = 8;
/// Bounds on one query, whatever the plugin let through: each token costs
/// a term clause and a phrase clause built in host memory, outside the
/// plugin's memory cap (a 5 MB query once took 10 GB).
const MAX_QUERY_BYTES: usize = 16 * 1024;
const MAX_CLAUSES: usize = 4096;

pub fn search(opened: &Opened, request: &SearchRequest) -> Result<Vec<Hit>, String> {
    if request.query.len() > MAX_QUERY_BYTES {
        return Err(format!(
            "the query is {} bytes; the index searches at most {MAX_QUERY_BYTES}: shorten it",
            request.query.len()
        ));
    }
    let given = request.terms.len()
        + request
            .filters
            .iter()
            .map(|f| f.any_of.len())
            .sum::<usize>();
    if given > MAX_CLAUSES {
        return Err(format!(
            "{given} terms and filter values; the index takes at most {MAX_CLAUSES} per query"
        ));
    }
    let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    let mut analysed = Vec::new();
    for wanted in &request.fields {
        let (field, kind) = opened.field(&wanted.field)?;
        if !matches!(kind, Kind::Identifier | Kind::Prose) {
            return Err(format!(
                "field `{}` is not a text field: match keyword fields with `terms`",
                wanted.field
            ));
        }
        let mut analyzer = opened
            .index
            .tokenizer_for_field(field)
            .map_err(|e| e.to_string())?;
        // The words as written (the first of each `word|alternative|…`)
        // make the phrases; their alternatives are searched as words only.
        let (written, alternatives) = split_alternatives(&request.query);
        let mut tokens: Vec<(usize, String)> = Vec::new();
        analyzer
            .token_stream(&written)
            .process(&mut |t| tokens.push((t.position, t.text.clone())));
        let mut others: Vec<String> = Vec::new();
        analyzer
            .token_stream(&alternatives)
            .process(&mut |t| others.push(t.text.clone()));
        let mut seen = HashSet::new();
        for text in tokens.iter().map(|(_, t)| t).chain(&others) {
            if seen.insert(text.as_str()) {
                let term = TermQuery::new(
                    Term::from_field_text(field, text),
                    IndexRecordOption::WithFreqs,
                );
                clauses.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(term), wanted.boost)),
                ));
            }
        }
        if kind == Kind::Prose {
            for pair in tokens.windows(2) {
                let ((p1, t1), (p2, t2)) = (&pair[0], &pair[1]);
                let phrase = PhraseQuery::new_with_offset(vec![
                    (0, Term::from_field_text(field, t1)),
                    (p2 - p1, Term::from_field_text(field, t2)),
                ]);
                clauses.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(
                        Box::new(phrase),
                        wanted.boost * PHRASE_BONUS,
                    )),
                ));
            }
        }
        analysed.push((
            wanted.field.as_str(),
            tokens.into_iter().map(|(_, t)| t).collect::<Vec<_>>(),
        ));
    }
    for boost in &request.terms {
        let field = keyword_field(opened, &boost.field)?;
        let term = TermQuery::new(
            Term::from_field_text(field, &boost.term),
            IndexRecordOption::Basic,
        );
        clauses.push((
            Occur::Should,
            Box::new(BoostQuery::new(Box::new(term), boost.boost)),
        ));
    }
    if let Some(coverage) = &request.coverage
        && let Some(all_words) = coverage_query(opened, &request.query, &coverage.fields)?
    {
        clauses.push((
            Occur::Should,
            Box::new(ConstScoreQuery::new(all_words, coverage.bonus)),
        ));
    }
    if clauses.len() > MAX_CLAUSES {
        return Err(format!(
            "the query makes {} clauses; the index takes at most {MAX_CLAUSES}: use fewer words or fields",
            clauses.len()
        ));
    }
    tracing::debug!(target: "index", index = %opened.info.name, ?analysed, terms = request.terms.len(), "query analysed");
    if clauses.is_empty() {
        return Ok(Vec::new());
    }
    let mut query: Box<dyn Query> = Box::new(BooleanQuery::new(clauses));
    if !request.filters.is_empty() {
        let mut all = vec![(Occur::Must, query)];
        for filter in &request.filters {
            let allowed = filter_query(opened, filter)?;
            all.push((Occur::Must, Box::new(ConstScoreQuery::new(allowed, 0.0))));
        }
        query = Box::new(BooleanQuery::new(all));
    }

    let searcher = opened.reader.searcher();
    // Equal scores come in index order, which a rebuild may change: they
    // are put in id order, from a few more hits than asked for.
    let wanted = request.limit.clamp(1, MAX_LIMIT) as usize;
    let top = TopDocs::with_limit(wanted + TIE_MARGIN);
    let found: Vec<(Score, DocAddress)> =
        match opened.spec.fields.iter().find(|f| f.kind == Kind::Weight) {
            Some(weight) => {
                let name = weight.name.clone();
                let by_weight = top.tweak_score(move |segment: &SegmentReader| {
                    let column = segment
                        .fast_fields()
                        .f64(&name)
                        .ok()
                        .map(|c| c.first_or_default_col(1.0));
                    move |doc, score: Score| match &column {
                        Some(column) => score * column.get_val(doc) as Score,
                        None => score,
                    }
                });
                searcher.search(&*query, &by_weight)
            }
            None => searcher.search(&*query, &top.order_by_score()),
        }
        .map_err(|e| opened.read_failed(e))?;

    let snippets = match &request.snippet_field {
        Some(name) => {
            let (field, _) = opened.field(name)?;
            let mut generator = SnippetGenerator::create(&searcher, &*query, field)
                .map_err(|e| opened.read_failed(e))?;
            generator.set_max_num_chars(request.snippet_chars.max(20) as usize);
            Some((field, generator))
        }
        None => None,
    };
    let id_field = opened.field(&opened.spec.id_field)?.0;
    let mut ranked = Vec::with_capacity(found.len());
    for (score, address) in found {
        let doc: TantivyDocument = searcher.doc(address).map_err(|e| opened.read_failed(e))?;
        let id = doc
            .get_first(id_field)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        ranked.push((score, id, doc));
    }
    ranked.sort_by(|(s1, id1, _), (s2, id2, _)| s2.total_cmp(s1).then_with(|| id1.cmp(id2)));
    ranked.truncate(wanted);
    let top: Vec<(&str, Score)> = ranked
        .iter()
        .take(5)
        .map(|(s, id, _)| (id.as_str(), *s))
        .collect();
    tracing::debug!(target: "index", index = %opened.info.name, ?top, "top scores");
    let mut hits = Vec::with_capacity(ranked.len());
    for (score, _, doc) in ranked {
        let snippet = snippets.as_ref().map(|(field, generator)| {
            let text: Vec<&str> = doc.get_all(*field).filter_map(|v| v.as_str()).collect();
            let text = text.join(" ");
            let snippet = generator.snippet(&text);
            if snippet.highlighted().is_empty() {
                shorten(&text, request.snippet_chars.max(20) as usize)
            } else {
                render(&snippet, text.len())
            }
        });
        hits.push(Hit {
            score,
            fields: opened.stored_fields(&doc, &request.return_)?,
            snippet,
        });
    }
    Ok(hits)
}

/// The query's words as written (the first of each `word|alternative|…`)
/// and, apart, their alternatives.
fn split_alternatives(query: &str) -> (String, String) {
    let (mut written, mut alternatives) = (Vec::new(), Vec::new());
    for word in query.split_whitespace() {
        let mut parts = word.split('|');
        written.extend(parts.next());
        alternatives.extend(parts);
    }
    (written.join(" "), alternatives.join(" "))
}

/// Matches documents in which each required word of `query` (or one of its
/// alternatives) matches in one of `fields`. A word is required unless
/// every prose field drops it.
fn coverage_query(
    opened: &Opened,
    query: &str,
    fields: &[String],
) -> Result<Option<Box<dyn Query>>, String> {
    let mut analyzers = Vec::new();
    for name in fields {
        let (field, kind) = opened.field(name)?;
        if !matches!(kind, Kind::Identifier | Kind::Prose) {
            return Err(format!("coverage field `{name}` is not a text field"));
        }
        analyzers.push((
            field,
            kind,
            opened
                .index
                .tokenizer_for_field(field)
                .map_err(|e| e.to_string())?,
        ));
    }
    let has_prose = analyzers.iter().any(|(_, kind, _)| *kind == Kind::Prose);
    let mut words: Vec<(Occur, Box<dyn Query>)> = Vec::new();
    for word in query.split_whitespace() {
        let mut either: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut kept_by_prose = false;
        for (field, kind, analyzer) in &mut analyzers {
            analyzer
                .token_stream(&word.replace('|', " "))
                .process(&mut |t| {
                    kept_by_prose |= *kind == Kind::Prose;
                    let term = TermQuery::new(
                        Term::from_field_text(*field, &t.text),
                        IndexRecordOption::Basic,
                    );
                    either.push((Occur::Should, Box::new(term)));
                });
        }
        if !either.is_empty() && (kept_by_prose || !has_prose) {
            words.push((Occur::Must, Box::new(BooleanQuery::new(either))));
        }
    }
    Ok((!words.is_empty()).then(|| Box::new(BooleanQuery::new(words)) as Box<dyn Query>))
}

/// The documents whose keyword field `filter.field` is one of its values.
pub(crate) fn filter_query(opened: &Opened, filter: &Filter) -> Result<Box<dyn Query>, String> {
    let field = keyword_field(opened, &filter.field)?;
    if filter.any_of.is_empty() {
        return Err(format!("the filter on `{}` lists no values", filter.field));
    }
    let terms = filter
        .any_of
        .iter()
        .map(|v| Term::from_field_text(field, v))
        .collect();
    Ok(Box::new(BooleanQuery::new_multiterms_query(terms)))
}

fn keyword_field(opened: &Opened, name: &str) -> Result<tantivy::schema::Field, String> {
    match opened.field(name)? {
        (field, Kind::Keyword) => Ok(field),
        _ => Err(format!(
            "field `{name}` is not a keyword field: terms and filters need one"
        )),
    }
}

/// The fragment with its matched words in `**`, and `…` where it was cut.
fn render(snippet: &Snippet, text_len: usize) -> String {
    let fragment = snippet.fragment();
    let mut out = String::new();
    if snippet.fragment_range().start > 0 {
        out.push('…');
    }
    let mut at = 0;
    let mut ranges = snippet.highlighted().to_vec();
    ranges.sort_by_key(|r| r.start);
    for range in ranges {
        if range.start < at {
            continue;
        }
        out.push_str(&fragment[at..range.start]);
        out.push_str("**");
        out.push_str(&fragment[range.clone()]);
        out.push_str("**");
        at = range.end;
    }
    out.push_str(&fragment[at..]);
    if snippet.fragment_range().end < text_len {
        out.push('…');
    }
    out
}

/// The start of `text`, cut at a word boundary within `max` characters.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut = text.char_indices().nth(max).map_or(text.len(), |(i, _)| i);
    let head = &text[..cut];
    let head = head.rfind(char::is_whitespace).map_or(head, |i| &head[..i]);
    format!("{}…", head.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternatives_are_told_apart_from_the_words_as_written() {
        assert_eq!(
            split_alternatives("quit  the game|application|app"),
            ("quit the game".to_string(), "application app".to_string())
        );
        assert_eq!(split_alternatives("a|"), ("a".to_string(), String::new()));
    }
}
