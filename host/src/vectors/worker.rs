//! The one thread that embeds documents, at low priority, with its matrix
//! kernels in a small pool of its own (also low priority), so calls and
//! lexical answers go first. Jobs come one at a time: an index build's
//! field, whose texts not yet in the store are embedded in small batches
//! (bounded memory), appended to the store, then made the table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Sender, channel};
use std::time::Instant;

use embedder::{Model, Store, TextHash, text_hash};
use textindex::Opened;

use super::{Loaded, Slot, Table};

/// Texts embedded together: activations stay a few MiB.
const BATCH: usize = 16;

pub struct Job {
    pub opened: Arc<Opened>,
    pub field: String,
    pub table: Arc<Table>,
    pub model_dir: PathBuf,
}

/// Start the worker; jobs go to the returned sender.
pub fn start(store_dir: PathBuf, model: Slot) -> Sender<Job> {
    let (sender, jobs) = channel::<Job>();
    let spawned = std::thread::Builder::new()
        .name("embedding".into())
        .spawn(move || {
            crate::platform::lower_thread_priority();
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .thread_name(|i| format!("embedding-{i}"))
                .start_handler(|_| crate::platform::lower_thread_priority())
                .build();
            let pool = match pool {
                Ok(pool) => pool,
                Err(e) => {
                    tracing::warn!(error = %e, "no threads for embedding: sentence vectors are off");
                    return;
                }
            };
            for job in jobs {
                let loaded = model
                    .get_or_init(|| load(&job.model_dir, &store_dir).map(Arc::new))
                    .clone();
                let outcome = loaded.and_then(|loaded| pool.install(|| run(&job, &loaded)));
                // Loading (the weights file, read whole) and embedding (a
                // batch's activations, MiBs each) leave free memory in the
                // allocator's arenas, which glibc keeps for reuse: given
                // back, it no longer counts against the memory a resident
                // index may add (issue 73; see the performance chapter).
                crate::platform::return_free_heap();
                if let Err(why) = outcome {
                    tracing::warn!(index = %job.opened.info.name, field = %job.field, error = %why, "documents not embedded: words only");
                    let _ = job.table.failed.set(why);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the embedding thread");
    }
    sender
}

/// The model in `dir`, and its store: the host's own file under
/// `store_dir`, and the shipped ones in the model's `vectors/` folder.
fn load(dir: &Path, store_dir: &Path) -> Result<Loaded, String> {
    let started = Instant::now();
    let model =
        Model::load(dir).map_err(|e| format!("the sentence model cannot be loaded: {e:#}"))?;
    let digest: String = model.digest()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let file = store_dir.join(format!("{}-{digest}.vec", model.name()));
    let mut seeds: Vec<PathBuf> = std::fs::read_dir(dir.join("vectors"))
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "vec"))
                .collect()
        })
        .unwrap_or_default();
    seeds.sort();
    let (store, notes) = Store::open(model.digest(), model.dim(), &file, &seeds)
        .map_err(|e| format!("the vector store {} cannot be read: {e:#}", file.display()))?;
    tracing::info!(model = %dir.display(), store = %file.display(), vectors = store.len(), seeds = ?notes, ms = started.elapsed().as_millis() as u64, "sentence model loaded");
    Ok(Loaded {
        model,
        store: std::sync::Mutex::new(store),
    })
}

/// Embed what the store lacks of the job's texts, then fill its table.
fn run(job: &Job, loaded: &Loaded) -> Result<(), String> {
    let started = Instant::now();
    let texts = job.opened.texts(&job.field)?;
    let table = &job.table;
    table.total.store(texts.len() as u64, Ordering::Release);
    let hashes: Vec<TextHash> = texts.iter().map(|(_, t)| text_hash(t)).collect();
    // Each missing text once, with how many documents wait for it.
    let mut missing: HashMap<TextHash, (&str, u64)> = HashMap::new();
    {
        let store = loaded.store.lock().expect("store lock");
        for ((_, text), hash) in texts.iter().zip(&hashes) {
            if !store.contains(hash) {
                missing.entry(*hash).or_insert((text.as_str(), 0)).1 += 1;
            }
        }
    }
    let waiting: u64 = missing.values().map(|(_, n)| n).sum();
    table
        .done
        .store(texts.len() as u64 - waiting, Ordering::Release);
    // Texts of like length together: a batch is padded to its longest.
    let mut missing: Vec<(TextHash, (&str, u64))> = missing.into_iter().collect();
    missing.sort_by_key(|(hash, (text, _))| (text.len(), *hash));
    for batch in missing.chunks(BATCH) {
        // A build replaced meanwhile is not worth finishing.
        if !job.opened.generation().exists() {
            return Err("the index was built again meanwhile".into());
        }
        let batch_texts: Vec<&str> = batch.iter().map(|(_, (t, _))| *t).collect();
        let vectors = loaded
            .model
            .embed(&batch_texts)
            .map_err(|e| format!("embedding failed: {e:#}"))?;
        let rows = batch.iter().map(|(h, _)| *h).zip(vectors).collect();
        loaded
            .store
            .lock()
            .expect("store lock")
            .put(rows)
            .map_err(|e| format!("the vector store cannot be written: {e:#}"))?;
        let docs: u64 = batch.iter().map(|(_, (_, n))| n).sum();
        table.done.fetch_add(docs, Ordering::AcqRel);
    }
    // The vectors read from the store's files into one matrix: held once,
    // in the table, and scanned in one sweep.
    let (matrix, lacking) = loaded
        .store
        .lock()
        .expect("store lock")
        .matrix(&hashes)
        .map_err(|e| format!("the vector store cannot be read: {e:#}"))?;
    let mut lacking = lacking.into_iter().peekable();
    let addresses = texts
        .iter()
        .enumerate()
        .filter(|(i, _)| lacking.next_if_eq(i).is_none())
        .map(|(_, (address, _))| *address)
        .collect();
    let _ = table.rows.set((addresses, matrix));
    tracing::info!(index = %job.opened.info.name, field = %job.field, documents = texts.len(), embedded = missing.len(), ms = started.elapsed().as_millis() as u64, "sentence vectors ready");
    Ok(())
}
