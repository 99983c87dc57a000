//! Logs: `tracing` to stderr only (stdout carries JSON-RPC), one line per
//! record with an ISO 8601 (RFC 3339) UTC timestamp.
//!
//! The level comes from `MCP_SERVER_LOG` (`silent|error|warn|info|debug`)
//! or, for finer control, `RUST_LOG` (an `EnvFilter` directive). Default:
//! `info`. `debug` is ours only (the host, plugins, searches): libraries
//! stay at `info`, since some would log whole messages and documents.

use anyhow::{Result, bail};
use tracing_subscriber::EnvFilter;

pub fn init() -> Result<()> {
    let filter = match std::env::var("MCP_SERVER_LOG") {
        Ok(level) => EnvFilter::new(match level.to_ascii_lowercase().as_str() {
            "silent" => "off",
            "debug" => "info,host=debug,call=debug,index=debug,plugin=debug",
            l @ ("error" | "warn" | "info") => l,
            other => bail!(
                "MCP_SERVER_LOG={other} is not a level: use silent, error, warn, info or debug"
            ),
        }),
        Err(_) => EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    Ok(())
}
