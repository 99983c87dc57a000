//! `host call`: one tool from the shell, its reply printed as JSON.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use tokio_util::sync::CancellationToken;

use crate::catalog::Loader;
use crate::client::StderrLink;
use crate::service::Service;

pub async fn call(tool: &str, arguments: &str, loader: Loader) -> Result<ExitCode> {
    let arguments: serde_json::Value = serde_json::from_str(arguments)
        .context("arguments must be a JSON object, e.g. '{\"key\": 1}'")?;
    let serde_json::Value::Object(arguments) = arguments else {
        bail!("arguments must be a JSON object, e.g. '{{\"key\": 1}}'");
    };
    let service = Service::start(loader).await;
    let cancel = CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    let Some(reply) = service
        .call(tool, arguments, Arc::new(StderrLink), cancel)
        .await
    else {
        if let Some(why) = service.catalog().hidden.get(tool) {
            bail!("tool `{tool}` is hidden: {why}");
        }
        bail!("no plugin serves a tool named `{tool}`: `host list tools` shows what is served");
    };
    // A reader that stopped early (`host call … | head`) is not an error:
    // the call is done and what it read was what it wanted.
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{}", serde_json::to_string_pretty(&reply)?).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(if reply.is_error {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
