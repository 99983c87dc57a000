//! Host capabilities offered to plugins as WIT imports, one module per
//! interface, and the per-call state they work on.
//!
//! Every tool call gets a fresh [`CallState`]: the plugin's grants, the
//! call's deadline and cancellation token, and the link back to the MCP
//! client for progress and logs. Capability functions check the grants
//! first and answer `denied` with the config key that would grant them.

/// For capability functions whose answer is `Result<T, E>`: run a block
/// that uses `?`, with the call's grants as `g` (cloned: the future must be
/// `Send`, and `CallState` is not `Sync`). Defined before the modules that
/// use it.
macro_rules! answer {
    ($state:expr, |$g:ident| $body:expr) => {{
        let $g = $state.grants.clone();
        Ok(async move { $body }.await)
    }};
}

pub mod containers;
pub mod git;
pub mod index;
pub mod log;
pub mod notify;
pub mod process;
pub mod pty;

use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use crate::bindings::FullPlugin;
use crate::client::ClientLink;
use crate::policy::Grants;
use crate::runtime::MemoryCap;

/// What a capability needs to know about the call it serves.
#[derive(Clone)]
pub struct CallContext {
    pub trace_id: String,
    pub tool: String,
    pub cancel: CancellationToken,
    pub deadline: Instant,
    pub client: Arc<dyn ClientLink>,
}

/// The data of one call's wasmtime `Store`.
pub struct CallState {
    pub grants: Arc<Grants>,
    pub call: CallContext,
    pub memory: MemoryCap,
    /// When the guest was first seen running after the call was cancelled.
    pub cancelled_at: Option<std::time::Instant>,
    wasi: WasiCtx,
    pub(crate) table: ResourceTable,
}

impl CallState {
    pub fn new(grants: Arc<Grants>, call: CallContext) -> Self {
        let memory = MemoryCap::new(grants.memory_bytes);
        let wasi = wasi_ctx(&grants);
        CallState {
            grants,
            call,
            memory,
            cancelled_at: None,
            wasi,
            table: ResourceTable::new(),
        }
    }
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// WASI for a plugin: stderr only (stdout carries the host's JSON-RPC),
/// no inherited environment (only the policy's `vars`), and the granted directories preopened at
/// their host paths so a path means the same thing on both sides.
fn wasi_ctx(grants: &Grants) -> WasiCtx {
    let mut builder = WasiCtxBuilder::new();
    builder.inherit_stderr();
    builder.env("MCP_WORKSPACE", grants.workspace.to_string_lossy());
    builder.env("MCP_PLUGIN_CACHE", grants.plugin_cache.to_string_lossy());
    for (name, value) in &grants.vars {
        builder.env(name, value);
    }
    if grants.has("fs") {
        let writable = grants.write_roots.iter().map(|r| (r, FsPerms::ReadWrite));
        let readable = grants
            .read_roots
            .iter()
            .filter(|r| !grants.write_roots.contains(r))
            .map(|r| (r, FsPerms::ReadOnly));
        for (root, perms) in writable.chain(readable) {
            let guest = root.to_string_lossy().into_owned();
            // The plugin's own cache directory is the host's to create.
            if root.starts_with(&grants.plugin_cache) && !root.exists() {
                let _ = std::fs::create_dir_all(root);
            }
            if let Err(e) = builder.preopened_dir(root, &guest, perms) {
                tracing::warn!(plugin = %grants.plugin, root = %guest, error = %e, "granted directory cannot be opened; not preopened");
            }
        }
    }
    builder.build()
}

/// A linker with WASI and every capability interface of the world.
pub fn linker(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    FullPlugin::add_to_linker::<CallState, HasSelf<CallState>>(&mut linker, |s| s)?;
    Ok(linker)
}

impl crate::bindings::mcphost::plugin::types::Host for CallState {}
