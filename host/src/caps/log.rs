//! `log`: plugin log records into the host's `tracing` output (stderr) and,
//! at info and above, to the MCP client as logging notifications.

use crate::bindings::mcphost::plugin::log::{Host, Level};
use crate::client;
use crate::store::CallState;

impl Host for CallState {
    async fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let (plugin, trace_id) = (&self.grants.plugin, &self.call.trace_id);
        let message = crate::scrub::scrubbed(message);
        let client_level = match level {
            Level::Debug => {
                tracing::debug!(target: "plugin", %plugin, %trace_id, "{message}");
                return Ok(());
            }
            Level::Info => {
                tracing::info!(target: "plugin", %plugin, %trace_id, "{message}");
                client::Level::Info
            }
            Level::Warn => {
                tracing::warn!(target: "plugin", %plugin, %trace_id, "{message}");
                client::Level::Warning
            }
            Level::Error => {
                tracing::error!(target: "plugin", %plugin, %trace_id, "{message}");
                client::Level::Error
            }
        };
        self.call.client.log(
            client_level,
            plugin,
            serde_json::json!({"trace_id": trace_id, "message": message}),
        );
        Ok(())
    }
}
