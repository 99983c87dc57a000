//! `notify`: progress and relayed events for the call in progress, and
//! changes to the plugin's resources, which every session subscribed to
//! them hears of, and to its tools.

use tokio::sync::broadcast;

use crate::bindings::Refusal;
use crate::bindings::mcphost::plugin::notify::Host;
use crate::bindings::mcphost::plugin::types::CapabilityError;
use crate::store::{CallContext, CallState};

/// A change to what the host serves, told to the client sessions.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The tool list (a plugin was added, changed or removed).
    Tools,
    /// A plugin's list of resources.
    Resources,
    /// One resource, by URI.
    Resource(String),
}

/// How one plugin's calls announce changes to its resources: only under
/// the URI scheme it serves.
#[derive(Clone)]
pub struct Announcer {
    pub scheme: Option<String>,
    pub changes: broadcast::Sender<Change>,
    /// Where a plugin asks to have its tools listed again, by name.
    pub relist: tokio::sync::mpsc::UnboundedSender<String>,
}

impl CallContext {
    /// The same call, able to announce changes to the plugin's resources
    /// (a call without an announcer, as while a plugin loads, cannot).
    pub fn announcing(self, announcer: &Announcer) -> Self {
        self.with(announcer.clone())
    }

    /// The URI scheme of the plugin's resources, when it serves any.
    pub fn own_scheme(&self) -> Option<&str> {
        self.attached::<Announcer>()?.scheme.as_deref()
    }
}

/// The scheme of `uri` (`godot` of `godot://class/Node`).
pub fn uri_scheme(uri: &str) -> Option<&str> {
    let (scheme, _) = uri.split_once("://")?;
    let valid = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    valid.then_some(scheme)
}

impl Host for CallState {
    async fn progress(
        &mut self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> wasmtime::Result<()> {
        self.call.client.progress(progress, total, message);
        Ok(())
    }

    async fn event(&mut self, name: String, data: String) -> wasmtime::Result<()> {
        let data: serde_json::Value =
            serde_json::from_str(&data).unwrap_or(serde_json::Value::String(data));
        let event = serde_json::json!({"event": name, "tool": self.call.tool, "trace_id": self.call.trace_id, "data": data});
        self.call.client.event(&self.grants.plugin, event);
        Ok(())
    }

    async fn resource_updated(&mut self, uri: String) -> Result<(), Refusal<CapabilityError>> {
        let announcer = self.call.attached::<Announcer>();
        let scheme = announcer.and_then(|a| a.scheme.as_deref());
        match (announcer, scheme) {
            (Some(announcer), Some(scheme)) if uri_scheme(&uri) == Some(scheme) => {
                // No receiver: nobody is connected, nothing to tell.
                let _ = announcer.changes.send(Change::Resource(uri));
                Ok(())
            }
            (_, Some(scheme)) => Err(CapabilityError::Invalid(format!(
                "`{uri}` is not one of this plugin's resources: they are under `{scheme}://`"
            ))
            .into()),
            (_, None) => Err(CapabilityError::Invalid(
                "this plugin serves no resources (export `resources` or `resource-list`)".into(),
            )
            .into()),
        }
    }

    async fn resources_changed(&mut self) -> wasmtime::Result<()> {
        if let Some(announcer) = self.call.attached::<Announcer>() {
            let _ = announcer.changes.send(Change::Resources);
        }
        Ok(())
    }

    async fn tools_changed(&mut self) -> wasmtime::Result<()> {
        if let Some(announcer) = self.call.attached::<Announcer>() {
            let _ = announcer.relist.send(self.grants.plugin.clone());
        }
        Ok(())
    }
}
