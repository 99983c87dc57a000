//! `host serve`: MCP on stdio or HTTP until the client, or a signal,
//! ends it; the plugins folder and the config watched meanwhile.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::catalog::Loader;
use crate::mcp::McpFront;
use crate::service::Service;

/// Serve MCP on stdio, or on HTTP when `http` says where.
pub async fn serve(
    loader: Loader,
    watch: bool,
    http: Option<crate::http::Options>,
) -> Result<ExitCode> {
    std::fs::create_dir_all(&loader.plugins_dir).with_context(|| {
        format!(
            "cannot create the plugins folder {}",
            loader.plugins_dir.display()
        )
    })?;
    // What an earlier host left is killed now; what this one leaves is its
    // watchdog's.
    crate::platform::sweep_left_behind();
    let programs: Vec<String> = timebox::host_program_list()
        .into_iter()
        .map(|(name, path)| match path {
            Some(path) => format!("{name}={}", path.display()),
            None => format!("{name}=<not found>"),
        })
        .collect();
    let programs = programs.join(" ");
    tracing::info!(
        programs,
        "{}; plugins' programs: {}",
        crate::platform::containment(),
        timebox::confine::enforcement().describe()
    );
    let memo = loader.places.cache_dir.join("watched");
    let service = Service::start_listed(loader, memo).await;
    tokio::spawn(service.clone().release_when_settled());
    let _watcher = if watch {
        Some(crate::watch::watch(service.clone())?)
    } else {
        None
    };
    match http {
        Some(options) => serve_http(service, options).await,
        None => serve_stdio(service).await,
    }
}

async fn serve_http(service: Arc<Service>, options: crate::http::Options) -> Result<ExitCode> {
    let stop = CancellationToken::new();
    let server = tokio::spawn(crate::http::serve(service.clone(), options, stop.clone()));
    tokio::pin!(server);
    let why = tokio::select! {
        signal = crate::platform::shutdown_signal() => signal,
        ended = &mut server => {
            ended.context("the HTTP server task")??;
            return Ok(ExitCode::SUCCESS);
        }
    };
    tracing::info!("{why}: shutting down");
    // Calls end first, answered while their streams are still open.
    service.shut_down(Duration::from_secs(1)).await;
    stop.cancel();
    server.await.context("the HTTP server task")??;
    Ok(ExitCode::SUCCESS)
}

async fn serve_stdio(service: Arc<Service>) -> Result<ExitCode> {
    service.log_serving("on stdio");
    let transport = crate::stdio::Stdio::new();
    let stdin_closed = transport.closed();
    let running = rmcp::ServiceExt::serve(
        McpFront::new(service.clone(), Default::default()),
        transport,
    )
    .await
    .context("MCP initialisation with the client failed")?;
    let cancel = running.cancellation_token();
    // The client closed stdin or sent a signal: its calls end with it
    // (answered while the transport is still open), then the session.
    let session = running.waiting();
    tokio::pin!(session);
    let (why, session_over) = tokio::select! {
        () = stdin_closed.cancelled() => ("stdin closed", false),
        signal = crate::platform::shutdown_signal() => (signal, false),
        _ = &mut session => ("the MCP session ended", true),
    };
    tracing::info!("{why}: shutting down");
    service.shut_down(Duration::from_secs(1)).await;
    cancel.cancel();
    if !session_over {
        let _ = tokio::time::timeout(Duration::from_millis(200), session).await;
    }
    Ok(ExitCode::SUCCESS)
}
