//! Documents by address, for what is searched outside tantivy (the
//! host's sentence vectors): every document's text of one field, which
//! documents pass the filters, and the stored fields of one.

use tantivy::query::{BooleanQuery, EnableScoring, Occur, Query};
use tantivy::schema::Value;
use tantivy::{BitSet, DocAddress, TantivyDocument};

use super::{Document, Filter, Kind, Opened};

/// Documents read for their text at most (a corpus bigger than this is
/// cut: vectors are for reference-sized corpora, and the texts are held
/// in memory while they are embedded).
const MAX_DOCUMENTS: usize = 100_000;
/// Characters of one document's text kept: the sentence model reads 128
/// tokens, about a hundred words.
const MAX_TEXT_CHARS: usize = 600;

/// The documents that passed filters: a bit per document of each segment
/// (every document is asked of it once per search of the vectors).
pub struct Passing(Vec<BitSet>);

impl Passing {
    pub fn contains(&self, address: &DocAddress) -> bool {
        self.0
            .get(address.segment_ord as usize)
            .is_some_and(|passed| {
                address.doc_id < passed.max_value() && passed.contains(address.doc_id)
            })
    }
}

impl Opened {
    /// Every live document with a value in the stored field `field`, its
    /// values joined by a space and cut to [`MAX_TEXT_CHARS`], in the
    /// order of their ids: the same in every build of the same documents
    /// (addresses are not: the writer's threads share documents out as
    /// they come), so that ties are broken the same way each time.
    pub fn texts(&self, field: &str) -> Result<Vec<(DocAddress, String)>, String> {
        let (wanted, kind) = self.field(field)?;
        if !self.spec.fields.iter().any(|f| f.name == field && f.stored) || kind == Kind::Weight {
            return Err(format!("field `{field}` is not a stored text field"));
        }
        let id_field = self.field(&self.spec.id_field)?.0;
        let searcher = self.reader.searcher();
        let mut out = Vec::new();
        'segments: for (ordinal, segment) in searcher.segment_readers().iter().enumerate() {
            let store = segment
                .get_store_reader(64)
                .map_err(|e| self.read_failed(e))?;
            for doc_id in segment.doc_ids_alive() {
                if out.len() >= MAX_DOCUMENTS {
                    break 'segments;
                }
                let doc: TantivyDocument = store.get(doc_id).map_err(|e| self.read_failed(e))?;
                let mut text = String::new();
                for value in doc.get_all(wanted) {
                    if let Some(v) = value.as_str() {
                        if !text.is_empty() {
                            text.push(' ');
                        }
                        text.push_str(v);
                    }
                }
                if !text.trim().is_empty() {
                    let text = match text.char_indices().nth(MAX_TEXT_CHARS) {
                        Some((at, _)) => text[..at].to_string(),
                        None => text,
                    };
                    let id = doc
                        .get_first(id_field)
                        .and_then(|v| v.as_str())
                        .unwrap_or("");
                    out.push((
                        id.to_string(),
                        DocAddress::new(ordinal as u32, doc_id),
                        text,
                    ));
                }
            }
        }
        out.sort_unstable_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        Ok(out
            .into_iter()
            .map(|(_, address, text)| (address, text))
            .collect())
    }

    /// The documents that pass every filter; `None` when there is none.
    pub fn passing(&self, filters: &[Filter]) -> Result<Option<Passing>, String> {
        if filters.is_empty() {
            return Ok(None);
        }
        let mut all: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for filter in filters {
            all.push((Occur::Must, super::search::filter_query(self, filter)?));
        }
        let searcher = self.reader.searcher();
        let weight = BooleanQuery::new(all)
            .weight(EnableScoring::disabled_from_searcher(&searcher))
            .map_err(|e| self.read_failed(e))?;
        let mut segments = Vec::with_capacity(searcher.segment_readers().len());
        for reader in searcher.segment_readers() {
            let mut passed = BitSet::with_max_value(reader.max_doc());
            weight
                .for_each_no_score(reader, &mut |docs| {
                    for doc in docs {
                        passed.insert(*doc);
                    }
                })
                .map_err(|e| self.read_failed(e))?;
            segments.push(passed);
        }
        Ok(Some(Passing(segments)))
    }

    /// The stored fields `wanted` of the document at `address`.
    pub fn fetch(&self, address: DocAddress, wanted: &[String]) -> Result<Document, String> {
        let doc: TantivyDocument = self
            .reader
            .searcher()
            .doc(address)
            .map_err(|e| self.read_failed(e))?;
        self.stored_fields(&doc, wanted)
    }

    /// The directory of this generation: vectors made for it are its own.
    pub fn generation(&self) -> &std::path::Path {
        &self.generation
    }
}

#[cfg(test)]
mod tests {
    use crate::{FieldSpec, Kind, Spec};

    /// Texts come in their ids' order whatever order the documents were
    /// added in (the vectors break ties by it).
    #[tokio::test]
    async fn texts_come_in_the_order_of_their_ids() {
        let dir = tempfile::tempdir().unwrap();
        let field = |name: &str, kind| FieldSpec {
            name: name.into(),
            kind,
            stored: true,
        };
        let spec = Spec::new(
            vec![field("id", Kind::Keyword), field("sense", Kind::Stored)],
            "id",
            "1",
        )
        .unwrap();
        let mut builder = crate::build("t", dir.path(), spec).await.unwrap().unwrap();
        let ids = ["c", "a", "d", "b"];
        let docs = ids
            .iter()
            .map(|id| {
                vec![
                    ("id".into(), id.to_string()),
                    ("sense".into(), "same text".into()),
                ]
            })
            .collect();
        builder.add(docs).unwrap();
        builder.commit().await.unwrap();
        let opened = crate::open("t", dir.path()).unwrap();
        let texts = opened.texts("sense").unwrap();
        let order: Vec<String> = texts
            .iter()
            .map(|(address, _)| opened.fetch(*address, &["id".into()]).unwrap()[0].1.clone())
            .collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
    }
}
