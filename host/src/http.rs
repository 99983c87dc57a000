//! Streamable HTTP: `host serve --http ADDR`.
//!
//! rmcp's Streamable HTTP service answers at `/mcp`: clients of MCP
//! 2026-07-28 statelessly, older ones (2025-06-18, 2025-11-25) in sessions.
//! In front of it stand a bearer token when one is configured (compared in
//! constant time) and rmcp's `Host` and `Origin` checks, which keep a web
//! page from reaching the server through a rebound DNS name. `/health`
//! answers without a token so that a supervisor can probe it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::mcp::McpFront;
use crate::service::Service;

/// How `serve --http` was asked to listen.
pub struct Options {
    pub addr: SocketAddr,
    /// The bearer token every `/mcp` request must carry.
    pub token: Option<String>,
    /// `Host` names accepted besides the loopback names and the bound address.
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides loopback pages (`http://localhost:*`).
    pub allowed_origins: Vec<String>,
}

impl Options {
    /// Checks what would expose the host: every tool is reachable by
    /// whoever reaches the address, so off loopback a token is required.
    pub fn new(
        addr: SocketAddr,
        token_file: Option<&std::path::Path>,
        allowed_hosts: Vec<String>,
        allowed_origins: Vec<String>,
    ) -> Result<Options> {
        let token = match token_file {
            None => None,
            Some(file) => {
                let text = std::fs::read_to_string(file)
                    .with_context(|| format!("cannot read the token file {}", file.display()))?;
                let token = text.trim().to_string();
                if token.is_empty() {
                    bail!(
                        "the token file {} is empty: put a long random secret in it (e.g. `openssl rand -hex 32 > {}`)",
                        file.display(),
                        file.display()
                    );
                }
                Some(token)
            }
        };
        if !addr.ip().is_loopback() && token.is_none() {
            bail!(
                "{addr} is reachable from other machines, and so would be every tool: give --token-file FILE (clients then send `Authorization: Bearer <token>`), or listen on 127.0.0.1"
            );
        }
        Ok(Options {
            addr,
            token,
            allowed_hosts,
            allowed_origins,
        })
    }

    /// rmcp's settings: the allow-lists, and `sessions`, which ends them.
    fn rmcp_config(&self, sessions: CancellationToken) -> StreamableHttpServerConfig {
        let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"].map(String::from).into();
        // An IP literal cannot be rebound; the address we listen on is fine.
        if !self.addr.ip().is_unspecified() {
            hosts.push(self.addr.ip().to_string());
        }
        hosts.extend(self.allowed_hosts.iter().cloned());
        let mut origins: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .flat_map(|h| [format!("http://{h}:*"), format!("https://{h}:*")])
            .collect();
        origins.extend(self.allowed_origins.iter().cloned());
        StreamableHttpServerConfig::default()
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_cancellation_token(sessions)
    }
}

/// Serve until `stop` is cancelled; the caller ends the calls first.
pub async fn serve(service: Arc<Service>, options: Options, stop: CancellationToken) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let addr = listener.local_addr()?;
    // Ends every session and event stream, and the server with them.
    let sessions = CancellationToken::new();
    let mcp = {
        let service = service.clone();
        // Stateless requests get a handler each; their rounds are shared.
        let rounds = Arc::new(crate::mcp::Rounds::default());
        StreamableHttpService::new(
            move || Ok(McpFront::new(service.clone(), rounds.clone())),
            Arc::new(LocalSessionManager::default()),
            options.rmcp_config(sessions.clone()),
        )
    };
    let answers = TaskTracker::new();
    let token = Arc::new(options.token);
    let app = Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            answers.clone(),
            track_answers,
        ))
        .layer(axum::middleware::from_fn_with_state(token, require_token))
        .route("/health", axum::routing::get(health))
        .with_state(service.clone());
    service.log_serving(&format!("at http://{addr}/mcp"));
    let server =
        axum::serve(listener, app).with_graceful_shutdown(sessions.clone().cancelled_owned());
    let mut server = tokio::spawn(async move { server.await });
    tokio::select! {
        () = stop.cancelled() => {}
        ended = &mut server => return ended.context("the HTTP server task")?.context("the HTTP server failed"),
    }
    // The calls have ended; their answers go out before the sessions end.
    answers.close();
    let _ = tokio::time::timeout(Duration::from_secs(1), answers.wait()).await;
    sessions.cancel();
    // A client that keeps its connection open is not waited for long.
    match tokio::time::timeout(Duration::from_secs(1), server).await {
        Ok(served) => served
            .context("the HTTP server task")?
            .context("the HTTP server failed"),
        Err(_) => Ok(()),
    }
}

/// A POST's answer is in flight until its response stream has ended.
async fn track_answers(
    State(answers): State<TaskTracker>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let in_flight = answers.token();
    next.run(request).await.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _ = &in_flight;
            chunk
        }))
    })
}

/// `401` unless the request carries `Authorization: Bearer <token>`.
async fn require_token(
    State(token): State<Arc<Option<String>>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = token.as_deref() else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "this server wants `Authorization: Bearer <token>`, the token being the contents of the file given to `host serve --token-file`\n",
    )
        .into_response()
}

/// Liveness and what is served, for supervisors and load balancers.
async fn health(State(service): State<Arc<Service>>) -> Response {
    let catalog = service.catalog();
    axum::Json(serde_json::json!({
        "status": "ok",
        "plugins": catalog.plugins.len(),
        "tools": catalog.tools.len(),
        "problems": catalog.problems.len(),
    }))
    .into_response()
}
