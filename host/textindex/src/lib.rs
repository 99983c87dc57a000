//! The index store behind the `index` capability: named tantivy indexes
//! on disk, kept open in memory, rebuilt and swapped atomically.
//!
//! Layout of one index `<root>/<name>/`:
//! - `g-<id>/`: one generation, a tantivy index plus `spec.json` (our
//!   schema: analyzers, id field, version label);
//! - `CURRENT`: the name of the generation in force, replaced by rename.
//!
//! A build writes a new generation beside the old one; `commit` writes
//! `CURRENT` and swaps the in-memory handle, so readers see the old index
//! or the new one, never a mix. Old generations are then deleted (open
//! files stay readable until the last searcher lets go).
//!
//! Open indexes are cached process-wide by directory, because plugins are
//! instantiated afresh for every call and must not reopen tantivy each time.

pub mod analyzers;
mod documents;
mod search;
mod types;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, STORED, STRING, Schema, TextFieldIndexing,
    TextOptions,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument};
use tokio::sync::OwnedMutexGuard;

pub use search::search;
pub use tantivy::DocAddress;
pub use types::{Coverage, Document, FieldBoost, Filter, Hit, IndexInfo, SearchRequest, TermBoost};

/// Our description of an index's fields, saved with each generation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spec {
    pub fields: Vec<FieldSpec>,
    pub id_field: String,
    pub version: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FieldSpec {
    pub name: String,
    pub kind: Kind,
    pub stored: bool,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Identifier,
    Prose,
    Keyword,
    Stored,
    Weight,
}

impl Spec {
    /// Check a plugin's fields and id field and make them a spec.
    pub fn new(fields: Vec<FieldSpec>, id_field: &str, version: &str) -> Result<Spec, String> {
        let mut checked: Vec<FieldSpec> = Vec::new();
        for f in fields {
            let valid = !f.name.is_empty()
                && f.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                && !f.name.starts_with('_');
            if !valid {
                return Err(format!(
                    "field name `{}`: use lowercase letters, digits and `_`, not starting with `_`",
                    f.name
                ));
            }
            if checked.iter().any(|g| g.name == f.name) {
                return Err(format!("field `{}` is declared twice", f.name));
            }
            let kind = f.kind;
            checked.push(FieldSpec {
                stored: f.stored || kind == Kind::Stored,
                ..f
            });
        }
        let fields = checked;
        match fields.iter().find(|f| f.name == id_field) {
            Some(f) if f.kind == Kind::Keyword && f.stored => {}
            Some(_) => {
                return Err(format!(
                    "id field `{id_field}` must be a stored keyword field"
                ));
            }
            None => {
                return Err(format!("id field `{id_field}` is not among the fields"));
            }
        }
        if fields.iter().filter(|f| f.kind == Kind::Weight).count() > 1 {
            return Err("at most one weight field".into());
        }
        Ok(Spec {
            fields,
            id_field: id_field.to_string(),
            version: version.to_string(),
        })
    }

    fn tantivy_schema(&self) -> Schema {
        let mut builder = Schema::builder();
        for f in &self.fields {
            let text = |tokenizer: &str| {
                let indexing = TextFieldIndexing::default()
                    .set_tokenizer(tokenizer)
                    .set_index_option(IndexRecordOption::WithFreqsAndPositions);
                let options = TextOptions::default().set_indexing_options(indexing);
                if f.stored {
                    options.set_stored()
                } else {
                    options
                }
            };
            match f.kind {
                Kind::Identifier => builder.add_text_field(&f.name, text(analyzers::IDENTIFIER)),
                Kind::Prose => builder.add_text_field(&f.name, text(analyzers::PROSE)),
                Kind::Keyword if f.stored => builder.add_text_field(&f.name, STRING | STORED),
                Kind::Keyword => builder.add_text_field(&f.name, STRING),
                Kind::Stored => builder.add_text_field(&f.name, STORED),
                Kind::Weight => {
                    builder.add_f64_field(&f.name, NumericOptions::default().set_fast())
                }
            };
        }
        builder.build()
    }
}

/// An index open for reading.
pub struct Opened {
    pub index: Index,
    pub reader: IndexReader,
    pub spec: Spec,
    fields: HashMap<String, (Field, Kind)>,
    pub info: IndexInfo,
    /// Where its generation lives, and whether reading it failed: a
    /// damaged index is let go and built again ([`forget_damaged`]).
    generation: PathBuf,
    damaged: std::sync::atomic::AtomicBool,
}

impl Opened {
    fn new(name: &str, dir: &Path, index: Index, spec: Spec) -> Result<Opened> {
        analyzers::register(index.tokenizers());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let schema = index.schema();
        let mut fields = HashMap::new();
        for f in &spec.fields {
            let field = schema
                .get_field(&f.name)
                .map_err(|_| anyhow!("field `{}` missing from the tantivy schema", f.name))?;
            fields.insert(f.name.clone(), (field, f.kind));
        }
        let info = IndexInfo {
            name: name.to_string(),
            documents: reader.searcher().num_docs(),
            size_bytes: dir_size(dir),
            version: spec.version.clone(),
        };
        Ok(Opened {
            index,
            reader,
            spec,
            fields,
            info,
            generation: dir.to_path_buf(),
            damaged: Default::default(),
        })
    }

    /// A read of the index's files failed: the index is damaged (its
    /// blocks, not the question asked). Marked so, and said how.
    pub fn read_failed(&self, e: impl std::fmt::Display) -> String {
        self.damaged
            .store(true, std::sync::atomic::Ordering::Release);
        format!("the index's files cannot be read ({e})")
    }

    pub fn is_damaged(&self) -> bool {
        self.damaged.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A field by name, with a message naming the known ones.
    pub fn field(&self, name: &str) -> Result<(Field, Kind), String> {
        self.fields.get(name).copied().ok_or_else(|| {
            let known: Vec<&str> = self.spec.fields.iter().map(|f| f.name.as_str()).collect();
            format!(
                "index `{}` has no field `{name}` (fields: {})",
                self.info.name,
                known.join(", ")
            )
        })
    }

    /// The stored values of `wanted` fields of one document.
    pub fn stored_fields(
        &self,
        doc: &TantivyDocument,
        wanted: &[String],
    ) -> Result<Document, String> {
        use tantivy::schema::Value;
        let mut out = Vec::new();
        for name in wanted {
            let (field, _) = self.field(name)?;
            for value in doc.get_all(field) {
                if let Some(text) = value.as_str() {
                    out.push((name.clone(), text.to_string()));
                }
            }
        }
        Ok(out)
    }

    /// The document whose id field is `id`.
    pub fn get(&self, id: &str, wanted: &[String]) -> Result<Option<Document>, String> {
        use tantivy::collector::TopDocs;
        use tantivy::query::TermQuery;
        let (field, _) = self.field(&self.spec.id_field)?;
        let query = TermQuery::new(
            tantivy::Term::from_field_text(field, id),
            IndexRecordOption::Basic,
        );
        let searcher = self.reader.searcher();
        let top = searcher
            .search(&query, &TopDocs::with_limit(1).order_by_score())
            .map_err(|e| self.read_failed(e))?;
        let Some((_, address)) = top.first() else {
            return Ok(None);
        };
        let doc: TantivyDocument = searcher.doc(*address).map_err(|e| self.read_failed(e))?;
        self.stored_fields(&doc, wanted).map(Some)
    }

    /// Sorted distinct terms of a keyword field that start with `prefix`.
    pub fn terms(&self, field: &str, prefix: &str, limit: usize) -> Result<Vec<String>, String> {
        let (field, kind) = self.field(field)?;
        if kind != Kind::Keyword {
            return Err("`terms` lists keyword fields only".into());
        }
        let mut found = std::collections::BTreeSet::new();
        for segment in self.reader.searcher().segment_readers() {
            let inverted = segment
                .inverted_index(field)
                .map_err(|e| self.read_failed(e))?;
            let mut stream = inverted
                .terms()
                .range()
                .ge(prefix.as_bytes())
                .into_stream()
                .map_err(|e| self.read_failed(e))?;
            while stream.advance() {
                let key = stream.key();
                if !key.starts_with(prefix.as_bytes()) {
                    break;
                }
                found.insert(String::from_utf8_lossy(key).into_owned());
            }
        }
        Ok(found.into_iter().take(limit).collect())
    }
}

/// One index directory: its open generation and its build lock.
struct Slot {
    current: RwLock<Option<Arc<Opened>>>,
    /// Whether we already tried to read it from disk.
    loaded: Mutex<bool>,
    build: Arc<tokio::sync::Mutex<()>>,
}

static SLOTS: LazyLock<Mutex<HashMap<PathBuf, Arc<Slot>>>> = LazyLock::new(Default::default);

fn slot(dir: &Path) -> Arc<Slot> {
    SLOTS
        .lock()
        .expect("index registry lock")
        .entry(dir.to_path_buf())
        .or_insert_with(|| {
            Arc::new(Slot {
                current: RwLock::new(None),
                loaded: Mutex::new(false),
                build: Default::default(),
            })
        })
        .clone()
}

/// Check an index name: it becomes a directory name.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
        && !name.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "index name `{name}`: use letters, digits, `-`, `_` and `.` (not first), at most 64"
        ))
    }
}

/// The open index at `dir`, reading it from disk on first use. `None` when
/// there is none or it cannot be read (the reason is logged): build it.
pub fn open(name: &str, dir: &Path) -> Option<Arc<Opened>> {
    let slot = slot(dir);
    let mut loaded = slot.loaded.lock().expect("index slot lock");
    if !*loaded {
        *loaded = true;
        match read_current(name, dir) {
            Ok(Some(opened)) => {
                tracing::info!(index = %dir.display(), documents = opened.info.documents, size_bytes = opened.info.size_bytes, "index opened");
                *slot.current.write().expect("index slot lock") = Some(Arc::new(opened));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(index = %dir.display(), error = %format!("{e:#}"), "index cannot be read; it will be rebuilt")
            }
        }
    }
    drop(loaded);
    slot.current.read().expect("index slot lock").clone()
}

/// Let go of `opened`, found damaged by a read: the next `open` finds no
/// index (so its plugin builds it again), and so does the next host,
/// `CURRENT` no longer naming it.
pub fn forget_damaged(dir: &Path, opened: &Arc<Opened>) {
    let slot = slot(dir);
    let mut current = slot.current.write().expect("index slot lock");
    if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, opened)) {
        *current = None;
        let named = std::fs::read_to_string(dir.join("CURRENT")).unwrap_or_default();
        if opened.generation.file_name().and_then(|n| n.to_str()) == Some(named.trim()) {
            let _ = std::fs::remove_file(dir.join("CURRENT"));
        }
        tracing::warn!(index = %dir.display(), "the index's files cannot be read: it is let go and will be rebuilt");
    }
}

fn read_current(name: &str, dir: &Path) -> Result<Option<Opened>> {
    let current = match std::fs::read_to_string(dir.join("CURRENT")) {
        Ok(text) => text.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).context("reading CURRENT"),
    };
    if current.contains(['/', '\\']) || current.starts_with('.') {
        bail!("CURRENT names `{current}`, not a generation");
    }
    let generation = dir.join(&current);
    let spec: Spec = serde_json::from_slice(
        &std::fs::read(generation.join("spec.json")).context("reading spec.json")?,
    )
    .context("spec.json is not valid")?;
    let index = Index::open_in_dir(&generation).context("opening the tantivy index")?;
    let opened = Opened::new(name, &generation, index, spec)?;
    // Touch every segment once so a damaged file fails here, not mid-search.
    for segment in opened.reader.searcher().segment_readers() {
        segment
            .get_store_reader(0)
            .context("reading the document store")?;
    }
    Ok(Some(opened))
}

/// An index being built: a new generation nobody reads yet.
pub struct Builder {
    name: String,
    dir: PathBuf,
    generation: PathBuf,
    spec: Spec,
    index: Index,
    writer: Option<IndexWriter>,
    fields: HashMap<String, (Field, Kind)>,
    _lock: OwnedMutexGuard<()>,
    committed: bool,
}

/// Start building `name` in `dir`. Waits for another build of the same
/// index; `None` when that build already produced `spec.version`.
pub async fn build(name: &str, dir: &Path, spec: Spec) -> Result<Option<Builder>> {
    let slot = slot(dir);
    let lock = slot.build.clone().lock_owned().await;
    if open(name, dir).is_some_and(|o| o.spec == spec) {
        return Ok(None);
    }
    let generation = dir.join(format!("g-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&generation)
        .with_context(|| format!("creating {}", generation.display()))?;
    let index = Index::create_in_dir(&generation, spec.tantivy_schema())
        .context("creating the tantivy index")?;
    analyzers::register(index.tokenizers());
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(2);
    let writer: IndexWriter = index
        .writer_with_num_threads(threads, threads * 40_000_000)
        .context("starting the index writer")?;
    // A build is written once and replaced whole: merging its few segments
    // would only delay the commit.
    writer.set_merge_policy(Box::new(tantivy::merge_policy::NoMergePolicy));
    let schema = index.schema();
    let fields = spec
        .fields
        .iter()
        .map(|f| {
            (
                f.name.clone(),
                (schema.get_field(&f.name).expect("declared"), f.kind),
            )
        })
        .collect();
    Ok(Some(Builder {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        generation,
        spec,
        index,
        writer: Some(writer),
        fields,
        _lock: lock,
        committed: false,
    }))
}

impl Builder {
    pub fn add(&mut self, documents: Vec<Document>) -> Result<(), String> {
        let writer = self
            .writer
            .as_ref()
            .ok_or("this build was already committed")?;
        for fields in documents {
            let mut doc = TantivyDocument::new();
            for (name, value) in fields {
                let Some(&(field, kind)) = self.fields.get(&name) else {
                    return Err(format!(
                        "document has field `{name}`, which the schema does not declare"
                    ));
                };
                if kind == Kind::Weight {
                    let weight: f64 = value.parse().map_err(|_| {
                        format!("weight field `{name}` needs a number, got `{value}`")
                    })?;
                    doc.add_f64(field, weight);
                } else {
                    doc.add_text(field, &value);
                }
            }
            writer.add_document(doc).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Commit, then make this generation the current one.
    pub async fn commit(&mut self) -> Result<IndexInfo> {
        let mut writer = self
            .writer
            .take()
            .ok_or_else(|| anyhow!("this build was already committed"))?;
        let (generation, spec) = (self.generation.clone(), self.spec.clone());
        tokio::task::spawn_blocking(move || -> Result<()> {
            writer.commit()?;
            writer.wait_merging_threads()?;
            write_atomic(
                &generation.join("spec.json"),
                &serde_json::to_vec_pretty(&spec)?,
            )
        })
        .await??;
        let opened = Arc::new(Opened::new(
            &self.name,
            &self.generation,
            self.index.clone(),
            self.spec.clone(),
        )?);
        let current = self
            .generation
            .file_name()
            .expect("generation dir")
            .to_string_lossy()
            .into_owned();
        write_atomic(&self.dir.join("CURRENT"), current.as_bytes())?;
        self.committed = true;
        let slot = slot(&self.dir);
        *slot.loaded.lock().expect("index slot lock") = true;
        *slot.current.write().expect("index slot lock") = Some(opened.clone());
        remove_other_generations(&self.dir, &current);
        tracing::info!(index = %self.dir.display(), documents = opened.info.documents, size_bytes = opened.info.size_bytes, version = %self.spec.version, "index built");
        Ok(opened.info.clone())
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        if !self.committed {
            drop(self.writer.take());
            if let Err(e) = std::fs::remove_dir_all(&self.generation) {
                tracing::warn!(dir = %self.generation.display(), error = %e, "cannot remove an abandoned index build");
            }
        }
    }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut file =
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path).with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

fn remove_other_generations(dir: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("g-")
            && name != keep
            && let Err(e) = std::fs::remove_dir_all(entry.path())
        {
            tracing::debug!(dir = %entry.path().display(), error = %e, "old index generation not removed yet");
        }
    }
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
