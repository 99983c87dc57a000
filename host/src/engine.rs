//! The wasmtime engine and the on-disk cache of compiled components.
//!
//! Compiling a component takes ~100 ms; loading a precompiled artifact takes
//! ~0.1 ms. Artifacts are keyed by the SHA-256 of the wasm bytes, the
//! wasmtime version and the engine's compatibility hash (its settings), so a
//! changed plugin, a wasmtime upgrade or a different engine configuration
//! never reuses a stale artifact.
//!
//! An artifact is native code the host runs, so it is used only when its
//! own SHA-256, written beside it when it was stored, still matches
//! (issue 61): a file damaged or swapped since is compiled again. And the
//! cache is not kept at all where a plugin may write (a policy granting
//! `fs.write` over the cache folder): there every plugin is compiled in
//! memory, and the log says why.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// One epoch tick. Deadlines and cancellation are checked at this grain.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Calls that can run at once (each holds one pooled instance slot).
pub const MAX_CONCURRENT_CALLS: u32 = 128;

/// No plugin's linear memory grows beyond this, whatever its policy says.
pub const MAX_MEMORY_BYTES: usize = 1 << 30;

pub fn new_engine() -> Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    // A call instantiates afresh; the pooling allocator recycles memories,
    // tables and fiber stacks instead of mapping and unmapping them each time.
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(MAX_CONCURRENT_CALLS)
        .total_core_instances(MAX_CONCURRENT_CALLS * 4)
        .total_memories(MAX_CONCURRENT_CALLS * 2)
        .total_tables(MAX_CONCURRENT_CALLS * 4)
        .total_stacks(MAX_CONCURRENT_CALLS)
        .max_memory_size(MAX_MEMORY_BYTES);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Ok(Engine::new(&config)?)
}

/// Advance the engine's epoch every [`EPOCH_TICK`] for as long as the
/// process lives.
pub fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("epoch-ticker".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch ticker thread");
}

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Compiled,
    Cached,
}

pub struct ComponentCache {
    /// None: compiled in memory only.
    dir: Option<PathBuf>,
    engine_key: String,
}

impl ComponentCache {
    /// The cache in `dir`, unless a plugin may write there (`writable`:
    /// every plugin's `fs.write` root).
    pub fn new(engine: &Engine, dir: PathBuf, writable: &[PathBuf]) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = format!("{}-{:016x}", env!("WASMTIME_VERSION"), hasher.finish());
        let dir = match writable.iter().find(|root| dir.starts_with(root)) {
            Some(root) => {
                tracing::warn!(
                    cache = %dir.display(), root = %root.display(),
                    "compiled plugins are not cached: a plugin may write {} (an fs.write root); \
                     narrow that grant, or give --cache-dir elsewhere",
                    root.display()
                );
                None
            }
            None => Some(dir),
        };
        ComponentCache { dir, engine_key }
    }

    /// Where the compiled `hash` (SHA-256 of its wasm, hex) is kept.
    fn artifact(&self, hash: &str) -> Option<PathBuf> {
        let dir = self.dir.as_ref()?;
        Some(dir.join(format!("{}-{}.cwasm", &hash[..32], self.engine_key)))
    }

    /// Whether the wasm of SHA-256 `hash` is compiled already.
    pub fn has(&self, hash: &str) -> bool {
        self.artifact(hash).is_some_and(|a| a.exists())
    }

    /// Load `wasm` from the cache, or compile it and store the artifact.
    /// `hash` is the SHA-256 of `wasm` in hex.
    pub fn load(&self, engine: &Engine, wasm: &[u8], hash: &str) -> Result<(Component, Origin)> {
        let Some(artifact) = self.artifact(hash) else {
            return Ok((compile(engine, wasm)?, Origin::Compiled));
        };
        if artifact.exists() && !intact(&artifact) {
            tracing::warn!(path = %artifact.display(), "a compiled artifact does not match its digest: compiled again");
        } else if artifact.exists() {
            // SAFETY: artifacts are written only by `store` below, from
            // `Component::serialize` of this engine configuration (the key
            // includes it), into the host's own cache directory, which no
            // plugin may write (see `new`); its bytes were just checked
            // against the digest stored with it.
            // Mapping the file is cheapest; where the system refuses the
            // copy-on-write mapping wasmtime asks for (Wine), the bytes are
            // read and deserialised instead of compiling again.
            let loaded = unsafe { Component::deserialize_file(engine, &artifact) }.or_else(|e| {
                tracing::debug!(path = %artifact.display(), error = %e, "artifact not mapped; reading it");
                let bytes = std::fs::read(&artifact)?;
                unsafe { Component::deserialize(engine, &bytes) }
            });
            match loaded {
                Ok(component) => return Ok((component, Origin::Cached)),
                Err(e) => {
                    tracing::warn!(path = %artifact.display(), error = %e, "discarding unreadable compiled artifact")
                }
            }
        }
        let component = compile(engine, wasm)?;
        if let Err(e) = store(&artifact, &component) {
            tracing::warn!(path = %artifact.display(), error = %format!("{e:#}"), "could not cache compiled component");
            return Ok((component, Origin::Compiled));
        }
        // Compiled code would stay in the host's own memory for as long as
        // it runs (~6 MiB with the bundled plugins); the stored artifact,
        // mapped, is the same code in the page cache, which the system
        // shares and may reclaim. Where it cannot be mapped (Wine), reading
        // it would gain nothing: the compiled copy is kept.
        // SAFETY: as above; the file was written just now from `component`.
        match unsafe { Component::deserialize_file(engine, &artifact) } {
            Ok(mapped) => Ok((mapped, Origin::Compiled)),
            Err(_) => Ok((component, Origin::Compiled)),
        }
    }
}

fn compile(engine: &Engine, wasm: &[u8]) -> Result<Component> {
    Component::new(engine, wasm)
        .map_err(anyhow::Error::from)
        .context("not a valid WebAssembly component")
}

/// Write atomically: a reader never sees half an artifact. Its digest
/// goes beside it first, so an artifact is never there without one.
fn store(path: &Path, component: &Component) -> Result<()> {
    let dir = path.parent().expect("artifact paths have a parent");
    std::fs::create_dir_all(dir)?;
    let bytes = component.serialize()?;
    let digest = {
        use sha2::{Digest, Sha256};
        format!("{:x}", Sha256::digest(&bytes))
    };
    for (to, content) in [
        (digest_path(path), digest.as_bytes()),
        (path.to_path_buf(), &bytes[..]),
    ] {
        let tmp = tempfile_in(dir)?;
        std::fs::write(&tmp, content)?;
        std::fs::rename(&tmp, to)?;
    }
    Ok(())
}

fn digest_path(artifact: &Path) -> PathBuf {
    artifact.with_extension("cwasm.sha256")
}

/// Whether `artifact`'s bytes still have the digest stored beside it.
fn intact(artifact: &Path) -> bool {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let Ok(wanted) = std::fs::read_to_string(digest_path(artifact)) else {
        return false;
    };
    let Ok(mut file) = std::fs::File::open(artifact) else {
        return false;
    };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return false,
        }
    }
    format!("{:x}", hasher.finalize()) == wanted.trim()
}

fn tempfile_in(dir: &Path) -> Result<PathBuf> {
    Ok(dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    )))
}
