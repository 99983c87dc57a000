//! Streamable HTTP: `host serve --http ADDR`.
//!
//! rmcp's Streamable HTTP service answers at `/mcp`: clients of MCP
//! 2026-07-28 statelessly, older ones (2025-06-18, 2025-11-25) in sessions.
//! In front of it stand a bearer token when one is configured (compared in
//! constant time) and rmcp's `Host` and `Origin` checks, which keep a web
//! page from reaching the server through a rebound DNS name. `/health`
//! answers without a token so that a supervisor can probe it.
//!
//! Connections are accepted by our own loop, not `axum::serve`, for the
//! bounds a client must not get past (issues 34 and 61): a request whose
//! headers are not all there within [`HEADER_TIMEOUT`] is dropped (the
//! token is only read once they are; an idle connection waits no longer
//! for its next request), a body must arrive within [`BODY_TIMEOUT`], and
//! [`connections`] decides which connections stay open: a bounded number,
//! where connections that never sent a request that passed make room for
//! new ones, so a flood of them cannot keep a client with the token out.

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

mod connections;

use connections::{Connection, Connections, Refused};

/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request's body may take to arrive once its headers have.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest request body taken (a call's arguments: a file written
/// whole is the largest there is).
const MAX_BODY_BYTES: usize = 64 << 20;

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
        // Stateless requests get a handler each; their rounds and tasks
        // are shared.
        let unfinished = Arc::new(crate::mcp::Unfinished::default());
        StreamableHttpService::new(
            move || Ok(McpFront::new(service.clone(), unfinished.clone())),
            Arc::new(LocalSessionManager::default()),
            options.rmcp_config(sessions.clone()),
        )
    };
    let answers = Answers {
        in_flight: TaskTracker::new(),
        unread: crate::mcp::unread::Budget::default(),
    };
    let token = Arc::new(options.token);
    let app = Router::new()
        .nest_service("/mcp", mcp)
        .layer(axum::middleware::from_fn_with_state(
            answers.clone(),
            track_answers,
        ))
        .layer(axum::middleware::from_fn(body_in_time))
        .layer(axum::middleware::from_fn_with_state(token, require_token))
        .route("/health", axum::routing::get(health))
        .with_state(service.clone());
    service.log_serving(&format!("at http://{addr}/mcp"));
    crate::platform::raise_fd_limit();
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let open = Arc::new(Connections::default());
    let mut refused_logged = false;
    loop {
        let (stream, peer) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of descriptors or a connection reset before accept:
                // not the server's end.
                Err(e) => {
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let place = match open.admit(peer.ip()) {
            Ok(place) => place,
            Err(why) => {
                if !refused_logged {
                    tracing::warn!(%peer, ?why, "a connection was closed at once: {}", match why {
                        Refused::Full => "every place is held by clients whose requests passed",
                        Refused::Peer => "its address holds as many as one address may",
                    });
                    refused_logged = true;
                }
                continue;
            }
        };
        refused_logged = false;
        let app = app.clone().layer(axum::Extension(place.clone()));
        let connection = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(
                hyper_util::rt::TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(app),
            );
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            tokio::select! {
                _ = connection => {}
                () = place.closing.cancelled() => {}
            }
            place.ended();
        });
    }
    // The calls have ended; their answers go out before the sessions end.
    answers.in_flight.close();
    let _ = tokio::time::timeout(Duration::from_secs(1), answers.in_flight.wait()).await;
    sessions.cancel();
    // A client that keeps its connection open is not waited for long.
    let _ = tokio::time::timeout(Duration::from_secs(1), graceful.shutdown()).await;
    Ok(())
}

/// The answers of POSTs: in flight until their response streams end, and
/// what they hold until then.
#[derive(Clone)]
struct Answers {
    in_flight: TaskTracker,
    unread: crate::mcp::unread::Budget,
}

/// A POST's answer is in flight, and its result counted as unread, until
/// its response stream has ended.
async fn track_answers(
    State(answers): State<Answers>,
    mut request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let in_flight = answers.in_flight.token();
    let ledger = answers.unread.ledger();
    request.extensions_mut().insert(ledger.clone());
    next.run(request).await.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _ = (&in_flight, &ledger);
            chunk
        }))
    })
}

/// `401` unless the request carries `Authorization: Bearer <token>`; a
/// request that passes proves its connection ([`connections`]).
async fn require_token(
    State(token): State<Arc<Option<String>>>,
    request: Request,
    next: Next,
) -> Response {
    let proven = |request: &Request| {
        if let Some(place) = request.extensions().get::<Arc<Connection>>() {
            place.proven();
        }
    };
    let Some(token) = token.as_deref() else {
        proven(&request);
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
        proven(&request);
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "this server wants `Authorization: Bearer <token>`, the token being the contents of the file given to `host serve --token-file`\n",
    )
        .into_response()
}

/// A request's body, whole within [`BODY_TIMEOUT`] and [`MAX_BODY_BYTES`]:
/// a client that sends it slowly, or without end, holds no place.
async fn body_in_time(request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(BODY_TIMEOUT, axum::body::to_bytes(body, MAX_BODY_BYTES)).await {
        Ok(Ok(bytes)) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Ok(Err(e)) => (
            StatusCode::BAD_REQUEST,
            format!("the request body could not be read whole ({e}); at most {MAX_BODY_BYTES} bytes are taken\n"),
        )
            .into_response(),
        Err(_) => (
            StatusCode::REQUEST_TIMEOUT,
            format!("the request body did not arrive within {} s\n", BODY_TIMEOUT.as_secs()),
        )
            .into_response(),
    }
}

/// Liveness and what is served, for supervisors and load balancers.
async fn health(State(service): State<Arc<Service>>) -> Response {
    let catalog = service.catalog();
    axum::Json(serde_json::json!({
        "status": "ok",
        "plugins": catalog.plugins.len(),
        "tools": catalog.served_tools().len(),
        "loading": catalog.listed.len(),
        "problems": catalog.problems.len(),
    }))
    .into_response()
}
