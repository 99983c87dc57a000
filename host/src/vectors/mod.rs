//! The sentence vectors behind the `vectors` capability: one model per
//! host, loaded when a plugin first asks; its vectors on disk by text
//! hash ([`embedder::Store`]); and a table per (index build, field),
//! filled by one background thread ([`worker`]) and scanned by `similar`.
//!
//! Lexical search never waits on any of this: a table that is not ready
//! answers nothing and says how far it got.

mod worker;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, RwLock};

use embedder::{Matrix, Model, Store};
use textindex::{DocAddress, Document, Filter, Opened};

/// Characters of a question embedded (the model reads 128 tokens at most).
pub const MAX_QUESTION_CHARS: usize = 1_000;
/// Questions whose vectors are kept for the next `similar`.
const RECENT_QUESTIONS: usize = 8;
/// Hits one `similar` answers at most.
pub const MAX_HITS: usize = 200;

/// Where the model is and where vectors are kept, from the command line.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The model folder; `None` when there is none (words only).
    pub model: Option<PathBuf>,
    /// Why there is none, for `unavailable`.
    pub why_none: String,
    /// `<cache>/vectors`: the host's own store files.
    pub store_dir: PathBuf,
}

impl Settings {
    /// The model `--embedding-model` names (`none`: no model), else the
    /// default folder when it holds one; vectors kept under `cache_dir`.
    pub fn new(given: Option<PathBuf>, cache_dir: &Path) -> Settings {
        let default = default_model_dir();
        let (model, why_none) = match given {
            Some(dir) if dir.as_os_str() == "none" => (
                None,
                "the host was started with --embedding-model none".to_string(),
            ),
            Some(dir) => (Some(dir), String::new()),
            None => match default {
                Some(dir) if dir.join("model.safetensors").is_file() => (Some(dir), String::new()),
                _ => (
                    None,
                    format!(
                        "no sentence model: run scripts/setup-model (it fills {}), or start the \
                         host with --embedding-model DIR",
                        default.map_or("the default folder".into(), |d| d.display().to_string())
                    ),
                ),
            },
        };
        Settings {
            model,
            why_none,
            store_dir: cache_dir.join("vectors"),
        }
    }
}

/// What a plugin learns of its vectors.
#[derive(Clone, Debug, PartialEq)]
pub enum State {
    Unavailable(String),
    Building(Progress),
    Ready(Progress),
    Failed(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
    pub model: String,
}

/// The model and its store, once loaded.
struct Loaded {
    model: Model,
    store: Mutex<Store>,
}

/// The vectors of one field of one index build.
#[derive(Default)]
struct Table {
    done: AtomicU64,
    total: AtomicU64,
    /// The documents, and their vectors a row each in the same order.
    rows: OnceLock<(Vec<DocAddress>, Matrix)>,
    failed: OnceLock<String>,
}

/// The model, once the worker has loaded it (or why it could not).
type Slot = Arc<OnceLock<Result<Arc<Loaded>, String>>>;

/// A question's vector: embedded once, by whichever asks first (a
/// `prepare` ahead of the plugin's lexical work, or `similar`); the
/// others wait for that one.
type Question = Arc<tokio::sync::OnceCell<Result<Arc<Vec<f32>>, String>>>;

struct Service {
    settings: Settings,
    model: Slot,
    /// The last questions embedded or being embedded, newest last.
    recent: Mutex<std::collections::VecDeque<(String, Question)>>,
    tables: Mutex<HashMap<(PathBuf, String), Arc<Table>>>,
    jobs: Mutex<Option<std::sync::mpsc::Sender<worker::Job>>>,
}

static SERVICE: LazyLock<RwLock<Option<Arc<Service>>>> = LazyLock::new(Default::default);

/// Use `settings` from now on (the host calls this once at start).
pub fn configure(settings: Settings) {
    if let Some(model) = &settings.model {
        tracing::info!(model = %model.display(), "sentence vectors: this model embeds on first use");
    } else {
        tracing::info!(why = %settings.why_none, "sentence vectors are off: words only");
    }
    *SERVICE.write().expect("vectors lock") = Some(Arc::new(Service {
        settings,
        model: Slot::default(),
        recent: Default::default(),
        tables: Default::default(),
        jobs: Default::default(),
    }));
}

fn service() -> Option<Arc<Service>> {
    SERVICE.read().expect("vectors lock").clone()
}

/// The default model folder (where `scripts/setup-model` puts it).
pub fn default_model_dir() -> Option<PathBuf> {
    Some(dirs::data_dir()?.join("mcp-host/models/godot-minilm-l6"))
}

/// What `host check` says of the model: loaded here to be sure it
/// loads; `Err` when a model is given and does not.
pub fn check() -> Result<String, String> {
    let Some(service) = service() else {
        return Ok("not configured".into());
    };
    let Some(dir) = &service.settings.model else {
        return Ok(format!(
            "off ({}): questions are searched by their words only",
            service.settings.why_none
        ));
    };
    let model = Model::load(dir).map_err(|e| format!("{e:#}"))?;
    Ok(format!(
        "{} at {}, {} dimensions (documents are embedded in the background at first use)",
        model.name(),
        dir.display(),
        model.dim()
    ))
}

/// Embed `field` of `opened` unless done or under way; its state.
pub fn embed(opened: &Arc<Opened>, field: &str) -> Result<State, String> {
    let Some(service) = service() else {
        return Ok(State::Unavailable(
            "the host was started without vector settings".into(),
        ));
    };
    let Some(model_dir) = service.settings.model.clone() else {
        return Ok(State::Unavailable(service.settings.why_none.clone()));
    };
    check_field(opened, field)?;
    let key = (opened.generation().to_path_buf(), field.to_string());
    let mut tables = service.tables.lock().expect("vectors lock");
    if let Some(table) = tables.get(&key) {
        return Ok(service.state(table));
    }
    // Builds replaced since are gone from disk: their tables go too.
    tables.retain(|(generation, _), _| generation.exists());
    let table = Arc::new(Table::default());
    tables.insert(key, table.clone());
    drop(tables);
    service.send(worker::Job {
        opened: opened.clone(),
        field: field.to_string(),
        table: table.clone(),
        model_dir,
    });
    Ok(service.state(&table))
}

/// The documents of `opened` nearest in meaning to `question`, when its
/// `field` is embedded; else none, with the state.
pub async fn similar(
    opened: &Arc<Opened>,
    field: &str,
    question: &str,
    filters: &[Filter],
    limit: usize,
    wanted: &[String],
) -> Result<(State, Vec<(f32, Document)>), String> {
    let state = embed(opened, field)?;
    if !matches!(state, State::Ready(_)) {
        return Ok((state, Vec::new()));
    }
    let service = service().expect("configured: embed answered ready");
    let key = (opened.generation().to_path_buf(), field.to_string());
    let table = service
        .tables
        .lock()
        .expect("vectors lock")
        .get(&key)
        .cloned();
    let (Some(table), Some(Ok(loaded))) = (table, service.model.get()) else {
        return Ok((state, Vec::new()));
    };
    let loaded = loaded.clone();
    let query = service.question(loaded, question).await?;
    let passing = opened.passing(filters)?;
    let (addresses, matrix) = table.rows.get().expect("ready");
    // Best first; equal scores (the same text in two documents) in the
    // rows' order, which is their ids' (`Opened::texts`): the same answer
    // from every build of the index.
    let mut scored: Vec<(f32, usize)> = addresses
        .iter()
        .enumerate()
        .filter(|(_, address)| passing.as_ref().is_none_or(|p| p.contains(address)))
        .map(|(row, _)| (matrix.dot(row, &query), row))
        .collect();
    let order = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    let limit = limit.min(MAX_HITS);
    if scored.len() > limit {
        scored.select_nth_unstable_by(limit, order);
        scored.truncate(limit);
    }
    scored.sort_by(order);
    let mut hits = Vec::with_capacity(scored.len());
    for (score, row) in scored {
        hits.push((score, opened.fetch(addresses[row], wanted)?));
    }
    Ok((state, hits))
}

/// Begin embedding `question` now, on a thread of its own, so that a
/// `similar` for it soon after finds it ready: a plugin calls this before
/// its lexical work on the same question, which then runs beside the
/// model instead of before it. Nothing when there is no loaded model.
pub fn prepare(question: &str) {
    let Some(service) = service() else { return };
    let Some(Ok(loaded)) = service.model.get() else {
        return;
    };
    let loaded = loaded.clone();
    let question = question.to_string();
    tokio::spawn(async move {
        if let Err(why) = service.question(loaded, &question).await {
            tracing::debug!(why, "embedding a question ahead failed");
        }
    });
}

fn check_field(opened: &Opened, field: &str) -> Result<(), String> {
    match opened.spec.fields.iter().find(|f| f.name == field) {
        Some(f) if f.stored && f.kind != textindex::Kind::Weight => Ok(()),
        Some(_) => Err(format!(
            "field `{field}` is not stored: vectors are made from a stored text field's values"
        )),
        None => opened.field(field).map(|_| ()),
    }
}

impl Service {
    /// The vector of `question`: embedded, or the one embedded (or being
    /// embedded) a moment ago: a plugin asks once per list it wants
    /// (entries, sections), and may have asked ahead ([`prepare`]).
    async fn question(&self, loaded: Arc<Loaded>, question: &str) -> Result<Arc<Vec<f32>>, String> {
        let question: String = question.chars().take(MAX_QUESTION_CHARS).collect();
        let cell = self.cell(&question);
        cell.get_or_init(|| async move {
            tokio::task::spawn_blocking(move || loaded.model.embed(&[question.as_str()]))
                .await
                .map_err(|e| format!("embedding the question failed: {e}"))?
                .map_err(|e| format!("embedding the question failed: {e:#}"))
                .map(|embedded| Arc::new(embedded.into_iter().next().unwrap_or_default()))
        })
        .await
        .clone()
    }

    /// The slot of `question` among the recent ones, made if new.
    fn cell(&self, question: &str) -> Question {
        let mut recent = self.recent.lock().expect("vectors lock");
        if let Some((_, cell)) = recent.iter().find(|(q, _)| q == question) {
            return cell.clone();
        }
        if recent.len() == RECENT_QUESTIONS {
            recent.pop_front();
        }
        let cell = Question::default();
        recent.push_back((question.to_string(), cell.clone()));
        cell
    }

    fn state(&self, table: &Table) -> State {
        if let Some(why) = table.failed.get() {
            return State::Failed(why.clone());
        }
        let progress = Progress {
            done: table.done.load(Ordering::Acquire),
            total: table.total.load(Ordering::Acquire),
            model: self.model_name(),
        };
        if table.rows.get().is_some() {
            State::Ready(progress)
        } else {
            State::Building(progress)
        }
    }

    fn model_name(&self) -> String {
        let dir = self.settings.model.as_deref().unwrap_or(Path::new(""));
        embedder::model::folder_name(dir)
    }

    /// Hand `job` to the worker, starting it on the first.
    fn send(&self, job: worker::Job) {
        let mut jobs = self.jobs.lock().expect("vectors lock");
        let sender = jobs.get_or_insert_with(|| {
            worker::start(self.settings.store_dir.clone(), self.model.clone())
        });
        if let Err(lost) = sender.send(job) {
            // The worker died (a panic in the model): say so on the table.
            let _ = lost
                .0
                .table
                .failed
                .set("the embedding thread has stopped".into());
            *jobs = None;
        }
    }
}
