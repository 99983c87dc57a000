//! `notify`: progress and relayed events for the call in progress.

use crate::bindings::mcphost::plugin::notify::Host;
use crate::store::CallState;

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
}
