//! The floor every call figure is read against: the smallest MCP server
//! rmcp makes, one tool that does nothing, over stdio (issue 41). The
//! bench binary serves it itself when `MCP_FLOOR_SERVER` is set, so it is
//! built with the same compiler, profile and rmcp as the host.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

struct Floor;

impl ServerHandler for Floor {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({"type": "object"});
        let schema = Arc::new(schema.as_object().expect("an object").clone());
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "noop",
            "Does nothing.",
            schema,
        )]))
    }

    async fn call_tool(
        &self,
        _: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(CallToolResult::success(Vec::new()).into())
    }
}

/// Whether this process was started to be the floor server.
pub fn asked() -> bool {
    std::env::var_os("MCP_FLOOR_SERVER").is_some()
}

/// Serve the floor on stdio until the client goes.
pub async fn serve() {
    let running = Floor
        .serve(rmcp::transport::stdio())
        .await
        .expect("MCP session with the bench");
    let _ = running.waiting().await;
}

/// The command that starts the floor server (this bench binary again).
pub fn command() -> tokio::process::Command {
    let mut command =
        tokio::process::Command::new(std::env::current_exe().expect("the bench binary"));
    command.env("MCP_FLOOR_SERVER", "1");
    command
}
