//! The data of one call's wasmtime `Store` and everything set up with it:
//! the call's context, the WASI context a plugin sees, its memory cap, the
//! deadline/cancellation callback, and the linker with every capability.
//!
//! Every tool call gets a fresh [`CallState`]: the plugin's grants, the
//! call's deadline and cancellation token, and the link back to the MCP
//! client for progress and logs. The capabilities (`caps/`) work on it;
//! [`crate::runtime`] instantiates plugins in it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Extensions;
use tokio_util::sync::CancellationToken;
use wasmtime::component::{HasSelf, InstancePre, Linker, ResourceTable};
use wasmtime::{Engine, ResourceLimiter, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::FullPlugin;
use crate::client::ClientLink;
use crate::paths::{guest, guest_list};
use crate::policy::Grants;

/// How long a cancelled call's guest may still run: run_test writes its
/// reports, a plugin reports what it cut short. Within the shutdown's wait.
pub const CANCEL_GRACE: Duration = Duration::from_millis(500);

/// What a capability needs to know about the call it serves.
#[derive(Clone)]
pub struct CallContext {
    /// Ties the call's log records, events and errors together.
    pub trace_id: String,
    pub tool: String,
    pub cancel: CancellationToken,
    pub deadline: Instant,
    pub client: Arc<dyn ClientLink>,
    /// What capabilities attach to the call, one value per type (the
    /// content blocks for its reply, where its resource changes are told):
    /// the call's state names no capability.
    attached: Extensions,
}

impl CallContext {
    /// A call of `tool` with a fresh trace id and its own cancellation,
    /// due within `timeout_ms`.
    pub fn new(tool: &str, timeout_ms: u64, client: Arc<dyn ClientLink>) -> Self {
        CallContext {
            trace_id: new_trace_id(),
            tool: tool.to_string(),
            cancel: CancellationToken::new(),
            deadline: Instant::now() + Duration::from_millis(timeout_ms),
            client,
            attached: Extensions::new(),
        }
    }

    /// The same call with `value` attached (replacing one of its type).
    /// Clones of the call made afterwards share what `value` shares.
    pub fn with<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        self.attached.insert(value);
        self
    }

    /// What is attached of type `T`, if anything.
    pub fn attached<T: Clone + Send + Sync + 'static>(&self) -> Option<&T> {
        self.attached.get()
    }

    /// The same call, cancelled by `cancel` and known as `trace_id`.
    pub fn traced(self, trace_id: &str, cancel: CancellationToken) -> Self {
        CallContext {
            trace_id: trace_id.to_string(),
            cancel,
            ..self
        }
    }
}

/// 16 hex digits, unique enough to find one call in a day's logs.
pub fn new_trace_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..16].to_string()
}

/// The data of one call's wasmtime `Store`.
pub struct CallState {
    pub grants: Arc<Grants>,
    pub call: CallContext,
    pub memory: MemoryCap,
    /// The Podman service this call's container operations go to.
    pub engine: crate::podman::Engine,
    /// When the guest was first seen running after the call was cancelled.
    cancelled_at: Option<Instant>,
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    /// The call's programs' temporary folder, made at the first confined
    /// start; removed after the table (its programs) at the call's end.
    pub(crate) private_tmp: std::sync::OnceLock<tempfile::TempDir>,
}

impl crate::wasi_fs::Guarded for CallState {
    fn plugin(&self) -> &str {
        &self.grants.plugin
    }

    fn blocking_allowed(&self) -> bool {
        blocking_allowed(&self.grants)
    }
}

/// Whether a plugin's file operations run on the call's own thread (see
/// [`wasi_ctx`]).
fn blocking_allowed(grants: &Grants) -> bool {
    !grants.has("containers")
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// A fresh store for one call of a plugin: memory capped by its grants,
/// interrupted at the deadline or (after a grace) on cancellation, and
/// yielding to the executor every epoch tick meanwhile.
pub fn new_store(
    pre: &InstancePre<CallState>,
    grants: Arc<Grants>,
    call: CallContext,
) -> Store<CallState> {
    let state = CallState {
        memory: MemoryCap::new(grants.memory_bytes),
        wasi: wasi_ctx(&grants),
        grants,
        call,
        engine: crate::podman::Engine::Local,
        cancelled_at: None,
        table: ResourceTable::new(),
        private_tmp: std::sync::OnceLock::new(),
    };
    let mut store = Store::new(pre.engine(), state);
    store.limiter(|state| &mut state.memory);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx| {
        let now = Instant::now();
        let state = ctx.data_mut();
        // A cancelled call gets a moment to finish its bookkeeping (its
        // host calls already ended: processes killed); then it is stopped.
        let cancelled_long_ago = state.call.cancel.is_cancelled()
            && now.duration_since(*state.cancelled_at.get_or_insert(now)) >= CANCEL_GRACE;
        if cancelled_long_ago || now >= state.call.deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store
}

/// Caps linear memory and remembers whether the cap was hit, so an
/// allocation failure that ends in a trap is reported as out-of-memory.
pub struct MemoryCap {
    max: usize,
    pub hit: bool,
}

impl MemoryCap {
    fn new(max: usize) -> Self {
        MemoryCap { max, hit: false }
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let ok = desired <= self.max;
        self.hit |= !ok;
        Ok(ok)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// WASI for a plugin: stderr only (stdout carries the host's JSON-RPC),
/// no inherited environment (only the policy's `vars`), and the granted
/// directories preopened at their host paths in guest form (`/` between
/// names, also on Windows: `C:/Users/me/game`), so a path means the same
/// thing on both sides and the host's capabilities take it back as it is.
fn wasi_ctx(grants: &Grants) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder.inherit_stderr();
    // A plugin's file operations run on the calling thread: each is short
    // (a stat, one bounded read; an open that would wait is refused,
    // crate::wasi_fs), and handing each to tokio's blocking pool cost ~100
    // µs apiece (godot's check of 1,058 files at a warm start: 130 ms that
    // way, 11 ms on-thread). Not for a plugin that runs containers: they
    // write while its calls run, and a file swapped for a pipe between the
    // look and the open would hold the thread; in the pool, the call's
    // deadline still ends the call.
    builder.allow_blocking_current_thread(blocking_allowed(grants));
    builder.env("MCP_WORKSPACE", guest(&grants.workspace));
    builder.env("MCP_PLUGIN_CACHE", guest(&grants.plugin_cache));
    // The call's own limit (limits.timeout_ms): a plugin that runs long
    // ends its work, and says so, before the host must stop it.
    builder.env("MCP_CALL_TIMEOUT_MS", grants.timeout_ms.to_string());
    builder.env(
        "MCP_PATH_LIST_SEPARATOR",
        crate::platform::PATH_LIST_SEPARATOR,
    );
    for (name, value) in &grants.vars {
        builder.env(name, guest_list(value));
    }
    for (name, secret) in &grants.secrets {
        builder.env(name, secret.expose());
    }
    if grants.has("fs") {
        let writable = grants.write_roots.iter().map(|r| (r, FsPerms::ReadWrite));
        let readable = grants
            .read_roots
            .iter()
            .filter(|r| !grants.write_roots.contains(r))
            .map(|r| (r, FsPerms::ReadOnly));
        for (root, perms) in writable.chain(readable) {
            let guest = guest(root);
            // The plugin's own cache directory is the host's to create.
            if root.starts_with(&grants.plugin_cache) && !root.exists() {
                let _ = std::fs::create_dir_all(root);
            }
            if let Err(e) = builder.preopened_dir(root, &guest, perms) {
                not_preopened(&grants.plugin, root, &guest, &e);
            }
        }
    }
    builder.build()
}

/// Say once per plugin and folder (not at every call) that a granted
/// folder could not be opened; one that does not exist (yet: `${workspace}/
/// doc` where the engine gives the docs) is normal, and `host check` names
/// it, so it is only a debug line.
fn not_preopened(plugin: &str, root: &std::path::Path, guest: &str, e: &impl std::fmt::Display) {
    use std::collections::HashSet;
    use std::sync::{LazyLock, Mutex};
    static SAID: LazyLock<Mutex<HashSet<(String, std::path::PathBuf)>>> =
        LazyLock::new(Default::default);
    if !root.exists() {
        tracing::debug!(plugin, root = %guest, "granted directory does not exist; not preopened");
        return;
    }
    let first = SAID
        .lock()
        .expect("preopen lock")
        .insert((plugin.to_string(), root.to_path_buf()));
    if first {
        tracing::warn!(plugin, root = %guest, error = %e, "granted directory cannot be opened; not preopened (said once)");
    }
}

/// A linker with WASI and every capability interface of the world.
pub fn linker(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    crate::wasi_fs::add_checks(&mut linker)?;
    FullPlugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)?;
    Ok(linker)
}
