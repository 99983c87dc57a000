//! Running one tool call in a fresh instance.
//!
//! Each call gets its own `Store` (so plugins keep no state between calls,
//! see [`crate::store`]), instantiated from the plugin's `InstancePre`
//! (~15 µs); a trap is classified here as the reason the call failed.

use std::sync::Arc;

use wasmtime::component::{Instance, InstancePre};
use wasmtime::{Store, Trap};

use crate::bindings::mcphost::plugin::content::ResourceBody;
use crate::bindings::{
    Exports, Filled, ListedContents, Prompt, Reference, Resource, ResourceTemplate, Tool,
    ToolError, ToolOutput,
};
use crate::policy::Grants;
use crate::store::{CallContext, CallState, new_store};

/// Why a call produced no result from the plugin.
#[derive(Debug, thiserror::Error)]
pub enum CallFailure {
    #[error(
        "the plugin ran past its {0} ms deadline and was stopped (raise `limits.timeout_ms` for it if it needs longer)"
    )]
    Timeout(u64),
    #[error(
        "the plugin exceeded its {0} MiB memory limit (raise `limits.memory_mb` for it if it needs more)"
    )]
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

/// A component linked against the host, with its exports located: what
/// every call of a plugin instantiates.
pub struct Prepared {
    pub pre: InstancePre<CallState>,
    pub exports: Exports,
    /// Its instance slots (see [`crate::admission`]).
    pub slots: crate::admission::Reserve,
}

/// Instantiate the plugin in a fresh store, run `f` on the instance, and
/// turn a trap into the reason the call failed.
async fn in_fresh_instance<R>(
    prepared: &Prepared,
    grants: Arc<Grants>,
    call: CallContext,
    f: impl AsyncFnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<R>,
) -> Result<R, CallFailure> {
    // Declared first, so released after the store (and its instance) is gone.
    let _slot = prepared.slots.slot().await;
    let cancel = call.cancel.clone();
    let mut store = new_store(&prepared.pre, grants, call);
    // A cancelled call has a grace to clean up (a plugin writing its
    // report), then running wasm is interrupted (the epoch); one still
    // waiting in a host call (a sleep) after twice the grace is dropped
    // with its instance.
    let dropped = async {
        cancel.cancelled().await;
        tokio::time::sleep(2 * crate::store::CANCEL_GRACE).await;
    };
    let result = tokio::select! {
        biased;
        result = async {
            let instance = prepared.pre.instantiate_async(&mut store).await?;
            f(&mut store, &instance).await
        } => Some(result),
        () = dropped => None,
    };
    match result {
        Some(result) => result.map_err(|e| classify(&store, e)),
        None => Err(CallFailure::Cancelled),
    }
}

/// What a plugin offers, asked once at load.
pub struct Offer {
    pub tools: Vec<Tool>,
    pub templates: Vec<ResourceTemplate>,
    /// The resources it listed at load (asked again at every listing).
    pub resources: Vec<Resource>,
    pub prompts: Vec<Prompt>,
}

/// Ask a plugin for its tools, resource templates, resources and prompts.
pub async fn describe(
    prepared: &Prepared,
    grants: Arc<Grants>,
    call: CallContext,
) -> Result<Offer, CallFailure> {
    in_fresh_instance(prepared, grants, call, async |store, instance| {
        let tools = prepared
            .exports
            .tools
            .load(&mut *store, instance)?
            .call_list(&mut *store)
            .await?;
        let templates = match &prepared.exports.resources {
            Some(resources) => {
                resources
                    .load(&mut *store, instance)?
                    .call_templates(&mut *store)
                    .await?
            }
            None => Vec::new(),
        };
        let resources = match &prepared.exports.resource_list {
            Some(listed) => {
                listed
                    .load(&mut *store, instance)?
                    .call_list(&mut *store)
                    .await?
            }
            None => Vec::new(),
        };
        let prompts = match &prepared.exports.prompts {
            Some(prompts) => {
                prompts
                    .load(&mut *store, instance)?
                    .call_list(&mut *store)
                    .await?
            }
            None => Vec::new(),
        };
        Ok(Offer {
            tools,
            templates,
            resources,
            prompts,
        })
    })
    .await
}

/// Run one tool call to its end.
pub async fn call_tool(
    prepared: &Prepared,
    grants: Arc<Grants>,
    call: CallContext,
    tool: &str,
    arguments: &str,
) -> Result<Result<ToolOutput, ToolError>, CallFailure> {
    in_fresh_instance(prepared, grants, call, async |store, instance| {
        prepared
            .exports
            .tools
            .load(&mut *store, instance)?
            .call_call(&mut *store, tool, arguments)
            .await
    })
    .await
}

/// The resources a plugin lists now (none without `resource-list`).
pub async fn list_resources(
    prepared: &Prepared,
    grants: Arc<Grants>,
    call: CallContext,
) -> Result<Result<Vec<Resource>, ToolError>, CallFailure> {
    let Some(listed) = &prepared.exports.resource_list else {
        return Ok(Ok(Vec::new()));
    };
    in_fresh_instance(prepared, grants, call, async |store, instance| {
        let list = listed
            .load(&mut *store, instance)?
            .call_list(&mut *store)
            .await?;
        Ok(Ok(list))
    })
    .await
}

/// Read one resource: through `resource-list` when the plugin exports it,
/// else through `resources` (text only).
pub async fn read_resource(
    prepared: &Prepared,
    grants: Arc<Grants>,
    call: CallContext,
    uri: &str,
) -> Result<Result<ListedContents, ToolError>, CallFailure> {
    let exports = &prepared.exports;
    if exports.resource_list.is_none() && exports.resources.is_none() {
        return Ok(Err(not_offered("this plugin serves no resources")));
    }
    in_fresh_instance(prepared, grants, call, async |store, instance| {
        if let Some(listed) = &exports.resource_list {
            return listed
                .load(&mut *store, instance)?
                .call_read(&mut *store, uri)
                .await;
        }
        let resources = exports.resources.as_ref().expect("checked above");
        let read = resources
            .load(&mut *store, instance)?
            .call_read(&mut *store, uri)
            .await?;
        Ok(read.map(|c| ListedContents {
            uri: c.uri,
            mime_type: Some(c.mime_type),
            body: ResourceBody::Text(c.text),
        }))
    })
    .await
}

/// Completions for an argument of a prompt or resource template (none
/// when the plugin does not export `completion`).
pub async fn complete(
    prepared: &Prepared,
    grants: Arc<Grants>,
    call: CallContext,
    reference: &Reference,
    argument: &str,
    value: &str,
    context: &[(String, String)],
) -> Result<Vec<String>, CallFailure> {
    let Some(completion) = &prepared.exports.completion else {
        return Ok(Vec::new());
    };
    in_fresh_instance(prepared, grants, call, async |store, instance| {
        completion
            .load(&mut *store, instance)?
            .call_complete(&mut *store, reference, argument, value, context)
            .await
    })
    .await
}

/// Fill in one prompt; the plugin must export `prompts`.
pub async fn get_prompt(
    prepared: &Prepared,
    grants: Arc<Grants>,
    call: CallContext,
    name: &str,
    arguments: &[(String, String)],
) -> Result<Result<Filled, ToolError>, CallFailure> {
    let Some(prompts) = &prepared.exports.prompts else {
        return Ok(Err(not_offered("this plugin offers no prompts")));
    };
    in_fresh_instance(prepared, grants, call, async |store, instance| {
        prompts
            .load(&mut *store, instance)?
            .call_get(&mut *store, name, arguments)
            .await
    })
    .await
}

/// The answer for an optional export the plugin does not have.
fn not_offered(message: &str) -> ToolError {
    ToolError {
        code: "not_found".into(),
        message: message.into(),
        retryable: false,
        details: None,
    }
}

/// Run the plugin's background `refresh`, if it has one (`None` if not).
pub async fn refresh(
    prepared: &Prepared,
    grants: Arc<Grants>,
    call: CallContext,
    changed: &[String],
) -> Option<Result<Result<Vec<String>, ToolError>, CallFailure>> {
    let lifecycle = prepared.exports.lifecycle.as_ref()?;
    Some(
        in_fresh_instance(prepared, grants, call, async |store, instance| {
            lifecycle
                .load(&mut *store, instance)?
                .call_refresh(&mut *store, changed)
                .await
        })
        .await,
    )
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
