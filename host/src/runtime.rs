//! Running one tool call in a fresh instance.
//!
//! Each call gets its own `Store` (so plugins keep no state between calls),
//! instantiated from the plugin's `InstancePre` (~15 µs), with a memory cap
//! and a wall-clock deadline. The epoch ticker wakes a callback every tick
//! while guest code runs: it interrupts the guest once the deadline passed
//! or the call was cancelled, and otherwise yields to the async executor so
//! a busy plugin never starves other calls.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{ResourceLimiter, Store, Trap, UpdateDeadline};

use crate::bindings::{PluginPre, Tool, ToolError, ToolOutput};
use crate::caps::{CallContext, CallState};
use crate::policy::Grants;

/// Why a call produced no result from the plugin.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    #[error("the plugin ran past its {0} ms deadline and was stopped (raise `limits.timeout_ms` for it if it needs longer)")]
    Timeout(u64),
    #[error("the plugin exceeded its {0} MiB memory limit (raise `limits.memory_mb` for it if it needs more)")]
    OutOfMemory(u64),
    #[error("the call was cancelled")]
    Cancelled,
    #[error("the plugin crashed: {0}")]
    Trapped(String),
}

impl CallFailure {
    pub fn code(&self) -> &'static str {
        match self {
            CallFailure::Timeout(_) => "plugin_timeout",
            CallFailure::OutOfMemory(_) => "plugin_out_of_memory",
            CallFailure::Cancelled => "cancelled",
            CallFailure::Trapped(_) => "plugin_trapped",
        }
    }
}

/// Caps linear memory and remembers whether the cap was hit, so an
/// allocation failure that ends in a trap is reported as out-of-memory.
pub struct MemoryCap {
    max: usize,
    hit: bool,
}

impl MemoryCap {
    pub fn new(max: usize) -> Self {
        MemoryCap { max, hit: false }
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let ok = desired <= self.max;
        self.hit |= !ok;
        Ok(ok)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

fn new_store(pre: &PluginPre<CallState>, grants: Arc<Grants>, call: CallContext) -> Store<CallState> {
    let mut store = Store::new(pre.engine(), CallState::new(grants, call));
    store.limiter(|state| &mut state.memory);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|ctx| {
        let call = &ctx.data().call;
        if call.cancel.is_cancelled() || Instant::now() >= call.deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
    store
}

/// Ask a plugin for its tools.
pub async fn list_tools(pre: &PluginPre<CallState>, grants: Arc<Grants>, call: CallContext) -> Result<Vec<Tool>, CallFailure> {
    let mut store = new_store(pre, grants, call);
    let result = async {
        let plugin = pre.instantiate_async(&mut store).await?;
        plugin.mcphost_plugin_tools().call_list(&mut store).await
    }
    .await;
    result.map_err(|e| classify(&store, e))
}

/// Run one tool call to its end.
pub async fn call_tool(
    pre: &PluginPre<CallState>,
    grants: Arc<Grants>,
    call: CallContext,
    tool: &str,
    arguments: &str,
) -> Result<Result<ToolOutput, ToolError>, CallFailure> {
    let mut store = new_store(pre, grants, call);
    let result = async {
        let plugin = pre.instantiate_async(&mut store).await?;
        plugin.mcphost_plugin_tools().call_call(&mut store, tool, arguments).await
    }
    .await;
    result.map_err(|e| classify(&store, e))
}

fn classify(store: &Store<CallState>, error: wasmtime::Error) -> CallFailure {
    let state = store.data();
    if state.memory.hit {
        return CallFailure::OutOfMemory((state.grants.memory_bytes / (1024 * 1024)) as u64);
    }
    if error.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return if state.call.cancel.is_cancelled() {
            CallFailure::Cancelled
        } else {
            CallFailure::Timeout(state.grants.timeout_ms)
        };
    }
    CallFailure::Trapped(format!("{error:#}"))
}
